"""Browser actions below MCP: the ledger's action rows (states, one claimer, expiry,
forget), the service queue (validation, profiles, outcomes, captured text, bookmarks),
the native host pushing actions over real frames, related content, open-tab sources
and the write-lock demo."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backtrail.errors import Excluded, InvalidInput, InvalidUrl, Paused, StoreBusy
from backtrail.service import Memory, VisitInfo, insights
from backtrail.service.actions import ActionQueue, NoActiveTab, parse_wire_id, wire_id
from backtrail.service.browser_sync import VisitRecord
from backtrail.store import ActionNotFound, Ledger, TabInput
from conftest import FakeClock
from helpers import make_config, share_model, wait_for
from host_client import HostProcess, capture_fields, hello_fields

ARTICLE = (
    "<html lang='en'><head><title>Checkpoints</title></head><body><article><h1>Checkpoints</h1>"
    + "".join(
        f"<p>Paragraph {i}: a checkpoint copies the write-ahead log back into the main "
        "database file so that the log can start again from the beginning.</p>"
        for i in range(8)
    )
    + "</article></body></html>"
)


# Tests of the memory fixture run on each ledger backend (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")

@pytest.fixture
def memory(tmp_path: Path, clock: FakeClock, ledger_target: Path | str) -> Iterator[Memory]:
    backend = {"ledger_url": ledger_target} if isinstance(ledger_target, str) else {}
    opened = Memory(make_config(tmp_path / "home", **backend), client="mcp:test", clock=clock)
    yield opened
    opened.close()


@pytest.fixture
def queue(memory: Memory) -> ActionQueue:
    return memory.actions


def other_ledger(memory: Memory, clock: FakeClock, **options: Any) -> Ledger:
    """A second connection to the same ledger (another process, in effect)."""
    return Ledger(memory.config.ledger_target, client="native-host", clock=clock, **options)


def event_trail(ledger: Ledger, action_id: int) -> list[tuple[str, str]]:
    return [
        (e.action, e.client)
        for e in ledger.list_events(target_type="action", target=action_id)
    ]


# ------------------------------------------------------------------- ledger


def test_an_action_goes_pending_sent_done_with_one_audit_event_per_step(
    memory: Memory, clock: FakeClock
) -> None:
    created = memory._ledger.create_action("close_tabs", {"tab_ids": [3]}, profile="p1", ttl=60)
    assert (created.status, created.client, created.expires_at) == (
        "pending", "mcp:test", clock.now + 60,
    )  # fmt: skip
    host = other_ledger(memory, clock)
    try:
        (sent,) = host.claim_actions("native-host:1", profile="p1")
        assert (sent.id, sent.status, sent.claimed_by) == (created.id, "sent", "native-host:1")
        assert host.claim_actions("native-host:1", profile="p1") == []
        done = host.finish_action(created.id, "done", result={"closed": 1})
        assert done is not None and (done.status, done.result, done.error) == (
            "done", {"closed": 1}, None,
        )  # fmt: skip
        assert host.finish_action(created.id, "failed", error={"code": 11}) is None  # replay
        assert event_trail(host, created.id) == [
            ("action.create", "mcp:test"), ("action.sent", "native-host"),
            ("action.done", "native-host"),
        ]  # fmt: skip
        sent_event = host.list_events(action="action.sent")[0]
        assert sent_event.details == {"type": "close_tabs", "by": "native-host:1"}
    finally:
        host.close()


def test_each_action_is_claimed_by_exactly_one_of_many_racing_hosts(
    memory: Memory, clock: FakeClock
) -> None:
    ids = {memory._ledger.create_action("group_tabs", {"tab_ids": [i]}).id for i in range(40)}
    claimed: dict[str, list[int]] = {}
    start = threading.Barrier(4)

    def host(name: str) -> None:
        ledger = other_ledger(memory, clock)
        got: list[int] = []
        try:
            start.wait()
            while batch := ledger.claim_actions(name, profile="p", limit=3):
                got += [action.id for action in batch]
        finally:
            ledger.close()
        claimed[name] = got

    threads = [threading.Thread(target=host, args=(f"host-{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    everything = [i for got in claimed.values() for i in got]
    assert sorted(everything) == sorted(ids)  # each once, none twice
    assert len(memory._ledger.list_events(action="action.sent", limit=1_000)) == 40


def test_a_host_claims_actions_for_its_own_profile_or_for_any_browser(memory: Memory) -> None:
    ledger = memory._ledger
    mine = ledger.create_action("close_tabs", {"tab_ids": [1]}, profile="p1")
    theirs = ledger.create_action("close_tabs", {"tab_ids": [1]}, profile="p2")
    anyone = ledger.create_action("create_bookmark", {"url": "https://a.example/"})
    assert [a.id for a in ledger.claim_actions("h", profile="p1")] == [mine.id, anyone.id]
    assert [a.id for a in ledger.claim_actions("h", profile="p2")] == [theirs.id]


def test_unclaimed_and_unanswered_actions_expire_and_a_late_answer_still_counts(
    memory: Memory, clock: FakeClock
) -> None:
    ledger = memory._ledger
    waiting = ledger.create_action("capture_tab", {"tab_id": 1}, ttl=30)
    answered_late = ledger.create_action("capture_tab", {"tab_id": 2}, ttl=30)
    ledger.claim_actions("h", profile=None, limit=1)
    ledger.claim_actions("h", profile=None, limit=1)
    never_sent = ledger.create_action("capture_tab", {"tab_id": 3}, ttl=30)
    clock.advance(29)
    assert ledger.expire_actions() == []
    clock.advance(1)
    assert ledger.expire_actions() == [never_sent.id]
    assert ledger.claim_actions("h", profile=None) == []
    expired = ledger.get_action(never_sent.id)
    assert expired.status == "expired" and "no browser picked" in expired.error["message"]
    clock.advance(600)
    assert ledger.expire_actions() == [waiting.id, answered_late.id]
    assert "did not report an outcome within 600 s" in ledger.get_action(waiting.id).error[
        "message"
    ]
    late = ledger.finish_action(answered_late.id, "done", result={"dedupe_key": "capture:x"})
    assert late is not None and late.status == "done" and late.error is None
    assert ledger.finish_action(never_sent.id, "done", result={}) is None  # never delivered
    assert [e.details for e in ledger.list_events(action="action.expired")] == [
        {"was": "pending"}, {"was": "sent"}, {"was": "sent"},
    ]  # fmt: skip


@pytest.mark.backends("sqlite")  # holds SQLite's file lock directly
def test_an_idle_poll_reads_without_taking_the_write_lock(
    memory: Memory, clock: FakeClock
) -> None:
    poller = other_ledger(memory, clock, busy_timeout_ms=0)
    raw = sqlite3.connect(memory.config.ledger_path, timeout=0, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")  # another process is writing
        assert poller.claim_actions("h", profile="p") == []
        assert poller.expire_actions() == []
        raw.execute("ROLLBACK")
        memory._ledger.create_action("close_tabs", {"tab_ids": [1]})
        raw.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreBusy):  # now there is something to claim: it must write
            poller.claim_actions("h", profile="p")
    finally:
        raw.execute("ROLLBACK")
        raw.close()
        poller.close()


def test_actions_are_checked_before_anything_is_stored(memory: Memory) -> None:
    ledger = memory._ledger
    with pytest.raises(InvalidInput, match="type"):
        ledger.create_action("format_disk", {})
    with pytest.raises(InvalidInput, match="payload"):
        ledger.create_action("close_tabs", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="ttl"):
        ledger.create_action("close_tabs", {"tab_ids": [1]}, ttl=0)
    with pytest.raises(InvalidInput, match="status"):
        ledger.finish_action(1, "maybe")
    with pytest.raises(ActionNotFound):
        ledger.get_action(12345)
    assert ledger.list_actions() == []
    assert ledger.list_events(target_type="action") == []


def test_forgetting_a_page_or_a_time_range_forgets_the_actions_about_it(
    memory: Memory, clock: FakeClock
) -> None:
    ledger = memory._ledger
    bookmark = ledger.create_action("create_bookmark", {"url": "https://a.example/x"},
                                    url="https://a.example/x")  # fmt: skip
    other = ledger.create_action("create_bookmark", {"url": "https://b.example/"},
                                 url="https://b.example/")  # fmt: skip
    tabs = ledger.create_action("group_tabs", {"tab_ids": [1]})
    result = memory.forget(domain="a.example")
    assert result.counts["actions"] == 1
    assert [a.id for a in ledger.list_actions()] == [other.id, tabs.id]
    clock.advance(100)
    later = ledger.create_action("close_tabs", {"tab_ids": [2]})
    assert memory.forget(since=clock.now - 10).counts["actions"] == 1
    assert later.id not in [a.id for a in ledger.list_actions()]
    assert memory.forget(everything=True).counts["actions"] == 2
    assert ledger.list_actions() == [] and bookmark.id not in (other.id, tabs.id)


# ------------------------------------------------------------------ service


def tabs(memory: Memory, profile: str, *items: tuple[int, str | None, bool]) -> None:
    memory.snapshot_tabs(
        [TabInput(tab_id=i, window_id=1, url=url, title=f"tab {i}", active=active)
         for i, url, active in items],
        profile=profile,
    )  # fmt: skip


def test_tab_actions_target_the_browser_profile_that_reported_those_tabs(
    memory: Memory, queue: ActionQueue
) -> None:
    tabs(memory, "laptop", (1, "https://a.example/", True), (2, "https://b.example/", False))
    tabs(memory, "desktop", (7, "https://c.example/", True))
    grouped = queue.group_tabs([2, 1, 2], title="  Reading  ", color="blue")
    assert (grouped.profile, grouped.payload) == (
        "laptop", {"tab_ids": [2, 1], "title": "Reading", "color": "blue"},
    )  # fmt: skip
    assert queue.close_tabs([7]).profile == "desktop"
    assert queue.close_tabs([99]).profile is None  # unknown tabs: whichever browser has them
    with pytest.raises(InvalidInput, match="color"):
        queue.group_tabs([1], color="mauve")
    with pytest.raises(InvalidInput, match="tab_ids"):
        queue.close_tabs([])
    with pytest.raises(InvalidInput, match=r"tab_ids\[0\]"):
        queue.close_tabs([-1])


def test_capturing_refuses_at_once_what_the_browser_would_refuse(
    memory: Memory, queue: ActionQueue
) -> None:
    with pytest.raises(NoActiveTab):
        queue.capture_tab()
    tabs(memory, "p", (1, "https://a.example/doc", True), (2, "https://bank.example/", False),
         (3, None, False))  # fmt: skip
    action = queue.capture_tab()
    assert (action.payload, action.profile) == ({"tab_id": 1}, "p")
    memory.add_exclusion("bank.example")
    with pytest.raises(Excluded):
        queue.capture_tab(2)
    unknown = queue.capture_tab(3)  # its page is not reported yet: the browser decides
    assert (unknown.payload, unknown.profile) == ({"tab_id": 3}, "p")
    memory.pause_capture()
    with pytest.raises(Paused):
        queue.capture_tab()
    with pytest.raises(InvalidUrl):
        queue.create_bookmark("javascript:alert(1)")
    with pytest.raises(Excluded):
        queue.create_bookmark("https://bank.example/account")
    assert [a.id for a in queue.recent()] == [action.id, unknown.id]


def test_wire_ids_round_trip_and_foreign_ids_are_ignored(
    memory: Memory, queue: ActionQueue
) -> None:
    action = queue.close_tabs([1])
    assert wire_id(action) == f"a-{action.id}" and parse_wire_id(wire_id(action)) == action.id
    for foreign in ("a-", "a-01", "b-1", "a-1x", "", None, 5):
        assert parse_wire_id(foreign) is None
    assert queue.record_result("x-9", ok=True, result={}, error=None, profile="p") is None
    assert queue.record_result("a-999", ok=True, result={}, error=None, profile="p") is None


@pytest.mark.parametrize(
    ("code", "status"), [(18, "refused"), (19, "refused"), (10, "refused"), (9, "refused"),
                         (11, "failed"), (14, "failed"), (None, "failed")],
)  # fmt: skip
def test_the_browsers_error_code_decides_between_refused_and_failed(
    memory: Memory, queue: ActionQueue, code: int | None, status: str
) -> None:
    action = queue.close_tabs([1])
    queue.claim("h", None)
    error = None if code is None else {"code": code, "name": "x", "message": "why", "extra": 1}
    recorded = queue.record_result(wire_id(action), ok=False, result=None, error=error,
                                   profile="p")  # fmt: skip
    assert recorded is not None and recorded.status == status
    if code is None:
        assert recorded.error == {"code": 14, "name": "internal_error",
                                  "message": "the browser gave no reason"}  # fmt: skip
    else:
        assert recorded.error == {"code": code, "name": "x", "message": "why"}


def test_a_created_bookmark_is_recorded_in_the_folder_the_browser_chose(
    memory: Memory, queue: ActionQueue
) -> None:
    action = queue.create_bookmark("https://a.example/post?utm_source=x&token=s3cret",
                                   title="A post", folder=" Research / Rust ")  # fmt: skip
    assert action.payload == {"url": "https://a.example/post?utm_source=x", "title": "A post",
                              "parent_id": None, "folder": "Research/Rust"}  # fmt: skip
    queue.claim("h", "p")
    done = queue.record_result(
        wire_id(action), ok=True, error=None, profile="p",
        result={"browser_id": "512", "folder": "Bookmarks bar/Research/Rust"},
    )  # fmt: skip
    (bookmark,) = memory.list_bookmarks(profile="p")
    assert (bookmark.browser_id, bookmark.title, bookmark.folder) == (
        "512", "A post", "Bookmarks bar/Research/Rust",
    )  # fmt: skip
    assert done is not None and done.result == {
        "browser_id": "512", "folder": "Bookmarks bar/Research/Rust", "bookmark_id": bookmark.id,
    }  # fmt: skip


def test_a_done_capture_yields_the_text_even_before_an_indexing_pass(
    memory: Memory, queue: ActionQueue
) -> None:
    tabs(memory, "p", (4, "https://db.example/checkpoints", True))
    action = queue.capture_tab()
    (claimed,) = queue.claim("h", "p")
    sync = memory.browser("p")  # what the host does with the extension's frames
    sync.capture(
        "https://db.example/checkpoints", html=ARTICLE, title="Checkpoints",
        visit=VisitRecord(visit_id="v-1", visited_at=1_700_000_000, tab_id=4),
    )  # fmt: skip
    assert memory._ledger.count_pending_captures() == 1  # extraction deferred
    done = sync.action_result(wire_id(claimed), ok=True, error=None,
                              result={"dedupe_key": "capture:v-1"})  # fmt: skip
    assert done is not None
    page_id = memory.get_page("https://db.example/checkpoints", length=1).page_id
    assert done.result == {"dedupe_key": "capture:v-1", "page_id": page_id,
                           "url": "https://db.example/checkpoints"}  # fmt: skip
    page = queue.captured_page(done, length=5_000)
    assert page is not None and page.page_id == page_id
    assert "a checkpoint copies the write-ahead log back" in page.text
    assert memory._ledger.count_pending_captures() == 0
    assert queue.captured_page(action, length=10) is None  # the stale copy is not done


def test_waiting_stops_soon_when_no_browser_picks_the_action_up(
    memory: Memory, queue: ActionQueue
) -> None:
    action = queue.close_tabs([1])
    naps: list[float] = []
    started = time.monotonic()
    seen = queue.wait(action.id, claim_timeout=0.3, timeout=30, poll=0.05, sleep=naps.append)
    assert seen.status == "pending" and time.monotonic() - started < 5
    queue.claim("h", None)
    seen = queue.wait(wire_id(action), claim_timeout=0.0, timeout=0.2, poll=0.05)
    assert seen.status == "sent"  # a browser has it: only the overall timeout stops us
    with pytest.raises(ActionNotFound):
        queue.get("a-424242")


# ---------------------------------------------------------------- the host


def actions_home(tmp_path: Path) -> Path:
    return tmp_path / "backtrail-home"


def recv_push(host: HostProcess, timeout: float = 20.0) -> dict[str, Any]:
    message = host.recv(timeout)
    assert "id" not in message and message.get("type") == "action", message
    return message


def test_the_host_pushes_actions_for_its_profile_and_records_their_outcome(
    tmp_path: Path,
) -> None:
    home = actions_home(tmp_path)
    with HostProcess(home) as host:
        host.hello("laptop")
        host.ok("tab_snapshot", time=1_700_000_000_000, tabs=[
            {"tab_id": 5, "window_id": 1, "url": "https://a.example/", "title": "A",
             "active": True, "pinned": False, "group_id": None, "index": 0,
             "last_accessed_time": None},
        ])  # fmt: skip
        memory = Memory(make_config(home), client="mcp:claude")
        try:
            actions = memory.actions
            proposed = actions.group_tabs([5], title="Work", color="green")
            elsewhere = actions.close_tabs([5])
            push = recv_push(host)
            assert push == {"type": "action", "action_id": wire_id(proposed),
                            "action": "group_tabs", "tab_ids": [5], "title": "Work",
                            "color": "green"}  # fmt: skip
            second = recv_push(host)
            assert second["action_id"] == wire_id(elsewhere)
            assert actions.get(proposed.id).status == "sent"
            assert host.ok("action_result", action_id=push["action_id"], ok=True,
                           result={"group_id": 3}, error=None) == {}  # fmt: skip
            refusal = {"code": 18, "name": "action_not_allowed",
                       "message": 'the user has not allowed "close_tabs"'}  # fmt: skip
            host.ok("action_result", action_id=second["action_id"], ok=False, result=None,
                    error=refusal)  # fmt: skip
            assert actions.get(proposed.id).result == {"group_id": 3}
            refused = actions.get(elsewhere.id)
            assert (refused.status, refused.error["code"]) == ("refused", 18)
            trail = [(e.action, e.client) for e in memory._ledger.list_events(
                target_type="action", target=elsewhere.id)]  # fmt: skip
            assert trail == [("action.create", "mcp:claude"), ("action.sent", "native-host"),
                             ("action.refused", "native-host")]  # fmt: skip
        finally:
            memory.close()


def test_a_host_pushes_nothing_to_an_extension_that_does_not_take_actions(
    tmp_path: Path,
) -> None:
    home = actions_home(tmp_path)
    memory = Memory(make_config(home), client="mcp:claude")
    try:
        action = memory.actions.create_bookmark("https://a.example/")
        with HostProcess(home) as old, HostProcess(home) as new:
            fields = {**hello_fields("p"), "capabilities": ["notify"]}
            assert "actions" in old.ok("hello", **fields)["capabilities"]
            new.hello("p")  # connected later, yet the only one that may take it
            assert recv_push(new)["action_id"] == wire_id(action)
            assert old.ok("status")["profile_id"] == "p"  # frames come in order
            assert old.frames.empty()
            sent = memory._ledger.get_action(action.id)
            assert sent.claimed_by is not None and sent.claimed_by.startswith("native-host:")
            assert sent.claimed_by == f"native-host:{new.process.pid}"
    finally:
        memory.close()


def test_two_hosts_never_both_push_the_same_action(tmp_path: Path) -> None:
    home = actions_home(tmp_path)
    with HostProcess(home) as first, HostProcess(home) as second:
        first.hello("shared")
        second.hello("shared")
        memory = Memory(make_config(home), client="mcp:claude")
        try:
            queue = memory.actions
            ids = [wire_id(queue.close_tabs([n])) for n in range(6)]
            pushed: list[str] = []

            def collect() -> bool:
                for host in (first, second):
                    while not host.frames.empty():
                        pushed.append(recv_push(host)["action_id"])
                return len(pushed) >= len(ids)

            wait_for(collect, 30, "every action to be pushed")
            assert sorted(pushed) == sorted(ids)
            assert first.call("status")["ok"] and second.call("status")["ok"]
            assert first.frames.empty() and second.frames.empty()  # and nothing twice
        finally:
            memory.close()


def test_the_captured_page_arrives_before_the_answer_to_capture_tab(tmp_path: Path) -> None:
    """The extension queues capture_page before action_result (one queue, in order):
    by the time the action is done its page is stored."""
    home = actions_home(tmp_path)
    with HostProcess(home) as host:
        host.hello("p")
        memory = Memory(make_config(home), client="mcp:claude")
        try:
            memory.snapshot_tabs([TabInput(tab_id=9, window_id=1, url="https://db.example/c",
                                           active=True)], profile="p")  # fmt: skip
            queue = memory.actions
            action = queue.capture_tab()
            push = recv_push(host)
            assert push["tab_id"] == 9
            host.ok("capture_page", **capture_fields("https://db.example/c", ARTICLE, html=True,
                                                     visit_id="vv-9"))  # fmt: skip
            host.ok("action_result", action_id=push["action_id"], ok=True,
                    result={"dedupe_key": "capture:vv-9"}, error=None)  # fmt: skip
            done = queue.wait(action.id, claim_timeout=5, timeout=5)
            page = queue.captured_page(done, length=5_000)
            assert page is not None and "checkpoint copies the write-ahead log" in page.text
        finally:
            memory.close()


# ----------------------------------------------------------- related pages


def numbered(sentence: str, count: int = 6) -> str:
    return " ".join(f"Point {n}: {sentence}" for n in range(1, count + 1))


SQL_A = numbered("SQLite write-ahead logging appends every change to a separate log file, "
                 "and readers keep reading the database while one writer appends.")  # fmt: skip
SQL_COPY = SQL_A + " Mirrored from the original documentation site."
SQL_B = numbered("checkpoints move pages from the write-ahead log back into the database "
                 "file, and a busy reader can delay a SQLite checkpoint.")  # fmt: skip
BREAD = numbered("a sourdough starter needs flour and water every day, and the dough rises "
                 "slowly in a warm kitchen before baking.")  # fmt: skip


def related_memory(memory: Memory) -> dict[str, int]:
    pages = {
        "a": ("https://sqlite.org/wal.html", "Write-ahead logging", SQL_A),
        "copy": ("https://mirror.example/sqlite/wal.html", "Write-ahead logging", SQL_COPY),
        "b": ("https://sqlite.org/checkpoint.html", "Checkpoints", SQL_B),
        "bread": ("https://bread.example/starter", "Sourdough starter", BREAD),
    }
    ids = {}
    seen = VisitInfo(visited_at=1_700_000_000)
    for key, (url, title, text) in pages.items():
        ids[key] = memory.capture_page(url, text=text, title=title, visit=seen).page_id
    memory.catch_up()
    return ids


def test_related_content_by_key_words_leaves_out_the_page_and_its_copies(
    memory: Memory,
) -> None:
    ids = related_memory(memory)
    related = insights.related_content(memory, "https://sqlite.org/wal.html")
    assert (related.method, related.page_id) == ("keywords", ids["a"])
    assert "lean mode" in (related.note or "")
    assert [p.page_id for p in related.pages] == [ids["b"]]
    assert [p.page_id for p in related.duplicates] == [ids["copy"]]
    by_id = insights.related_content(memory, page_id=ids["bread"])
    assert ids["bread"] not in [p.page_id for p in by_id.pages]
    with pytest.raises(InvalidInput):
        insights.related_content(memory, page_id=ids["a"], limit=0)


def test_related_content_by_passage_vectors_finds_pages_sharing_no_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    share_model(monkeypatch)
    with Memory(make_config(tmp_path / "vec", embeddings=True), client="t") as memory:
        ids = related_memory(memory)
        baking = memory.capture_page(
            "https://cook.example/bread", title="Home baking", visit=VisitInfo(),
            text="Bakers feed their leaven daily; loaves prove for hours before the oven. " * 5,
        ).page_id  # fmt: skip
        memory.catch_up()
        related = insights.related_content(memory, page_id=ids["bread"], limit=3)
        assert related.method == "vectors" and related.note is None
        assert related.pages[0].page_id == baking
        assert ids["bread"] not in [p.page_id for p in related.pages]
        wal = insights.related_content(memory, page_id=ids["a"], limit=3)
        assert [p.page_id for p in wal.duplicates] == [ids["copy"]]
        assert wal.pages[0].page_id == ids["b"]
        assert all(0 < p.score <= 1 for p in wal.pages)


def test_open_tab_sources_read_each_captured_page_once_grouped_by_window(
    memory: Memory,
) -> None:
    ids = related_memory(memory)
    memory.snapshot_tabs([
        TabInput(1, 1, "https://sqlite.org/wal.html", "WAL", last_accessed=10),
        TabInput(2, 2, "https://sqlite.org/wal.html", "WAL again", last_accessed=20),
        TabInput(3, 1, "https://news.example/unread", "Unread", last_accessed=5),
        TabInput(4, 1, "chrome://newtab/", "New tab"),
    ], profile="p")  # fmt: skip
    found = insights.open_tab_sources(memory, chars=50)
    assert found.total == 4 and found.omitted == 0
    assert [(s.url, s.session, len(s.text)) for s in found.sources] == [
        ("https://sqlite.org/wal.html", "Window 2", 50),
    ]  # fmt: skip
    assert [t.tab_id for t in found.uncaptured] == [3]
    assert insights.open_tab_sources(memory, max_tabs=1).omitted == 1
    assert ids


# ------------------------------------------------------------ lock demo


def test_holding_the_write_lock_makes_other_writers_fail_fast_or_queue(
    tmp_path: Path,
) -> None:
    home = tmp_path / "lock"
    holder = Memory(make_config(home), client="client-A")
    impatient = Memory(make_config(home, busy_timeout_ms=0), client="client-B")
    patient = Memory(make_config(home, busy_timeout_ms=20_000), client="client-C")
    try:
        done: list[float] = []
        thread = threading.Thread(target=lambda: done.append(holder.hold_write_lock(1.5)))
        thread.start()
        probe = sqlite3.connect(holder.config.ledger_path, timeout=0, isolation_level=None)

        def locked() -> bool:
            try:
                probe.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            probe.execute("ROLLBACK")
            return False

        wait_for(locked, 30, "the demo to take the lock")
        started = time.monotonic()
        with pytest.raises(StoreBusy):
            impatient.set_fact("contended", "B was here")
        assert time.monotonic() - started < 1.0  # refused at once, nothing written
        patient.set_fact("contended", "C was here")  # waited for the lock, then wrote
        thread.join(30)
        probe.close()
        assert done and done[0] >= 1.5
        assert holder.get_fact("contended").client == "client-C"
        (event,) = holder._ledger.list_events(action="demo.lock_hold")
        assert (event.client, event.details) == ("client-A", {"seconds": 1.5})
        with pytest.raises(InvalidInput):
            holder.hold_write_lock(0)
    finally:
        for memory in (holder, impatient, patient):
            memory.close()


def test_an_action_the_host_cannot_deliver_is_recorded_as_failed(
    memory: Memory, queue: ActionQueue
) -> None:
    """The browser goes away between the answer to hello and the push."""
    import io
    import os

    from backtrail.native_host.dispatch import Dispatcher
    from backtrail.native_host.framing import FrameReader, FrameWriter
    from backtrail.native_host.server import serve
    from host_client import frame

    class GoneAfterOneFrame(io.RawIOBase):
        def __init__(self) -> None:
            self.frames = 0

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            if self.frames >= 1:
                raise BrokenPipeError("the browser closed the port")
            self.frames += 1
            return len(data)

    action = queue.close_tabs([1])
    read_end, write_end = os.pipe()
    os.write(write_end, frame({"id": "h-1", "type": "hello", **hello_fields("p")}))
    sync = memory.browser()
    dispatcher = Dispatcher(sync, max_request_bytes=1 << 20)
    with os.fdopen(read_end, "rb") as stdin:
        try:
            status = serve(FrameReader(stdin), FrameWriter(GoneAfterOneFrame()), dispatcher)
        finally:
            os.close(write_end)
    assert status == 0
    failed = memory._ledger.get_action(action.id)
    assert (failed.status, failed.error["message"]) == (
        "failed", "the browser disconnected before the action reached it",
    )  # fmt: skip
