"""The indexer: document ids, chunking, the watermark, the text and vector phases,
resuming after failures and kills, rebuilds, locking and background runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from backtrail import _core
from backtrail.indexer import (
    MAX_ENTITY_ID,
    MAX_PASSAGES,
    TYPE_BOOKMARK,
    TYPE_FACT,
    TYPE_HIGHLIGHT,
    TYPE_NOTE,
    TYPE_PAGE,
    TYPE_PASSAGE,
    DocRef,
    HostPresence,
    Indexer,
    VectorModel,
    Watermark,
    chunk_text,
    doc_id,
    entity_doc_id,
    page_parent,
    parse_doc_id,
)
from backtrail.indexer.reads import LEGACY_MODEL
from backtrail.store import Ledger
from helpers import (
    LOREM,
    CountingEmbedder,
    as_model,
    cached_embedder,
    cached_model,
    make_config,
    wait_for,
)

T0 = 1_700_000_000


def page_text(paragraphs: int, word: str = "paragraph") -> str:
    return "\n\n".join(f"{word} {n}: {LOREM}" for n in range(paragraphs))


def hits(indexer: Indexer, query: str, **kwargs: object) -> list[int]:
    return [hit["id"] for hit in indexer.index.search(query, 50, mode="bm25", **kwargs)]


def docs_of_page(indexer: Indexer, page_id: int) -> list[int]:
    """Ids of the passages of a page present in the index."""
    found = []
    for n in range(MAX_PASSAGES):
        if indexer.index.get(doc_id(TYPE_PASSAGE, page_id, n)) is None:
            return found
        found.append(n)
    return found


@pytest.fixture
def real_embedder() -> _core.Embedder:
    return cached_embedder()


@pytest.fixture
def indexer(data_home: Path, ledger: Ledger) -> Indexer:
    opened = Indexer(make_config(data_home))
    yield opened
    opened.close()


# ----------------------------------------------------------------------------- ids


def test_doc_ids_encode_type_entity_and_passage_and_decode_back() -> None:
    for type_code in (TYPE_PAGE, TYPE_PASSAGE, TYPE_HIGHLIGHT, TYPE_NOTE, TYPE_BOOKMARK, TYPE_FACT):
        for entity_id in (1, 12345, MAX_ENTITY_ID):
            for passage in (0, 1, MAX_PASSAGES - 1):
                value = doc_id(type_code, entity_id, passage)
                assert 1 <= value <= _core.MAX_ID
                assert parse_doc_id(value) == DocRef(type_code, entity_id, passage)
    assert doc_id(TYPE_PASSAGE, 7, 3) == (2 << 56) | (7 << 16) | 3
    assert parse_doc_id(doc_id(TYPE_PASSAGE, 7, 3)).entity_type == "page"
    assert parse_doc_id(doc_id(TYPE_FACT, 7)).entity_type == "fact"


def test_doc_ids_of_different_kinds_and_entities_never_collide() -> None:
    ids = {
        doc_id(type_code, entity_id, passage)
        for type_code in (TYPE_PAGE, TYPE_PASSAGE, TYPE_HIGHLIGHT, TYPE_NOTE, TYPE_FACT)
        for entity_id in (1, 2, 65536, MAX_ENTITY_ID)
        for passage in (0, 1, 65535)
    }
    assert len(ids) == 5 * 4 * 3
    assert page_parent(9) == entity_doc_id("page", 9) == doc_id(TYPE_PAGE, 9)


@pytest.mark.parametrize(
    "args",
    [(9, 1, 0), (TYPE_NOTE, 0, 0), (TYPE_NOTE, MAX_ENTITY_ID + 1, 0), (TYPE_PASSAGE, 1, -1),
     (TYPE_PASSAGE, 1, MAX_PASSAGES)],
)  # fmt: skip
def test_doc_id_refuses_values_outside_its_fields(args: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        doc_id(*args)


def test_ids_the_indexer_did_not_make_do_not_parse() -> None:
    for value in (1, 5, (9 << 56) | (1 << 16), TYPE_NOTE << 56):
        with pytest.raises(ValueError):
            parse_doc_id(value)


# ------------------------------------------------------------------------ chunking


def test_chunks_stay_within_size_and_break_between_paragraphs() -> None:
    paragraphs = [f"Paragraph {n}" + " word" * 30 for n in range(20)]  # ~170 chars each
    passages = chunk_text("\n\n".join(paragraphs), size=1000, overlap=0)
    assert all(len(p) <= 1000 for p in passages)
    assert len(passages) == 4  # five 170-char paragraphs per passage
    for passage in passages:  # no paragraph is split
        assert all(line in paragraphs for line in (s.strip() for s in passage.split("\n")))


def test_long_sentences_and_text_without_spaces_are_split() -> None:
    sentences = " ".join(f"Sentence {n} " + "lorem " * 40 + "ends here." for n in range(10))
    passages = chunk_text(sentences, size=500, overlap=50)
    assert all(len(p) <= 500 for p in passages)
    assert passages[0].startswith("Sentence 0") and passages[0].endswith("ends here.")
    unbroken = "数据库索引可以加快查询速度" * 200
    pieces = chunk_text(unbroken, size=300, overlap=0)
    assert all(len(p) <= 300 for p in pieces) and "".join(pieces) == unbroken


def test_chunks_overlap_and_together_hold_every_word() -> None:
    words = [f"w{n}" for n in range(2000)]
    text = " ".join(words[:1000]) + "\n" + " ".join(words[1000:])
    passages = chunk_text(text, size=400, overlap=60)
    assert all(len(p) <= 400 for p in passages)
    seen = {word for passage in passages for word in passage.split()}
    assert seen == set(words)
    for before, after in zip(passages, passages[1:], strict=False):
        head = after.split()[0]
        assert head in before.split()  # the next passage repeats the end of this one
        assert len(" ".join(after.split()[: after.split().index(head) + 1])) <= 60


def test_chunking_is_deterministic_and_blank_text_has_no_passages() -> None:
    text = page_text(30)
    assert chunk_text(text) == chunk_text(text)
    assert chunk_text("") == chunk_text(" \n\n \t") == []
    assert chunk_text("one short line") == ["one short line"]
    assert len(chunk_text(page_text(300), max_passages=7)) == 7
    with pytest.raises(ValueError):
        chunk_text("x", size=100, overlap=60)


# ---------------------------------------------------------------------- watermark


def test_watermark_round_trips_and_unreadable_ones_mean_rebuild() -> None:
    mark = Watermark(text=12, vectors=7, text_scan=None, vector_scan=("note", 40))
    assert Watermark.loads(mark.dumps()) == mark
    assert json.loads(mark.dumps())["text"] == 12
    for raw in (None, "", "garbage", "{}", '{"format": 2, "text": 1, "vectors": 1}',
                '{"format": 1, "text": -1, "vectors": 0}',
                '{"format": 1, "text": 1, "vectors": 0, "text_scan": ["tab", 1]}'):  # fmt: skip
        assert Watermark.loads(raw) is None
    assert Watermark.rebuild(5) == Watermark(5, 5, ("page", 0), ("page", 0))
    # An index written before models were named holds the derived packaged model's vectors.
    legacy = Watermark.loads('{"format": 1, "text": 3, "vectors": 2}')
    assert legacy == Watermark(3, 2, model=VectorModel(LEGACY_MODEL))
    assert LEGACY_MODEL == cached_model().identity or cached_model().fallback is not None
    named = Watermark(4, 4, model=VectorModel("custom-0123", True, 3, LEGACY_MODEL))
    assert Watermark.loads(named.dumps()) == named
    assert Watermark.rebuild(9, named.model).model == VectorModel(generation=3)


# ----------------------------------------------------------------------- text phase


def test_text_phase_indexes_every_kind_and_records_the_watermark(
    indexer: Indexer, ledger: Ledger
) -> None:
    indexer.catch_up()  # an empty ledger: the first watermark
    assert indexer.watermark() == Watermark(0, 0, None, ("page", 0))  # no embedder yet
    page = ledger.capture_page("https://docs.example.com/wal", text=page_text(12), title="WAL")
    ledger.record_visit("https://history.example.org/only-visited", title="Kayak rental prices")
    highlight = ledger.add_highlight("https://docs.example.com/wal", "checkpoint starvation")
    note = ledger.add_note("buy sourdough starter")
    ledger.upsert_bookmark("b1", "https://rust-lang.org/learn", title="Learn Rust", folder="Dev")
    fact = ledger.set_fact("user/editor", "helix")
    assert indexer.lag().text == 6

    lag = indexer.catch_up()
    assert lag.text == 0 and lag.text_seq == ledger.max_change_seq() == 6
    assert (indexer.watermark().text, indexer.watermark().text_scan) == (6, None)
    passages = docs_of_page(indexer, page.page.id)
    assert len(passages) > 2
    stored = indexer.index.get(doc_id(TYPE_PASSAGE, page.page.id, 0))
    assert stored is not None and stored["title"] == "WAL" and stored["kind"] == "passage"
    assert stored["parent"] == page_parent(page.page.id) and stored["domain"] == "docs.example.com"
    assert hits(indexer, "kayak") == [doc_id(TYPE_PAGE, 2)]
    assert hits(indexer, "starvation") == [doc_id(TYPE_HIGHLIGHT, highlight.id)]
    assert hits(indexer, "sourdough") == [doc_id(TYPE_NOTE, note.id)]
    assert hits(indexer, "learn rust") == [doc_id(TYPE_BOOKMARK, 1)]
    assert hits(indexer, "helix") == [doc_id(TYPE_FACT, fact.id)]
    # one hit per page, listing the best of the passages that matched
    (hit,) = indexer.index.search("checkpoints", 10, mode="bm25", kinds=["passage"])
    assert hit["parent"] == page_parent(page.page.id) and len(hit["passages"]) == 3
    assert {parse_doc_id(p["id"]).entity_id for p in hit["passages"]} == {page.page.id}


def test_a_page_whose_text_shrank_loses_its_surplus_passages(
    indexer: Indexer, ledger: Ledger
) -> None:
    url = "https://example.com/shrinking"
    page = ledger.capture_page(url, text=page_text(40, "zebra")).page
    indexer.catch_up()
    before = docs_of_page(indexer, page.id)
    assert len(before) >= 5
    ledger.capture_page(url, text="Now only one short paragraph about ocelots.")
    indexer.catch_up()
    assert docs_of_page(indexer, page.id) == [0]
    assert hits(indexer, "zebra") == []
    assert hits(indexer, "ocelots") == [doc_id(TYPE_PASSAGE, page.id, 0)]
    assert indexer.index.stats()["documents"] == 1


def test_deleted_entities_leave_the_index(indexer: Indexer, ledger: Ledger) -> None:
    highlight = ledger.add_highlight("https://a.example/x", "marmalade highlight")
    note = ledger.add_note("marmalade note")
    ledger.upsert_bookmark("b1", "https://a.example/marmalade", title="marmalade bookmark")
    ledger.set_fact("jam", "marmalade fact")
    ledger.capture_page("https://b.example/y", text="marmalade page")
    indexer.catch_up()
    assert len(hits(indexer, "marmalade")) == 5
    ledger.delete_highlight(highlight.id)
    ledger.delete_note(note.id)
    ledger.delete_bookmark("b1")
    ledger.delete_fact("jam")
    ledger.forget(url="https://b.example/y")
    indexer.catch_up()
    assert hits(indexer, "marmalade") == []
    assert indexer.index.stats()["documents"] == 0


def test_title_only_pages_are_found_by_title_and_url_words(
    indexer: Indexer, ledger: Ledger
) -> None:
    ledger.import_visits(
        [{"url": "https://github.com/tokio-rs/axum/issues", "visited_at": T0, "title": "Axum"}]
    )
    indexer.catch_up()
    assert hits(indexer, "axum") == [doc_id(TYPE_PAGE, 1)]
    assert hits(indexer, "tokio") == [doc_id(TYPE_PAGE, 1)]
    ledger.capture_page("https://github.com/tokio-rs/axum/issues", text="Routing with extractors")
    indexer.catch_up()
    assert hits(indexer, "tokio") == []  # the page now has text: passages replace it
    assert hits(indexer, "extractors") == [doc_id(TYPE_PASSAGE, 1, 0)]


def test_visits_update_ranking_fields_without_dropping_vectors(
    data_home: Path, ledger: Ledger, real_embedder: _core.Embedder
) -> None:
    counting = CountingEmbedder(real_embedder)
    with Indexer(make_config(data_home), model=lambda: as_model(counting)) as indexer:
        indexer.catch_up()
        page = ledger.capture_page("https://example.com/p", text=page_text(8)).page
        indexer.catch_up()
        embedded = len(counting.texts)
        passages = docs_of_page(indexer, page.id)
        assert embedded == len(passages) >= 2
        assert indexer.index.stats()["documents_with_vectors"] == len(passages)
        for n in range(3):
            ledger.record_visit("https://example.com/p", visited_at=T0 + 3600 * (n + 1))
        assert [c.aspect for c in ledger.changes_since(indexer.watermark().text)] == ["stats"] * 3
        indexer.catch_up()
        stored = indexer.index.get(doc_id(TYPE_PASSAGE, page.id, 1))
        assert stored is not None and stored["visits"] == 3 and stored["last_seen"] == T0 + 10800
        assert stored.get("vector") is not None
        assert indexer.index.stats()["documents_with_vectors"] == len(passages)
        assert len(counting.texts) == embedded  # nothing was embedded again


class RecordingIndex:
    """Delegates to the core index and records which staging calls were made."""

    def __init__(self, inner: _core.Index) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        if name in ("upsert", "touch", "delete_parents", "delete_ids"):
            self.calls.append(name)
        return getattr(self.inner, name)


def test_visits_to_a_captured_page_are_applied_by_touch_without_resending_text(
    indexer: Indexer, ledger: Ledger
) -> None:
    page = ledger.capture_page("https://example.com/t", text=page_text(6)).page
    indexer.catch_up()
    recording = RecordingIndex(indexer.index)
    indexer.index = recording  # type: ignore[assignment]
    ledger.record_visit("https://example.com/t", visited_at=T0 + 7200)
    indexer.catch_up()
    assert recording.calls == ["touch"]
    stored = recording.inner.get(doc_id(TYPE_PASSAGE, page.id, 1))
    assert stored is not None and (stored["visits"], stored["last_seen"]) == (1, T0 + 7200)


def test_vector_phase_embeds_in_batches_and_advances_its_watermark(
    data_home: Path, ledger: Ledger, real_embedder: _core.Embedder
) -> None:
    counting = CountingEmbedder(real_embedder)
    config = make_config(data_home, vector_batch_passages=4)
    with Indexer(config, model=lambda: as_model(counting)) as indexer:
        indexer.catch_up()
        for n in range(6):
            ledger.capture_page(f"https://example.com/{n}", text=page_text(9, f"topic{n}"))
        ledger.set_fact("user/theme", "dark mode")
        progress: list[tuple[int, int, str]] = []
        text_only = indexer.catch_up(vectors=False)
        documents = indexer.index.stats()["documents"]
        assert documents > 7  # pages of several passages, and the fact
        # Vector lag counts passages waiting, the indexer's own measure changes.
        assert (text_only.text, text_only.vectors, text_only.vector_changes) == (0, documents, 7)
        commits = indexer.commits
        lag = indexer.catch_up(progress=lambda *args: progress.append(args))
        assert lag.vectors_caught_up and lag.vectors == 0
        claimed = VectorModel(cached_model().identity, generation=1)
        assert indexer.watermark() == Watermark(7, 7, model=claimed)
        stats = indexer.index.stats()
        assert stats["documents_with_vectors"] == stats["documents"] == len(counting.texts)
        assert indexer.commits - commits >= len(counting.texts) // 4
        assert {phase for *_, phase in progress} == {"vectors"}
        # Shown before the first batch (and the model load), then after each batch.
        assert progress[0] == (0, documents, "vectors")
        assert progress[-1] == (documents, documents, "vectors")
        assert len(progress) >= 1 + documents // 4
        found = indexer.index.search(
            "appearance preference for screens", 3, mode="vector",
            query_vector=real_embedder.embed(["appearance preference for screens"])[0],
        )  # fmt: skip
        assert found[0]["id"] == doc_id(TYPE_FACT, 1)


def test_text_pass_resumes_from_its_watermark_after_a_failure(
    data_home: Path, ledger: Ledger
) -> None:
    for n in range(30):
        ledger.add_note(f"resumable note number {n}")
    config = make_config(data_home, text_batch_changes=10)
    with Indexer(config) as indexer:
        indexer.catch_up()  # fresh index: scans
        for n in range(30):
            ledger.add_note(f"second batch note {n}")

        def crash(done: int, total: int, phase: str) -> None:
            if done >= 10:
                raise KeyboardInterrupt("killed mid-way")

        with pytest.raises(KeyboardInterrupt):
            indexer.catch_up(progress=crash)
        assert indexer.watermark().text == 40  # the first batch was committed
    with Indexer(config) as indexer:
        assert indexer.lag().text == 20
        indexer.catch_up()
        assert indexer.watermark().text == 60
        assert indexer.index.stats()["documents"] == 60


VECTOR_CHILD = r"""
import sys
from backtrail.config import Config
from backtrail.indexer.embedding import load_model
from backtrail.indexer import Indexer

home = sys.argv[1]
config = Config.load(home, overrides={"vector_batch_passages": 8}, environ={})
model = load_model()
indexer = Indexer(config, model=lambda: model)
indexer.catch_up(progress=lambda done, total, phase: print(phase, done, total, flush=True))
print("finished", flush=True)
"""


def test_vector_phase_resumes_after_the_process_is_killed(
    data_home: Path, ledger: Ledger, real_embedder: _core.Embedder
) -> None:
    with Indexer(make_config(data_home)) as indexer:
        indexer.catch_up()
        for n in range(20):
            ledger.capture_page(f"https://example.com/{n}", text=page_text(5, f"subject{n}"))
        indexer.catch_up(vectors=False)
        total = indexer.index.stats()["documents"]
    child = subprocess.Popen(
        [sys.executable, "-c", VECTOR_CHILD, str(data_home)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        # Passages are counted from the start; 16 embedded means the first batch of 8
        # was committed.
        line = child.stdout.readline()
        assert line == f"vectors 0 {total}\n", child.communicate(timeout=60)[1]
        while int(line.split()[1]) < 16:
            line = child.stdout.readline()
            assert line.startswith("vectors "), child.communicate(timeout=60)[1]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    counting = CountingEmbedder(real_embedder)
    with Indexer(make_config(data_home), model=lambda: as_model(counting)) as indexer:
        done_before = indexer.index.stats()["documents_with_vectors"]
        assert 8 <= done_before < total
        lag = indexer.catch_up()
        assert lag.vectors_caught_up
        stats = indexer.index.stats()
        assert stats["documents_with_vectors"] == stats["documents"] == total
        assert len(counting.texts) == total - done_before  # nothing embedded twice


# ------------------------------------------------------------------ rebuilds


def test_a_fresh_index_scans_the_ledger_even_when_the_feed_was_pruned(
    data_home: Path, ledger: Ledger
) -> None:
    for n in range(120):
        ledger.capture_page(f"https://example.com/{n}", text=f"pruned feed page {n}")
    ledger.add_note("pruned feed note")
    ledger.set_fact("feed", "pruned feed fact")
    ledger.prune_changes(ledger.max_change_seq())
    with Indexer(make_config(data_home)) as indexer:
        assert indexer.watermark() is None and indexer.lag().rebuilding_text
        progress: list[tuple[int, int, str]] = []
        lag = indexer.catch_up(progress=lambda *args: progress.append(args))
        assert lag.text_caught_up
        assert indexer.index.stats()["documents"] == 122
        assert progress[-1] == (122, 122, "rebuild-text")
        # Pruning every change leaves max_change_seq at 0; new changes continue above.
        assert indexer.watermark() == Watermark(0, 0, None, ("page", 0))
        ledger.add_note("pruned feed follow-up")
        indexer.catch_up()
        assert len(hits(indexer, "pruned")) == 50 and len(hits(indexer, "follow")) == 1


def test_reindex_rebuilds_everything_from_the_ledger(indexer: Indexer, ledger: Ledger) -> None:
    for n in range(5):
        ledger.capture_page(f"https://example.com/{n}", text=page_text(3, f"alpha{n}"))
    indexer.catch_up()
    before = indexer.index.stats()["documents"]
    indexer.index.delete_all()  # damage: the index lost everything
    indexer.index.commit(None)
    assert hits(indexer, "alpha3") == []
    lag = indexer.reindex()
    assert lag.text_caught_up and not lag.rebuilding_text
    assert indexer.index.stats()["documents"] == before
    assert len(hits(indexer, "alpha3")) == 1


def test_a_damaged_index_is_rebuilt_from_the_ledger(
    data_home: Path, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    ledger.add_note("survives index damage")
    with Indexer(make_config(data_home)) as indexer:
        indexer.catch_up()
    (data_home / "index" / "meta.json").write_text("{ this is not tantivy")
    with Indexer(make_config(data_home)) as indexer:
        assert "damaged" in caplog.text and indexer.watermark() is None
        indexer.catch_up()
        assert len(hits(indexer, "damage")) == 1


# ---------------------------------------------------------------- concurrency


def test_a_second_indexer_skips_quietly_while_another_holds_the_lock(
    data_home: Path, ledger: Ledger
) -> None:
    config = make_config(data_home)
    with Indexer(config) as first, Indexer(config) as second:
        first.catch_up()
        ledger.add_note("waiting note")
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with first._lock.hold(5) as held:
                assert held
                holding.set()
                release.wait(30)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            holding.wait(10)
            assert second.run_text(wait=0.0) is False
            assert second.run_text(wait=0.05) is False
            assert second.lag().text == 1
            ledger.add_note("writers never wait for the indexer")  # returns at once
        finally:
            release.set()
            thread.join()
        assert second.run_text(wait=0.0) is True
        assert second.lag().text == 0


def test_background_indexing_debounces_a_burst_of_writes(data_home: Path) -> None:
    from backtrail.service import Memory

    config = make_config(
        data_home, background_indexing=True, indexer_debounce=0.5, indexer_max_delay=10.0
    )
    with Memory(config) as memory:
        wait_for(lambda: memory.indexer.watermark() is not None, what="the first pass")
        commits = memory.indexer.commits
        for n in range(40):
            memory.add_note(f"burst note {n}")
        wait_for(lambda: memory.index_lag().text_caught_up, what="the burst to be indexed")
        wait_for(lambda: memory.indexer.commits > commits, what="the commit to be counted")
        assert memory.indexer.commits - commits <= 3
        assert len(memory.search("burst", limit=50).results) == 40


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_background_indexing_runs_at_lower_cpu_priority_than_its_process(
    data_home: Path,
) -> None:
    from backtrail.service import Memory

    def indexer_priority(memory: Memory, note: str) -> int:
        memory.add_note(note)
        wait_for(lambda: memory.index_lag().text_caught_up, what="the note to be indexed")
        (thread,) = [t for t in threading.enumerate() if t.name == "backtrail-indexer"]
        assert thread.native_id is not None
        return os.getpriority(os.PRIO_PROCESS, thread.native_id)

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    config = make_config(data_home, background_indexing=True, indexer_debounce=0.0)
    with Memory(config) as memory:
        assert indexer_priority(memory, "wake the indexer") == min(19, base + 10)
        # the process (and this thread) keep their priority
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
    config = make_config(data_home, background_indexing=True, indexer_nice=0)
    with Memory(config) as memory:
        assert indexer_priority(memory, "and again, at the same priority") == base


def start_host_stand_in(home: Path) -> subprocess.Popen[str]:
    """Another OS process announcing itself as the native host, as the host does."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from backtrail.indexer import HostPresence\n"
        "HostPresence(Path(sys.argv[1])).announce()\n"
        "print('announced', flush=True)\n"
        "time.sleep(600)\n"
    )
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(home / "host.lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "announced"
    return proc


@pytest.mark.skipif(sys.platform == "win32", reason="presence is an flock")
def test_a_running_host_is_seen_by_other_processes_until_it_dies(data_home: Path) -> None:
    probe = HostPresence(data_home / "host.lock")
    data_home.mkdir(parents=True, exist_ok=True)
    assert not probe.present()
    host = start_host_stand_in(data_home)
    second = start_host_stand_in(data_home)  # a second browser profile's host
    try:
        assert probe.present() and probe.present()  # probing does not take it away
        host.kill()
        host.wait()
        assert probe.present()  # the other host still runs
        second.kill()
        second.wait()
        assert not probe.present()  # SIGKILL released it: the kernel drops the lock
    finally:
        for proc in (host, second):
            proc.kill()
            proc.wait()
    here = HostPresence(data_home / "host.lock")
    here.announce()
    assert here.announced and here.present() and probe.present()
    here.close()
    assert not probe.present()


@pytest.mark.skipif(sys.platform == "win32", reason="presence is an flock")
def test_with_a_host_running_others_embed_only_up_to_their_own_writes(
    data_home: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backtrail.service import Memory
    from backtrail.service import base as memory_module

    counting = CountingEmbedder(cached_embedder())
    monkeypatch.setattr(memory_module, "load_model", lambda *args, **kwargs: as_model(counting))
    config = make_config(
        data_home, embeddings=True, background_indexing=True, indexer_debounce=0.0
    )
    ledger.capture_page("https://example.com/before", text=page_text(2, "earlier"))
    with Indexer(make_config(data_home), model=lambda: as_model(counting)) as first:
        first.catch_up()  # a fresh index's first rebuild scan is a host's job too
    host = start_host_stand_in(data_home)
    try:
        with Memory(config, client="mcp") as memory:
            memory.add_note("my own note about tea")  # this process's write
            own = ledger.max_change_seq()
            wait_for(lambda: memory.index_lag().vector_seq >= own, what="own vectors")
            ledger.capture_page("https://example.com/after", text=page_text(2, "later"))
            memory.indexer.schedule()
            time.sleep(1.5)  # a pass that did the host's work would be done by now
            memory.indexer.stop()
            # the host's share (the page captured after our note) is left to the host:
            # neither embedded nor even made searchable here
            lag = memory.index_lag()
            assert (lag.text_seq, lag.vector_seq) == (own, own)
            assert not any("later" in text for text in counting.texts)
            assert any("tea" in text for text in counting.texts)
        host.kill()
        host.wait()
        with Memory(config, client="mcp") as memory:  # no host: the backlog is ours
            wait_for(lambda: memory.index_lag().vectors_caught_up, what="all vectors")
            assert any("later" in text for text in counting.texts)
    finally:
        host.kill()
        host.wait()
    config = make_config(data_home, embeddings=True, defer_vectors_to_host=False)
    assert config.defer_vectors_to_host is False


def test_lag_counts_changes_not_yet_searchable_and_not_yet_embedded(
    indexer: Indexer, ledger: Ledger
) -> None:
    indexer.catch_up()
    for n in range(3):
        ledger.add_note(f"lagging note {n}")
    lag = indexer.lag()
    assert (lag.ledger_seq, lag.text_seq, lag.text, lag.vectors) == (3, 0, 3, 0)
    indexer.catch_up()  # no embedder: text only
    lag = indexer.lag()
    assert (lag.text_seq, lag.vector_seq, lag.text, lag.vectors) == (3, 0, 0, 3)
    assert lag.text_caught_up and not lag.vectors_caught_up
