"""Forgetting by URL, domain, time range or everything: what goes, what stays, the event
and change-feed records, and the text gone from the database and WAL files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from backtrail.errors import InvalidInput, InvalidUrl, PageNotFound
from backtrail.store import Ledger, TabInput
from store_support import LONG_TEXT, T0

if TYPE_CHECKING:
    from conftest import FakeClock

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


def file_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# ------------------------------------------------------------------------ forget


def populate(ledger: Ledger) -> None:
    for url in ("https://example.com/a", "https://sub.example.com/b", "https://notexample.com/c"):
        ledger.capture_page(url, text=f"text of {url}", title=f"title of {url}")
        ledger.record_visit(url, visited_at=T0, referrer="https://example.com/a")
        ledger.add_highlight(url, f"highlight on {url}")
        ledger.add_note(f"note on {url}", url=url)
        ledger.upsert_bookmark(url, url)
    ledger.snapshot_tabs(
        [TabInput(1, 1, "https://example.com/a"), TabInput(2, 1, "https://notexample.com/c")]
    )
    ledger.set_fact("k", "v")


def test_forget_url_removes_everything_about_that_page(ledger: Ledger) -> None:
    populate(ledger)
    result = ledger.forget(url="https://EXAMPLE.com/a?utm_source=x")
    assert result.selector == "url"
    assert result.counts == {
        "pages": 1, "page_versions": 1, "visits": 1, "highlights": 1, "notes": 1,
        "bookmarks": 1, "tabs": 1, "actions": 0, "referrers_cleared": 2,
    }  # fmt: skip
    assert result.purged is True
    with pytest.raises(PageNotFound):
        ledger.get_page("https://example.com/a")
    assert [p.domain for p in ledger.list_pages()] == ["notexample.com", "sub.example.com"]
    assert all(v.referrer is None for v in ledger.list_visits())
    assert ledger.get_fact("k").value == "v"


def test_forget_domain_includes_subdomains_but_not_lookalikes(ledger: Ledger) -> None:
    populate(ledger)
    result = ledger.forget(domain="Example.com")
    assert result.counts == {
        "pages": 2, "page_versions": 2, "visits": 2, "highlights": 2, "notes": 2,
        "bookmarks": 2, "tabs": 1, "actions": 0, "referrers_cleared": 1,
    }  # fmt: skip
    assert [p.domain for p in ledger.list_pages()] == ["notexample.com"]
    assert [h.domain for h in ledger.list_highlights()] == ["notexample.com"]
    assert [t.tab_id for t in ledger.list_tabs()] == [2]
    assert ledger.list_visits()[0].referrer is None


def test_forget_records_one_event_with_counts_and_no_selector_value(ledger: Ledger) -> None:
    populate(ledger)
    ledger.forget(domain="example.com")
    event = ledger.list_events(action="forget")[0]
    assert (event.target_type, event.target) == ("selector", "domain")
    assert event.details == {
        "counts": {"pages": 2, "page_versions": 2, "visits": 2, "highlights": 2, "notes": 2,
                   "bookmarks": 2, "tabs": 1, "actions": 0, "referrers_cleared": 1}
    }  # fmt: skip
    assert "example" not in json.dumps(event.details)


def test_forget_records_delete_changes_for_the_indexer(ledger: Ledger) -> None:
    populate(ledger)
    page = ledger.get_page("https://example.com/a")
    highlight = ledger.list_highlights(url="https://example.com/a")[0]
    note = ledger.list_notes(url="https://example.com/a")[0]
    bookmark = ledger.list_bookmarks(url="https://example.com/a")[0]
    watermark = ledger.max_change_seq()
    ledger.forget(url="https://example.com/a")
    assert [(c.entity_type, c.entity_id, c.op) for c in ledger.changes_since(watermark)] == [
        ("page", page.id, "delete"),
        ("highlight", highlight.id, "delete"),
        ("note", note.id, "delete"),
        ("bookmark", bookmark.id, "delete"),
    ]


def test_forget_time_range_removes_what_happened_in_it_and_recomputes_pages(
    ledger: Ledger, clock: FakeClock
) -> None:
    # A page visited before and inside the range, a page only inside it.
    ledger.record_visit("https://kept.example/", visited_at=T0 - 100, dwell_ms=10, title="Kept")
    clock.now = T0 + 50
    ledger.capture_page("https://kept.example/", text="read during the range", title="During")
    ledger.record_visit("https://kept.example/", visited_at=T0 + 50, dwell_ms=90)
    ledger.capture_page("https://gone.example/", text="only in range")
    ledger.add_highlight("https://gone.example/", "hl in range")
    ledger.add_note("note in range")
    clock.now = T0 + 500
    ledger.add_note("note after range")
    ledger.upsert_bookmark("1", "https://gone.example/")
    watermark = ledger.max_change_seq()
    result = ledger.forget(since=T0, until=T0 + 100)
    assert result.counts == {
        "visits": 1, "page_versions": 2, "raw_captures": 0, "pages": 1, "pages_updated": 1,
        "highlights": 1, "notes": 1, "actions": 0,
    }  # fmt: skip
    kept = ledger.get_page("https://kept.example/", with_text=True)
    assert (kept.visit_count, kept.first_seen, kept.last_seen, kept.dwell_ms) == (
        1, T0 - 100, T0 - 100, 10,
    )  # fmt: skip
    assert (kept.current_version, kept.title, kept.text, kept.last_captured_at) == (
        None, None, None, None,
    )  # fmt: skip
    with pytest.raises(PageNotFound):
        ledger.get_page("https://gone.example/")
    assert [n.content for n in ledger.list_notes()] == ["note after range"]
    assert len(ledger.list_bookmarks()) == 1  # bookmarks mirror the browser: kept
    ops = {(c.entity_type, c.op) for c in ledger.changes_since(watermark)}
    assert ops == {("page", "upsert"), ("page", "delete"), ("highlight", "delete"),
                   ("note", "delete")}  # fmt: skip
    assert ledger.list_events(action="forget")[0].details["since"] == T0


def test_forget_since_alone_means_up_to_now(ledger: Ledger) -> None:
    ledger.record_visit("https://a.example/", visited_at=T0 - 10)
    ledger.record_visit("https://b.example/", visited_at=T0 + 10)
    assert ledger.forget(since=T0).counts["pages"] == 1
    assert [p.domain for p in ledger.list_pages()] == ["a.example"]


def test_forget_everything_keeps_facts_unless_asked(ledger: Ledger) -> None:
    populate(ledger)
    ledger.set_setting("paused", False)
    result = ledger.forget(everything=True)
    assert result.counts["pages"] == 3
    counts = ledger.stats().counts
    for table in ("pages", "page_versions", "visits", "bookmarks", "highlights", "notes", "tabs"):
        assert counts[table] == 0, table
    assert (counts["facts"], counts["settings"]) == (1, 1)
    result = ledger.forget(everything=True, include_facts=True)
    assert result.counts["facts"] == 1
    assert ledger.stats().counts["facts"] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"url": "https://e.com/", "domain": "e.com"},
        {"domain": "e.com", "since": 1},
        {"url": "https://e.com/", "everything": True},
    ],
)
def test_forget_needs_exactly_one_selector(ledger: Ledger, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="give exactly one of url, domain, since/until"):
        ledger.forget(**kwargs)


def test_forget_rejects_bad_selector_values(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="must be later than since"):
        ledger.forget(since=T0, until=T0)
    with pytest.raises(InvalidInput, match="only applies together with everything=True"):
        ledger.forget(domain="e.com", include_facts=True)
    with pytest.raises(InvalidUrl):
        ledger.forget(domain="bad domain")
    with pytest.raises(InvalidInput, match="vacuum: must be one of none, incremental, full"):
        ledger.forget(everything=True, vacuum="sometimes")  # type: ignore[arg-type]


@pytest.mark.backends("sqlite")  # SQLite's files; PostgreSQL's are its server's (docs/deploy.md)
@pytest.mark.parametrize("vacuum", ["incremental", "full"])
def test_forgotten_text_is_gone_from_the_database_and_wal_files(
    ledger: Ledger, vacuum: str
) -> None:
    marker = "zqxplorificationmarker"
    url = f"https://{marker}.example/{marker}"
    big_text = f"{marker} " * 2000 + LONG_TEXT  # spills into overflow pages
    for n in range(5):
        ledger.capture_page(f"{url}/{n}", text=big_text + str(n), title=f"{marker} title")
        ledger.record_visit(f"{url}/{n}", visited_at=T0 + n)
    ledger.add_highlight(url, f"{marker} highlighted", context=f"{marker} context")
    ledger.add_note(f"{marker} note", url=url)
    ledger.upsert_bookmark("1", url, title=f"{marker} bookmark")
    ledger.snapshot_tabs([TabInput(1, 1, url, f"{marker} tab")])
    ledger.capture_page("https://kept.example/", text=LONG_TEXT)
    db, wal = ledger.path, ledger.path.with_name(ledger.path.name + "-wal")
    needle = marker.encode()
    assert needle in file_bytes(db) + file_bytes(wal)  # the test can fail
    result = ledger.forget(domain=f"{marker}.example", vacuum=vacuum)  # type: ignore[arg-type]
    assert result.purged is True
    assert file_bytes(wal) == b""
    assert needle not in file_bytes(db)
    for leftover in db.parent.iterdir():
        assert needle not in leftover.read_bytes(), leftover.name
    assert ledger.get_page("https://kept.example/", with_text=True).text == LONG_TEXT
