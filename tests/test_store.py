"""The ledger: pages, visits, items, tabs, facts, events, change feed, forget,
migrations, input hygiene and concurrency across real processes."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import pytest

from backtrail.errors import (
    BookmarkNotFound,
    FactNotFound,
    HighlightNotFound,
    InvalidInput,
    InvalidUrl,
    KeyExists,
    LimitExceeded,
    NoteNotFound,
    PageNotFound,
    SchemaTooNew,
    StoreBusy,
    TabNotFound,
    VersionConflict,
)
from backtrail.store import (
    LEDGER_FILENAME,
    SCHEMA_VERSION,
    BookmarkInput,
    Ledger,
    Limits,
    TabInput,
    VisitInput,
    data_dir,
)
from backtrail.store.schema import MIGRATIONS, SCHEMA_V1
from backtrail.store.versioning import content_hash, similarity

if TYPE_CHECKING:
    from conftest import FakeClock

PYTHON_SRC = Path(__file__).resolve().parent.parent / "python"
T0 = 1_700_000_000  # the fake clock's start
LONG_TEXT = " ".join(
    f"Paragraph {n} discusses how write-ahead logging keeps the database consistent."
    for n in range(40)
)


def snapshot(ledger: Ledger) -> dict[str, Any]:
    """Everything a failed call must leave untouched."""
    stats = ledger.stats()
    return {
        "counts": stats.counts,
        "max_change_seq": stats.max_change_seq,
        "facts": [(f.key, f.value, f.version) for f in ledger.list_facts()],
        "pages": [(p.canonical_url, p.visit_count, p.current_version) for p in ledger.list_pages()],
    }


def file_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# ---------------------------------------------------------------- data directory


def test_data_dir_uses_backtrail_home_env_var(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BACKTRAIL_HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home"
    assert (tmp_path / "home").is_dir()


def test_data_dir_override_beats_env_var(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BACKTRAIL_HOME", str(tmp_path / "env"))
    assert data_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    assert not (tmp_path / "env").exists()


def test_data_dir_defaults_to_platform_user_data_dir(monkeypatch) -> None:
    monkeypatch.delenv("BACKTRAIL_HOME", raising=False)
    expected = Path(platformdirs.user_data_dir("backtrail", appauthor=False)).absolute()
    assert data_dir(create=False) == expected


def test_open_creates_an_owner_only_wal_database_in_the_data_dir(data_home: Path) -> None:
    with Ledger.open() as ledger:
        assert ledger.path == data_home / LEDGER_FILENAME
        ledger.set_fact("k", "v")
    mode = stat.S_IMODE((data_home / LEDGER_FILENAME).stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(data_home.stat().st_mode) == 0o700
    raw = sqlite3.connect(data_home / LEDGER_FILENAME)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    raw.close()


def test_write_waits_for_busy_timeout_then_raises_store_busy_and_stores_nothing(
    data_home: Path,
) -> None:
    ledger = Ledger.open(busy_timeout_ms=50)
    blocker = sqlite3.connect(ledger.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreBusy) as caught:
        ledger.set_fact("k", "v")
    assert str(caught.value) == (
        "the store is busy: another process held the write lock for more than 50 ms; try again"
    )
    blocker.execute("ROLLBACK")
    blocker.close()
    with pytest.raises(FactNotFound):
        ledger.get_fact("k")
    assert ledger.set_fact("k", "v").version == 1
    ledger.close()


def test_opening_a_database_from_a_newer_backtrail_raises_schema_too_new(
    data_home: Path,
) -> None:
    path = data_home / LEDGER_FILENAME
    data_home.mkdir(parents=True)
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(SchemaTooNew, match=f"has schema version {SCHEMA_VERSION + 1} but"):
        Ledger(path)


# ------------------------------------------------------------------------- pages


def test_capture_creates_page_with_canonical_url_domain_and_first_version(
    ledger: Ledger,
) -> None:
    result = ledger.capture_page(
        "HTTPS://Docs.Example.com:443/guide?utm_source=x&b=1#intro",
        text="Hello storage world",
        title="  The   Guide ",
        language="en_US",
    )
    assert result.outcome == "created"
    page = result.page
    assert page.canonical_url == "https://docs.example.com/guide?b=1"
    assert page.url == "https://docs.example.com/guide?utm_source=x&b=1#intro"
    assert page.domain == "docs.example.com"
    assert (page.title, page.language) == ("The Guide", "en-us")
    assert (page.first_seen, page.last_seen, page.visit_count) == (T0, T0, 0)
    assert (page.current_version, page.last_captured_at) == (1, T0)
    assert result.version.version == 1
    assert result.version.text == "Hello storage world"
    assert result.version.text_bytes == len(b"Hello storage world")
    assert result.version.truncated is False


def test_capture_stores_the_url_scrubbed_of_secrets(ledger: Ledger) -> None:
    page = ledger.capture_page(
        "https://bob:pw@example.com/cb?code=abc&x=1#access_token=t", text="t"
    ).page
    assert page.url == "https://example.com/cb?x=1"
    assert page.canonical_url == "https://example.com/cb?x=1"


def test_tracking_and_fragment_variants_are_one_page(ledger: Ledger) -> None:
    first = ledger.capture_page("https://example.com/a?id=1", text=LONG_TEXT)
    second = ledger.capture_page("https://example.com/a?fbclid=z&id=1#top", text=LONG_TEXT)
    assert second.page.id == first.page.id
    assert ledger.stats().counts["pages"] == 1


def test_recapture_differing_only_in_whitespace_and_case_is_unchanged(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.capture_page("https://example.com/a", text=LONG_TEXT, title="T")
    clock.advance(60)
    again = ledger.capture_page(
        "https://example.com/a", text="  " + LONG_TEXT.upper().replace(" ", " \n\t "), title="T"
    )
    assert again.outcome == "unchanged"
    assert again.version.version == 1
    assert again.version.text == LONG_TEXT  # the stored text is not replaced
    assert (again.page.last_seen, again.version.updated_at) == (T0 + 60, T0 + 60)
    assert len(ledger.list_page_versions(again.page.id)) == 1


def test_recapture_with_changed_dates_and_counters_updates_the_version_in_place(
    ledger: Ledger,
) -> None:
    before = "Updated 2024-01-02 at 10:15. 41 comments. " + LONG_TEXT
    after = "Updated 2024-03-09 at 18:40. 57 comments. " + LONG_TEXT
    ledger.capture_page("https://example.com/news", text=before)
    result = ledger.capture_page("https://example.com/news", text=after)
    assert result.outcome == "updated"
    assert result.version.version == 1
    assert result.version.text == after
    assert len(ledger.list_page_versions(result.page.id)) == 1


def test_recapture_with_one_word_edited_updates_in_place(ledger: Ledger) -> None:
    ledger.capture_page("https://example.com/a", text=LONG_TEXT)
    edited = LONG_TEXT.replace("Paragraph 20 discusses", "Paragraph 20 explains", 1)
    result = ledger.capture_page("https://example.com/a", text=edited)
    assert (result.outcome, result.version.version) == ("updated", 1)


def test_recapture_with_substantially_different_text_keeps_a_new_version(
    ledger: Ledger, clock: FakeClock
) -> None:
    first = ledger.capture_page("https://example.com/a", text=LONG_TEXT, title="Old")
    clock.advance(3600)
    rewritten = " ".join(f"Section {n} now covers vector search." for n in range(40))
    second = ledger.capture_page("https://example.com/a", text=rewritten, title="New")
    assert (second.outcome, second.version.version) == ("new_version", 2)
    assert (second.page.current_version, second.page.title) == (2, "New")
    versions = ledger.list_page_versions(first.page.id)
    assert [(v.version, v.title, v.captured_at) for v in versions] == [
        (1, "Old", T0),
        (2, "New", T0 + 3600),
    ]
    assert ledger.get_page_version(first.page.id, 1).text == LONG_TEXT
    assert ledger.get_page("https://example.com/a", with_text=True).text == rewritten


def test_similarity_threshold_separates_small_edits_from_rewrites() -> None:
    rng = random.Random(7)
    vocabulary = [f"word{chr(97 + a)}{chr(97 + b)}" for a in range(26) for b in range(26)]
    words = [rng.choice(vocabulary) for _ in range(400)]
    text = " ".join(words)

    def edit(fraction: float) -> str:
        edited = list(words)
        for index in rng.sample(range(len(words)), int(len(words) * fraction)):
            edited[index] = "changed"
        return " ".join(edited)

    assert similarity(text, text.upper()) == 1.0
    assert similarity(text, edit(0.005)) >= 0.9  # two words: updated in place
    assert similarity(text, edit(0.05)) < 0.9  # twenty words: a new version
    assert similarity(text, "") == 0.0
    assert similarity("", "") == 1.0
    assert content_hash("A  b\n c") == content_hash("a b c")


def test_versions_beyond_the_limit_are_pruned_oldest_first(
    data_home: Path, clock: FakeClock
) -> None:
    ledger = Ledger.open(clock=clock, limits=Limits(max_versions_per_page=3))
    for word in ("apple", "river", "stone", "cloud", "forest"):
        ledger.capture_page("https://example.com/a", text=f"{word} " * 30)
    page = ledger.get_page("https://example.com/a")
    assert [v.version for v in ledger.list_page_versions(page.id)] == [3, 4, 5]
    assert ledger.list_events(action="page.capture")[-1].details["pruned_versions"] == 1
    ledger.close()


def test_page_text_is_capped_on_a_character_boundary(data_home: Path, clock: FakeClock) -> None:
    ledger = Ledger.open(clock=clock, limits=Limits(max_text_bytes=11))
    version = ledger.capture_page("https://example.com/a", text="ab€€€€").version  # € is 3 bytes
    assert (version.text, version.text_bytes, version.truncated) == ("ab€€€", 11, True)
    version = ledger.capture_page("https://example.com/b", text="a😀😀😀").version  # 4 bytes
    assert (version.text, version.text_bytes, version.truncated) == ("a😀😀", 9, True)
    ledger.close()


def test_default_text_cap_is_one_mebibyte(ledger: Ledger) -> None:
    version = ledger.capture_page("https://example.com/big", text="x" * 1_500_000).version
    assert (version.text_bytes, version.truncated) == (1_048_576, True)


def test_web_metadata_is_cleaned_rather_than_refused(ledger: Ledger) -> None:
    result = ledger.capture_page(
        "https://e.com/", text="body\x00 text\x1b", title="a\n\tb " + "c" * 5000,
        language="en-US,fr",
    )  # fmt: skip
    assert result.page.title == ("a b " + "c" * 5000)[:1000]
    assert result.page.language is None
    assert result.version.text == "body text"


def test_limits_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="invalid limits.max_text_bytes: must be a positive"):
        Limits(max_text_bytes=0)
    with pytest.raises(InvalidInput, match=r"limits.version_similarity: must be in \(0, 1\]"):
        Limits(version_similarity=1.5)


def test_get_page_finds_by_any_url_form_or_id_and_raises_page_not_found(
    ledger: Ledger,
) -> None:
    page = ledger.capture_page("https://example.com/a?b=2&a=1", text="text").page
    assert ledger.get_page("https://EXAMPLE.com/a?a=1&b=2&utm_medium=x").id == page.id
    assert ledger.get_page(page_id=page.id).canonical_url == page.canonical_url
    assert ledger.get_page(page_id=page.id).text is None
    with pytest.raises(PageNotFound) as caught:
        ledger.get_page("https://example.com/missing")
    assert str(caught.value) == "page 'https://example.com/missing' does not exist"
    with pytest.raises(InvalidInput, match="give exactly one of url or page_id"):
        ledger.get_page("https://example.com/a", page_id=page.id)


def test_pages_by_id_returns_existing_pages_with_text_for_the_indexer(ledger: Ledger) -> None:
    a = ledger.capture_page("https://example.com/a", text="alpha").page
    b = ledger.record_visit("https://example.com/b", visited_at=T0).page
    found = ledger.pages_by_id([a.id, b.id, 999], with_text=True)
    assert set(found) == {a.id, b.id}
    assert (found[a.id].text, found[b.id].text) == ("alpha", None)


def test_list_pages_filters_by_domain_with_subdomains_and_time(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.capture_page("https://example.com/1", text="a")
    clock.advance(10)
    ledger.capture_page("https://docs.example.com/2", text="b")
    clock.advance(10)
    ledger.capture_page("https://notexample.com/3", text="c")
    urls = [p.canonical_url for p in ledger.list_pages(domain="example.com")]
    assert urls == ["https://docs.example.com/2", "https://example.com/1"]
    recent = [p.canonical_url for p in ledger.list_pages(since=T0 + 10)]
    assert recent == ["https://notexample.com/3", "https://docs.example.com/2"]


# ------------------------------------------------------------------------ visits


def test_record_visit_creates_the_page_and_updates_its_stats(ledger: Ledger) -> None:
    first = ledger.record_visit(
        "https://example.com/a",
        visited_at=T0 + 100,
        title="From history",
        tab_id=7,
        window_id=2,
        transition="link",
        referrer="https://search.example/?q=x&utm_source=y",
        dwell_ms=1500,
    )
    assert first.created is True
    assert (first.visit.tab_id, first.visit.window_id, first.visit.transition) == (7, 2, "link")
    assert first.visit.referrer == "https://search.example/?q=x"
    assert first.visit.source == "extension"
    second = ledger.record_visit("https://example.com/a", visited_at=T0 + 50, dwell_ms=500)
    page = second.page
    assert (page.visit_count, page.first_seen, page.last_seen) == (2, T0 + 50, T0 + 100)
    assert (page.dwell_ms, page.title) == (2000, "From history")


def test_reimporting_the_same_browser_history_adds_nothing(ledger: Ledger) -> None:
    history = [
        VisitInput(url=f"https://example.com/{n % 3}", visited_at=T0 + n, source="history",
                   external_id=f"chrome-visit-{n}", title=f"Page {n % 3}")
        for n in range(10)
    ]  # fmt: skip
    first = ledger.import_visits(history)
    assert (first.added, first.skipped, first.pages_created) == (10, 0, 3)
    before = snapshot(ledger)
    again = ledger.import_visits([vars(item) for item in history])  # plain dicts work too
    assert (again.added, again.skipped, again.pages_created) == (0, 10, 0)
    assert snapshot(ledger) == before
    assert sum(p.visit_count for p in ledger.list_pages()) == 10


def test_a_visit_seen_live_and_again_in_browser_history_counts_once(ledger: Ledger) -> None:
    # The extension recorded the load live; later the extension's backfill and the
    # CLI's import of the History file bring the same load (a second apart) again.
    live = ledger.record_visit("https://example.com/a", visited_at=T0, external_id="uuid-1")
    assert live.created is True
    backfill = ledger.import_visits(
        [VisitInput(url="https://example.com/a", visited_at=T0 + 1, source="history",
                    external_id="Default:41")]
    )  # fmt: skip
    cli = ledger.import_visits(
        [VisitInput(url="https://example.com/a", visited_at=T0, source="import:chrome",
                    external_id="Default:41"),
         # a later load of the same page, and the same moment on another page, are new
         VisitInput(url="https://example.com/a", visited_at=T0 + 60, source="import:chrome",
                    external_id="Default:42"),
         VisitInput(url="https://example.com/b", visited_at=T0, source="import:chrome",
                    external_id="Default:43")]
    )  # fmt: skip
    assert (backfill.added, backfill.skipped) == (0, 1)
    assert (cli.added, cli.skipped, cli.pages_created) == (2, 1, 1)
    assert ledger.get_page("https://example.com/a").visit_count == 2
    assert ledger.get_page("https://example.com/b").visit_count == 1
    # live visits are never folded into each other: a reload a second later counts
    assert ledger.record_visit("https://example.com/a", visited_at=T0 + 61).created is True


def test_visits_without_external_id_are_unique_per_page_time_and_source(
    ledger: Ledger,
) -> None:
    assert ledger.record_visit("https://example.com/a", visited_at=T0).created is True
    assert ledger.record_visit("https://example.com/a#x", visited_at=T0).created is False
    assert ledger.record_visit("https://example.com/a", visited_at=T0, source="import").created
    assert ledger.record_visit("https://example.com/a", visited_at=T0 + 1).created is True
    assert ledger.get_page("https://example.com/a").visit_count == 3
    assert len(ledger.list_events(action="visit.record")) == 3


def test_import_refuses_the_whole_batch_when_one_visit_is_bad(ledger: Ledger) -> None:
    ledger.record_visit("https://example.com/existing", visited_at=T0)
    before = snapshot(ledger)
    batch = [
        {"url": "https://example.com/ok", "visited_at": T0},
        {"url": "chrome://history", "visited_at": T0},
    ]
    with pytest.raises(InvalidUrl) as caught:
        ledger.import_visits(batch)
    assert str(caught.value).startswith("invalid visits[1].url 'chrome://history': has scheme")
    with pytest.raises(InvalidInput, match=r"invalid visits\[0\]: .*unexpected keyword"):
        ledger.import_visits([{"url": "https://e.com/", "visited_at": T0, "bogus": 1}])
    assert snapshot(ledger) == before


def test_non_http_referrer_is_dropped(ledger: Ledger) -> None:
    visit = ledger.record_visit(
        "https://example.com/", visited_at=T0, referrer="android-app://com.example"
    ).visit
    assert visit.referrer is None


def test_dwell_time_can_be_set_after_the_visit_and_the_page_total_follows(
    ledger: Ledger,
) -> None:
    visit = ledger.record_visit(
        "https://example.com/a", visited_at=T0, source="extension", external_id="uuid-1"
    ).visit
    ledger.record_visit("https://example.com/a", visited_at=T0 + 5, dwell_ms=100)
    assert ledger.find_visit("extension", "uuid-1").id == visit.id
    assert ledger.set_visit_dwell(visit.id, 4000).dwell_ms == 4000
    assert ledger.set_visit_dwell(visit.id, 2500).dwell_ms == 2500
    assert ledger.get_page("https://example.com/a").dwell_ms == 2600


def test_history_title_names_a_page_until_its_text_is_captured(ledger: Ledger) -> None:
    ledger.record_visit("https://example.com/a", visited_at=T0, title="History title")
    ledger.capture_page("https://example.com/a", text="body", title="Captured title")
    ledger.record_visit("https://example.com/a", visited_at=T0 + 1, title="Later history title")
    assert ledger.get_page("https://example.com/a").title == "Captured title"


def test_list_visits_filters_by_url_and_time_newest_first(ledger: Ledger) -> None:
    for n in range(3):
        ledger.record_visit("https://example.com/a", visited_at=T0 + n)
    ledger.record_visit("https://example.com/b", visited_at=T0 + 10)
    visits = ledger.list_visits(url="https://example.com/a", since=T0 + 1)
    assert [v.visited_at for v in visits] == [T0 + 2, T0 + 1]


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


# ------------------------------------------------------------------------- facts


def test_set_fact_starts_at_version_1_and_bumps_on_each_write(
    ledger: Ledger, clock: FakeClock
) -> None:
    created = ledger.set_fact("user/editor", "vim")
    clock.advance(10)
    updated = ledger.set_fact("user/editor", "helix")
    assert (created.version, created.client, created.created_at) == (1, "test", T0)
    assert (updated.version, updated.value, updated.created_at, updated.updated_at) == (
        2, "helix", T0, T0 + 10,
    )  # fmt: skip
    assert ledger.get_fact("user/editor") == updated


def test_cas_by_version_conflict_names_expected_and_actual_versions(ledger: Ledger) -> None:
    ledger.set_fact("counter", "1")
    ledger.set_fact("counter", "2")
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("counter", "3", expected_version=1)
    error = caught.value
    assert str(error) == (
        "fact 'counter' was not changed: expected version 1, but the current version is 2"
    )
    assert (error.key, error.expected, error.actual, error.what) == ("counter", 1, 2, "version")
    assert error.to_dict()["code"] == "version_conflict"
    assert ledger.set_fact("counter", "3", expected_version=2).version == 3


def test_cas_by_value_conflict_names_expected_and_actual_values(ledger: Ledger) -> None:
    ledger.set_fact("mode", "draft")
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("mode", "final", expected_value="review")
    assert str(caught.value) == (
        "fact 'mode' was not changed: expected value 'review', but the current value is 'draft'"
    )
    assert (caught.value.expected, caught.value.actual) == ("review", "draft")
    assert ledger.set_fact("mode", "final", expected_value="draft").value == "final"


def test_cas_on_a_missing_key_says_the_fact_does_not_exist(ledger: Ledger) -> None:
    with pytest.raises(VersionConflict) as caught:
        ledger.set_fact("ghost", "x", expected_version=3)
    assert str(caught.value) == (
        "fact 'ghost' was not changed: expected version 3, but the fact does not exist"
    )
    assert caught.value.actual is None
    with pytest.raises(VersionConflict, match="expected value 'a', but the fact does not exist"):
        ledger.set_fact("ghost", "x", expected_value="a")


def test_create_only_refuses_an_existing_key(ledger: Ledger) -> None:
    assert ledger.set_fact("lock/owner", "alice", require_absent=True).version == 1
    with pytest.raises(KeyExists) as caught:
        ledger.set_fact("lock/owner", "bob", require_absent=True)
    assert str(caught.value) == (
        "fact 'lock/owner' already exists (version 1); it was not overwritten"
    )
    assert ledger.get_fact("lock/owner").value == "alice"


def test_require_absent_cannot_be_combined_with_expectations(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput) as caught:
        ledger.set_fact("k", "v", expected_value="x", require_absent=True)
    assert str(caught.value) == (
        "invalid require_absent: cannot be combined with expected_value: choose one"
    )
    with pytest.raises(InvalidInput, match="cannot be combined with expected_version"):
        ledger.set_fact("k", "v", expected_version=1, require_absent=True)
    assert ledger.list_facts() == []


def test_expected_value_and_version_may_be_combined_and_both_must_hold(ledger: Ledger) -> None:
    ledger.set_fact("k", "a")
    with pytest.raises(VersionConflict, match="expected value 'b'"):
        ledger.set_fact("k", "c", expected_version=1, expected_value="b")
    assert ledger.set_fact("k", "c", expected_version=1, expected_value="a").version == 2


def test_fact_key_and_value_limits_are_enforced_with_clear_errors(ledger: Ledger) -> None:
    assert ledger.set_fact("k" * 256, "v").key == "k" * 256
    with pytest.raises(LimitExceeded) as caught:
        ledger.set_fact("k" * 257, "v")
    assert str(caught.value) == "key is 257 characters long; the limit is 256 characters"
    assert ledger.set_fact("big", "v" * 16_384).value == "v" * 16_384
    with pytest.raises(LimitExceeded, match="value is 16385 characters long; the limit is 16384"):
        ledger.set_fact("big", "v" * 16_385)
    assert ledger.get_fact("big").version == 1


def test_fact_value_limit_is_configurable(data_home: Path) -> None:
    with Ledger.open(limits=Limits(max_fact_value_chars=4)) as ledger:
        ledger.set_fact("k", "1234")
        with pytest.raises(LimitExceeded, match="the limit is 4 characters"):
            ledger.set_fact("k", "12345")


def test_list_facts_by_prefix_case_sensitive_and_insensitive(ledger: Ledger) -> None:
    for key in ("Project/a", "project/b", "project/c", "ÄPFEL/x", "äpfel/y", "other"):
        ledger.set_fact(key, "v")
    assert [f.key for f in ledger.list_facts("project/")] == ["project/b", "project/c"]
    assert [f.key for f in ledger.list_facts("PROJECT/", case_insensitive=True)] == [
        "Project/a", "project/b", "project/c",
    ]  # fmt: skip
    assert [f.key for f in ledger.list_facts("äpfel", case_insensitive=True)] == [
        "ÄPFEL/x", "äpfel/y",
    ]  # fmt: skip
    assert [f.key for f in ledger.list_facts("project/", limit=1, offset=1)] == ["project/c"]
    assert len(ledger.list_facts()) == 6
    assert ledger.list_facts("100%_") == []


def test_deleting_a_fact_supports_cas_and_versions_keep_counting(ledger: Ledger) -> None:
    ledger.set_fact("k", "a")
    ledger.set_fact("k", "b")
    with pytest.raises(VersionConflict, match="expected version 1, but the current version is 2"):
        ledger.delete_fact("k", expected_version=1)
    assert ledger.delete_fact("k", expected_version=2).value == "b"
    with pytest.raises(FactNotFound, match="fact 'k' does not exist"):
        ledger.get_fact("k")
    with pytest.raises(FactNotFound):
        ledger.delete_fact("k")
    assert ledger.list_facts() == []
    recreated = ledger.set_fact("k", "c", require_absent=True)
    assert recreated.version == 4  # 1, 2, deleted at 3, re-created at 4
    with pytest.raises(VersionConflict):  # a stale version from before the delete never matches
        ledger.set_fact("k", "d", expected_version=2)


def test_facts_record_the_writing_client(ledger: Ledger) -> None:
    with ledger.acting_as("claude-desktop"):
        fact = ledger.set_fact("k", "v")
    assert fact.client == "claude-desktop"
    assert ledger.set_fact("k", "w").client == "test"
    assert [e.client for e in ledger.fact_history("k")] == ["claude-desktop", "test"]


def test_a_failed_cas_changes_nothing_and_leaves_only_its_attempt_in_the_history(
    ledger: Ledger,
) -> None:
    ledger.set_fact("k", "v")
    before = snapshot(ledger)
    for attempt in (
        lambda: ledger.set_fact("k", "x", expected_version=9),
        lambda: ledger.set_fact("k", "y", expected_value="nope"),
        lambda: ledger.set_fact("k", "z", require_absent=True),
        lambda: ledger.delete_fact("k", expected_version=9),
    ):
        with pytest.raises((VersionConflict, KeyExists)):
            attempt()
    after = snapshot(ledger)
    tried = [e for e in ledger.fact_history("k") if e.action == "fact.cas_fail"]
    assert [e.details["value"] for e in tried] == ["x", "y", "z"]
    assert after["counts"]["events"] == before["counts"]["events"] + 3
    after["counts"]["events"] = before["counts"]["events"]
    assert after == before  # no fact, version or change-feed row moved


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


def test_reads_are_logged_as_events_only_when_enabled(data_home: Path) -> None:
    with Ledger.open() as quiet:
        quiet.set_fact("k", "v")
        quiet.get_fact("k")
        assert [e.action for e in quiet.list_events()] == ["fact.set"]
    with Ledger.open(log_reads=True, client="auditor") as audited:
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


def test_unchanged_capture_at_a_later_time_records_a_stats_change(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.capture_page("https://e.com/a", text="t")
    clock.advance(60)
    ledger.capture_page("https://e.com/a", text="t")
    assert [(c.op, c.aspect) for c in ledger.changes_since(1)] == [("upsert", "stats")]


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


# ----------------------------------------------------------- settings and stats


def test_settings_hold_json_values(ledger: Ledger) -> None:
    assert ledger.get_setting("exclusions", []) == []
    ledger.set_setting("exclusions", ["bank.example", "*/private/*"])
    ledger.set_setting("pause", {"until": T0 + 3600, "reason": "meeting"})
    ledger.set_setting("pause", {"until": None})
    assert ledger.get_setting("exclusions") == ["bank.example", "*/private/*"]
    assert ledger.list_settings() == {
        "exclusions": ["bank.example", "*/private/*"],
        "pause": {"until": None},
    }
    assert ledger.delete_setting("pause") is True
    assert ledger.delete_setting("pause") is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1, 2}, "must be JSON-serialisable"),
        (float("nan"), "must be JSON-serialisable"),
        ("\ud800", "lone surrogate"),
        ("x" * 1_000_001, "value is 1000003 bytes long; the limit is 1000000 bytes"),
    ],
)
def test_settings_refuse_values_that_are_not_json_or_too_large(
    ledger: Ledger, value: object, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        ledger.set_setting("k", value)
    assert ledger.list_settings() == {}


def test_stats_report_counts_last_times_and_sizes(ledger: Ledger, clock: FakeClock) -> None:
    empty = ledger.stats()
    assert (empty.last_capture_at, empty.last_visit_at, empty.max_change_seq) == (None, None, 0)
    ledger.capture_page("https://e.com/a", text="t")
    ledger.record_visit("https://e.com/a", visited_at=T0 - 5)
    clock.advance(100)
    ledger.capture_page("https://e.com/b", text="t")
    ledger.set_fact("k", "v")
    ledger.delete_fact("k")
    stats = ledger.stats()
    assert stats.counts["pages"] == 2 and stats.counts["visits"] == 1
    assert stats.counts["facts"] == 0  # deleted facts are not counted
    assert (stats.last_capture_at, stats.last_visit_at) == (T0 + 100, T0 - 5)
    assert stats.schema_version == SCHEMA_VERSION
    assert stats.db_bytes > 0 and stats.wal_bytes > 0
    assert stats.path == str(ledger.path)


# ---------------------------------------------------------------------- bad input

BAD_CALLS: list[tuple[str, Callable[[Ledger], object], type[Exception], str]] = [
    ("url type", lambda db: db.capture_page(123, text="x"), InvalidUrl,
     "must be a string, not int"),
    ("js url", lambda db: db.capture_page("javascript:alert(1)", text="x"), InvalidUrl, "scheme"),
    ("bytes text", lambda db: db.capture_page("https://e.com/", text=b"x"), InvalidInput,
     "invalid text: must be a string, not bytes"),
    ("surrogate text", lambda db: db.capture_page("https://e.com/", text="a\ud800"), InvalidInput,
     "invalid text: contains invalid Unicode (a lone surrogate at index 1)"),
    ("title type", lambda db: db.capture_page("https://e.com/", text="x", title=5), InvalidInput,
     "invalid title: must be a string, not int"),
    ("float time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=1.5),
     InvalidInput, "must be an integer (unix seconds), not float"),
    ("negative time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=-1),
     InvalidInput, "must not be negative"),
    ("ms time", lambda db: db.capture_page("https://e.com/", text="x", captured_at=T0 * 1000),
     InvalidInput, "it looks like milliseconds"),
    ("language type", lambda db: db.capture_page("https://e.com/", text="x", language=["en"]),
     InvalidInput, "invalid language: must be a string, not list"),
    ("undecodable bytes", lambda db: db.set_fact("k", b"\xff".decode("utf-8", "surrogateescape")),
     InvalidInput, "invalid value: contains invalid Unicode (a lone surrogate at index 0)"),
    ("visit time", lambda db: db.record_visit("https://e.com/", visited_at="yesterday"),
     InvalidInput, "invalid visited_at: must be an integer"),
    ("bool tab", lambda db: db.record_visit("https://e.com/", visited_at=T0, tab_id=True),
     InvalidInput, "invalid tab_id: must be an integer, not bool"),
    ("negative dwell", lambda db: db.record_visit("https://e.com/", visited_at=T0, dwell_ms=-5),
     InvalidInput, "invalid dwell_ms: must be between 0"),
    ("source newline", lambda db: db.record_visit("https://e.com/", visited_at=T0, source="a\nb"),
     InvalidInput, "must not contain control characters"),
    ("long highlight", lambda db: db.add_highlight("https://e.com/", "x" * 20_001), LimitExceeded,
     "text is 20001 characters long; the limit is 20000 characters"),
    ("empty highlight", lambda db: db.add_highlight("https://e.com/", "  "), InvalidInput,
     "invalid text: must not be empty"),
    ("nul note", lambda db: db.add_note("a\x00b"), InvalidInput, "must not contain NUL"),
    ("long note", lambda db: db.add_note("x" * 100_001), LimitExceeded, "the limit is 100000"),
    ("note url", lambda db: db.add_note("n", url="data:,x"), InvalidUrl, "has scheme 'data'"),
    ("empty key", lambda db: db.set_fact("", "v"), InvalidInput, "invalid key: must not be empty"),
    ("key type", lambda db: db.set_fact(7, "v"), InvalidInput, "must be a string, not int"),
    ("key newline", lambda db: db.set_fact("a\nb", "v"), InvalidInput, "control characters"),
    ("value type", lambda db: db.set_fact("k", 5), InvalidInput, "invalid value: must be a string"),
    ("value surrogate", lambda db: db.set_fact("k", "\udfff"), InvalidInput, "lone surrogate"),
    ("version type", lambda db: db.set_fact("k", "v", expected_version="1"), InvalidInput,
     "invalid expected_version: must be an integer, not str"),
    ("version zero", lambda db: db.set_fact("k", "v", expected_version=0), InvalidInput,
     "must be between 1"),
    ("bookmark url", lambda db: db.upsert_bookmark("b", "file:///etc/passwd"), InvalidUrl, "file"),
    ("tabs type", lambda db: db.snapshot_tabs("tabs"), InvalidInput, "must be a list of tabs"),
    ("tab active", lambda db: db.snapshot_tabs([TabInput(1, 1, active="yes")]), InvalidInput,
     "invalid tabs[0].active: must be true or false, not str"),
    ("visits type", lambda db: db.import_visits({"url": "x"}), InvalidInput, "must be a list"),
    ("limit zero", lambda db: db.list_facts(limit=0), InvalidInput, "invalid limit"),
    ("forget url", lambda db: db.forget(url="about:blank"), InvalidUrl, "has scheme 'about'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_bad_input_raises_a_clear_error_and_changes_nothing(
    ledger: Ledger, call: Callable[[Ledger], object], error: type[Exception], message: str
) -> None:
    ledger.capture_page("https://e.com/", text="existing", title="Existing")
    ledger.set_fact("k", "v")
    ledger.record_visit("https://e.com/", visited_at=T0)
    before = snapshot(ledger)
    with pytest.raises(error) as caught:
        call(ledger)
    assert message in str(caught.value)
    assert snapshot(ledger) == before
    assert ledger.get_page("https://e.com/", with_text=True).text == "existing"


# -------------------------------------------------------------------- migrations

FROZEN_SCHEMA_V1 = """
CREATE TABLE pages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    canonical_url    TEXT    NOT NULL UNIQUE,
    url              TEXT    NOT NULL,
    domain           TEXT    NOT NULL,
    title            TEXT,
    language         TEXT,
    current_version  INTEGER,
    first_seen       INTEGER NOT NULL,
    last_seen        INTEGER NOT NULL,
    visit_count      INTEGER NOT NULL DEFAULT 0,
    last_captured_at INTEGER
);
CREATE INDEX pages_domain ON pages (domain);
CREATE INDEX pages_last_seen ON pages (last_seen);

CREATE TABLE page_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    page_id      INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    title        TEXT,
    language     TEXT,
    text         TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    text_bytes   INTEGER NOT NULL,
    truncated    INTEGER NOT NULL DEFAULT 0,
    captured_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (page_id, version)
);
CREATE INDEX page_versions_captured ON page_versions (captured_at);

CREATE TABLE visits (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    page_id     INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    visited_at  INTEGER NOT NULL,
    tab_id      INTEGER,
    window_id   INTEGER,
    transition  TEXT,
    referrer    TEXT,
    dwell_ms    INTEGER,
    source      TEXT    NOT NULL,
    external_id TEXT
);
CREATE UNIQUE INDEX visits_external ON visits (source, external_id)
    WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX visits_natural ON visits (page_id, visited_at, source)
    WHERE external_id IS NULL;
CREATE INDEX visits_page ON visits (page_id, visited_at);
CREATE INDEX visits_time ON visits (visited_at);

CREATE TABLE bookmarks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    profile       TEXT    NOT NULL,
    browser_id    TEXT    NOT NULL,
    url           TEXT    NOT NULL,
    canonical_url TEXT    NOT NULL,
    domain        TEXT    NOT NULL,
    title         TEXT,
    folder        TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (profile, browser_id)
);
CREATE INDEX bookmarks_canonical ON bookmarks (canonical_url);
CREATE INDEX bookmarks_domain ON bookmarks (domain);

CREATE TABLE highlights (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    url           TEXT    NOT NULL,
    canonical_url TEXT    NOT NULL,
    domain        TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    context       TEXT,
    note          TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    external_id   TEXT    UNIQUE
);
CREATE INDEX highlights_canonical ON highlights (canonical_url);
CREATE INDEX highlights_domain ON highlights (domain);
CREATE INDEX highlights_created ON highlights (created_at);

CREATE TABLE notes (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    content       TEXT    NOT NULL,
    url           TEXT,
    canonical_url TEXT,
    domain        TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    external_id   TEXT    UNIQUE
);
CREATE INDEX notes_canonical ON notes (canonical_url);
CREATE INDEX notes_domain ON notes (domain);
CREATE INDEX notes_created ON notes (created_at);

CREATE TABLE tabs (
    profile       TEXT    NOT NULL,
    tab_id        INTEGER NOT NULL,
    window_id     INTEGER NOT NULL,
    tab_index     INTEGER,
    url           TEXT,
    canonical_url TEXT,
    domain        TEXT,
    title         TEXT,
    active        INTEGER NOT NULL DEFAULT 0,
    pinned        INTEGER NOT NULL DEFAULT 0,
    group_id      INTEGER,
    last_accessed INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (profile, tab_id)
);
CREATE INDEX tabs_window ON tabs (profile, window_id);

CREATE TABLE facts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT    NOT NULL UNIQUE,
    value      TEXT,
    version    INTEGER NOT NULL,
    client     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deleted_at INTEGER
);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    client      TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_type TEXT    NOT NULL,
    target      TEXT,
    details     TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_target ON events (target_type, target, id);
CREATE INDEX events_at ON events (at);

CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
"""


def schema_of(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
    ).fetchall()


def test_released_migration_1_still_builds_the_frozen_v1_schema() -> None:
    frozen = sqlite3.connect(":memory:")
    frozen.executescript(FROZEN_SCHEMA_V1)
    migrated = sqlite3.connect(":memory:", isolation_level=None)
    MIGRATIONS[0](migrated, T0)
    assert schema_of(migrated) == schema_of(frozen)
    assert SCHEMA_V1 == FROZEN_SCHEMA_V1


def build_v1_database(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.executescript(FROZEN_SCHEMA_V1)
    raw.executescript(
        f"""
        INSERT INTO pages (canonical_url, url, domain, title, current_version, first_seen,
                           last_seen, visit_count, last_captured_at)
            VALUES ('https://old.example/a', 'https://old.example/a', 'old.example', 'Old page',
                    1, {T0 - 100}, {T0 - 50}, 2, {T0 - 100});
        INSERT INTO page_versions (page_id, version, title, text, content_hash, text_bytes,
                                   captured_at, updated_at)
            VALUES (1, 1, 'Old page', 'old text', 'hash', 8, {T0 - 100}, {T0 - 100});
        INSERT INTO visits (page_id, visited_at, dwell_ms, source)
            VALUES (1, {T0 - 100}, 1200, 'extension'), (1, {T0 - 50}, 300, 'extension');
        INSERT INTO highlights (url, canonical_url, domain, text, created_at, updated_at)
            VALUES ('https://old.example/a', 'https://old.example/a', 'old.example', 'hl',
                    {T0 - 90}, {T0 - 90});
        INSERT INTO facts (key, value, version, client, created_at, updated_at)
            VALUES ('counter', '7', 7, 'old-client', {T0 - 80}, {T0 - 80});
        INSERT INTO facts (key, value, version, client, created_at, updated_at, deleted_at)
            VALUES ('gone', NULL, 3, 'old-client', {T0 - 80}, {T0 - 70}, {T0 - 70});
        INSERT INTO events (at, client, action, target_type, target)
            VALUES ({T0 - 80}, 'old-client', 'fact.set', 'fact', 'counter');
        PRAGMA user_version = 1;
        """
    )
    raw.close()


def test_upgrading_a_v1_database_keeps_data_and_backfills_the_change_feed(
    data_home: Path, clock: FakeClock
) -> None:
    data_home.mkdir(parents=True)
    path = data_home / LEDGER_FILENAME
    build_v1_database(path)
    with Ledger(path, clock=clock) as ledger:
        assert ledger.stats().schema_version == SCHEMA_VERSION == 5
        page = ledger.get_page("https://old.example/a", with_text=True)
        assert (page.title, page.text, page.visit_count, page.dwell_ms) == (
            "Old page", "old text", 2, 1500,
        )  # fmt: skip
        assert ledger.get_fact("counter").version == 7
        assert [(c.entity_type, c.entity_id, c.op, c.at) for c in ledger.changes_since(0)] == [
            ("page", 1, "upsert", T0), ("highlight", 1, "upsert", T0), ("fact", 1, "upsert", T0),
        ]  # fmt: skip
        assert ledger.list_events()[0].client == "old-client"
        assert ledger.set_fact("counter", "8", expected_version=7).version == 8
        ledger.record_visit("https://old.example/a", visited_at=T0, dwell_ms=500)
        assert ledger.get_page("https://old.example/a").dwell_ms == 2000
    with Ledger(path, clock=clock) as reopened:  # migrating again is a no-op
        assert reopened.max_change_seq() == 5


# ------------------------------------------------------------------- concurrency


def test_a_ledger_shared_between_threads_serialises_calls(ledger: Ledger) -> None:
    errors: list[BaseException] = []

    def increment() -> None:
        try:
            for _ in range(50):
                while True:
                    try:
                        fact = ledger.get_fact("n")
                        value = str(int(fact.value) + 1)
                        ledger.set_fact("n", value, expected_version=fact.version)
                        break
                    except VersionConflict:
                        continue
        except BaseException as error:  # reported below
            errors.append(error)

    ledger.set_fact("n", "0")
    threads = [threading.Thread(target=increment) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert ledger.get_fact("n").value == "200"


WORKER = r"""
import json, sys
from backtrail.errors import FactNotFound, KeyExists, VersionConflict
from backtrail.store import Ledger

path, worker, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ledger = Ledger(path, client=f"worker-{worker}", busy_timeout_ms=60_000)
print("ready", flush=True)
sys.stdin.readline()  # start together
captures = increments = conflicts = 0
for i in range(ops):
    if i % 2 == 0:
        ledger.capture_page(
            f"https://example.com/w{worker}/p{i}?utm_source=test",
            text=f"worker {worker} wrote page {i}", title=f"w{worker} p{i}",
        )
        captures += 1
        continue
    key = f"counter/{i % 3}"
    while True:
        try:
            fact = ledger.get_fact(key)
        except FactNotFound:
            try:
                ledger.set_fact(key, "1", require_absent=True)
                break
            except KeyExists:
                conflicts += 1
                continue
        try:
            if i % 4 == 1:
                ledger.set_fact(key, str(int(fact.value) + 1), expected_version=fact.version)
            else:
                ledger.set_fact(key, str(int(fact.value) + 1), expected_value=fact.value)
            break
        except VersionConflict:
            conflicts += 1
    increments += 1
ledger.close()
print(json.dumps({"captures": captures, "increments": increments, "conflicts": conflicts}))
"""


def test_four_processes_writing_at_once_lose_nothing(data_home: Path) -> None:
    processes, ops = 4, 500
    path = data_home / LEDGER_FILENAME  # not created yet: the workers race to create it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_SRC), *sys.path])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(n), str(ops)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        for n in range(processes)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == "ready\n", worker.communicate(timeout=30)[1]
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=600)
            assert worker.returncode == 0, err
            reports.append(json.loads(out))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    expected_per_key = {k: 0 for k in range(3)}
    for i in range(1, ops, 2):
        expected_per_key[i % 3] += processes
    assert sum(r["captures"] for r in reports) == processes * ops // 2
    assert sum(r["increments"] for r in reports) == processes * ops // 2
    with Ledger(path) as ledger:
        for k, expected in expected_per_key.items():
            fact = ledger.get_fact(f"counter/{k}")
            assert (fact.value, fact.version) == (str(expected), expected)
        stats = ledger.stats()
        assert stats.counts["pages"] == stats.counts["page_versions"] == processes * ops // 2
        writes = processes * ops  # every capture and every successful set
        events = ledger.list_events(limit=100_000)
        refused = [e for e in events if e.action == "fact.cas_fail"]  # lost races, retried
        assert stats.counts["events"] == writes + len(refused)
        assert stats.counts["changes"] == writes == stats.max_change_seq
        events = [e for e in events if e.action != "fact.cas_fail"]
        assert len([e for e in events if e.action == "page.capture"]) == processes * ops // 2
        assert len([e for e in events if e.action == "fact.set"]) == processes * ops // 2
        per_client = {f"worker-{n}": 0 for n in range(processes)}
        for event in events:
            per_client[event.client] += 1
        assert per_client == {f"worker-{n}": ops for n in range(processes)}


def test_upgrading_to_schema_5_names_the_assistants_of_notes_saved_over_mcp(
    data_home: Path, clock: FakeClock
) -> None:
    path = data_home / LEDGER_FILENAME
    with Ledger(path, client="mcp:cursor", clock=clock) as ledger:
        assistant = ledger.add_note("saved by an assistant before notes had authors")
    with Ledger(path, client="native-host", clock=clock) as ledger:
        own = ledger.add_note("the user's own note")
    raw = sqlite3.connect(path)
    raw.execute("ALTER TABLE notes DROP COLUMN author")
    raw.execute("PRAGMA user_version = 4")
    raw.commit()
    raw.close()
    with Ledger(path, clock=clock) as ledger:
        assert ledger.get_note(assistant.id).author == "mcp:cursor"
        assert ledger.get_note(own.id).author is None
