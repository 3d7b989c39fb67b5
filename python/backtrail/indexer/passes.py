"""The indexing passes: :class:`Indexer` brings the core index up to the ledger's change feed.

The ledger is the truth; the index in ``<data_dir>/index`` is derived from it and can
always be rebuilt. Indexing runs in two phases, because embedding is the expensive step
and text must become searchable first:

1. **Text.** Read the changes after the text watermark, read the *current* state of each
   entity they name (several changes may name one entity; a deleted entity is simply
   absent), stage ``delete``/``upsert`` operations and commit them together with the new
   watermark. Pages are replaced whole (``delete_parents`` then upsert), so a page whose
   text shrank loses its surplus passages. A page that only had visits (all its changes
   are ``stats``) is not re-read: ``Index.touch`` rewrites its passages' visit count and
   last-seen time inside the core, keeping text and vectors, and the vector phase skips
   it. An upsert without a vector keeps the stored vector when title and body are
   unchanged, so re-captures of unchanged text cost no embedding either.
2. **Vectors.** For the changes between the vector watermark and the text watermark,
   embed the current passages that have no vector yet (or a vector of older text), in
   batches of ``vector_batch_passages``, and commit each batch. Progress is never lost:
   a batch that was committed keeps its vectors, and a re-run skips passages that
   already carry a vector for their current text.

**Threads.** Ledger writers never wait for indexing: the indexer reads the ledger
through its own SQLite connection (WAL readers never block writers), and
:meth:`Indexer.schedule` only sets an event. In long-running processes one daemon thread
per :class:`Indexer` runs passes after writes, debounced by ``indexer_debounce`` (but at
least every ``indexer_max_delay`` seconds under a steady stream), text first and then
vector batches, releasing the lock between batches so other processes' text and
``forget`` get their turn. Short-lived commands call :meth:`Indexer.catch_up` instead.

**Shutting down.** :meth:`Indexer.stop` asks the background thread to stop: a running
pass gives up at its next checkpoint (between extractions, staged chunks and embedding
pieces), drops what it staged since its last commit and releases the lock; everything
committed stays, and the next pass, in this process or another, resumes from the
watermark. Ledger writes were durable before they were acknowledged, so nothing
acknowledged is lost. :meth:`Indexer.close` never closes the files under a thread that
is still running: the pass lock then stays held until the process ends, so no other
process starts the same work meanwhile.

**Vector merges.** Each commit that brings vectors adds a vector segment, and a search
visits every segment's graph. Past two, the small ones are inserted into the next
largest graph (or, once they hold an eighth as many vectors, into the largest). The merge
runs on its own thread beside the indexing thread, at the same low priority, and builds
the graph without the index's write lock (``_core.Index.merge_vectors``): commits, and
so captures becoming searchable, never wait for a merge. While a host runs, only the
host merges.

Ids are in :mod:`~backtrail.indexer.ids`, documents in :mod:`~backtrail.indexer.documents`,
the watermark in :mod:`~backtrail.indexer.reads`, the locks in :mod:`~backtrail.indexer.locks`,
the vector phase in :mod:`~backtrail.indexer.vectors`.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import Any, cast

from backtrail import _core
from backtrail.config import Config
from backtrail.errors import BacktrailError, IndexBusy, IndexFailure
from backtrail.indexer.documents import (
    Document,
    item_document,
    page_documents,
)
from backtrail.indexer.extract import extract_main_text
from backtrail.indexer.follow import Follower
from backtrail.indexer.ids import (
    entity_doc_id,
    page_parent,
)
from backtrail.indexer.locks import HostPresence, PassLock, lower_thread_priority
from backtrail.indexer.reads import (
    FETCH_CHUNK,
    EntityReader,
    IndexLag,
    Progress,
    Watermark,
    entities_named,
    next_scan,
    report,
)
from backtrail.indexer.vectors import TextEmbedder, VectorPhase, VectorStart
from backtrail.store import Change, Ledger, Page

logger = logging.getLogger(__name__)


_EXTRACT_BATCH = 20
_SCAN_BATCH = {"page": 50}
_SCAN_BATCH_DEFAULT = 500
_YIELD_SECONDS = 0.05
_MAX_RETRY_SECONDS = 300.0


class _Stopping(Exception):
    """The background thread was asked to stop: the pass gives up at a checkpoint."""


class Indexer(VectorPhase):
    """Keeps ``<data_dir>/index`` up to date with the ledger (see the module doc).

    ``embedder`` is a callable returning the embedder, or ``None`` when embeddings are
    off or the model is unavailable (then only the text phase runs). The indexer opens
    its own ledger connection, so its reads never hold up the caller's writes.
    """

    def __init__(
        self, config: Config, *, embedder: Callable[[], TextEmbedder | None] | None = None
    ) -> None:
        self.config = config
        self._embedder = embedder if embedder is not None else (lambda: None)
        self._ledger = Ledger(
            config.ledger_target, client="backtrail-indexer",
            busy_timeout_ms=config.busy_timeout_ms, limits=config.limits(),
            synchronous=config.synchronous,
        )  # fmt: skip
        self._reader = EntityReader(self._ledger)
        self._lock = PassLock(config.indexer_lock_path)
        self._presence = HostPresence(config.host_lock_path)
        self._own_writes = 0
        try:
            self.index = self._open_index()
        except BaseException:
            self._ledger.close()
            self._lock.close()
            raise
        self.commits = 0
        """Index commits made by this indexer (for diagnostics and tests)."""
        self.embedded = 0
        """Passages this indexer embedded (for progress, diagnostics and tests)."""
        self.embedded_texts = 0  # also counts a batch's pieces before its commit
        self._on_piece: Callable[[], None] | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_guard = threading.Lock()
        self._compact_requested = False
        self._merging = threading.Event()
        self._merge_thread: threading.Thread | None = None
        self.follower: Follower | None = None
        """Following the PostgreSQL ledger's commits (see :meth:`follow`), or ``None``."""

    # ----------------------------------------------------------- lifecycle

    def _open_index(self) -> _core.Index:
        path = self.config.index_dir
        try:
            return _core.Index(str(path), lock_timeout=self.config.index_lock_timeout)
        except _core.IndexCorrupt as error:
            logger.error("the search index is damaged (%s); rebuilding it from the ledger", error)
        except _core.CoreError as error:
            raise IndexFailure(f"cannot open the search index at {path}: {error}") from error
        with self._lock.hold(self.config.index_lock_timeout) as held:
            if not held:
                raise IndexBusy(self.config.index_lock_timeout)
            shutil.rmtree(path, ignore_errors=True)
            try:
                return _core.Index(str(path), lock_timeout=self.config.index_lock_timeout)
            except _core.CoreError as error:
                raise IndexFailure(f"cannot create the search index at {path}: {error}") from error

    def close(self, timeout: float = 30.0) -> bool:
        """Stop the background threads (see :meth:`stop`) and release the files; False
        (files left open) when a thread is still inside a step after ``timeout``
        seconds, since closing the ledger or the lock under it would break its pass
        and let another process start the same work."""
        if not self.stop(timeout):
            logger.warning("an indexing thread is still running; its files stay open, and "
                           "its pass lock held, until it ends or the process does")  # fmt: skip
            return False
        self._ledger.close()
        self._lock.close()
        self._presence.close()
        return True

    def announce_host(self) -> None:
        """Mark this process as a native host: it embeds every backlog, and other
        processes defer to it while it runs (``defer_vectors_to_host``)."""
        self._presence.announce()

    def note_own_write(self, seq: int) -> None:
        """This process wrote change ``seq``: its background vectors reach at least that
        far even while a host runs."""
        self._own_writes = max(self._own_writes, seq)

    def _vector_limit(self) -> int | None:
        """How far the background thread embeds: ``None`` for the whole backlog, else
        only up to this process's own writes (a host runs and takes the rest)."""
        if (
            not self.config.defer_vectors_to_host
            or self._presence.announced
            or not self._presence.present()
        ):
            return None
        return self._own_writes

    def __enter__(self) -> Indexer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------ state

    def watermark(self) -> Watermark | None:
        """The watermark of the latest index commit (``None`` for a fresh index)."""
        return Watermark.loads(self.index.watermark())

    def lag(
        self,
        ledger_seq: int | None = None,
        *,
        passages: bool = True,
        index_stats: Mapping[str, Any] | None = None,
    ) -> IndexLag:
        """The lag behind ``ledger_seq`` (default: the ledger's newest change). Counting
        the passages waiting for vectors reads every document's vector stamp (the core's
        :meth:`~backtrail._core.Index.stats`; pass ``index_stats`` if just read); with
        ``passages=False`` (searches, the indexer's own loop) ``vectors`` is ``None``."""
        seq = self._ledger.max_change_seq() if ledger_seq is None else ledger_seq
        mark = self.watermark()
        captures = self._ledger.count_pending_captures()
        waiting = self.passages_without_vectors(index_stats) if passages else None
        if mark is None:
            return IndexLag(seq, 0, 0, seq, waiting, True, True, captures)
        return IndexLag(
            ledger_seq=seq,
            text_seq=mark.text,
            vector_seq=mark.vectors,
            text=max(0, seq - mark.text),
            vectors=waiting,
            rebuilding_text=mark.text_scan is not None,
            rebuilding_vectors=mark.vector_scan is not None,
            captures=captures,
            vector_changes=max(0, mark.text - mark.vectors),
        )

    def busy(self) -> bool:
        """True while a pass runs (here or in another process) or a host, which works
        through the backlog, serves this data directory."""
        return self._lock.busy() or self._presence.present()

    def passages_without_vectors(self, index_stats: Mapping[str, Any] | None = None) -> int:
        """Documents of the index that have no vector for their current text."""
        stats = self.index.stats() if index_stats is None else index_stats
        return max(0, int(stats["documents"] or 0) - int(stats["documents_with_vectors"] or 0))

    def _mark(self) -> Watermark:
        """The current watermark, or a rebuild from the current sequence for a fresh index."""
        mark = self.watermark()
        return mark if mark is not None else self._rebuild_mark()

    def _rebuild_mark(self) -> Watermark:
        """The watermark of an index to be built from the ledger: it scans every entity
        from the current change on, and has nothing forgotten left to compact."""
        forgets = self._ledger.last_event_id("forget")
        return replace(Watermark.rebuild(self._ledger.max_change_seq()), forgets=forgets)

    def _commit(self, mark: Watermark) -> Watermark:
        try:
            self.index.commit(mark.dumps())
        except _core.LockTimeout as error:
            self.index.rollback()
            raise IndexBusy(self.config.index_lock_timeout) from error
        except _core.CoreError as error:
            self.index.rollback()
            raise IndexFailure(f"index commit failed: {error}") from error
        self.commits += 1
        return mark

    @contextmanager
    def _pass(self, wait: float) -> Iterator[bool]:
        """The pass lock (see :meth:`PassLock.hold`); a pass stopped at a checkpoint
        drops what it staged before the lock is released."""
        with self._lock.hold(wait) as held:
            try:
                yield held
            except _Stopping:
                self.index.rollback()
                raise

    def _checkpoint(self) -> None:
        """A safe point of a background pass: give up here when asked to stop."""
        if self._stop.is_set() and threading.current_thread() is self._thread:
            raise _Stopping

    # ------------------------------------------------------- explicit runs

    def run_text(self, *, wait: float = 0.0, progress: Progress | None = None) -> bool:
        """One text pass up to the current change; False if another pass held the lock
        for longer than ``wait`` seconds."""
        with self._pass(wait) as held:
            if held:
                self._text_pass(progress)
            return held

    def catch_up(
        self, *, wait: float | None = None, vectors: bool = True, progress: Progress | None = None
    ) -> IndexLag:
        """Index everything written so far: text, then (with ``vectors`` and an
        embedder) vectors, batch by batch. Waits up to ``wait`` seconds (default
        ``index_lock_timeout``) for each pass; returns the remaining lag."""
        wait = self.config.index_lock_timeout if wait is None else wait
        if not self.run_text(wait=wait, progress=progress) or not vectors:
            return self.lag()
        mark = self._mark()
        waiting = self.passages_without_vectors() if progress is not None else 0
        start = VectorStart(mark, self.embedded, waiting, self.embedded_texts)
        if self.config.embeddings:  # before the model loads: the phase shows at once
            report(progress, 0, waiting, "vectors")
        embedder = self._embedder()
        if embedder is not None and not self.config.embeddings:
            report(progress, 0, waiting, "vectors")
        self._on_piece = None if progress is None else lambda: self._piece_report(progress, start)
        try:
            while embedder is not None and self._vector_turn(embedder, wait, progress, start):
                pass
        finally:
            self._on_piece = None
        self.merge_vectors()
        return self.lag()

    def _piece_report(self, progress: Progress, start: VectorStart) -> None:
        """After each embedding piece; a Ctrl-C seen here raises after the batch's commit."""
        done = self.embedded_texts - start.texts
        with suppress(Exception):
            report(progress, done, max(start.waiting, done), "vectors")

    def merge_vectors(self) -> None:
        """Merge small vector segments until few are left (see ``_core.Index.
        merge_vectors``: built without the write lock, so others keep committing)."""
        try:
            while not self._stop.is_set() and self.index.merge_vectors():
                pass
        except _core.CoreError as error:
            logger.warning("merging vector segments failed (searches still work): %s", error)

    def _merge_soon(self) -> None:
        """Start the merge thread when the index has more vector segments than searches
        should visit. Merging rebuilds a graph, so it runs beside
        the indexing thread, at its low priority, and never delays a commit."""
        if self._stop.is_set() or self._merging.is_set():
            return
        try:
            if not self.index.needs_vector_merge():
                return
        except _core.CoreError:
            return
        self._merging.set()

        def merge() -> None:
            lower_thread_priority(self.config.indexer_nice)
            try:
                self.merge_vectors()
            finally:
                self._merging.clear()

        self._merge_thread = threading.Thread(
            target=merge, name="backtrail-vector-merge", daemon=True
        )
        self._merge_thread.start()

    def reindex(self, *, progress: Progress | None = None, vectors: bool = True) -> IndexLag:
        """Rebuild the index from scratch: delete every document, then scan every entity
        of the ledger (resumable: a killed rebuild continues on the next pass)."""
        wait = self.config.index_lock_timeout
        with self._pass(wait) as held:
            if not held:
                raise IndexBusy(wait)
            self.index.rollback()
            self.index.delete_all()
            self._commit(self._rebuild_mark())
        return self.catch_up(progress=progress, vectors=vectors)

    def purge(self, *, wait: float | None = None) -> bool:
        """After a ``forget``: apply the deletions now and compact the index, so deleted
        words and vectors leave the index files. False (and retried in the background)
        if another pass kept the lock for longer than ``wait``."""
        wait = self.config.index_lock_timeout if wait is None else wait
        with self._pass(wait) as held:
            if held:
                if not self._text_pass(None):
                    self._compact()
                return True
        self._compact_requested = True
        self.schedule()
        return False

    def _compact(self) -> None:
        try:
            self.index.compact()
        except _core.CoreError as error:
            raise IndexFailure(f"index compaction failed: {error}") from error
        self._compact_requested = False

    # -------------------------------------------------------- text phase

    def _extract_pending(self, progress: Progress | None = None) -> int:
        """Turns queued HTML captures into page versions (main text by trafilatura), so
        their text joins this pass. Only those queued when it starts: under a steady
        stream of captures the pass still ends and commits, and the captures that came
        meanwhile (each of which scheduled another pass) wait for the next one. Returns
        how many were processed."""
        done = 0
        budget = self._ledger.count_pending_captures()
        report(progress, 0, budget, "extract")
        while done < budget and (
            batch := self._ledger.pending_captures(min(_EXTRACT_BATCH, budget - done))
        ):
            for raw in batch:
                self._checkpoint()
                try:
                    found = extract_main_text(raw.html, raw.url)
                    self._ledger.complete_capture(
                        raw, text=found.text, title=found.title, language=found.language,
                        outline=found.outline,
                    )
                    logger.debug("extracted queued capture %d", raw.id)
                except BacktrailError:
                    logger.warning("dropping a queued capture that cannot be stored", exc_info=True)
                    self._ledger.drop_capture(raw.id)
                done += 1
                report(progress, done, budget, "extract")
        return done

    def _text_pass(self, progress: Progress | None) -> bool:
        """Bring the text up to the ledger's newest change. When a ``forget`` happened
        since this index last compacted (through this process or any other, on any
        machine sharing the ledger), the index is then compacted so the forgotten words
        leave its files; returns whether it was."""
        forgotten = self._ledger.last_event_id("forget")  # its deletions precede it
        self._extract_pending(progress)
        mark = self._mark()
        if mark.text_scan is not None:
            mark = self._text_scan(mark, progress)
        start = mark.text
        end = self._ledger.max_change_seq()
        report(progress, 0, end - start, "text")
        while True:
            self._checkpoint()
            changes = self._ledger.changes_since(mark.text, limit=self.config.text_batch_changes)
            if not changes:
                break
            mark = self._apply_changes(mark, changes)
            report(progress, mark.text - start, end - start, "text")
        if forgotten <= mark.forgets:
            return False
        self._compact()
        self._commit(replace(mark, forgets=forgotten))
        return True

    def _apply_changes(self, mark: Watermark, changes: Sequence[Change]) -> Watermark:
        touched = self._touch_stats_only_pages(changes)
        entities = [e for e in entities_named(changes) if e[1] != "page" or e[2] not in touched]
        staged = 0
        for start in range(0, len(entities), FETCH_CHUNK):
            self._checkpoint()
            staged += self._stage_entities(entities[start : start + FETCH_CHUNK])
            following = start + FETCH_CHUNK
            if staged >= self.config.text_batch_bytes and following < len(entities):
                # Everything before the next entity's first change has been applied.
                mark = self._commit(replace(mark, text=entities[following][0] - 1))
                staged = 0
        return self._commit(replace(mark, text=changes[-1].seq))

    def _stats_only_pages(self, changes: Sequence[Change]) -> dict[int, Page]:
        """Pages with text whose changes in ``changes`` are all ``stats`` (visits): their
        passages need new numbers only, never new text or vectors. Title-only pages are
        left out, since a visit may change their title."""
        content = {c.entity_id for c in changes if c.entity_type == "page" and
                   (c.aspect != "stats" or c.op != "upsert")}  # fmt: skip
        stats_only = {c.entity_id for c in changes if c.entity_type == "page"} - content
        if not stats_only:
            return {}
        pages = self._reader.fetch("page", sorted(stats_only), with_text=False)
        return {i: p for i, p in pages.items() if p.current_version is not None}

    def _touch_stats_only_pages(self, changes: Sequence[Change]) -> set[int]:
        """Stages new visit counts and last-seen times for pages that only had visits:
        the core rewrites their passages' numbers without the text being read, chunked
        or sent again. Returns the pages done."""
        pages = self._stats_only_pages(changes)
        if pages:
            updates = [(page_parent(i), p.last_seen, p.visit_count) for i, p in pages.items()]
            self.index.touch(updates)
        return set(pages)

    def _stage_entities(self, entities: Sequence[tuple[int, str, int]]) -> int:
        by_type: dict[str, list[int]] = {}
        for _, entity_type, entity_id in entities:
            by_type.setdefault(entity_type, []).append(entity_id)
        return sum(
            self._stage(entity_type, ids, self._reader.fetch(entity_type, ids))
            for entity_type, ids in by_type.items()
        )

    def _stage(self, entity_type: str, ids: Sequence[int], found: dict[int, Any]) -> int:
        """Stage the current state of ``ids`` (absent from ``found``: deleted); returns
        the characters of text staged."""
        if entity_type == "page":
            self.index.delete_parents([page_parent(i) for i in ids])
            docs = [doc for i in ids if i in found for doc in self._page_docs(found[i])]
        else:
            gone = [entity_doc_id(entity_type, i) for i in ids if i not in found]
            if gone:
                self.index.delete_ids(gone)
            docs = [item_document(entity_type, found[i]) for i in ids if i in found]
        if docs:
            self.index.upsert(cast("list[_core.Document]", docs))
        return sum(len(doc["body"]) for doc in docs)

    def _page_docs(self, page: Page) -> list[Document]:
        cfg = self.config
        return page_documents(
            page, passage_chars=cfg.passage_chars, overlap=cfg.passage_overlap,
            max_passages=cfg.max_passages_per_page,
        )  # fmt: skip

    def _text_scan(self, mark: Watermark, progress: Progress | None) -> Watermark:
        done, total = self._reader.scan_progress(mark.text_scan)
        report(progress, done, total, "rebuild-text")
        while mark.text_scan is not None:
            self._checkpoint()
            entity_type, after = mark.text_scan
            batch = _SCAN_BATCH.get(entity_type, _SCAN_BATCH_DEFAULT)
            ids = self._reader.ids_after(entity_type, after, batch)
            if not ids:
                mark = replace(mark, text_scan=next_scan(entity_type))
                if mark.text_scan is None:
                    mark = self._commit(mark)
                continue
            self._stage(entity_type, ids, self._reader.fetch(entity_type, ids))
            mark = self._commit(replace(mark, text_scan=(entity_type, ids[-1])))
            done += len(ids)
            report(progress, done, total, "rebuild-text")
        return mark

    # --------------------------------------------------------- background

    def schedule(self) -> None:
        """Ask the background thread for a pass soon (debounced). Never blocks; does
        nothing when ``background_indexing`` is off."""
        if not self.config.background_indexing or self._stop.is_set():
            return
        with self._thread_guard:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._background, name="backtrail-indexer", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def follow(self) -> bool:
        """On a PostgreSQL ledger, start following its commits: other processes' writes
        become searchable here soon after they commit (:mod:`~backtrail.indexer.follow`).
        False (nothing to do) on SQLite, where processes share one index."""
        target = self.config.ledger_target
        if not isinstance(target, str) or self._stop.is_set():
            return False
        if self.follower is None:
            self.follower = Follower(self, target, poll_seconds=self.config.follow_poll)
            self.follower.start()
        return True

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the background thread and a running merge: a pass gives up at its next
        checkpoint (see the module doc). True when both ended within ``timeout``
        seconds; False when one is still inside a step (an extraction, an embedding
        piece, a commit) that cannot be interrupted."""
        if self.follower is not None:
            self.follower.stop(0.0)  # it ends within a poll, without touching the index
        self._stop.set()
        self._wake.set()
        self.index.stop_merging()
        deadline = time.monotonic() + timeout
        others = [t for t in (self._thread, self._merge_thread)
                  if t is not None and t is not threading.current_thread()]  # fmt: skip
        for thread in others:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in others)

    def _background(self) -> None:
        lower_thread_priority(self.config.indexer_nice)
        failures = 0
        while True:
            self._wake.wait()
            if self._stop.is_set():
                return
            self._debounce()
            if self._stop.is_set():
                return
            try:
                self._background_pass()
                failures = 0
            except _Stopping:
                logger.info("indexing stopped at a checkpoint; the next pass resumes from "
                            "the last commit")  # fmt: skip
                return
            except Exception:
                failures += 1
                delay = min(_MAX_RETRY_SECONDS, 2.0**failures)
                logger.exception("background indexing failed; retrying in %.0f s", delay)
                if self._stop.wait(delay):
                    return
                self._wake.set()

    def _debounce(self) -> None:
        first = time.monotonic()
        self._wake.clear()
        while not self._stop.is_set():
            left = self.config.indexer_max_delay - (time.monotonic() - first)
            if left <= 0 or not self._wake.wait(min(self.config.indexer_debounce, left)):
                return
            self._wake.clear()

    def _background_pass(self) -> None:
        while not self._stop.is_set():
            upto = self._vector_limit()
            if upto is not None and self._own_work_done(upto):
                return  # a host runs: it indexes the rest and merges
            if not self.run_text(wait=0.0):
                # Another process is indexing (our changes too); look again later.
                if self._stop.wait(max(0.2, 2 * self.config.indexer_debounce)):
                    return
                if self._settled(upto, self._background_embedder(upto) is None):
                    return
                continue
            if self._compact_requested:
                self.purge(wait=0.0)
            embedder = self._background_embedder(upto)
            more = embedder is not None and self._vector_turn(
                embedder, 0.0, None, VectorStart(self._mark(), self.embedded), upto
            )
            if upto is None:  # with a host running, merging is its work too
                self._merge_soon()
            if not more and self._settled(upto, embedder is None):
                return
            self._stop.wait(_YIELD_SECONDS)  # let other processes take the lock

    def _own_work_done(self, upto: int) -> bool:
        """With a host running: are this process's writes (up to change ``upto``)
        searchable, and embedded? Rebuild scans are the host's work."""
        mark = self.watermark()
        if mark is None or mark.text_scan is not None:
            return True
        if upto > mark.text:
            return False
        if not self.config.background_vectors or mark.vector_scan is not None:
            return True
        return upto <= mark.vectors

    def _background_embedder(self, upto: int | None) -> TextEmbedder | None:
        """The embedder for this background turn, ``None`` when there is no vector work
        here (the model is not even loaded when the work is a host's)."""
        if not self.config.background_vectors:
            return None
        if upto is not None:
            mark = self._mark()
            if mark.vector_scan is not None or upto <= mark.vectors:
                return None
        return self._embedder()

    def _settled(self, upto: int | None, no_vector_work: bool) -> bool:
        if upto is not None:
            return self._own_work_done(upto)
        lag = self.lag(passages=False)
        if not lag.text_caught_up or lag.captures:  # a capture queued during another's pass
            return False
        return no_vector_work or lag.vectors_caught_up
