"""The service layer: capture policy, search (modes, cursors, budgets, labels,
ledger verification), reading, items, tabs, facts, forget and stats."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from backtrail import _core
from backtrail.errors import (
    Excluded,
    FactNotFound,
    InvalidInput,
    InvalidUrl,
    KeyExists,
    Paused,
    SearchUnavailable,
    VersionConflict,
)
from backtrail.service import Memory, SearchPage, VisitInfo
from backtrail.service.search import chance_floor
from backtrail.store import Ledger, TabInput
from helpers import LOREM, cached_embedder, make_config, share_model

if TYPE_CHECKING:
    from conftest import FakeClock

pytestmark = pytest.mark.backends("sqlite", "postgresql")  # the memory fixture's ledger
T0 = 1_700_000_000
DAY = 86_400
ARTICLE = f"""<html lang="en"><head><title>Write-ahead logging explained</title>
<script>var tracking = "never indexed";</script></head><body>
<nav>Home | About | Login</nav>
<article><h1>Write-ahead logging</h1><p>{LOREM}</p><p>{LOREM}</p></article>
<footer>Copyright nobody</footer></body></html>"""


@pytest.fixture
def memory(data_home: Path, clock: FakeClock, ledger_target: Path | str) -> Iterator[Memory]:
    backend = {"ledger_url": ledger_target} if isinstance(ledger_target, str) else {}
    with Memory(make_config(data_home, **backend), client="test", clock=clock) as opened:
        yield opened


@pytest.fixture
def semantic(
    data_home: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Memory]:
    """A memory with the embedding model (the session's, shared)."""
    share_model(monkeypatch)
    with Memory(make_config(data_home, embeddings=True), client="test", clock=clock) as opened:
        yield opened


def urls_of(page: SearchPage) -> list[str | None]:
    return [result.url for result in page.results]


# --------------------------------------------------------------------- capture


def test_capturing_html_stores_the_main_text_and_title(memory: Memory) -> None:
    receipt = memory.capture_page("https://blog.example.com/wal?utm_source=x", html=ARTICLE)
    assert receipt.outcome == "queued" and receipt.canonical_url == "https://blog.example.com/wal"
    memory.catch_up(vectors=False)  # the indexing pass extracts queued captures
    page = memory.get_page("https://blog.example.com/wal")
    assert page.title == "Write-ahead logging explained"
    assert "Checkpoints copy the log" in page.text
    assert "tracking" not in page.text and "Copyright" not in page.text
    assert page.language == "en" and page.origin == "web"


def test_html_captures_are_acknowledged_before_extraction_and_searchable_after_it(
    memory: Memory,
) -> None:
    receipt = memory.capture_page("https://blog.example.com/wal", html=ARTICLE, visit={"tab_id": 1})
    assert (receipt.outcome, receipt.version, receipt.visit_id is not None) == ("queued", 0, True)
    ledger = Ledger(memory.config.ledger_target)
    try:
        assert ledger.count_pending_captures() == 1
        assert memory.search("checkpoints copy the log").results[0].id == receipt.page_id
        assert ledger.count_pending_captures() == 0
        assert ledger.get_page("https://blog.example.com/wal").current_version == 1
    finally:
        ledger.close()


def test_a_steady_stream_of_html_captures_does_not_hold_back_the_text_commit(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import backtrail.indexer.passes as indexer_module

    real_extract = indexer_module.extract_main_text
    arrived: list[str] = []

    def extract_while_more_arrive(html: str, url: str) -> Any:
        # every extraction sees another capture arrive, as in a restored session
        if len(arrived) < 50:
            arrived.append(f"https://stream.example/{len(arrived)}")
            memory.capture_page(arrived[-1], html=ARTICLE)
        return real_extract(html, url)

    for n in range(3):
        memory.capture_page(f"https://first.example/{n}", html=ARTICLE)
    monkeypatch.setattr(indexer_module, "extract_main_text", extract_while_more_arrive)
    memory.catch_up(vectors=False)
    # the three queued at the start are searchable; those that arrived meanwhile wait
    found = {r.url for r in memory.search("checkpoints copy the log", limit=20).results}
    assert {f"https://first.example/{n}" for n in range(3)} <= found
    assert len(arrived) == 3
    ledger = Ledger(memory.config.ledger_target)
    try:
        assert ledger.count_pending_captures() == 3
    finally:
        ledger.close()
    monkeypatch.setattr(indexer_module, "extract_main_text", real_extract)
    memory.catch_up(vectors=False)
    found = {r.url for r in memory.search("checkpoints copy the log", limit=20).results}
    assert set(arrived) <= found


def test_forgetting_a_page_drops_its_queued_raw_html(memory: Memory) -> None:
    memory.capture_page("https://gone.example/p", html=ARTICLE)
    memory.forget(domain="gone.example")
    ledger = Ledger(memory.config.ledger_target)
    try:
        assert ledger.count_pending_captures() == 0
    finally:
        ledger.close()
    data = b"".join(p.read_bytes() for p in memory.config.data_dir.rglob("*") if p.is_file())
    assert b"Checkpoints copy the log" not in data


def test_extraction_before_acknowledgement_when_deferral_is_off(data_home: Path) -> None:
    with Memory.open(data_home, defer_extraction=False, embeddings=False) as memory:
        receipt = memory.capture_page("https://blog.example.com/wal", html=ARTICLE)
        assert receipt.outcome == "created" and receipt.title == "Write-ahead logging explained"


def test_a_capture_with_a_visit_is_one_transaction_with_an_event_each(
    memory: Memory, clock: FakeClock
) -> None:
    receipt = memory.capture_page(
        "https://example.com/a", text="hello", title="A", visit={"tab_id": 4, "transition": "link"}
    )
    assert receipt.visit_id is not None
    ledger = Ledger(memory.config.ledger_target)
    try:
        (visit,) = ledger.list_visits()
        assert (visit.tab_id, visit.visited_at) == (4, clock.now)
        assert [e.action for e in ledger.list_events()] == ["visit.record", "page.capture"]
        with pytest.raises(InvalidInput):  # a bad visit undoes the capture too
            memory.capture_page("https://example.com/b", text="x", visit=VisitInfo(dwell_ms=-1))
        assert ledger.stats().counts["pages"] == 1
    finally:
        ledger.close()


def test_text_over_the_stored_limit_is_cut_and_marked(data_home: Path) -> None:
    config = make_config(data_home, max_text_bytes=1000, max_capture_bytes=5000)
    with Memory(config) as memory:
        receipt = memory.capture_page("https://example.com/long", text="é" * 2000)
        assert receipt.truncated and receipt.text_chars == 500
        with pytest.raises(InvalidInput, match="5000 bytes"):
            memory.capture_page("https://example.com/huge", text="x" * 5001)


def test_paused_capture_stores_nothing_until_resumed_or_expired(
    memory: Memory, clock: FakeClock
) -> None:
    settings = memory.pause_capture()
    assert settings.paused and settings.paused_until is None
    with pytest.raises(Paused, match="paused"):
        memory.capture_page("https://example.com/a", text="secret")
    with pytest.raises(Paused):
        memory.record_visit("https://example.com/a")
    assert memory.stats().ledger.counts["pages"] == 0
    memory.resume_capture()
    memory.capture_page("https://example.com/a", text="fine")
    memory.pause_capture(until=clock.now + 60)
    with pytest.raises(Paused) as raised:
        memory.capture_page("https://example.com/b", text="later")
    assert raised.value.until == clock.now + 60
    clock.advance(61)
    assert not memory.capture_settings().paused
    memory.capture_page("https://example.com/b", text="later")
    with pytest.raises(InvalidInput, match="future"):
        memory.pause_capture(until=clock.now - 1)


def test_excluded_urls_are_refused_and_the_rules_can_be_changed(memory: Memory) -> None:
    with pytest.raises(Excluded) as raised:
        memory.capture_page("https://mail.google.com/mail/u/0?token=abc", text="inbox")
    assert raised.value.rule == "mail.google.com" and "abc" not in raised.value.message
    with pytest.raises(Excluded):
        memory.record_visit("https://shop.example.com/checkout/shipping")
    assert memory.capture_settings().default_exclusions
    memory.add_exclusion("*.internal.example.com")
    with pytest.raises(Excluded):
        memory.capture_page("https://wiki.internal.example.com/x", text="private")
    memory.remove_exclusion("mail.google.com")
    memory.capture_page("https://mail.google.com/about", text="public page")
    assert memory.exclusion_for("https://wiki.internal.example.com/y") == "*.internal.example.com"
    with pytest.raises(InvalidUrl):
        memory.add_exclusion("has space")
    memory.set_exclusions(None)
    assert memory.capture_settings().exclusions[0] == "chromewebstore.google.com"
    assert memory.stats().ledger.counts["pages"] == 1


def test_importing_history_skips_excluded_urls(memory: Memory) -> None:
    result = memory.import_visits(
        [{"url": "https://example.com/1", "visited_at": T0, "title": "One"},
         {"url": "https://accounts.google.com/x", "visited_at": T0},
         {"url": "https://example.com/2", "visited_at": T0 + 1}]
    )  # fmt: skip
    assert (result.added, result.skipped) == (2, 1)
    assert [p.title for p in memory.search("one").results] == ["One"]
    with pytest.raises(InvalidInput, match=r"visits\[2\]\.visited_at"):  # the caller's index
        memory.import_visits(
            [{"url": "https://accounts.google.com/y", "visited_at": T0},
             {"url": "https://example.com/3", "visited_at": T0},
             {"url": "https://example.com/4", "visited_at": -1}]
        )  # fmt: skip
    with pytest.raises(InvalidUrl, match=r"visits\[1\]\.url"):
        memory.import_visits([{"url": "https://login.example.com", "visited_at": T0},
                              {"url": "ftp://x", "visited_at": T0}])  # fmt: skip
    assert memory.stats().ledger.counts["visits"] == 2


# ---------------------------------------------------------------------- search


def test_search_is_hybrid_when_the_model_loads(semantic: Memory) -> None:
    semantic.capture_page("https://example.com/theme", text="The editor uses a dark colour scheme.")
    semantic.capture_page("https://example.com/db", text="PostgreSQL stores tables in heap files.")
    semantic.catch_up()
    page = semantic.search("night mode for the editor")
    assert page.mode == "hybrid" and semantic.model_status() == "ready"
    assert page.results[0].url == "https://example.com/theme"
    assert page.results[0].explanation["vector_similarity"] is not None
    assert semantic.search("postgresql", mode="bm25").mode == "bm25"
    assert semantic.stats().index["documents_with_vectors"] == 2


def test_a_topic_nowhere_in_memory_finds_nothing_rather_than_unrelated_pages(
    semantic: Memory,
) -> None:
    semantic.capture_page("https://example.com/wal", text=LOREM)
    semantic.capture_page("https://example.com/ids", text="Orders are keyed by qzvxorder42 ids.")
    semantic.capture_page("https://example.com/tea", text="Green tea is brewed at eighty degrees.")
    semantic.catch_up()
    nothing = semantic.search("how long to proof sourdough in a cold fridge overnight")
    assert nothing.mode == "hybrid" and nothing.no_match
    assert nothing.results == [] and nothing.next_cursor is None
    assert semantic.find_forgotten("the hiking trails of Patagonia in March").no_match
    # Close in meaning, or holding the query's words: found as before.
    assert urls_of(semantic.search("keeping a database safe when the machine crashes"))[0] == (
        "https://example.com/wal"
    )
    exact = semantic.search("qzvxorder42")
    assert not exact.no_match and urls_of(exact)[0] == "https://example.com/ids"
    assert not semantic.search("qzvxorder42", mode="bm25").no_match


def test_the_nothing_matches_floor_grows_with_the_memory() -> None:
    """Chance brings an unrelated query closer to some passage the more passages there are:
    the floor is the setting at 10,000 passages, higher in a larger memory, lower in a
    smaller one, but never so low that unrelated short texts pass."""
    assert chance_floor(0.385, 10_000) == pytest.approx(0.385)
    assert chance_floor(0.385, 175_113) == pytest.approx(0.441, abs=5e-4)
    assert chance_floor(0.385, 19_263) == pytest.approx(0.398, abs=5e-4)
    floors = [chance_floor(0.385, n) for n in (200, 2_000, 20_000, 200_000, 2_000_000)]
    assert floors == sorted(set(floors))
    assert chance_floor(0.385, 3) == chance_floor(0.385, 0) == 0.25
    assert chance_floor(0.1, 3) == 0.1


def test_the_nothing_matches_rule_can_be_turned_off(
    data_home: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    share_model(monkeypatch)
    config = make_config(data_home, embeddings=True, search_min_similarity=0)
    with Memory(config, client="t", clock=clock) as memory:
        memory.capture_page("https://example.com/wal", text=LOREM)
        memory.catch_up()
        page = memory.search("how long to proof sourdough in a cold fridge overnight")
        assert not page.no_match and urls_of(page) == ["https://example.com/wal"]


def test_a_repeated_query_is_embedded_once(
    data_home: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    share_model(monkeypatch)
    embedder = cached_embedder()  # the model every Memory of this test uses
    with Memory(make_config(data_home, embeddings=True), client="t", clock=clock) as memory:
        for n in range(12):
            memory.capture_page(f"https://example.com/{n}", text=f"Night mode theme {n}.")
        memory.catch_up()
        question = f"dark colour scheme {uuid.uuid4().hex}"  # new to the shared model
        embedded, reused = embedder.query_counts
        first = memory.search(question, limit=5)
        assert first.next_cursor is not None
        second = memory.search(question, limit=5, cursor=first.next_cursor)
        memory.find_forgotten(question)
        # Embedded once; each later core search of it (a next page, deeper candidate
        # pools, find_forgotten) reuses that vector.
        once, reuses = embedder.query_counts
        assert once == embedded + 1 and reuses >= reused + 2
        other = memory.search(f"a different question {uuid.uuid4().hex}", limit=5)
        assert embedder.query_counts == (embedded + 2, reuses)
        assert {r.url for r in first.results}.isdisjoint(r.url for r in second.results)
        assert first.mode == other.mode == "hybrid"


def test_a_query_the_model_fails_to_embed_is_searched_with_bm25(
    data_home: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model that loads but then fails on a query cannot be made here, so the core's
    # ModelError is raised in its place, for searches that hand the core the model.
    share_model(monkeypatch)
    real = Memory._core_search

    def failing(self: Memory, request: Any, mode: str, embedder: Any, *rest: Any) -> Any:
        if embedder is not None:
            raise _core.ModelError("onnxruntime failed")
        return real(self, request, mode, embedder, *rest)

    monkeypatch.setattr(Memory, "_core_search", failing)
    with Memory(make_config(data_home, embeddings=True), client="t", clock=clock) as memory:
        memory.capture_page("https://example.com/k", text="Kestrels hover over motorways.")
        memory.catch_up()
        page = memory.search("kestrels")
        assert page.mode == "bm25" and urls_of(page) == ["https://example.com/k"]
        with pytest.raises(SearchUnavailable, match="onnxruntime failed"):
            memory.search("kestrels", mode="vector")


def test_search_falls_back_to_bm25_when_the_model_is_missing(
    data_home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "no-model"
    empty.mkdir()
    config = make_config(data_home, embeddings=True, model_dir=empty)
    with Memory(config) as memory:
        memory.capture_page("https://example.com/a", text="Kestrels hover over motorways.")
        memory.set_fact("bird", "kestrel")
        page = memory.search("kestrels")
        assert page.mode == "bm25" and urls_of(page) == ["https://example.com/a"]
        assert memory.search_facts("kestrel").results[0].title == "bird"
        assert memory.model_status().startswith("unavailable: ")
        assert "model.onnx" in memory.model_status()
        with pytest.raises(SearchUnavailable, match="vector search is unavailable"):
            memory.search("kestrels", mode="vector")
        assert memory.search("kestrels", mode="hybrid").mode == "bm25"
        lag = memory.catch_up()
        assert lag.text_caught_up and memory.stats().model.startswith("unavailable")


def test_search_with_embeddings_turned_off_is_bm25(memory: Memory) -> None:
    memory.capture_page("https://example.com/a", text="Kestrels hover over motorways.")
    assert memory.search("kestrels").mode == "bm25"
    assert memory.model_status() == "disabled"
    with pytest.raises(SearchUnavailable, match="disabled"):
        memory.search("kestrels", mode="vector")


def test_a_cursor_pages_through_every_result_once(memory: Memory) -> None:
    for n in range(25):
        memory.capture_page(f"https://example.com/{n}", text=f"Pagination test page {n}.")
    seen: list[str | None] = []
    cursor = None
    pages = 0
    while True:
        page = memory.search("pagination", limit=10, cursor=cursor)
        seen += urls_of(page)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3 and len(seen) == 25 and len(set(seen)) == 25
    first = memory.search("pagination", limit=10)
    assert first.next_cursor is not None
    again = memory.search("pagination", limit=5, cursor=first.next_cursor)
    assert urls_of(again) == seen[10:15]


def test_the_ranking_does_not_depend_on_the_page_size(semantic: Memory) -> None:
    # More pages than the first candidate pools hold, each matching by words and by
    # meaning to a different degree, so the later pages come from the deeper pools.
    birds = ["gulls", "terns", "puffins", "gannets", "petrels", "cormorants", "skuas"]
    places = ["cliffs", "harbour", "estuary", "dunes", "islands", "headland"]
    for n in range(150):
        bird, place = birds[n % len(birds)], places[n // len(birds) % len(places)]
        semantic.capture_page(
            f"https://birds.example/{n}",
            text=f"Survey {n}: {bird} nesting on the {place}, counted at dawn by volunteers. "
            + " ".join(birds[: n % 5]) + f" Note {n * 7919 % 1000}.",
        )  # fmt: skip
    semantic.catch_up()
    orders = []
    for limit in (5, 10, 25):
        seen: list[str | None] = []
        cursor = None
        while True:
            page = semantic.search("seabirds nesting on cliffs", limit=limit, cursor=cursor)
            assert page.mode == "hybrid"
            seen += urls_of(page)
            cursor = page.next_cursor
            if cursor is None:
                break
        orders.append(seen)
    assert len(orders[0]) == 150 and len(set(orders[0])) == 150
    assert orders[0] == orders[1] == orders[2]
    first = semantic.search("seabirds nesting on cliffs", limit=50)
    assert urls_of(first) == orders[0][:50]


def test_a_page_stays_full_while_the_index_still_holds_pages_forgotten_elsewhere(
    memory: Memory,
) -> None:
    for n in range(30):
        text = f"Lighthouse keeper log {n}: lamp trimmed, weather noted."
        memory.capture_page(f"https://gaps.example/{n}", text=text)
    memory.catch_up()
    before: list[str | None] = []
    cursor = None
    while True:
        page = memory.search("lighthouse keeper", limit=10, cursor=cursor)
        before += urls_of(page)
        if (cursor := page.next_cursor) is None:
            break
    assert len(before) == 30
    # Another process forgets pages from the ledger; this one's index still holds them.
    gone = set(before[3:11]) | {before[15]}
    with Ledger(memory.config.ledger_target, client="other") as ledger:
        for url in gone:
            ledger.forget(url=url)
    first = memory.search("lighthouse keeper", limit=10)
    assert urls_of(first) == [u for u in before if u not in gone][:10]
    assert first.next_cursor is not None
    rest = memory.search("lighthouse keeper", limit=25, cursor=first.next_cursor)
    assert urls_of(first) + urls_of(rest) == [u for u in before if u not in gone]
    assert rest.next_cursor is None


def test_a_cursor_from_another_search_or_garbage_is_refused(memory: Memory) -> None:
    for n in range(5):
        memory.capture_page(f"https://example.com/{n}", text=f"Cursor test page {n}.")
    cursor = memory.search("cursor", limit=2).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidInput, match="different search"):
        memory.search("page", limit=2, cursor=cursor)
    with pytest.raises(InvalidInput, match="different search"):
        memory.search("cursor", limit=2, cursor=cursor, kinds=["note"])
    for bad in ("", "garbage!", cursor[:-3], "eyJ2IjogMn0", 12, "x" * 600):
        with pytest.raises(InvalidInput, match="cursor"):
            memory.search("cursor", cursor=bad)


def test_each_result_fits_its_character_budget(memory: Memory) -> None:
    text = "\n\n".join(f"Budget paragraph {n}: {LOREM}" for n in range(40))
    memory.capture_page("https://example.com/long", text=text, title="Budget")
    memory.add_note("budget " + LOREM)
    for budget in (40, 120, 333, 2000):
        page = memory.search("budget checkpoints log", max_chars_per_result=budget)
        assert len(page.results) == 2
        for result in page.results:
            used = len(result.snippet) + sum(len(p) for p in result.passages)
            assert used <= budget, (budget, result)
            assert result.snippet.count("**") % 2 == 0
    wide = memory.search("budget checkpoints log", max_chars_per_result=2000).results[0]
    assert wide.kind == "page" and len(wide.passages) == 2  # more passages when they fit
    with pytest.raises(InvalidInput, match="max_chars_per_result"):
        memory.search("budget", max_chars_per_result=10)


def test_a_search_makes_its_own_clients_writes_searchable_not_every_clients(
    memory: Memory,
) -> None:
    """Read-your-writes is per client: on a server, an assistant's search does not wait
    for the pages devices keep sending, while each writer sees what it wrote (no
    background indexing here: only a search's own pass indexes)."""
    with memory.acting_as("device-laptop"):
        memory.capture_page("https://example.org/zeppelin", text="Zeppelin hangar log. " * 20,
                            title="Hangar")  # fmt: skip
    with memory.acting_as("assistant-b"):
        assert urls_of(memory.search("zeppelin hangar")) == []
    with memory.acting_as("agent-a", caller="assistant-b"):  # written in another's name
        memory.add_note("Airship mooring mast notes")
    with memory.acting_as("assistant-b"):
        assert [r.kind for r in memory.search("mooring mast").results] == ["note"]
    with memory.acting_as("device-laptop"):
        assert urls_of(memory.search("zeppelin hangar")) == ["https://example.org/zeppelin"]


def test_results_never_include_what_the_ledger_no_longer_has(memory: Memory) -> None:
    note = memory.add_note("ephemeral armadillo note")
    memory.capture_page("https://example.com/armadillo", text="armadillo page")
    assert len(memory.search("armadillo").results) == 2
    other = Ledger(memory.config.ledger_target, client="other-process")
    try:  # another process deletes; nothing has indexed that yet
        other.delete_note(note.id)
        other.forget(url="https://example.com/armadillo")
    finally:
        other.close()
    assert memory.index_lag().text == 2
    assert memory.search("armadillo").results == []


def test_results_say_where_their_text_came_from(memory: Memory, clock: FakeClock) -> None:
    memory.capture_page("https://example.com/heron", text="Grey herons nest in colonies.")
    memory.add_highlight("https://example.com/heron", "herons nest in colonies")
    memory.add_note("saw a heron at the canal")
    memory.upsert_bookmark("b1", "https://birds.example.org/heron", title="Heron facts")
    memory.set_fact("favourite/bird", "heron")
    page = memory.search("heron", kinds=["page", "highlight", "note", "bookmark", "fact"])
    by_kind = {result.kind: result for result in page.results}
    assert set(by_kind) == {"page", "highlight", "note", "bookmark", "fact"}
    web = by_kind["page"]
    assert (web.origin, web.url, web.captured_at) == ("web", "https://example.com/heron", T0)
    assert "untrusted" in web.source and "https://example.com/heron" in web.source
    assert "2023-11-14" in web.source
    assert by_kind["highlight"].origin == by_kind["bookmark"].origin == "web"
    assert by_kind["note"].origin == "user"
    assert by_kind["fact"].origin == "assistant" and "test" in by_kind["fact"].source
    assert by_kind["fact"].title == "favourite/bird"
    assert [r.kind for r in memory.search("heron").results if r.kind == "fact"] == []


def test_kind_domain_and_time_filters_narrow_the_results(memory: Memory, clock: FakeClock) -> None:
    memory.capture_page("https://docs.python.org/3/asyncio", text="asyncio event loop")
    clock.advance(10 * DAY)
    memory.capture_page("https://python.org/news", text="asyncio release news")
    memory.capture_page("https://rust-lang.org/async", text="async rust and asyncio compared")
    memory.add_note("asyncio note")
    assert len(memory.search("asyncio").results) == 4
    python = {"https://python.org/news", "https://docs.python.org/3/asyncio"}
    assert set(urls_of(memory.search("asyncio", domains=["python.org"]))) == python
    assert len(memory.search("asyncio", domains="python.org").results) == 2
    recent = memory.search("asyncio", since=T0 + DAY, kinds=["page"])
    assert set(urls_of(recent)) == {"https://python.org/news", "https://rust-lang.org/async"}
    old = memory.search("asyncio", until=T0 + DAY)
    assert urls_of(old) == ["https://docs.python.org/3/asyncio"]
    assert [r.kind for r in memory.search("asyncio", kinds=["note"]).results] == ["note"]


def test_find_forgotten_weighs_visits_and_recency_more_than_search(
    memory: Memory, clock: FakeClock
) -> None:
    memory.capture_page("https://example.com/often", text="Notes about sourdough hydration.")
    memory.capture_page("https://example.com/once", text="Notes about sourdough hydration!")
    for n in range(20):
        memory.record_visit("https://example.com/often", visited_at=T0 + n)
    clock.advance(60 * DAY)
    found = memory.find_forgotten("that sourdough hydration thing")
    assert urls_of(found)[0] == "https://example.com/often"
    forgotten = found.results[0].explanation
    searched = memory.search("sourdough hydration").results[0].explanation
    assert forgotten["visit_boost"] > searched["visit_boost"] > 1.0
    assert forgotten["decay"] < searched["decay"] < 1.0


def test_find_forgotten_picks_the_copy_read_recently_and_often_among_near_duplicates(
    semantic: Memory, clock: FakeClock, data_home: Path
) -> None:
    text = ("Autovacuum reclaims the dead row versions that updates and deletes leave "
            "behind, so busy tables do not bloat; lower autovacuum_vacuum_scale_factor "
            "for tables with many updates, and watch pg_stat_user_tables for the last "
            "autovacuum run of each table.")  # fmt: skip
    mirror = text.replace("do not bloat", "stay small").replace("dead row", "old row")
    semantic.capture_page("https://www.postgresql.org/docs/vacuum", title="Routine vacuuming",
                          text=text)  # fmt: skip
    semantic.capture_page("https://docs.example.net/pg/vacuum", title="Routine vacuuming",
                          text=mirror)  # fmt: skip
    semantic.capture_page("https://example.com/fillfactor", title="Fill factor",
                          text="A lower fillfactor leaves room on each page for updated "
                          "rows, which makes heap-only tuple updates possible.")  # fmt: skip
    semantic.capture_page("https://example.com/bread", text="Sourdough needs a lively starter.")
    clock.advance(5 * DAY)
    for n in range(4):
        semantic.record_visit("https://docs.example.net/pg/vacuum", visited_at=int(clock()) - n)
    semantic.catch_up()
    query = "that page on dead rows making tables bloat"
    original, copy = "https://www.postgresql.org/docs/vacuum", "https://docs.example.net/pg/vacuum"
    found = semantic.find_forgotten(query)
    assert urls_of(found)[0] == copy
    assert found.results[0].explanation["duplicate_of"] is not None
    assert urls_of(found).index(original) > 0
    # Without sharing, the copy holding more of the words ranks above the one read often.
    config = make_config(data_home, embeddings=True, forgotten_duplicate_similarity=0.0)
    with Memory(config, client="test", clock=clock) as plain:
        unshared = plain.find_forgotten(query)
    assert urls_of(unshared).index(original) < urls_of(unshared).index(copy)
    assert all(r.explanation["duplicate_of"] is None for r in unshared.results)


def test_a_search_right_after_a_write_finds_it(memory: Memory) -> None:
    for n in range(3):
        memory.add_note(f"immediately searchable {n}")
        assert len(memory.search("immediately").results) == n + 1


def test_bad_search_arguments_are_refused(memory: Memory) -> None:
    cases: list[dict[str, Any]] = [
        {"query": ""}, {"query": 5}, {"query": "x" * 1001}, {"query": "\ud800"},
        {"query": "a", "limit": 0}, {"query": "a", "limit": 101}, {"query": "a", "limit": "3"},
        {"query": "a", "since": -1}, {"query": "a", "since": 10, "until": 5},
        {"query": "a", "kinds": ["tab"]}, {"query": "a", "kinds": "page"},
        {"query": "a", "kinds": []},
        {"query": "a", "domains": ["not a domain"]}, {"query": "a", "domains": 7},
        {"query": "a", "mode": "fuzzy"},
    ]  # fmt: skip
    for case in cases:
        with pytest.raises(InvalidInput):
            memory.search(**case)


# -------------------------------------------------------------------- reading


def test_get_page_reads_the_text_in_slices(memory: Memory) -> None:
    text = "".join(f"{n:04d}" for n in range(2500))  # 10,000 characters
    receipt = memory.capture_page("https://example.com/book", text=text, title="Book")
    first = memory.get_page("https://example.com/book", length=4000)
    assert (first.text, first.next_offset, first.total_chars) == (text[:4000], 4000, 10_000)
    last = memory.get_page(page_id=receipt.page_id, offset=8000, length=4000)
    assert last.text == text[8000:] and last.next_offset is None
    assert memory.get_page(page_id=receipt.page_id).text == text[:8000]  # default length
    assert memory.get_page(page_id=receipt.page_id, offset=20_000).text == ""
    with pytest.raises(InvalidInput):
        memory.get_page(page_id=receipt.page_id, length=0)


def test_timeline_lists_pages_by_last_visit(memory: Memory, clock: FakeClock) -> None:
    memory.capture_page("https://a.example.com/1", text="one")
    clock.advance(DAY)
    memory.capture_page("https://b.example.com/2", text="two")
    memory.record_visit("https://a.example.com/3", visited_at=T0 + 2 * DAY)
    assert [e.url for e in memory.timeline()] == [
        "https://a.example.com/3", "https://b.example.com/2", "https://a.example.com/1"
    ]  # fmt: skip
    assert [e.url for e in memory.timeline(domain="a.example.com", until=T0 + DAY)] == [
        "https://a.example.com/1"
    ]
    assert memory.timeline(since=T0 + DAY, limit=1)[0].visit_count == 1


# ------------------------------------------------------------ items and tabs


def test_highlights_notes_and_bookmarks_are_kept_listed_and_searched(memory: Memory) -> None:
    highlight = memory.add_highlight("https://example.com/h", "tessellated pavement", note="geo")
    memory.set_highlight_note(highlight.id, "geology")
    note = memory.add_note("tessellated floor tiles idea", url="https://example.com/h")
    memory.update_note(note.id, "tessellated floor tiles plan")
    memory.upsert_bookmark("7", "https://example.com/tiles", title="Tessellated tiles")
    assert [h.note for h in memory.list_highlights(url="https://example.com/h")] == ["geology"]
    assert [n.content for n in memory.list_notes()] == ["tessellated floor tiles plan"]
    assert [b.title for b in memory.list_bookmarks()] == ["Tessellated tiles"]
    assert [r.id for r in memory.search_highlights("tessellated").results] == [highlight.id]
    assert [r.id for r in memory.search_notes("plan").results] == [note.id]
    assert [r.title for r in memory.search_bookmarks("tiles").results] == ["Tessellated tiles"]
    memory.delete_highlight(highlight.id)
    memory.delete_note(note.id)
    memory.replace_bookmarks([])
    assert memory.search("tessellated").results == []


def test_tab_snapshot_events_and_the_active_tab(memory: Memory, clock: FakeClock) -> None:
    memory.snapshot_tabs(
        [TabInput(tab_id=1, window_id=1, url="https://a.example.com", active=True),
         {"tab_id": 2, "window_id": 2, "url": "https://b.example.com", "active": True,
          "last_accessed": T0 - 5}],
    )  # fmt: skip
    assert memory.active_tab() is not None
    clock.advance(10)
    memory.apply_tab_event("activated", 2)
    assert memory.active_tab().tab_id == 2
    memory.apply_tab_event("opened", 3, window_id=1, url="https://c.example.com")
    memory.apply_tab_event("closed", 2)
    assert [t.tab_id for t in memory.list_tabs()] == [1, 3]
    with pytest.raises(InvalidInput, match="colour"):
        memory.apply_tab_event("updated", 1, colour="red")


def test_facts_compare_and_swap_keep_history_and_are_searchable(memory: Memory) -> None:
    first = memory.set_fact("deploy/region", "eu-west-1", require_absent=True)
    with pytest.raises(KeyExists):
        memory.set_fact("deploy/region", "us-east-1", require_absent=True)
    second = memory.set_fact("deploy/region", "eu-central-1", expected_version=first.version)
    with pytest.raises(VersionConflict):
        memory.set_fact("deploy/region", "ap-south-1", expected_version=first.version)
    memory.set_fact("deploy/region", "eu-north-1", expected_value=second.value)
    assert memory.get_fact("deploy/region").version == 3
    assert [f.key for f in memory.list_facts("deploy/")] == ["deploy/region"]
    found = memory.search_facts("north")
    assert [r.title for r in found.results] == ["deploy/region"] and "north" in found.results[
        0
    ].snippet
    memory.delete_fact("deploy/region", expected_version=3)
    with pytest.raises(FactNotFound):
        memory.get_fact("deploy/region")
    assert [e.action for e in memory.fact_history("deploy/region")] == [
        "fact.set", "fact.cas_fail", "fact.set", "fact.cas_fail", "fact.set", "fact.delete",
    ]  # fmt: skip
    assert memory.search_facts("north").results == []


# -------------------------------------------------------------------- forget


def test_forget_by_domain_and_by_time_range_removes_results(
    memory: Memory, clock: FakeClock
) -> None:
    memory.capture_page("https://news.example.com/a", text="quokka story")
    memory.capture_page("https://example.com/b", text="quokka facts")
    memory.add_note("quokka note", url="https://news.example.com/a")
    clock.advance(DAY)
    memory.capture_page("https://other.org/c", text="quokka later")
    report = memory.forget(domain="example.com")
    assert report.counts["pages"] == 2 and report.counts["notes"] == 1 and report.index_purged
    assert urls_of(memory.search("quokka")) == ["https://other.org/c"]
    memory.forget(since=T0 + DAY - 1)
    assert memory.search("quokka").results == []
    assert memory.index_lag().text_caught_up
    with pytest.raises(InvalidInput):
        memory.forget()


def test_stats_report_the_ledger_the_index_the_lag_and_the_model(memory: Memory) -> None:
    memory.capture_page("https://example.com/a", text="stats page")
    memory.add_note("stats note")
    before = memory.stats()
    assert before.ledger.counts["pages"] == 1 and before.lag.text == 2
    assert before.model == "disabled"
    memory.catch_up()
    after = memory.stats()
    assert after.index["documents"] == 2 and after.lag.text_caught_up


def test_opening_a_memory_writes_nothing(data_home: Path) -> None:
    config = make_config(data_home, background_indexing=True)
    for _ in range(2):
        with Memory(config) as memory:
            memory.search("anything")
            memory.stats()
    ledger = Ledger.open(data_home)
    try:
        assert ledger.stats().counts["events"] == 0
    finally:
        ledger.close()
