"""The browser tools through the official MCP client: ``backtrail mcp`` over stdio
proposes actions, the real native host (a subprocess exchanging real frames) pushes
them to a stand-in extension that behaves as extension/src/actions.js does (switches,
stale tabs, the capture before its answer), and the outcome comes back to the tool.
Also the read-only companions (related content, open-tab summary) and the tools'
annotations. The same flows in real Chromium are in test_e2e_actions.py."""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from backtrail.service import Memory
from backtrail.store import Ledger
from helpers import make_config, wait_for
from host_client import HostProcess, capture_fields
from mcp_support import read_json_lines, seed, stdio_params, text

pytestmark = pytest.mark.anyio

FAST = {"BACKTRAIL_MCP_ACTION_WAIT": "20", "BACKTRAIL_MCP_ACTION_CLAIM_WAIT": "10"}
PAGE_TEXT = (
    "The live version of this page explains how a checkpoint starves when readers never "
    "let go of the write-ahead log, and how to fix it with a passive checkpoint."
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------ a stand-in browser


@dataclass
class FakeBrowser:
    """The extension's side of actions (extension/src/actions.js), over the real host:
    per-action switches (closing tabs off by default), tabs that may have closed,
    captures queued before their answers, bookmarks into folders."""

    host: HostProcess
    profile: str = "laptop"
    allowed: dict[str, bool] = field(
        default_factory=lambda: {"group_tabs": True, "close_tabs": False,
                                 "capture_tab": True, "create_bookmark": True}
    )  # fmt: skip
    tabs: dict[int, str] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    bookmarks: list[dict[str, Any]] = field(default_factory=list)
    pushes: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def start(self) -> None:
        self.host.hello(self.profile)
        now = int(time.time() * 1000)
        threading.Thread(target=self._loop, daemon=True).start()
        self._send("tab_snapshot", time=now, tabs=[
            {"tab_id": tab, "window_id": 1, "url": url, "title": f"Tab {tab}",
             "active": tab == min(self.tabs), "pinned": False, "group_id": None, "index": n,
             "last_accessed_time": now if tab == min(self.tabs) else None}
            for n, (tab, url) in enumerate(sorted(self.tabs.items()))
        ])  # fmt: skip
        # The host polls for actions after answering hello, before reading on: once the
        # snapshot is answered, any action waiting for this browser has been pushed.
        wait_for(lambda: "fb-1" in self.answers, 30, "the tab snapshot's answer")

    def _send(self, kind: str, **fields: Any) -> None:
        self.host.send({"id": f"fb-{next(self._ids)}", "type": kind, **fields})

    def _loop(self) -> None:
        while True:
            try:
                message = self.host.frames.get(timeout=120)
            except queue.Empty:
                return
            if message is None:
                return
            if message.get("type") == "action":
                self.pushes.append(message)
                self._perform(message)
            elif "id" in message:
                self.answers[message["id"]] = message

    def _perform(self, push: dict[str, Any]) -> None:
        name = push["action"]
        answer: dict[str, Any] = {"action_id": push["action_id"], "ok": False, "result": None,
                                  "error": None}  # fmt: skip
        if not self.allowed.get(name):
            answer["error"] = {"code": 18, "name": "action_not_allowed",
                               "message": f'the user has not allowed "{name}" in Backtrail\'s '
                               "options"}  # fmt: skip
        elif name in ("group_tabs", "close_tabs"):
            present = [t for t in push["tab_ids"] if t in self.tabs]
            if not present:
                answer["error"] = {"code": 11, "name": "action_failed",
                                   "message": "none of these tabs exist"}  # fmt: skip
            elif name == "group_tabs":
                self.groups.append({"tab_ids": present, "title": push["title"],
                                    "color": push["color"]})  # fmt: skip
                answer.update(ok=True, result={"group_id": len(self.groups)})
            else:
                for tab in present:
                    del self.tabs[tab]
                self.closed += present
                answer.update(ok=True, result={"closed": len(present)})
        elif name == "capture_tab":
            url = self.tabs[push["tab_id"]]
            visit_id = f"visit-{push['action_id']}"
            self._send("capture_page", **capture_fields(url, PAGE_TEXT, visit_id=visit_id,
                                                        title="Checkpoint starvation"))  # fmt: skip
            answer.update(ok=True, result={"dedupe_key": f"capture:{visit_id}"})
        elif name == "create_bookmark":
            self.bookmarks.append(push)
            folder = "Bookmarks bar/" + push["folder"] if push.get("folder") else None
            answer.update(ok=True, result={"browser_id": str(900 + len(self.bookmarks)),
                                           **({"folder": folder} if folder else {})})  # fmt: skip
        self._send("action_result", **answer)


@contextmanager
def browser(home: Path, tabs: dict[int, str], profile: str = "laptop") -> Iterator[FakeBrowser]:
    with HostProcess(home) as host:
        fake = FakeBrowser(host, profile, tabs=dict(tabs))
        fake.start()
        yield fake


def action_events(home: Path) -> list[tuple[str, str, str | None]]:
    with Ledger.open(home) as ledger:
        return [(e.action, e.client, e.target)
                for e in ledger.list_events(target_type="action", limit=1_000)]  # fmt: skip


# ----------------------------------------------------------------------- tools


async def test_browser_tools_act_in_the_browser_and_report_each_outcome(tmp_path: Path) -> None:
    seed(tmp_path)
    log = tmp_path / "calls.jsonl"
    tabs = {11: "https://sqlite.org/wal.html", 12: "https://bread.example/sourdough",
            13: "https://news.example/long-read"}  # fmt: skip
    params = stdio_params(tmp_path, "--log-calls", str(log), MCP_CLIENT_ID="claude", **FAST)
    with browser(tmp_path, tabs) as fake:
        async with Client(params, mode="legacy") as client:
            captured = await client.call_tool("capture_page", {"max_chars": 60})
            assert not captured.is_error, text(captured)
            data = captured.structured_content
            assert data["action"]["status"] == "done"
            assert data["page"]["url"] == "https://sqlite.org/wal.html"
            assert data["page"]["chars"] == 60 and PAGE_TEXT[:60] in text(captured)
            assert '<web_content source="https://sqlite.org/wal.html"' in text(captured)
            assert [p["tab_id"] for p in fake.pushes] == [11]  # the active tab

            grouped = await client.call_tool("organize_tabs", {"groups": [
                {"tab_ids": [11, 13], "name": "Databases", "color": "blue"},
                {"tab_ids": [99], "name": "Gone"},
            ]})  # fmt: skip
            assert not grouped.is_error, text(grouped)
            assert [a["status"] for a in grouped.structured_content["actions"]] == [
                "done", "failed",
            ]  # fmt: skip
            assert fake.groups == [{"tab_ids": [11, 13], "title": "Databases", "color": "blue"}]
            assert "1 of 2 tab actions done" in text(grouped)
            assert "none of these tabs exist" in text(grouped)

            stale = await client.call_tool("organize_tabs", {"groups": [{"tab_ids": [98]}]})
            assert stale.is_error and "none of these tabs exist" in text(stale)
            assert "call get_open_tabs" in text(stale)

            refused = await client.call_tool("organize_tabs", {"close": [12]})
            assert refused.is_error
            assert "refused close_tabs" in text(refused) and "options" in text(refused)
            assert 12 in fake.tabs
            fake.allowed["close_tabs"] = True  # the user turned the switch on
            closed = await client.call_tool("organize_tabs", {"close": [12, 97]})
            assert not closed.is_error, text(closed)
            assert closed.structured_content["actions"][0]["result"] == {"closed": 1}
            assert fake.closed == [12]

            vacuum = "https://www.postgresql.org/docs/current/routine-vacuuming.html"
            saved = await client.call_tool("save_bookmark", {
                "url": vacuum + "#autovacuum", "title": "Vacuuming", "folder": "Databases",
            })  # fmt: skip
            assert not saved.is_error, text(saved)
            assert "in Bookmarks bar/Databases" in text(saved)
            assert (fake.bookmarks[0]["url"], fake.bookmarks[0]["folder"]) == (
                vacuum + "#autovacuum", "Databases",
            )  # fmt: skip
            again = await client.call_tool("save_bookmark", {"url": vacuum, "folder": "databases"})
            assert again.structured_content["already_bookmarked"] is True
            wal = await client.call_tool("save_bookmark", {"url": "https://sqlite.org/wal.html"})
            assert wal.structured_content["already_bookmarked"] is True  # seeded in Research
            assert len(fake.bookmarks) == 1
            found = await client.call_tool("get_saved", {"kind": "bookmark",
                                                          "folder": "Databases"})
            assert [b["url"] for b in found.structured_content["items"]] == [
                vacuum + "#autovacuum", "https://sqlite.org/wal.html",
            ]  # fmt: skip
            assert "Vacuuming" in text(found) and "WAL docs" in text(found)

            action_id = closed.structured_content["actions"][0]["action_id"]
            status = await client.call_tool("get_status", {"action_id": action_id})
            assert status.structured_content["action_status"] == "done"
            capture_id = data["action"]["action_id"]
            status = await client.call_tool("get_status", {"action_id": capture_id})
            assert f"get_page id={data['page']['page_id']}" in text(status)
            missing = await client.call_tool("get_status", {"action_id": "a-424242"})
            assert missing.is_error and "does not exist" in text(missing)

    events = action_events(tmp_path)
    outcomes = [(a, c) for a, c, _ in events if a != "action.create" and a != "action.sent"]
    assert outcomes == [("action.done", "native-host")] * 2 + [
        ("action.failed", "native-host"), ("action.failed", "native-host"),
        ("action.refused", "native-host"), ("action.done", "native-host"),
        ("action.done", "native-host"),
    ]  # fmt: skip
    assert {c for a, c, _ in events if a == "action.create"} == {"claude"}
    entries = read_json_lines(log)
    closing = [e for e in entries if e["tool"] == "organize_tabs" and "close" in e["arguments"]
               and e["arguments"]["close"]]  # fmt: skip
    assert [e["ok"] for e in closing] == [False, True]
    refusal = closing[0]
    assert refusal["outcome"].startswith("action_refused: The browser refused close_tabs")


async def test_without_a_browser_an_action_stays_pending_then_expires(tmp_path: Path) -> None:
    seed(tmp_path)
    params = stdio_params(tmp_path, BACKTRAIL_MCP_ACTION_CLAIM_WAIT="0.3",
                          BACKTRAIL_MCP_ACTION_TTL="2")  # fmt: skip
    async with Client(params, mode="legacy") as client:
        groups = [{"tab_ids": [1, 4], "name": "WAL"}]
        pending = await client.call_tool("organize_tabs", {"groups": groups})
        assert not pending.is_error, text(pending)
        (action,) = pending.structured_content["actions"]
        assert action["status"] == "pending"
        assert "No browser has picked up group_tabs" in text(pending)
        with anyio.fail_after(30):
            while True:
                status = await client.call_tool("get_status",
                                                {"action_id": action["action_id"]})  # fmt: skip
                if status.structured_content["action_status"] == "expired":
                    break
                await anyio.sleep(0.1)
        assert "no browser picked the action up in time" in text(status)
    # The browser of that profile connects afterwards: it never gets the expired action.
    with browser(tmp_path, {1: "https://sqlite.org/wal.html"}, profile="default") as fake:
        assert fake.pushes == []


async def test_capture_page_can_save_given_text_without_a_browser(
    tmp_path: Path,
) -> None:
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        saved = await client.call_tool("capture_page", {
            "url": "https://notes.example/x", "title": "X", "content": PAGE_TEXT,
        })  # fmt: skip
        assert not saved.is_error, text(saved)
        assert "action" not in saved.structured_content
        assert saved.structured_content["page"]["chars"] == len(PAGE_TEXT)
        assert PAGE_TEXT in text(saved)
        half = await client.call_tool("capture_page", {"content": "no url"})
        assert half.is_error and "give both url and content" in text(half)
        none = await client.call_tool("capture_page", {})
        assert none.is_error and "no active tab is known" in text(none)


async def test_related_pages_and_the_open_tab_summary(tmp_path: Path) -> None:
    s = seed(tmp_path)
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        related = await client.call_tool("search_browsing", {"similar_to": s.wal_page})
        assert not related.is_error, text(related)
        data = related.structured_content
        assert data["mode"] == "bm25"  # no vectors in lean mode: by key words
        assert "by key words" in text(related)
        assert s.wal_page not in [p["id"] for p in data["results"]]
        assert s.bread_page not in [p["id"] for p in data["results"]]
        both = await client.call_tool("search_browsing", {"similar_to": 1, "query": "x"})
        assert both.is_error and "exactly one of query, similar_to" in text(both)

        summary = await client.call_tool("summarize_reading", {"open_tabs": True})
        assert not summary.is_error, text(summary)
        data = summary.structured_content
        assert data["provider"] == "extractive" and data["open_tabs"] == 5
        assert data["summarised_tabs"] == 2  # WAL (two tabs, one page) and sourdough
        assert data["uncaptured_tab_ids"] == [5]
        assert "(https://sqlite.org/wal.html)" in text(summary)
        assert "capture_page captures one" in text(summary)


async def test_the_tools_carry_honest_annotations(tmp_path: Path) -> None:
    from backtrail.mcp_server.server import build_server

    server = build_server(lambda: Memory(make_config(tmp_path), client="t"))
    async with Client(server, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    hints = {
        name: (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        for name, a in ((n, t.annotations) for n, t in tools.items())
    }
    assert hints == {
        "search_browsing": (True, False, True, False),
        "get_page": (True, False, True, False),
        "get_timeline": (True, False, True, False),
        "get_saved": (True, False, True, False),
        "save_note": (False, False, False, False),
        "forget": (False, True, True, False),
        "get_status": (True, False, True, False),
        "get_open_tabs": (True, False, True, False),
        "summarize_reading": (True, False, False, True),
        "capture_page": (False, False, False, True),
        "save_bookmark": (False, False, False, True),
        "organize_tabs": (False, True, False, True),
        "memory_set": (False, True, False, False),
        "memory_get": (True, False, True, False),
        "memory_list": (True, False, True, False),
        "memory_delete": (False, True, True, False),
        "memory_search": (True, False, True, False),
        "memory_history": (True, False, True, False),
    }
    schema = json.dumps(tools["organize_tabs"].input_schema)
    assert '"enum": ["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", ' \
        '"orange"]' in schema


def test_open_tab_summaries_stay_bounded_with_hundreds_of_tabs(tmp_path: Path) -> None:
    from mcp_types import Implementation

    from backtrail.mcp_server.server import MemoryHolder, build_server

    memory = Memory(make_config(tmp_path), client="t")
    try:
        body = "A fairly long sentence of text. " * 400
        for n in range(120):
            url = f"https://site{n}.example/"
            memory.capture_page(url, title=f"Page {n}", text=f"Topic {n}. {body}")
        memory.snapshot_tabs([
            {"tab_id": n, "window_id": n % 3, "url": f"https://site{n}.example/",
             "title": f"Page {n}", "last_accessed": 2_000 + n if n < 120 else 1_000}
            for n in range(300)
        ])  # fmt: skip
        holder = MemoryHolder(lambda: memory)
        server = build_server(holder.get, holder=holder)

        async def call() -> Any:
            info = Implementation(name="t", version="1")
            async with Client(server, mode="legacy", client_info=info) as client:
                return await client.call_tool("summarize_reading",
                                              {"open_tabs": True, "max_tabs": 50})

        result = anyio.run(call)
        assert not result.is_error
        size = sum(len(b.text) for b in result.content) + len(json.dumps(result.structured_content))
        assert size < 60_000
        assert result.structured_content["summarised_tabs"] == 50  # the 50 most recent
        assert result.structured_content["uncaptured_tab_ids"] == []
        assert "(250 more tabs were not read: raise max_tabs.)" in text(result)
    finally:
        memory.close()
