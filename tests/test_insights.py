"""Insights over the memory: research sessions, the weekly digest, tab clean-up advice,
topic sources, bookmark and highlight lookups; and that their MCP answers stay bounded
at ten thousand pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from backtrail.errors import InvalidInput
from backtrail.service import Memory, VisitInfo, insights
from mcp_support import lean_config

H = 3_600
MIN = 60
T = 1_706_522_400  # Monday 2024-01-29 10:00 UTC (ISO week 2024-W05)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    opened = Memory(lean_config(tmp_path), client="test")
    yield opened
    opened.close()


def _date(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).date().isoformat()


def visits(memory: Memory, items: list[tuple[str, str, int]]) -> None:
    memory.import_visits([{"url": u, "title": title, "visited_at": at} for u, title, at in items])


def test_sessions_split_on_long_pauses_and_on_a_change_of_subject(memory: Memory) -> None:
    visits(
        memory,
        [
            ("https://sqlite.org/wal.html", "SQLite WAL mode explained", T),
            ("https://sqlite.org/checkpoint.html", "How SQLite checkpoints work", T + 5 * MIN),
            (
                "https://blog.example/wal-starvation",
                "SQLite WAL checkpoint starvation",
                T + 17 * MIN,
            ),
            ("https://bread.example/feeding", "Feeding a sourdough starter", T + 27 * MIN),
            ("https://bread.example/hydration", "Sourdough hydration ratios", T + 30 * MIN),
            ("https://doc.rust-lang.org/borrow", "Rust borrow checker basics", T + 3 * H),
            (
                "https://doc.rust-lang.org/lifetimes",
                "Rust lifetimes in practice",
                T + 3 * H + 5 * MIN,
            ),
            ("https://weather.example/paris", "Weather forecast Paris", T + 6 * H),
        ],
    )
    found = insights.research_sessions(memory)
    assert found.total == 3  # the lone weather page is no session
    rust, bread, sqlite = found.sessions
    assert [p.title for p in sqlite.pages] == [
        "SQLite WAL checkpoint starvation",
        "How SQLite checkpoints work",
        "SQLite WAL mode explained",
    ]
    assert (sqlite.start, sqlite.end, sqlite.page_count) == (T, T + 17 * MIN, 3)
    assert "sqlite" in sqlite.topics and "wal" in sqlite.topics
    assert "sourdough" in bread.topics and bread.domains == ("bread.example",)
    assert "rust" in rust.topics
    single = insights.research_sessions(memory, min_pages=1)
    assert single.total == 4 and single.sessions[0].pages[0].title == "Weather forecast Paris"
    paged = insights.research_sessions(memory, limit=2)
    assert [s.id for s in paged.sessions] == [rust.id, bread.id] and paged.next_offset == 2
    rest = insights.research_sessions(memory, limit=2, offset=2)
    assert [s.id for s in rest.sessions] == [sqlite.id] and rest.next_offset is None
    capped = insights.research_sessions(memory, pages_per_session=1)
    assert capped.sessions[2].pages_omitted == 2
    with pytest.raises(InvalidInput, match="limit"):
        insights.research_sessions(memory, limit=21)


def test_the_weekly_digest_covers_one_iso_week(memory: Memory) -> None:
    visits(
        memory,
        [
            ("https://sqlite.org/wal.html", "WAL", T - 8 * 24 * H),  # first seen the week before
            ("https://sqlite.org/wal.html", "WAL", T),
            ("https://sqlite.org/wal.html", "WAL", T + 10 * MIN),
            ("https://sqlite.org/lock.html", "Locking", T + 20 * MIN),
            ("https://bread.example/x", "Bread", T + 2 * 24 * H),
            ("https://later.example/y", "Next week", T + 7 * 24 * H),
        ],
    )
    inside = memory.add_highlight(
        "https://sqlite.org/wal.html", "Checkpoints copy the log.", created_at=T + 5 * MIN
    )
    memory.add_highlight("https://later.example/y", "Later.", created_at=T + 8 * 24 * H)
    note = memory.add_note("Read about locking next", created_at=T + H)
    digest = insights.weekly_digest(memory, "2024-W05")
    assert (digest.week.label, digest.week.start) == ("2024-W05", T - 10 * H)
    assert (digest.pages_seen, digest.new_pages) == (3, 2)
    assert [(d.domain, d.pages) for d in digest.top_domains] == [
        ("sqlite.org", 2),
        ("bread.example", 1),
    ]
    assert [p.title for p in digest.top_pages][0] == "WAL"
    assert [h.id for h in digest.highlights] == [inside.id]
    assert [n.id for n in digest.notes] == [note.id]
    assert digest.session_count == 1 and digest.sessions[0].page_count == 2
    assert insights.weekly_digest(memory, "2024-02-01").week.label == "2024-W05"
    assert insights.parse_week("last", now=T).label == "2024-W04"
    assert insights.parse_week(None, now=T).label == "2024-W05"
    with pytest.raises(InvalidInput, match="not a week"):
        insights.parse_week("soon")


def _tab(tab_id: int, url: str, title: str, accessed: int | None, **flags: Any) -> dict[str, Any]:
    return {
        "tab_id": tab_id,
        "window_id": 1,
        "url": url,
        "title": title,
        "last_accessed": accessed,
        **flags,
    }


def test_tab_clean_up_gives_a_verdict_and_the_facts_behind_it(memory: Memory) -> None:
    now = T + 30 * 24 * H
    day = 24 * H
    for when in range(6):
        memory.record_visit("https://mail.example/inbox", visited_at=now - day - when * H)
    memory.capture_page(
        "https://docs.example/saved",
        text="Saved text " * 20,
        title="Saved",
        captured_at=now - 3 * day,
        visit=VisitInfo(visited_at=now - 3 * day),
    )
    memory.upsert_bookmark("b1", "https://docs.example/saved", title="Saved")
    memory.capture_page(
        "https://read.example/done",
        text="Done text " * 20,
        title="Done",
        captured_at=now - 6 * day,
        visit=VisitInfo(visited_at=now - 6 * day),
    )
    memory.record_visit("https://read.example/done", visited_at=now - 5 * day)
    memory.snapshot_tabs(
        [
            _tab(1, "https://pinned.example/", "Pinned", now - 10 * day, pinned=True),
            _tab(2, "https://here.example/", "Here", now, active=True),
            _tab(3, "chrome://newtab/", "New Tab", None),
            _tab(4, "https://here.example/", "Here again", now - day),
            _tab(5, "https://mail.example/inbox", "Inbox", now - 2 * day),
            _tab(6, "https://docs.example/saved", "Saved", now - 2 * day),
            _tab(7, "https://unread.example/essay", "Essay", now - 4 * day),
            _tab(8, "https://read.example/done", "Done", now - 5 * day),
            _tab(9, "https://fresh.example/", "Fresh", now - 2 * H),
        ]
    )
    advice = insights.tab_cleanup(memory, now=now)
    verdict = {a.tab_id: (a.action, a.reasons[0]) for a in advice.tabs}
    assert verdict == {
        1: ("keep", "pinned"),
        2: ("keep", "the tab in front of you"),
        3: ("close", "a browser page with nothing to read"),
        4: ("close", "duplicate of tab 2 (same page)"),
        5: ("keep", "a page you return to often"),
        6: (
            "close",
            "nothing is lost by closing it: reopen it from your bookmarks or ask "
            "your assistant for it",
        ),
        7: ("read_later", "open for days without being read"),
        8: ("close", "untouched for days and already read; the text stays searchable"),
        9: ("keep", "in use recently"),
    }
    saved = next(a for a in advice.tabs if a.tab_id == 6)
    assert saved.reasons[1:] == (
        "last looked at 2 days ago",
        "visited 1 time",
        f"its text is saved in your memory (captured {_date(now - 3 * day)})",
        "bookmarked",
    )
    essay = next(a for a in advice.tabs if a.tab_id == 7)
    assert "its text is not captured yet" in essay.reasons
    assert advice.counts == {"keep": 4, "read_later": 1, "close": 4}
    page = insights.tab_cleanup(memory, now=now, limit=4, offset=4)
    assert [a.tab_id for a in page.tabs] == [5, 6, 7, 8] and page.next_offset == 8


def test_topic_sources_gather_pages_highlights_and_notes_about_it(memory: Memory) -> None:
    memory.capture_page(
        "https://sqlite.org/wal.html",
        text="Write-ahead logging in SQLite. " * 5,
        title="WAL",
        captured_at=T,
        visit=VisitInfo(visited_at=T),
    )
    memory.capture_page("https://bread.example/", text="Sourdough bread. " * 5, title="Bread")
    memory.add_highlight("https://sqlite.org/wal.html", "logging protects commits", note="key")
    memory.add_note("My logging experiments went well")
    sources = insights.topic_sources(memory, "logging")
    assert {(s.kind, s.origin) for s in sources} == {
        ("page", "web"),
        ("highlight", "web"),
        ("note", "user"),
    }
    page = next(s for s in sources if s.kind == "page")
    assert page.url == "https://sqlite.org/wal.html" and page.session == "Read on 2024-01-29"
    highlight = next(s for s in sources if s.kind == "highlight")
    assert highlight.text == "logging protects commits\n(the user's note on it: key)"


def test_bookmark_and_highlight_lookups_filter_by_folder_and_page(memory: Memory) -> None:
    memory.upsert_bookmark("1", "https://a.example/", title="Alpha", folder="Bar/Research/DB")
    memory.upsert_bookmark("2", "https://b.example/", title="Beta research", folder="Bar/Fun")
    assert [b.title for b in insights.find_bookmarks(memory, folder="research")] == ["Alpha"]
    assert [b.title for b in insights.find_bookmarks(memory, query="beta")] == ["Beta research"]
    assert (
        insights.find_bookmarks(memory, query="research", folder="fun")[0].title == "Beta research"
    )
    memory.add_highlight("https://a.example/", "alpha fact")
    memory.add_highlight("https://b.example/", "beta fact")
    on_b = insights.find_highlights(memory, query="fact", url="https://b.example/")
    assert [h.text for h in on_b] == ["beta fact"]
    assert len(insights.find_highlights(memory)) == 2


def test_session_and_digest_answers_stay_bounded_at_ten_thousand_pages(memory: Memory) -> None:
    import anyio
    from mcp import Client
    from mcp_types import Implementation

    from backtrail.mcp_server.server import MemoryHolder, build_server

    topics = ["sqlite wal", "rust lifetimes", "sourdough bread", "postgres vacuum", "css grid"]
    items = []
    for i in range(10_000):  # 250 sessions of 40 pages over about two weeks
        session, position = divmod(i, 40)
        topic = topics[session % len(topics)]
        at = T + session * 90 * MIN + position * 60
        items.append(
            (f"https://site{session % 7}.example/{i}", f"{topic} page {i} " + "x" * 80, at)
        )
    visits(memory, items)
    everything = insights.research_sessions(memory, limit=20)
    assert everything.truncated_scan and everything.scanned_pages == 5_000
    week = datetime.fromtimestamp(T + 3 * 24 * H, timezone.utc).date().isoformat()

    holder = MemoryHolder(lambda: memory)
    server = build_server(holder.get, holder=holder)
    sizes: dict[str, int] = {}

    async def measure() -> None:
        async with Client(
            server, mode="legacy", client_info=Implementation(name="t", version="1")
        ) as client:
            for name, arguments in [
                ("get_timeline", {"sessions": True}),
                ("get_timeline", {"sessions": True, "limit": 20}),
                ("summarize_reading", {"week": week}),
                ("get_timeline", {"limit": 200}),
                ("get_open_tabs", {"advise": True}),
            ]:
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result.content
                size = sum(len(b.text) for b in result.content) + len(
                    json.dumps(result.structured_content)
                )
                sizes[f"{name} {arguments}"] = size

    anyio.run(measure)
    assert max(sizes.values()) < 150_000
    assert sizes["get_timeline {'sessions': True}"] < 30_000
