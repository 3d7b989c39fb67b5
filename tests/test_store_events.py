"""The ledger's event log (one event per mutation, reads, no private text in it),
transactions, and the change feed the indexer follows."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from backtrail.errors import KeyExists
from backtrail.store import Ledger, TabInput, VisitInput
from store_support import LONG_TEXT, T0

if TYPE_CHECKING:
    from conftest import FakeClock

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


# ---------------------------------------------------------------- events, reads


def test_every_mutation_writes_exactly_one_event(ledger: Ledger) -> None:
    calls: list[tuple[str, Callable[[], object]]] = [
        ("page.capture", lambda: ledger.capture_page("https://e.com/a", text="t")),
        ("visit.record", lambda: ledger.record_visit("https://e.com/a", visited_at=T0)),
        ("visits.import", lambda: ledger.import_visits([VisitInput("https://e.com/b", T0)])),
        ("highlight.add", lambda: ledger.add_highlight("https://e.com/a", "h")),
        ("note.add", lambda: ledger.add_note("n")),
        ("bookmark.added", lambda: ledger.upsert_bookmark("1", "https://e.com/a")),
        ("bookmarks.sync", lambda: ledger.replace_bookmarks([])),
        ("tabs.snapshot", lambda: ledger.snapshot_tabs([TabInput(1, 1, "https://e.com/")])),
        ("tab.updated", lambda: ledger.apply_tab_event("updated", 1, title="x")),
        ("fact.set", lambda: ledger.set_fact("k", "v")),
        ("fact.delete", lambda: ledger.delete_fact("k")),
        ("setting.set", lambda: ledger.set_setting("paused", True)),
        ("setting.delete", lambda: ledger.delete_setting("paused")),
        ("forget", lambda: ledger.forget(url="https://e.com/a")),
    ]
    for action, call in calls:
        before = ledger.stats().counts["events"]
        call()
        events = ledger.list_events(after_id=before)
        assert [e.action for e in events] == [action]


def test_reads_are_logged_as_events_only_when_enabled(open_ledger: Callable[..., Ledger]) -> None:
    with open_ledger() as quiet:
        quiet.set_fact("k", "v")
        quiet.get_fact("k")
        assert [e.action for e in quiet.list_events()] == ["fact.set"]
    with open_ledger(log_reads=True, client="auditor") as audited:
        page = audited.capture_page("https://e.com/", text="t").page
        audited.get_fact("k")
        audited.list_facts("k")
        audited.get_page(page_id=page.id)
        actions = [(e.action, e.target, e.client) for e in audited.list_events(after_id=1)]
    assert actions == [
        ("page.capture", str(page.id), "auditor"),
        ("fact.read", "k", "auditor"),
        ("facts.list", "k", "auditor"),
        ("page.read", str(page.id), "auditor"),
    ]


def test_page_history_lists_capture_visit_and_dwell_events(ledger: Ledger) -> None:
    page = ledger.capture_page("https://e.com/a", text="t").page
    visit = ledger.record_visit("https://e.com/a", visited_at=T0).visit
    ledger.set_visit_dwell(visit.id, 10)
    ledger.capture_page("https://e.com/other", text="t")
    history = ledger.list_events(target_type="page", target=page.id)
    assert [e.action for e in history] == ["page.capture", "visit.record", "visit.dwell"]


def test_events_never_hold_urls_titles_or_text_and_fact_values_only_in_fact_events(
    ledger: Ledger,
) -> None:
    secret_bits = ["secret-host", "Secret Title", "secret body", "secret note"]
    ledger.capture_page("https://secret-host.example/p", text="secret body", title="Secret Title")
    ledger.record_visit("https://secret-host.example/p", visited_at=T0)
    ledger.add_highlight("https://secret-host.example/p", "secret body", note="secret note")
    ledger.add_note("secret note", url="https://secret-host.example/p")
    ledger.upsert_bookmark("1", "https://secret-host.example/p", title="Secret Title")
    ledger.snapshot_tabs([TabInput(1, 1, "https://secret-host.example/p", "Secret Title")])
    ledger.set_fact("k", "secret value")
    ledger.forget(domain="secret-host.example")
    events = ledger.list_events(limit=1000)
    dumped = json.dumps([vars(e) for e in events])
    for bit in secret_bits:
        assert bit not in dumped
    others = json.dumps([vars(e) for e in events if e.target_type != "fact"])
    assert "secret value" not in others  # the value is the fact's history (memory_history)


def test_transaction_groups_calls_and_a_failing_call_rolls_back_alone(ledger: Ledger) -> None:
    with ledger.transaction():
        ledger.set_fact("a", "1")
        with pytest.raises(KeyExists):
            ledger.set_fact("a", "2", require_absent=True)
        ledger.set_fact("b", "1")
    assert [(f.key, f.value) for f in ledger.list_facts()] == [("a", "1"), ("b", "1")]
    with pytest.raises(RuntimeError, match="boom"), ledger.transaction():
        ledger.set_fact("c", "1")
        raise RuntimeError("boom")
    assert [f.key for f in ledger.list_facts()] == ["a", "b"]
    assert [e.action for e in ledger.list_events()] == ["fact.set", "fact.cas_fail", "fact.set"]


# ------------------------------------------------------------------- change feed


def test_change_feed_records_every_indexable_mutation_in_order(ledger: Ledger) -> None:
    page = ledger.capture_page("https://e.com/a", text=LONG_TEXT).page
    ledger.capture_page("https://e.com/a", text=LONG_TEXT)  # unchanged, same time: no change
    ledger.record_visit("https://e.com/a", visited_at=T0 + 5)
    highlight = ledger.add_highlight("https://e.com/a", "h")
    note = ledger.add_note("n")
    bookmark = ledger.upsert_bookmark("1", "https://e.com/a")
    fact = ledger.set_fact("k", "v")
    ledger.snapshot_tabs([TabInput(1, 1, "https://e.com/a")])  # tabs are not indexed
    ledger.set_setting("x", 1)  # settings are not indexed
    ledger.delete_note(note.id)
    ledger.delete_fact("k")
    feed = [(c.seq, c.entity_type, c.entity_id, c.op, c.aspect) for c in ledger.changes_since(0)]
    assert feed == [
        (1, "page", page.id, "upsert", "content"),
        (2, "page", page.id, "upsert", "stats"),
        (3, "highlight", highlight.id, "upsert", "content"),
        (4, "note", note.id, "upsert", "content"),
        (5, "bookmark", bookmark.id, "upsert", "content"),
        (6, "fact", fact.id, "upsert", "content"),
        (7, "note", note.id, "delete", "content"),
        (8, "fact", fact.id, "delete", "content"),
    ]
    assert ledger.max_change_seq() == 8


def test_changes_since_resumes_from_a_watermark_in_pages(ledger: Ledger) -> None:
    assert ledger.max_change_seq() == 0
    assert ledger.changes_since(0) == []
    for n in range(7):
        ledger.set_fact(f"k{n}", "v")
    watermark, seen = 0, []
    while batch := ledger.changes_since(watermark, limit=3):
        seen += [c.seq for c in batch]
        watermark = batch[-1].seq
    assert seen == [1, 2, 3, 4, 5, 6, 7]
    assert ledger.prune_changes(5) == 5
    assert [c.seq for c in ledger.changes_since(0)] == [6, 7]
    ledger.set_fact("k-new", "v")
    assert ledger.max_change_seq() == 8  # never restarts


def test_unchanged_capture_at_a_later_time_records_no_change(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.capture_page("https://e.com/a", text="t")
    clock.advance(60)
    ledger.capture_page("https://e.com/a", text="t")
    assert ledger.changes_since(1) == []  # a capture is not a visit: nothing to re-rank
    assert (
        ledger.get_page("https://e.com/a").last_seen
        == ledger.get_page("https://e.com/a").first_seen
    )
