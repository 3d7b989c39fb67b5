"""``POST /host`` on a live ``backtrail mcp --http`` (issue 40): a device's native host
forwarding the extension's messages, as JSON arrays of the host protocol's own messages.
On both backends: the messages are applied by the host's dispatcher (same validation and
error codes) and attributed to the device token's client; each queued message is applied
exactly once however often it is resent; a device may capture and search, nothing else;
and every kind of bad request is refused with a clear JSON error while the server keeps
serving and nothing stored is lost."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from backtrail.errors import PageNotFound
from backtrail.service import Memory
from backtrail.store import Ledger
from helpers import make_config
from host_client import capture_fields, hello_fields, visit
from mcp_support import INITIALIZE, HttpServer

pytestmark = pytest.mark.backends("sqlite", "postgresql")

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
WAL = "Write-ahead logging appends changes to a log before the data pages change."


@dataclass
class Node:
    server: HttpServer
    host_url: str
    tokens: dict[str, str]
    ledger_target: Path | str

    def post(
        self, body: Any, token: str = "laptop", content: Any = None, **headers: str
    ) -> httpx2.Response:
        if content is None:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
        auth = {"Authorization": f"Bearer {self.tokens[token]}"} if token else {}
        with httpx2.Client(timeout=60) as http:
            return http.post(self.host_url, content=content,
                             headers={"Content-Type": "application/json", **auth, **headers})

    def ledger(self) -> Ledger:
        return Ledger(self.ledger_target)


@pytest.fixture
def node(tmp_path: Path, ledger_target: Path | str) -> Iterator[Node]:
    """One server with a device token (``laptop``), a write token, a revoked device
    token, and messages capped at 100 kB (``max_request_bytes``)."""
    home = tmp_path / "home" if isinstance(ledger_target, str) else ledger_target.parent
    env = {"BACKTRAIL_LEDGER_URL": ledger_target} if isinstance(ledger_target, str) else {}
    backend = {"ledger_url": ledger_target} if env else {}
    with Memory(make_config(home, **backend), client="operator") as memory:
        tokens = {
            "laptop": memory.add_token("laptop", scope="device").token,
            "writer": memory.add_token("agent", scope="write").token,
            "stolen": memory.add_token("old-phone", scope="device").token,
        }
        memory.revoke_tokens("old-phone")
    server = HttpServer(home, BACKTRAIL_MAX_REQUEST_BYTES="100000", **env)
    try:
        assert server.url is not None
        yield Node(server, server.url.replace("/mcp", "/host"), tokens, ledger_target)
    finally:
        server.stop()


def hello(ident: str = "h-1", profile: str = "profile-1") -> dict[str, Any]:
    return {"id": ident, "type": "hello", **hello_fields(profile)}


def capture(ident: str, url: str, text: str, visit_id: str) -> dict[str, Any]:
    return {"id": ident, "type": "capture_page", **capture_fields(url, text, visit_id=visit_id)}


def codes(answers: list[dict[str, Any]]) -> list[int | str]:
    return [a["error"]["code"] if not a["ok"] else "ok" for a in answers]


def test_a_device_captures_and_searches_attributed_to_its_token(node: Node) -> None:
    with node.ledger() as ledger:
        before = ledger.list_events(limit=10_000)[-1].id
    batch = [
        hello(),
        capture("c-1", "https://sqlite.org/wal.html", WAL, "v-1"),
        {"id": "v-2", "type": "visit", "url": "https://sqlite.org/wal.html", "title": "WAL",
         "visit": visit("v-2", time=1_732_924_900_000)},
        {"id": "t-1", "type": "tab_snapshot", "time": 1_732_924_900_000, "tabs": [
            {"tab_id": 1, "window_id": 1, "url": "https://sqlite.org/wal.html", "title": "WAL",
             "active": True, "pinned": False, "index": 0}]},
        {"id": "n-1", "type": "note", "dedupe_key": "note:n-1", "content": "checkpoint often",
         "url": "https://sqlite.org/wal.html", "title": "WAL", "time": 1_732_924_900_000},
        {"id": "s-1", "type": "search", "query": "write-ahead log"},
        {"id": "st-1", "type": "status"},
        {"id": "g-1", "type": "settings_get"},
    ]  # fmt: skip
    answered = node.post(batch)
    assert answered.status_code == 200, answered.text
    answers = answered.json()
    assert [a["id"] for a in answers] == [m["id"] for m in batch]  # same order
    assert codes(answers) == ["ok"] * len(batch), answers
    assert answers[0]["result"]["capabilities"] == ["search"]  # no export, no actions
    assert answers[1]["result"]["outcome"] == "created"
    assert answers[5]["result"]["results"][0]["url"] == "https://sqlite.org/wal.html"
    assert answers[6]["result"]["profile_id"] == "profile-1"
    with node.ledger() as ledger:
        events = [e for e in ledger.list_events(after_id=before, limit=10_000)
                  if e.client != "backtrail-indexer"]  # fmt: skip
        tabs = ledger.list_tabs()
    assert {e.client for e in events} == {"laptop"}  # every write is the device's
    assert sorted({e.action for e in events}) == [
        "note.add", "page.capture", "tabs.snapshot", "visit.record",
    ]  # fmt: skip
    assert [(t.profile, t.url) for t in tabs] == [("profile-1", "https://sqlite.org/wal.html")]
    # A batch without hello names its profile in a header; with neither, writes wait.
    later = node.post([{"id": "t-2", "type": "tab_event", "event": "closed", "time": 1,
                        "tab": {"tab_id": 1, "window_id": 1}}],  # fmt: skip
                      **{"X-Backtrail-Profile": "profile-1"})
    assert codes(later.json()) == ["ok"]
    orphan = node.post([capture("c-9", "https://example.org/", "orphan text", "v-9")])
    assert codes(orphan.json()) == [17]  # hello_required: retryable, nothing stored
    with node.ledger() as ledger:
        assert ledger.list_tabs() == []
        with pytest.raises(PageNotFound):
            ledger.get_page("https://example.org/")


def test_each_message_is_applied_exactly_once_however_often_it_is_resent(node: Node) -> None:
    batch = [
        hello(),
        capture("c-1", "https://sqlite.org/wal.html", WAL, "v-1"),
        {"id": "hl-1", "type": "highlight", "dedupe_key": "highlight:1", "url":
         "https://sqlite.org/wal.html", "title": "WAL", "text": "appends changes to a log",
         "time": 1_732_924_900_000},
        {"id": "bad-1", "type": "visit", "url": "javascript:alert(1)", "title": "x",
         "visit": visit("v-bad")},
    ]  # fmt: skip
    first = node.post(batch).json()
    assert codes(first) == ["ok", "ok", "ok", 8]  # a refused message is answered, and final
    with node.ledger() as ledger:
        counts = ledger.stats().counts
        events = len(ledger.list_events(limit=100_000))
    for _ in range(3):  # the device's outbox resends: same ids, same answers, no writes
        again = node.post(batch).json()
        assert again[1:] == first[1:]
    twice = node.post([batch[0], batch[1], batch[1], batch[2]]).json()  # twice in one batch
    assert twice[1] == twice[2] == first[1] and twice[3] == first[2]
    with node.ledger() as ledger:
        assert ledger.stats().counts == counts
        assert len(ledger.list_events(limit=100_000)) == events
        assert ledger.delivery("laptop", "c-1") == first[1]
    # Another device's message with the same id is its own message.
    with node.ledger() as ledger:
        assert ledger.delivery("old-phone", "c-1") is None


def test_a_device_may_capture_and_search_and_nothing_else(node: Node) -> None:
    refused = ("forget", "pause", "resume", "export", "page_get", "timeline",
               "saved_list", "forget_preview")  # fmt: skip
    batch = [hello(), *({"id": f"r-{n}", "type": kind, "everything": True}
                        for n, kind in enumerate(refused))]  # fmt: skip
    batch.append({"id": "ok-1", "type": "bookmark_upsert", "bookmarks": [
        {"browser_id": "7", "url": "https://sqlite.org/", "title": "SQLite"}]})  # fmt: skip
    # The extension's own settings for its profile, sent after every hello, are taken.
    batch.append({"id": "ok-2", "type": "settings_set",
                  "settings": {"exclusions": {"use_defaults": True, "rules": ["bank.example"]}}})
    batch.append({"id": "ok-3", "type": "settings_get"})
    answers = node.post(batch).json()
    assert codes(answers) == ["ok", *[18] * len(refused), "ok", "ok", "ok"]
    assert answers[-1]["result"]["settings"]["exclusions"]["rules"] == ["bank.example"]
    assert "device tokens cannot send forget" in answers[1]["error"]["message"]
    with httpx2.Client(timeout=30) as http:  # and no MCP: no assistant tools, no facts
        mcp = http.post(node.server.url, json=INITIALIZE, headers={
            **JSON_HEADERS, "Authorization": f"Bearer {node.tokens['laptop']}"})  # fmt: skip
        assert mcp.status_code == 403 and "scope is device" in mcp.json()["error"]["message"]
    writer = node.post([hello()], token="writer")
    assert writer.status_code == 403
    assert writer.json() == {"error": {"status": 403, "message":
                             "/host takes only device tokens; this token's scope is write"}}
    revoked = node.post([hello()], token="stolen")
    assert revoked.status_code == 401 and revoked.json()["error"]["message"] == (
        "invalid bearer token")  # fmt: skip
    assert node.post([hello()], token="").status_code == 401
    assert node.post([hello()], Host="evil.example").status_code == 421
    with httpx2.Client(timeout=30) as http:
        got = http.get(node.host_url, headers={"Authorization": f"Bearer {node.tokens['laptop']}"})
        assert got.status_code == 405 and got.headers["allow"] == "POST"


def test_bad_requests_are_refused_whole_or_per_message_and_the_server_keeps_serving(
    node: Node,
) -> None:
    stored = node.post([hello(), capture("c-1", "https://sqlite.org/wal.html", WAL, "v-1")])
    assert codes(stored.json()) == ["ok", "ok"]
    deep = b"[" * 70 + b"]" * 70
    deeper = b"[" * 100_000 + b"]" * 100_000
    whole = {
        b"[{not json": "not valid JSON",
        b"\xff\xfe[]": "not valid UTF-8",
        b'{"id": "x", "type": "hello"}': "must be a JSON array of messages, not a JSON dict",
        b"[]": "must hold 1 to 500 messages, not 0",
        json.dumps([{"id": f"m-{n}", "type": "status"} for n in range(501)]).encode():
            "not 501",
        b"[NaN]": "not valid JSON",
        deep: "nested deeper than 66 levels",
        deeper: "nested deeper than 66 levels",
    }  # fmt: skip
    for body, message in whole.items():
        answer = node.post(body)
        assert answer.status_code == 400, (body[:40], answer.text)
        assert message in answer.json()["error"]["message"], answer.json()
    bad_profile = node.post([{"id": "s", "type": "status"}], **{"X-Backtrail-Profile": "p" * 65})
    assert bad_profile.status_code == 400 and "X-Backtrail-Profile" in bad_profile.text
    declared = http.client.HTTPConnection(urlsplit(node.host_url).netloc, timeout=60)
    declared.putrequest("POST", "/host")  # says 40 MiB: answered before any is sent
    for name, value in (("Authorization", f"Bearer {node.tokens['laptop']}"),
                        ("Content-Length", str(40 * 1024 * 1024))):  # fmt: skip
        declared.putheader(name, value)
    declared.endheaders()
    refused = declared.getresponse()
    assert refused.status == 413 and b"larger than" in refused.read()
    declared.close()

    def chunks() -> Iterator[bytes]:  # no length said: read until past 32 MiB
        yield b"["
        for _ in range(33):
            yield b" " * (1024 * 1024)
        yield b"]"

    oversize = node.post(b"", content=chunks())
    assert oversize.status_code == 413 and "larger than" in oversize.json()["error"]["message"]
    per_message = [
        hello(),
        {"type": "status"},  # no id
        ["not", "an", "object"],
        {"id": "w-1", "type": "capture_page", "url": 5},  # wrong type
        {"id": "u-1", "type": "teleport"},  # unknown type
        {"id": "big-1", "type": "note", "dedupe_key": "note:big", "content": "x" * 200_000,
         "time": 1},  # above the server's max_request_bytes (100 kB)
        {"id": "ok-1", "type": "status"},
    ]  # fmt: skip
    answers = node.post(per_message).json()
    assert codes(answers) == ["ok", 3, 3, 6, 4, 7, "ok"]
    assert [a["id"] for a in answers] == ["h-1", None, None, "w-1", "u-1", "big-1", "ok-1"]
    assert answers[-1]["result"]["counts"]["pages"] == 1  # nothing stored was lost
    found = node.post([hello(), {"id": "s-1", "type": "search", "query": "write-ahead"}]).json()
    assert found[1]["result"]["results"][0]["url"] == "https://sqlite.org/wal.html"
