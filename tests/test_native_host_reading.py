"""The memory page's messages (PROTOCOL.md sections 3.18-3.22) on a real host subprocess
with real frames: recent pages, the timeline with sessions and reading per day, a page
with its text, visits and saved items, lists of saved items a page at a time, and a
forget preview that counts exactly what ``forget`` then removes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from host_client import VISIT_TIME, HostProcess, capture_fields

HOUR = 3_600_000
DAY = 24 * HOUR


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    with HostProcess(tmp_path / "home") as process:
        process.hello()
        yield process


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["ok"] is False, answer
    return answer["error"]


def capture(host: HostProcess, url: str, text: str, visit_id: str, at: int, title: str) -> int:
    fields = capture_fields(url, text, visit_id=visit_id, time=at, title=title)
    return int(host.ok("capture_page", **fields)["page_id"])


def highlight(host: HostProcess, url: str, text: str, key: str, at: int) -> None:
    host.ok("highlight", dedupe_key=key, url=url, title=None, text=text, context=None,
            note="why it matters", time=at)  # fmt: skip


def note(host: HostProcess, url: str | None, content: str, key: str, at: int) -> None:
    host.ok("note", dedupe_key=key, content=content, url=url, title=None, time=at)


def fill(host: HostProcess) -> dict[str, int]:
    """Two days of reading: a morning session on SQLite (3 pages, one read twice) and,
    the next day, one page on bread."""
    ids = {}
    for n, slug in enumerate(("wal", "locking", "vacuum")):
        ids[slug] = capture(host, f"https://sqlite.example/{slug}",
                            f"SQLite {slug} explained: the journal, pages and checkpoints. " * 5,
                            f"v-{slug}", VISIT_TIME + n * 5 * 60_000, f"SQLite {slug}")  # fmt: skip
    host.ok(
        "visit",
        url="https://sqlite.example/wal",
        title="SQLite wal",
        visit={"visit_id": "v-wal-2", "time": VISIT_TIME + 20 * 60_000, "dwell_ms": 9_000},
    )
    ids["bread"] = capture(host, "https://bread.example/starter",
                           "Keep the sourdough starter warm overnight. " * 5, "v-bread",
                           VISIT_TIME + DAY, "Sourdough starter")  # fmt: skip
    highlight(host, "https://sqlite.example/wal", "the journal", "h-1", VISIT_TIME + 60_000)
    highlight(host, "https://sqlite.example/wal", "checkpoints", "h-2", VISIT_TIME + 120_000)
    highlight(host, "https://bread.example/starter", "warm overnight", "h-3", VISIT_TIME + DAY)
    note(host, "https://sqlite.example/wal", "WAL is what I want for the app.", "n-1",
         VISIT_TIME + 180_000)  # fmt: skip
    note(host, None, "Buy flour.", "n-2", VISIT_TIME + DAY + 60_000)
    host.ok("bookmark_upsert", bookmarks=[
        {"browser_id": "b1", "url": "https://sqlite.example/wal", "title": "WAL docs",
         "folder": "Bar/Databases", "added_time": VISIT_TIME},
        {"browser_id": "b2", "url": "https://bread.example/starter", "title": "Starter",
         "folder": "Bar/Kitchen", "added_time": VISIT_TIME + DAY},
    ])  # fmt: skip
    return ids


def test_recent_pages_come_newest_first_a_page_at_a_time_with_filters(host: HostProcess) -> None:
    ids = fill(host)
    first = host.ok("recent", limit=2)
    assert [p["url"] for p in first["pages"]] == [
        "https://bread.example/starter", "https://sqlite.example/wal"]  # fmt: skip
    wal = first["pages"][1]
    assert wal["id"] == ids["wal"] and wal["visit_count"] == 2 and wal["title"] == "SQLite wal"
    assert wal["last_seen_time"] == VISIT_TIME // 1000 * 1000 + 20 * 60_000
    assert first["next_offset"] == 2
    rest = host.ok("recent", limit=2, offset=2)
    assert [p["id"] for p in rest["pages"]] == [ids["vacuum"], ids["locking"]]
    assert rest["next_offset"] is None
    only = host.ok("recent", filters={"domain": "bread.example"})["pages"]
    assert [p["id"] for p in only] == [ids["bread"]]
    window = host.ok("recent", filters={"since_time": VISIT_TIME + DAY - HOUR})["pages"]
    assert [p["id"] for p in window] == [ids["bread"]]
    assert error_of(host.call("recent", limit=0))["code"] == 16
    bad = error_of(host.call("recent", filters={"since_time": 5_000, "until_time": 1_000}))
    assert bad["code"] == 16 and bad["details"]["field"] == "filters.until_time"


def test_timeline_groups_visits_into_sessions_and_counts_reading_per_day(
    host: HostProcess,
) -> None:
    ids = fill(host)
    since, until = VISIT_TIME - DAY, VISIT_TIME + 2 * DAY
    result = host.ok("timeline", since_time=since, until_time=until, utc_offset_minutes=0)
    sessions = result["sessions"]
    assert result["total_sessions"] == 2 and result["next_offset"] is None
    assert [s["page_count"] for s in sessions] == [1, 3]  # newest first
    assert sessions[0]["pages"][0]["id"] == ids["bread"]
    sqlite = sessions[1]
    assert sqlite["domains"] == ["sqlite.example"]
    assert sqlite["pages"][0]["id"] == ids["wal"]  # most visited first
    assert sqlite["start_time"] < sqlite["end_time"]
    per_day = {d["time"]: d["visits"] for d in result["days"]}
    first_day = VISIT_TIME // DAY * DAY
    assert per_day == {first_day: 4, first_day + DAY: 1}
    assert sum(d["dwell_ms"] for d in result["days"]) == 4 * 5_000 + 9_000
    assert result["chart_start_time"] == since // 1000 * 1000
    paged = host.ok("timeline", since_time=since, until_time=until, limit=1, offset=1)
    assert [s["id"] for s in paged["sessions"]] == [sqlite["id"]]
    west = host.ok("timeline", since_time=since, until_time=until, utc_offset_minutes=-600)
    assert all((d["time"] - 600 * 60_000) % DAY == 0 for d in west["days"])
    assert error_of(host.call("timeline", utc_offset_minutes=10_000))["code"] == 16


def test_page_get_gives_text_slices_visits_and_what_was_saved_on_the_page(
    host: HostProcess,
) -> None:
    ids = fill(host)
    result = host.ok("page_get", page_id=ids["wal"], max_chars=40)
    assert result["page"]["url"] == "https://sqlite.example/wal"
    assert result["page"]["visit_count"] == 2
    assert result["text"].startswith("SQLite wal explained") and len(result["text"]) == 40
    assert result["next_offset"] == 40 and result["total_chars"] > 200
    rest = host.ok("page_get", url="https://sqlite.example/wal", offset=40, max_chars=100_000)
    assert rest["next_offset"] is None and len(rest["text"]) == result["total_chars"] - 40
    assert [v["dwell_ms"] for v in result["visits"]] == [9_000, 5_000]  # newest first
    assert [h["text"] for h in result["highlights"]] == ["checkpoints", "the journal"]
    assert result["highlights"][0]["note"] == "why it matters"
    assert [n["content"] for n in result["notes"]] == ["WAL is what I want for the app."]
    assert [b["folder"] for b in result["bookmarks"]] == ["Bar/Databases"]
    missing = error_of(host.call("page_get", url="https://nowhere.example/"))
    assert missing["code"] == 11
    assert error_of(host.call("page_get"))["code"] == 5
    assert error_of(host.call("page_get", page_id=1, url="https://sqlite.example/wal"))[
        "code"] == 16  # fmt: skip
    assert error_of(host.call("page_get", url="javascript:alert(1)"))["code"] == 8


def test_saved_list_pages_through_highlights_notes_and_bookmarks(host: HostProcess) -> None:
    fill(host)
    first = host.ok("saved_list", kind="highlight", limit=2)
    assert [h["text"] for h in first["items"]] == ["warm overnight", "checkpoints"]
    assert first["next_offset"] == 2
    last = host.ok("saved_list", kind="highlight", limit=2, offset=2)
    assert [h["text"] for h in last["items"]] == ["the journal"] and last["next_offset"] is None
    notes = host.ok("saved_list", kind="note")["items"]
    assert [(n["content"], n["url"]) for n in notes] == [
        ("Buy flour.", None),
        ("WAL is what I want for the app.", "https://sqlite.example/wal"),
    ]
    marks = host.ok("saved_list", kind="bookmark", filters={"domain": "bread.example"})["items"]
    assert [(b["title"], b["folder"]) for b in marks] == [("Starter", "Bar/Kitchen")]
    dated = host.ok("saved_list", kind="highlight",
                    filters={"until_time": VISIT_TIME + 90_000})["items"]  # fmt: skip
    assert [h["text"] for h in dated] == ["the journal"]
    assert error_of(host.call("saved_list", kind="tab"))["code"] == 16
    refused = error_of(host.call("saved_list", kind="bookmark", filters={"since_time": 0}))
    assert refused["code"] == 16 and refused["details"]["field"] == "filters.since_time"


def test_forget_preview_counts_what_forget_removes_and_changes_nothing(
    host: HostProcess,
) -> None:
    fill(host)
    url = "https://sqlite.example/wal"
    preview = host.ok("forget_preview", url=url)["counts"]
    assert preview == {"pages": 1, "page_versions": 1, "visits": 2, "highlights": 2, "notes": 1,
                       "bookmarks": 1}  # fmt: skip
    assert host.ok("forget_preview", url=url)["counts"] == preview  # nothing was removed
    assert host.ok("page_get", url=url)["page"]["visit_count"] == 2
    site = host.ok("forget_preview", domain="sqlite.example")["counts"]
    assert site["pages"] == 3 and site["visits"] == 4
    done = host.ok("forget", url=url)["counts"]
    assert {name: done[name] for name in preview} == preview
    assert host.ok("forget_preview", url=url)["counts"] == dict.fromkeys(preview, 0)
    assert error_of(host.call("forget_preview"))["code"] == 5
    assert error_of(host.call("forget_preview", url=url, domain="sqlite.example"))["code"] == 16
    assert error_of(host.call("forget_preview", domain="co.uk"))["code"] == 16
