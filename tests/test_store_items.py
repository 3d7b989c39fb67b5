"""The ledger's highlights, notes, bookmarks and tabs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from backtrail.errors import (
    BookmarkNotFound,
    HighlightNotFound,
    InvalidInput,
    InvalidUrl,
    NoteNotFound,
    TabNotFound,
)
from backtrail.store import BookmarkInput, Ledger, TabInput
from store_support import T0

if TYPE_CHECKING:
    from conftest import FakeClock

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


# ----------------------------------------------------- highlights, notes, bookmarks


def test_highlight_with_the_same_external_id_is_stored_once(ledger: Ledger) -> None:
    first = ledger.add_highlight(
        "https://example.com/a?utm_source=x", "key sentence", context="before key sentence after",
        note="remember", external_id="hl-1",
    )  # fmt: skip
    again = ledger.add_highlight("https://example.com/a", "key sentence", external_id="hl-1")
    assert again == first
    assert (first.canonical_url, first.context, first.note) == (
        "https://example.com/a", "before key sentence after", "remember",
    )  # fmt: skip
    assert len(ledger.list_highlights(url="https://example.com/a")) == 1
    assert len(ledger.list_events(action="highlight.add")) == 1


def test_highlight_note_can_be_set_and_cleared(ledger: Ledger, clock: FakeClock) -> None:
    highlight = ledger.add_highlight("https://example.com/a", "text")
    clock.advance(5)
    assert ledger.set_highlight_note(highlight.id, "why it matters").note == "why it matters"
    cleared = ledger.set_highlight_note(highlight.id, None)
    assert (cleared.note, cleared.updated_at) == (None, T0 + 5)
    ledger.delete_highlight(highlight.id)
    with pytest.raises(HighlightNotFound, match=f"highlight {highlight.id} does not exist"):
        ledger.get_highlight(highlight.id)


def test_notes_can_be_added_with_or_without_a_url_updated_and_deleted(ledger: Ledger) -> None:
    loose = ledger.add_note("call the bank about the form")
    attached = ledger.add_note("good explanation", url="https://example.com/wal")
    assert (loose.url, loose.domain) == (None, None)
    assert attached.domain == "example.com"
    assert ledger.update_note(loose.id, "done").content == "done"
    assert [n.id for n in ledger.list_notes(domain="example.com")] == [attached.id]
    ledger.delete_note(loose.id)
    with pytest.raises(NoteNotFound):
        ledger.delete_note(loose.id)


def test_replace_bookmarks_adds_updates_removes_and_skips_bookmarklets(ledger: Ledger) -> None:
    ledger.replace_bookmarks(
        [
            BookmarkInput("1", "https://example.com/a", "A", "Bar/Dev", T0),
            BookmarkInput("2", "https://example.com/b", "B", "Bar", T0),
        ]
    )
    result = ledger.replace_bookmarks(
        [
            {"browser_id": "1", "url": "https://example.com/a", "title": "A", "folder": "Bar/Dev",
             "created_at": T0},
            {"browser_id": "3", "url": "https://example.com/c", "title": "C"},
            {"browser_id": "4", "url": "javascript:alert(1)", "title": "Bookmarklet"},
        ]
    )  # fmt: skip
    assert (result.added, result.updated, result.removed, result.unchanged, result.skipped) == (
        1, 0, 1, 1, 1,
    )  # fmt: skip
    stored = {b.browser_id: (b.title, b.folder) for b in ledger.list_bookmarks()}
    assert stored == {"1": ("A", "Bar/Dev"), "3": ("C", None)}


def test_upserting_an_unchanged_bookmark_writes_no_event(ledger: Ledger) -> None:
    ledger.upsert_bookmark("9", "https://example.com/", title="E", created_at=T0)
    ledger.upsert_bookmark("9", "https://example.com/", title="E", created_at=T0)
    ledger.upsert_bookmark("9", "https://example.com/", title="Renamed")
    actions = [e.action for e in ledger.list_events()]
    assert actions == ["bookmark.added", "bookmark.updated"]
    assert ledger.list_bookmarks()[0].created_at == T0
    ledger.delete_bookmark("9")
    with pytest.raises(BookmarkNotFound):
        ledger.delete_bookmark("9")


def test_bookmark_for_a_non_web_url_is_refused(ledger: Ledger) -> None:
    with pytest.raises(InvalidUrl, match="has scheme 'file'"):
        ledger.upsert_bookmark("1", "file:///home/me/notes.txt")


# -------------------------------------------------------------------------- tabs


def test_snapshot_of_one_window_replaces_only_that_window(ledger: Ledger) -> None:
    ledger.snapshot_tabs(
        [TabInput(1, 10, "https://a.example/", "A", active=True),
         TabInput(2, 20, "https://b.example/", "B")]
    )  # fmt: skip
    ledger.snapshot_tabs([{"tab_id": 3, "window_id": 10, "url": "https://c.example/"}],
                         window_id=10)  # fmt: skip
    assert [(t.tab_id, t.window_id) for t in ledger.list_tabs()] == [(3, 10), (2, 20)]
    with pytest.raises(InvalidInput, match=r"tabs\[0\]\.window_id: is 20, not window 10"):
        ledger.snapshot_tabs([TabInput(4, 20)], window_id=10)


def test_tab_events_open_activate_update_and_close(ledger: Ledger, clock: FakeClock) -> None:
    ledger.apply_tab_event("opened", 1, window_id=5, url="https://a.example/", active=True)
    ledger.apply_tab_event("opened", 2, window_id=5, url="https://b.example/?token=x", index=1)
    clock.advance(30)
    activated = ledger.apply_tab_event("activated", 2)
    assert activated is not None and activated.active and activated.last_accessed == T0 + 30
    assert [(t.tab_id, t.active) for t in ledger.list_tabs(window_id=5)] == [(2, True), (1, False)]
    updated = ledger.apply_tab_event("updated", 2, title="Loaded", pinned=True, group_id=-1)
    assert updated is not None
    assert (updated.url, updated.title, updated.pinned, updated.group_id, updated.index) == (
        "https://b.example/", "Loaded", True, None, 1,
    )  # fmt: skip
    assert ledger.apply_tab_event("closed", 2) is None
    assert ledger.apply_tab_event("closed", 2) is None  # closing twice is harmless
    assert [t.tab_id for t in ledger.list_tabs()] == [1]


def test_event_for_an_unknown_tab_needs_its_window(ledger: Ledger) -> None:
    with pytest.raises(TabNotFound, match="tab 42 does not exist"):
        ledger.apply_tab_event("updated", 42, title="x")
    tab = ledger.apply_tab_event("updated", 42, window_id=1, url="https://e.com/")
    assert tab is not None and tab.window_id == 1
    with pytest.raises(InvalidInput, match="window_id: is required when a tab is opened"):
        ledger.apply_tab_event("opened", 43)
    with pytest.raises(InvalidInput, match="kind: must be one of opened, closed"):
        ledger.apply_tab_event("moved", 42)  # type: ignore[arg-type]


def test_non_web_tabs_keep_only_scheme_and_host(ledger: Ledger) -> None:
    ledger.snapshot_tabs(
        [TabInput(1, 1, "chrome://newtab/"), TabInput(2, 1, "file:///home/me/secret.pdf"),
         TabInput(3, 1, "chrome-extension://abc/page.html?key=1")]
    )  # fmt: skip
    assert [(t.url, t.domain) for t in ledger.list_tabs()] == [
        ("chrome://newtab", None), ("file://", None), ("chrome-extension://abc", None),
    ]  # fmt: skip
