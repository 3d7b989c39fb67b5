"""The native-messaging host as a real subprocess exchanging real frames
(native-host/PROTOCOL.md): every message type, every kind of bad input, a 20 MB
message, non-ASCII text, 1,000 messages in one session, end of stream."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from host_client import ORIGIN, VISIT_TIME, HostProcess, capture_fields, frame, hello_fields, visit

ARTICLE = (
    "<html lang='en'><head><title>Write-ahead logging</title></head><body><article>"
    "<h1>Write-ahead logging</h1>"
    + "".join(
        f"<p>Paragraph {i}: every transaction appends its changes to the journal before the "
        "data pages change, so a crash never leaves the database half written.</p>"
        for i in range(12)
    )
    + "</article><script>var secret = 'nope';</script></body></html>"
)


# Tests of the host fixture run on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "backtrail-home"


@pytest.fixture
def host(home: Path, ledger_target: Path | str) -> Iterator[HostProcess]:
    """A host that has answered hello (profile ``profile-1``), on SQLite in ``home``, or
    for tests marked ``backends(..., "postgresql")`` on a PostgreSQL ledger."""
    backend = {"BACKTRAIL_LEDGER_URL": ledger_target} if isinstance(ledger_target, str) else {}
    with HostProcess(home, env=backend) as process:
        process.hello()
        yield process


def capture(host: HostProcess, url: str, body: str, visit_id: str, **kw: Any) -> dict[str, Any]:
    return host.ok("capture_page", **capture_fields(url, body, visit_id=visit_id, **kw))


def search_urls(host: HostProcess, query: str, **fields: Any) -> list[str]:
    return [r["url"] for r in host.ok("search", query=query, **fields)["results"]]


def export_all(host: HostProcess, **fields: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1_000):
        result = host.ok("export", cursor=cursor, **fields)
        items += result["items"]
        cursor = result["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("export did not end")


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["ok"] is False, answer
    return answer["error"]


# ------------------------------------------------------------------ session


def test_hello_reports_protocol_limits_capabilities_and_pause_state(home: Path) -> None:
    with HostProcess(home) as host:
        result = host.hello()
        assert result["protocol"] == 1
        assert result["limits"] == {"max_request_bytes": 16 * 1024 * 1024,
                                    "max_response_bytes": 1024 * 1024}  # fmt: skip
        assert set(result["capabilities"]) == {"search", "export", "actions"}
        assert result["paused"] is False
        assert host.wait() == 0


def test_requests_before_hello_get_17_and_then_succeed_after_hello(home: Path) -> None:
    with HostProcess(home) as host:
        assert error_of(host.call("status"))["code"] == 17
        assert error_of(host.call("status"))["name"] == "hello_required"
        host.hello()
        assert host.ok("status")["counts"]["pages"] == 0


def test_hello_with_another_protocol_version_is_error_15(home: Path) -> None:
    with HostProcess(home) as host:
        error = error_of(host.call("hello", **{**hello_fields(), "protocol": 2}))
        assert error["code"] == 15
        assert error["details"] == {"supported": [1]}


def test_end_of_stream_ends_the_host_with_status_0_and_stdout_holds_only_frames(
    home: Path,
) -> None:
    with HostProcess(home) as host:
        host.hello()
        capture(host, "https://example.com/a", "Some text about journals.", "v-1")
        assert host.wait() == 0
        assert host.junk == []
        assert host.frames.get(timeout=5) is None  # nothing after the two responses


def test_log_goes_to_a_file_in_the_data_dir_without_captured_content(host: HostProcess) -> None:
    capture(host, "https://secret-site.example/page", "confidential words here", "v-1")
    assert host.wait() == 0
    log = (host.home / "logs" / "native-host.log").read_text(encoding="utf-8")
    assert "hello from chromium extension 0.1.0" in log
    assert "session ended after 2 message(s), status 0" in log
    assert "secret-site" not in log and "confidential" not in log


def test_console_script_backtrail_host_serves_frames(home: Path) -> None:
    script = Path(sys.executable).parent / "backtrail-host"
    with HostProcess(home, command=[str(script), ORIGIN]) as host:
        assert host.hello()["protocol"] == 1
        assert host.wait() == 0


def test_a_store_that_cannot_be_opened_is_reported_with_error_14(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("no_such_setting = 1\n")
    with HostProcess(home) as host:
        error = error_of(host.call("hello", **hello_fields()))
        assert error["code"] == 14
        assert "settings are invalid" in error["message"]
        assert "no_such_setting" in error["message"]
        assert error_of(host.call("status"))["code"] == 14
        assert host.wait() == 0


# ------------------------------------------------------------- page capture


def test_capture_page_html_is_stored_durably_and_becomes_searchable(host: HostProcess) -> None:
    result = capture(host, "https://example.com/wal?utm_source=x&token=s3cret", ARTICLE, "v-1",
                     html=True, title=None)  # fmt: skip
    assert result == {"page_id": 1, "outcome": "queued", "visit_created": True,
                      "duplicate": False}  # fmt: skip
    hits = host.ok("search", query="transaction journal crash")["results"]
    assert [(h["kind"], h["url"], h["title"]) for h in hits] == [
        ("page", "https://example.com/wal?utm_source=x", "Write-ahead logging")
    ]
    assert hits[0]["visit_time"] == VISIT_TIME // 1000 * 1000  # the visit's, not the capture's
    assert "secret" not in json.dumps(hits)
    status = host.ok("status")
    assert status["counts"]["pages"] == 1 and status["counts"]["visits"] == 1
    assert status["last_capture_time"] == (VISIT_TIME + 5_000) // 1000 * 1000


def test_a_replayed_capture_is_a_duplicate_and_a_resent_id_gets_the_same_answer(
    host: HostProcess,
) -> None:
    fields = capture_fields("https://example.com/a", "Text of the page.", visit_id="v-1")
    first = host.call("capture_page", ident="q-1", **fields)
    again = host.call("capture_page", ident="q-1", **fields)
    assert again == first
    replay = host.ok("capture_page", **fields)
    assert replay == {"page_id": 1, "outcome": "unchanged", "visit_created": False,
                      "duplicate": True}  # fmt: skip
    assert host.ok("status")["counts"]["visits"] == 1


def test_a_repeated_visit_only_raises_its_dwell(host: HostProcess) -> None:
    url = "https://example.com/read"
    first = host.ok("visit", url=url, title="Read", visit=visit("v-9", dwell_ms=4_000))
    assert first["visit_created"] is True
    again = host.ok("visit", url=url, title="Read", visit=visit("v-9", dwell_ms=9_000))
    assert again == {"page_id": first["page_id"], "visit_created": False}
    host.ok("visit", url=url, title="Read", visit=visit("v-9", dwell_ms=1_000))
    visits = [i for i in export_all(host) if i["kind"] == "visit"]
    assert [(v["external_id"], v["dwell_ms"]) for v in visits] == [("v-9", 9_000)]


def test_non_ascii_text_survives_the_round_trip(host: HostProcess) -> None:
    text = "Zürich façade naïve — 東京の図書館 ✨ שלום עולם 🦀 marker"
    capture(host, "https://例え.jp/ページ", text, "v-u", title="Ünïcödé 東京 🦀")
    page = next(i for i in export_all(host) if i["kind"] == "page")
    assert page["text"] == text
    assert page["title"] == "Ünïcödé 東京 🦀"
    assert page["url"] == "https://xn--r8jz45g.jp/%E3%83%9A%E3%83%BC%E3%82%B8"
    hit = host.ok("search", query="marker")["results"][0]
    assert hit["title"] == "Ünïcödé 東京 🦀"


def test_an_unpaired_surrogate_escape_is_read_as_a_replacement_character(
    host: HostProcess,
) -> None:
    body = json.dumps(host.message("capture_page", **capture_fields(
        "https://example.com/s", "broken \ud800 text", visit_id="v-s")), ensure_ascii=True)
    host.send_raw(struct.pack("<I", len(body)) + body.encode("ascii"))
    assert host.recv()["ok"] is True
    page = next(i for i in export_all(host) if i["kind"] == "page")
    assert page["text"] == "broken \ufffd text"


# -------------------------------------------------------------- tabs, bookmarks


def tab(tab_id: int, url: str | None, **extra: Any) -> dict[str, Any]:
    return {"tab_id": tab_id, "window_id": 1, "index": tab_id, "url": url,
            "title": f"Tab {tab_id}" if url else None, "active": False, "pinned": False,
            "group_id": None, "last_accessed_time": VISIT_TIME, **extra}  # fmt: skip


def tabs_of(host: HostProcess) -> dict[int, dict[str, Any]]:
    return {i["tab_id"]: i for i in export_all(host, kinds=["tab"])}


def test_tab_snapshot_and_tab_events_keep_the_open_tabs(host: HostProcess) -> None:
    snapshot = [tab(1, "https://example.com/one"), tab(2, None), tab(3, "https://mail.google.com/x")]
    assert host.ok("tab_snapshot", tabs=snapshot, time=VISIT_TIME) == {"tabs": 3}
    tabs = tabs_of(host)
    assert tabs[1]["url"] == "https://example.com/one"
    assert tabs[3]["url"] is None and tabs[3]["title"] is None  # excluded by default rules
    host.ok("tab_event", event="opened", tab=tab(4, None), time=VISIT_TIME)
    host.ok("tab_event", event="updated", tab=tab(4, "https://example.com/four"), time=VISIT_TIME)
    host.ok("tab_event", event="activated", tab=tab(4, "https://example.com/four"),
            time=VISIT_TIME)  # fmt: skip
    host.ok("tab_event", event="closed", tab={"tab_id": 2, "window_id": 1}, time=VISIT_TIME)
    host.ok("tab_event", event="closed", tab={"tab_id": 99, "window_id": 1}, time=VISIT_TIME)
    tabs = tabs_of(host)
    assert sorted(tabs) == [1, 3, 4]
    assert tabs[4]["url"] == "https://example.com/four" and tabs[4]["active"] is True
    assert tabs[4]["profile"] == "profile-1"


def bookmark(browser_id: str, url: str, folder: str = "Bookmarks bar") -> dict[str, Any]:
    return {
        "browser_id": browser_id, "parent_id": "1", "index": 0, "url": url,
        "title": f"Bookmark {browser_id}", "folder": folder, "added_time": VISIT_TIME,
    }  # fmt: skip


def bookmark_ids(host: HostProcess) -> list[str]:
    return sorted(i["browser_id"] for i in export_all(host, kinds=["bookmark"]))


def test_bookmarks_are_upserted_removed_and_skipped_when_not_allowed(host: HostProcess) -> None:
    result = host.ok("bookmark_upsert", bookmarks=[
        bookmark("10", "https://example.com/a"), bookmark("11", "https://example.com/b"),
        bookmark("12", "javascript:alert(1)"), bookmark("13", "https://mail.google.com/"),
    ])  # fmt: skip
    assert result == {"upserted": 2, "skipped": 2}
    assert host.ok("bookmark_remove", browser_ids=["11", "404"]) == {"removed": 1}
    assert bookmark_ids(host) == ["10"]


def test_a_complete_bookmark_import_removes_bookmarks_no_longer_in_the_browser(
    host: HostProcess,
) -> None:
    host.ok("bookmark_upsert", bookmarks=[bookmark("1", "https://old.example/")])
    first = host.ok("bookmark_import", import_id="imp-1", batch=0, final=False,
                    bookmarks=[bookmark("2", "https://example.com/2")])  # fmt: skip
    assert first == {"upserted": 1, "skipped": 0, "removed": 0, "complete": False}
    last = host.ok("bookmark_import", import_id="imp-1", batch=1, final=True, total=2,
                   bookmarks=[bookmark("3", "https://example.com/3")])  # fmt: skip
    assert last == {"upserted": 1, "skipped": 0, "removed": 1, "complete": True}
    assert bookmark_ids(host) == ["2", "3"]


def test_a_bookmark_import_with_a_missing_batch_removes_nothing(host: HostProcess) -> None:
    host.ok("bookmark_upsert", bookmarks=[bookmark("1", "https://old.example/")])
    last = host.ok("bookmark_import", import_id="imp-2", batch=1, final=True, total=2,
                   bookmarks=[bookmark("3", "https://example.com/3")])  # fmt: skip
    assert last["complete"] is False and last["removed"] == 0
    assert bookmark_ids(host) == ["1", "3"]


# ---------------------------------------------------- highlights, notes, history


def test_highlights_and_notes_are_kept_once_per_dedupe_key(host: HostProcess) -> None:
    fields = {"dedupe_key": "highlight:abc", "url": "https://example.com/h", "title": "H",
              "text": "the selected words", "context": "around the selected words",
              "note": None, "time": VISIT_TIME}  # fmt: skip
    first = host.ok("highlight", **fields)
    assert first["duplicate"] is False
    assert host.ok("highlight", **fields) == {"highlight_id": first["highlight_id"],
                                              "duplicate": True}  # fmt: skip
    note = {"dedupe_key": "note:n1", "content": "my own words", "url": "https://example.com/h",
            "title": "H", "time": VISIT_TIME}  # fmt: skip
    assert host.ok("note", **note)["duplicate"] is False
    assert host.ok("note", **note)["duplicate"] is True
    counts = host.ok("status")["counts"]
    assert counts["highlights"] == 1 and counts["notes"] == 1
    assert search_urls(host, "selected words", filters={"kinds": ["highlight"]}) == [
        "https://example.com/h"
    ]


def test_a_highlight_on_an_excluded_page_is_9_but_a_note_keeps_its_words(
    host: HostProcess,
) -> None:
    error = error_of(host.call("highlight", dedupe_key="highlight:x",
                               url="https://accounts.google.com/a", title=None, text="x",
                               context=None, note=None, time=VISIT_TIME))  # fmt: skip
    assert error["code"] == 9 and error["details"] == {"rule": "accounts.google.com"}
    result = host.ok("note", dedupe_key="note:x", content="kept words",
                     url="https://accounts.google.com/a", title="T", time=VISIT_TIME)  # fmt: skip
    note = next(i for i in export_all(host) if i["kind"] == "note")
    assert note["id"] == result["note_id"]
    assert note["url"] is None and note["content"] == "kept words"


def test_history_import_scopes_visit_ids_by_profile_and_skips_what_it_cannot_store(
    host: HostProcess,
) -> None:
    items = [
        {"url": "https://example.com/old", "title": "Old", "visit_count": 2, "typed_count": 0,
         "last_visit_time": VISIT_TIME, "visits": [
             {"visit_id": "11", "time": VISIT_TIME - 86_400_000, "transition": "typed",
              "referring_visit_id": None},
             {"visit_id": "12", "time": VISIT_TIME, "transition": "link",
              "referring_visit_id": "11"}]},
        {"url": "file:///etc/passwd", "title": None, "visit_count": 1, "typed_count": 0,
         "last_visit_time": VISIT_TIME, "visits": [
             {"visit_id": "13", "time": VISIT_TIME, "transition": "link",
              "referring_visit_id": None}]},
    ]  # fmt: skip
    batch = {"import_id": "h-1", "batch": 0, "final": True,
             "range": {"start_time": 0, "end_time": VISIT_TIME + 1}, "items": items}  # fmt: skip
    assert host.ok("history_import", **batch) == {"added": 2, "skipped": 1, "pages_created": 1}
    assert host.ok("history_import", **batch) == {"added": 0, "skipped": 3, "pages_created": 0}
    visits = [i for i in export_all(host) if i["kind"] == "visit"]
    assert sorted(v["external_id"] for v in visits) == ["profile-1:11", "profile-1:12"]
    assert {v["source"] for v in visits} == {"history"}


# --------------------------------------------------------------- reading, state


def test_search_pages_with_a_cursor_and_filters(host: HostProcess) -> None:
    for n in range(3):
        capture(host, f"https://site{n}.example/doc", f"Checkpoint number {n} of the log.",
                f"v-{n}")  # fmt: skip
    first = host.ok("search", query="checkpoint log", limit=2)
    assert len(first["results"]) == 2 and first["next_cursor"]
    second = host.ok("search", query="checkpoint log", limit=2, cursor=first["next_cursor"])
    urls = [r["url"] for r in first["results"] + second["results"]]
    assert sorted(urls) == [f"https://site{n}.example/doc" for n in range(3)]
    assert second["next_cursor"] is None
    assert search_urls(host, "checkpoint", filters={"domain": "site1.example"}) == [
        "https://site1.example/doc"
    ]
    error = error_of(host.call("search", query="checkpoint log", cursor="garbage"))
    assert error["code"] == 16 and error["details"]["field"] == "cursor"


def test_pause_refuses_captures_with_10_until_resume(host: HostProcess) -> None:
    assert host.ok("pause", until_time=None) == {"paused": True}
    assert host.ok("status")["paused"] is True
    error = error_of(host.call("capture_page", **capture_fields(
        "https://example.com/p", "paused text", visit_id="v-p")))  # fmt: skip
    assert error["code"] == 10
    assert error_of(host.call("tab_snapshot", tabs=[], time=VISIT_TIME))["code"] == 10
    assert host.ok("resume") == {"paused": False}
    assert capture(host, "https://example.com/p", "paused text", "v-p")["outcome"] == "created"


def test_forget_a_domain_removes_it_from_search_and_needs_exactly_one_selector(
    host: HostProcess,
) -> None:
    capture(host, "https://gone.example/a", "Forgettable unicorn story.", "v-1")
    capture(host, "https://kept.example/b", "Another unicorn story.", "v-2")
    result = host.ok("forget", domain="gone.example")
    assert result["selector"] == "domain" and result["counts"]["pages"] == 1
    assert result["purged"] is True
    assert search_urls(host, "unicorn story") == ["https://kept.example/b"]
    assert error_of(host.call("forget"))["code"] == 5
    assert error_of(host.call("forget", domain="a.example", everything=True))["code"] == 16
    assert error_of(host.call("forget", url="file:///x"))["code"] == 8


def test_forget_refuses_a_public_suffix_and_keeps_every_site_under_it(host: HostProcess) -> None:
    urls = ["https://python.org/a", "https://www.bbc.co.uk/b", "https://me.github.io/c"]
    for n, url in enumerate(urls):
        capture(host, url, "A walrus in every page.", f"v-{n}")
    for suffix in ("org", ".org", "co.uk", "UK", "github.io", "*.com"):
        error = error_of(host.call("forget", domain=suffix))
        assert error["code"] == 16 and error["details"] == {"field": "domain"}, suffix
        assert "public suffix" in error["message"]
    assert sorted(search_urls(host, "walrus")) == sorted(urls)
    assert host.ok("forget", domain="me.github.io")["counts"]["pages"] == 1
    assert host.ok("forget", domain="python.org")["counts"]["pages"] == 1
    assert search_urls(host, "walrus") == ["https://www.bbc.co.uk/b"]


def test_skipped_pages_are_counted_per_rule_without_urls_and_shown_by_backtrail_stats(
    host: HostProcess, home: Path, ledger_target: Path | str
) -> None:
    for rule in ("*/login", "password field", "*/login"):
        answer = host.ok("skipped", rule=rule, time=VISIT_TIME)
    assert answer == {"count": 2}
    assert error_of(host.call("skipped", rule="", time=VISIT_TIME))["code"] == 16
    assert error_of(host.call("skipped", rule=7, time=VISIT_TIME))["code"] == 6
    assert host.wait() == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKTRAIL_")}
    if isinstance(ledger_target, str):  # the host's PostgreSQL ledger
        env["BACKTRAIL_LEDGER_URL"] = ledger_target
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("backtrail")), "stats", "--json"], capture_output=True,
        text=True, timeout=120, env={**env, "BACKTRAIL_HOME": str(home),
                                     "BACKTRAIL_EMBEDDINGS": "0"}, check=True,
    )  # fmt: skip
    assert json.loads(shown.stdout)["skipped"] == {"*/login": 2, "password field": 1}
    table = subprocess.run(
        [str(Path(sys.executable).with_name("backtrail")), "stats"], capture_output=True,
        text=True, timeout=120, env={**env, "BACKTRAIL_HOME": str(home), "COLUMNS": "200",
                                     "BACKTRAIL_EMBEDDINGS": "0"}, check=True,
    )  # fmt: skip
    assert re.search(r"not captured +by rule: \*/login 2, password field 1", table.stdout)


def test_no_secret_of_a_url_in_a_title_reaches_the_store_through_any_message(
    host: HostProcess, home: Path
) -> None:
    raw = "127.0.0.1:8000/live/untitled.html?token=SECRETB3live&q=ok"
    clean = "127.0.0.1:8000/live/untitled.html?q=ok"
    url = f"http://{raw}"
    capture(host, url, "A page without a title element.", "v-t", title=raw)
    host.ok("visit", url="http://127.0.0.1:8000/a;jsessionid=SECRETJ9/b", visit=visit("v-j"),
            title="127.0.0.1:8000/a;jsessionid=SECRETJ9/b")  # fmt: skip
    host.ok("tab_snapshot", tabs=[tab(1, url, title=f"http://{raw}")], time=VISIT_TIME)
    host.ok("tab_event", event="updated", tab=tab(2, url, title=f"Loading {raw}"), time=VISIT_TIME)
    host.ok("bookmark_upsert", bookmarks=[{"browser_id": "9", "url": url, "title": raw}])
    host.ok("history_import", import_id="i", batch=0, final=True,
            range={"start_time": 0, "end_time": VISIT_TIME},
            items=[{"url": "https://docs.example/notes.txt", "title":
                    "docs.example/notes.txt?access_token=SECRETH7",
                    "visits": [{"visit_id": "h1", "time": VISIT_TIME}]}])  # fmt: skip
    for secret in ("SECRETB3live", "SECRETJ9", "SECRETH7"):
        assert search_urls(host, secret) == [], secret
    items = export_all(host)
    assert not any(s in json.dumps(items) for s in ("SECRETB3live", "SECRETJ9", "SECRETH7"))
    titles = {item.get("title") for item in items}
    assert {clean, f"http://{clean}", f"Loading {clean}", "127.0.0.1:8000/a/b",
            "docs.example/notes.txt"} <= titles  # fmt: skip
    assert host.wait() == 0
    for path in (p for p in home.rglob("*") if p.is_file()):  # ledger, WAL, index, logs
        data = path.read_bytes()
        assert not any(s in data for s in (b"SECRETB3live", b"SECRETJ9", b"SECRETH7")), path


def test_settings_are_stored_per_profile_and_their_exclusions_apply(host: HostProcess) -> None:
    assert host.ok("settings_get") == {"settings": None, "version": 0}
    settings = {"exclusions": {"use_defaults": True, "rules": ["private.example"]},
                "capture": {"min_dwell_ms": 5000}, "future_key": {"kept": True}}  # fmt: skip
    assert host.ok("settings_set", settings=settings) == {"version": 1}
    assert host.ok("settings_get") == {"settings": settings, "version": 1}
    error = error_of(host.call("capture_page", **capture_fields(
        "https://www.private.example/x", "text", visit_id="v-x")))  # fmt: skip
    assert error["code"] == 9 and error["details"]["rule"] == "private.example"
    bad = {"exclusions": {"use_defaults": True, "rules": ["has space"]}}
    assert error_of(host.call("settings_set", settings=bad))["code"] == 16
    assert host.ok("settings_get")["version"] == 1
    host.ok("hello", **hello_fields("profile-2"))
    assert host.ok("settings_get") == {"settings": None, "version": 0}


def test_export_splits_a_page_too_large_for_one_frame(host: HostProcess) -> None:
    text = '"ab" ' * 200_000  # 1 MB stored, 1.4 MB as JSON (each quote is escaped)
    capture(host, "https://example.com/big", text, "v-big")
    capture(host, "https://example.com/small", "small page", "v-small")
    host.ok("note", dedupe_key="note:1", content="a note", url=None, title=None,
            time=VISIT_TIME)  # fmt: skip
    items: list[dict[str, Any]] = []
    cursor = None
    frames = 0
    while True:
        result = host.ok("export", cursor=cursor)
        assert len(json.dumps(result).encode()) < 1024 * 1024
        frames += 1
        items += result["items"]
        cursor = result["next_cursor"]
        if cursor is None:
            break
    assert frames >= 2
    big = next(i for i in items if i["kind"] == "page" and i["url"].endswith("/big"))
    rest = [i for i in items if i["kind"] == "page_text" and i["page_id"] == big["id"]]
    assert big["text_chars"] == len(text)
    assert big["text"] + "".join(p["text"] for p in rest) == text
    assert [p["offset"] for p in rest][0] == len(big["text"])
    assert {i["kind"] for i in items} == {"page", "page_text", "visit", "note"}
    assert error_of(host.call("export", cursor="0123456789abcdef.0.0.0"))["code"] == 11


def test_action_result_is_acknowledged(host: HostProcess) -> None:
    assert host.ok("action_result", action_id="a-1", ok=True, result={"closed": 2},
                   error=None) == {}  # fmt: skip


# ------------------------------------------------------------------ bad input


def assert_still_serving(host: HostProcess, pages: int) -> None:
    assert host.ok("status")["counts"]["pages"] == pages


def raw(text: bytes) -> bytes:
    return struct.pack("<I", len(text)) + text


BAD_FRAMES = [
    (raw(b'{"id":"bad-1","type":"status","x":"\xff\xfe"}'), 2, "bad-1"),
    (raw(b'{"id":"bad-2","type":"status",'), 3, "bad-2"),
    (raw(b'{"id":"bad-3","type":"status","n":NaN}'), 3, "bad-3"),
    (raw(b'["id", "status"]'), 3, None),
    (raw(b'{"type":"status"}'), 3, None),
    (raw(b'{"id":"has space","type":"status"}'), 3, None),
    (raw(b'{"id":"' + b"x" * 65 + b'","type":"status"}'), 3, None),
    (raw(b'{"id":"bad-4","type":"launch_rockets"}'), 4, "bad-4"),
    (raw(b'{"id":"bad-5"}'), 4, "bad-5"),
    (raw(b"[" * 100_000), 3, None),
]


@pytest.mark.parametrize(
    ("data", "code", "ident"), BAD_FRAMES,
    ids=[f"code{c}-{n}" for n, (_, c, _) in enumerate(BAD_FRAMES)],
)  # fmt: skip
def test_a_malformed_frame_gets_its_code_and_the_host_keeps_serving(
    host: HostProcess, data: bytes, code: int, ident: str | None
) -> None:
    capture(host, "https://example.com/kept", "stored before the bad frame", "v-1")
    host.send_raw(data)
    answer = host.recv()
    assert answer["id"] == ident
    assert error_of(answer)["code"] == code
    assert_still_serving(host, 1)


def good_capture() -> dict[str, Any]:
    return capture_fields("https://example.com/x", "text", visit_id="v-x")


def without(fields: dict[str, Any], *path: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(fields))
    target = copy
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copy


def replaced(fields: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(fields))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


BAD_FIELDS = [
    (without(good_capture(), "url"), 5, "url"),
    (without(good_capture(), "visit", "visit_id"), 5, "visit.visit_id"),
    (replaced(good_capture(), 42, "url"), 6, "url"),
    (replaced(good_capture(), "1700000000", "captured_time"), 6, "captured_time"),
    (replaced(good_capture(), True, "visit", "tab_id"), 6, "visit.tab_id"),
    (replaced(good_capture(), None, "visit"), 6, "visit"),
    (replaced(good_capture(), 1.5, "visit", "time"), 6, "visit.time"),
    (replaced(good_capture(), "pdf", "content_type"), 16, "content_type"),
    (replaced(good_capture(), -1, "captured_time"), 16, "captured_time"),
    (replaced(good_capture(), "not a url", "url"), 16, "url"),
    (replaced(good_capture(), "https://" + "a" * 9_000 + ".com/", "url"), 16, "url"),
    (replaced(good_capture(), "", "visit", "visit_id"), 16, "visit.visit_id"),
    (replaced(good_capture(), "<p>both</p>", "html"), 16, "html"),
    (replaced(good_capture(), "javascript:alert(document.cookie)", "url"), 8, "url"),
    (replaced(good_capture(), "data:text/html,<b>x</b>", "url"), 8, "url"),
    (replaced(good_capture(), "file:///home/me/secrets.txt", "url"), 8, "url"),
]


@pytest.mark.parametrize(
    ("fields", "code", "field"), BAD_FIELDS,
    ids=[f"code{c}-{f}-{n}" for n, (_, c, f) in enumerate(BAD_FIELDS)],
)  # fmt: skip
def test_bad_fields_get_their_code_and_name_and_store_nothing(
    host: HostProcess, fields: dict[str, Any], code: int, field: str
) -> None:
    capture(host, "https://example.com/kept", "stored before", "v-1")
    error = error_of(host.call("capture_page", **fields))
    assert (error["code"], error["details"]["field"]) == (code, field)
    assert_still_serving(host, 1)


def test_a_20_mb_message_is_refused_with_7_and_the_host_keeps_serving(host: HostProcess) -> None:
    fields = capture_fields("https://example.com/huge", "x" * 20_000_000, visit_id="v-h")
    message = host.message("capture_page", ident="huge-1", **fields)
    data = frame(message)
    host.send_raw(data)
    error = error_of(answer := host.recv())
    assert answer["id"] == "huge-1"
    assert error["code"] == 7
    assert error["details"] == {"limit": 16 * 1024 * 1024, "actual": len(data) - 4}
    assert_still_serving(host, 0)


def test_a_20_mb_capture_is_stored_when_the_caps_allow_it(home: Path) -> None:
    caps = {"BACKTRAIL_MAX_REQUEST_BYTES": str(32 * 1024 * 1024),
            "BACKTRAIL_MAX_CAPTURE_BYTES": str(32 * 1024 * 1024)}  # fmt: skip
    with HostProcess(home, env=caps) as host:
        assert host.hello()["limits"]["max_request_bytes"] == 32 * 1024 * 1024
        text = "écrit " * 3_400_000  # 20.4 MB of UTF-8
        result = capture(host, "https://example.com/huge", text, "v-h")
        assert result["outcome"] == "created"
        page = next(i for i in export_all(host) if i["kind"] == "page")
        stored = page["text"] + "".join(
            i["text"] for i in export_all(host) if i["kind"] == "page_text"
        )
        assert 0 < len(stored.encode()) <= 1_048_576 and text.startswith(stored.rstrip())
        assert host.wait() == 0


def test_a_zero_length_prefix_is_error_1_and_ends_the_host_with_status_1(
    host: HostProcess,
) -> None:
    host.send_raw(struct.pack("<I", 0))
    error = error_of(host.recv())
    assert error["code"] == 1 and error["name"] == "malformed_frame"
    assert host.process.wait(60) == 1


def test_a_length_prefix_above_64_mib_is_error_1(host: HostProcess) -> None:
    host.send_raw(struct.pack("<I", 64 * 1024 * 1024 + 1) + b'{"id":"x"}')
    answer = host.recv()
    assert answer["id"] is None and error_of(answer)["code"] == 1
    assert error_of(answer)["details"] == {"limit": 64 * 1024 * 1024,
                                           "actual": 64 * 1024 * 1024 + 1}  # fmt: skip
    assert host.process.wait(60) == 1


def test_a_length_prefix_cut_by_end_of_stream_is_error_1_and_a_clean_exit(
    host: HostProcess,
) -> None:
    host.send_raw(b"\x10\x00")
    host.close_stdin()
    assert error_of(host.recv())["code"] == 1
    assert host.wait() == 0


def test_a_body_cut_by_end_of_stream_is_error_1_with_its_id_and_a_clean_exit(
    host: HostProcess,
) -> None:
    body = frame(host.message("status", ident="cut-1"))[4:]
    host.send_raw(struct.pack("<I", len(body) + 50) + body)
    host.close_stdin()
    answer = host.recv()
    assert answer["id"] == "cut-1" and error_of(answer)["code"] == 1
    assert host.wait() == 0


# ----------------------------------------------------------------- volume


def test_a_thousand_messages_in_one_session_get_one_answer_each_in_order(
    host: HostProcess,
) -> None:
    messages = []
    for n in range(1_000):
        if n % 4 == 3:
            messages.append(host.message("status", ident=f"m-{n}"))
        elif n % 4 == 2:
            messages.append(host.message("visit", ident=f"m-{n}", url=f"https://e.example/{n}",
                                         title=None, visit=visit(f"vv-{n}")))  # fmt: skip
        else:
            messages.append(host.message("capture_page", ident=f"m-{n}", **capture_fields(
                f"https://e.example/{n}", f"Page {n} body text", visit_id=f"vc-{n}")))  # fmt: skip
    host.send_raw(b"".join(frame(m) for m in messages))
    answers = [host.recv() for _ in messages]
    assert [a["id"] for a in answers] == [m["id"] for m in messages]
    assert all(a["ok"] for a in answers), [a for a in answers if not a["ok"]][:3]
    counts = host.ok("status")["counts"]
    assert (counts["pages"], counts["visits"]) == (750, 750)
    assert host.wait() == 0
