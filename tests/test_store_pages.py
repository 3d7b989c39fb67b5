"""The ledger's pages and visits: capture, canonical URLs, versions and their limits,
visit imports without duplicates, dwell time and listing."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from backtrail.errors import InvalidInput, InvalidUrl, PageNotFound
from backtrail.store import Ledger, Limits, VisitInput
from backtrail.store.versioning import content_hash, similarity
from store_support import LONG_TEXT, T0, snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import FakeClock

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


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
    # A capture is not a visit: the page's last visit stays where it was.
    assert (again.page.last_seen, again.version.updated_at) == (T0, T0 + 60)
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
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ledger = open_ledger(clock=clock, limits=Limits(max_versions_per_page=3))
    for word in ("apple", "river", "stone", "cloud", "forest"):
        ledger.capture_page("https://example.com/a", text=f"{word} " * 30)
    page = ledger.get_page("https://example.com/a")
    assert [v.version for v in ledger.list_page_versions(page.id)] == [3, 4, 5]
    assert ledger.list_events(action="page.capture")[-1].details["pruned_versions"] == 1
    ledger.close()


def test_page_text_is_capped_on_a_character_boundary(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ledger = open_ledger(clock=clock, limits=Limits(max_text_bytes=11))
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
