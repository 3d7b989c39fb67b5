"""The vector phase of indexing (phase 2 in :mod:`~backtrail.indexer.passes`): embed the
current passages named by the changes between the vector watermark and the text
watermark that have no vector yet (or a vector of older text), ``vector_batch_passages``
at a time, and commit each batch with the watermark it reaches; during a rebuild, scan
every entity in id order instead (``vector_scan``).

:class:`VectorPhase` is mixed into :class:`~backtrail.indexer.passes.Indexer`, whose pass
lock, watermark commits, checkpoints and text phase it uses.

**Whose vectors.** The watermark names the model the index's vectors belong to
(:class:`~backtrail.indexer.reads.VectorModel`), and a process writes vectors only of
that model, and searches with query vectors only while the index holds that model's
vectors (:func:`verdict`). A process whose model differs either **switches** the index
to its model, in one commit that drops every vector (text stays searchable), names the
new model and restarts the vector scan from the first entity, so the index is
re-embedded in the background, or **defers**: it writes no vector and searches by
words only. It defers when it runs the packaged model as it is because the derivation
failed here (a fallback never takes an index from another model), when the index
changed model after this process opened it (the newest process's choice stands, so
two long-running processes never take the index back and forth), or when a browser
host runs and the backlog is the host's work. A model that is itself a fallback is
always replaced, and an index no model has claimed yet is taken by the first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from backtrail import _core
from backtrail.indexer.documents import Document, embedding_text, item_document
from backtrail.indexer.embedding import Model, TextEmbedder
from backtrail.indexer.ids import ENTITY_TYPES
from backtrail.indexer.reads import (
    FETCH_CHUNK,
    Progress,
    VectorModel,
    Watermark,
    entities_named,
    next_scan,
    report,
)

if TYPE_CHECKING:
    from backtrail.config import Config
    from backtrail.indexer.reads import EntityReader
    from backtrail.store import Ledger

logger = logging.getLogger(__name__)

__all__ = ["TextEmbedder", "VectorStart", "VectorPhase", "Verdict", "verdict"]

_VECTOR_CHANGES = 1_000
_EMBED_PIECE = 16  # texts per embedding call: a shutdown waits for one piece at most

Verdict = Literal["own", "switch", "defer"]


def verdict(record: VectorModel, model: Model, opened: int, *, may_switch: bool) -> Verdict:
    """What a process running ``model`` does with an index whose vectors are ``record``'s:
    ``own`` (they are its model's), ``switch`` (name ``model`` and embed the index for it,
    dropping any other model's vectors) or ``defer`` (leave the vectors alone).
    ``opened``: the generation of the index's model when the process opened it;
    ``may_switch``: false while a browser host runs that is not this process (see the
    module doc)."""
    if record.identity == model.identity:
        return "own"
    if not may_switch:
        return "defer"
    if record.identity is None:
        return "switch"
    if model.fallback is not None:
        return "defer"
    return "switch" if record.fallback or record.generation <= opened else "defer"


def unusable_reason(
    record: VectorModel, model: Model, opened: int, *, may_switch: bool
) -> str | None:
    """Why searches in a process running ``model`` cannot use its query vectors against
    the index (``None``: they can; an index no model has claimed holds no vector); the
    arguments are :func:`verdict`'s."""
    decided = verdict(record, model, opened, may_switch=may_switch)
    if decided == "own" or record.identity is None:
        return None
    ours = f"this process runs {model.identity}"
    if model.fallback is not None:
        ours += f" (the packaged model as it is: deriving the integer model failed: " \
                f"{model.fallback})"  # fmt: skip
    theirs = f"the index's vectors are of {record.identity}"
    if decided == "switch":
        why = "it is about to re-embed them"
    elif model.fallback is not None:
        why = "a fallback never replaces another model's vectors"
    elif not may_switch:
        why = "the browser host, which embeds this memory, chooses its model"
    else:
        why = "a process started after this one chose that model"
    return f"{theirs}; {ours}; {why}"


@dataclass
class VectorStart:
    """Where a run of vector turns started: the watermark, :attr:`Indexer.embedded`, and
    how many passages were waiting for vectors (0 when not counted)."""

    mark: Watermark
    embedded: int
    waiting: int = 0
    texts: int = 0


class VectorPhase:
    """The vector phase of :class:`~backtrail.indexer.passes.Indexer`."""

    config: Config
    index: _core.Index
    embedded: int
    opened_generation: int
    embedded_texts: int
    _on_piece: Callable[[], None] | None
    _thread: threading.Thread | None
    _ledger: Ledger
    _reader: EntityReader

    def _vector_turn(
        self,
        model: Model,
        wait: float,
        progress: Progress | None,
        start: VectorStart,
        upto: int | None = None,
    ) -> bool:
        """Under the lock: text first, then one vector batch (of changes up to ``upto``
        if given) when the index's vectors are ``model``'s or become so. True if more
        remain."""
        with self._pass(wait) as held:
            if not held:
                return False
            self._text_pass(progress)
            more = self._hold_vectors(model, upto) and self._vector_step(model.embedder, upto)
        if progress is None:
            return more
        done = self.embedded - start.embedded
        if more and done >= start.waiting:  # more arrived meanwhile: count again
            start.waiting = done + self.passages_without_vectors()
        report(progress, done, start.waiting if more else done, "vectors")
        return more

    def model_verdict(self, model: Model, upto: int | None = None) -> Verdict:
        """:func:`verdict` for ``model`` on the latest commit (``upto``: as for the
        background thread's turns, whose limit says a host runs)."""
        return verdict(self._mark().model, model, self.opened_generation,
                       may_switch=upto is None)  # fmt: skip

    def vector_model(self) -> VectorModel:
        """The model the index's vectors belong to, as of the latest commit."""
        mark = self.watermark()
        return VectorModel() if mark is None else mark.model

    def vectors_unusable(self, model: Model) -> str | None:
        """Why searches here cannot score ``model``'s query vectors against the index's
        vectors (``None``: they can): the index's vectors are another model's."""
        may_switch = self._vector_limit() is None
        return unusable_reason(self.vector_model(), model, self.opened_generation,
                               may_switch=may_switch)  # fmt: skip

    def _hold_vectors(self, model: Model, upto: int | None) -> bool:
        """Under the pass lock: True when the index's vectors are ``model``'s, switching
        the index to it first if :func:`verdict` says so."""
        mark = self._mark()
        decided = verdict(mark.model, model, self.opened_generation, may_switch=upto is None)
        if decided == "switch":
            record = mark.model
            if record.identity is not None:
                logger.warning("the index's vectors are of %s; re-embedding them for %s",
                               record.identity, model.identity)  # fmt: skip
            self.index.clear_vectors()
            chosen = VectorModel(model.identity, model.fallback is not None,
                                 record.generation + 1, record.identity)  # fmt: skip
            start = (ENTITY_TYPES[0], 0)
            self._commit(replace(mark, vectors=mark.text, vector_scan=start, model=chosen))
        return decided != "defer"

    def _vector_step(self, embedder: TextEmbedder, upto: int | None = None) -> bool:
        """Embed one batch of passages that lack vectors (from changes up to ``upto``,
        default all); False when none are left."""
        mark = self._mark()
        if mark.vector_scan is not None:
            return upto is None and self._vector_scan_step(mark, embedder)
        limit = mark.text if upto is None else min(mark.text, upto)
        if mark.vectors >= limit:
            return False
        changes = [
            change
            for change in self._ledger.changes_since(mark.vectors, limit=_VECTOR_CHANGES)
            if change.seq <= limit
        ]
        if not changes:  # the changes in between were pruned from the feed
            self._commit(replace(mark, vectors=limit))
            return False
        visits_only = self._stats_only_pages(changes)
        entities = [
            e for e in entities_named(changes, upserts_only=True)
            if e[1] != "page" or e[2] not in visits_only
        ]  # fmt: skip
        docs, covered = self._collect(entities, changes[-1].seq)
        self._embed_and_commit(embedder, docs, mark, replace(mark, vectors=covered))
        return covered < limit

    def _collect(
        self, entities: Sequence[tuple[int, str, int]], last_seq: int
    ) -> tuple[list[Document], int]:
        """Documents needing vectors from the first entities, until a batch is full;
        and the sequence number up to which every change is then covered."""
        docs: list[Document] = []
        for start in range(0, len(entities), FETCH_CHUNK):
            self._checkpoint()
            chunk = entities[start : start + FETCH_CHUNK]
            found = self._fetch_all(chunk)
            for position, (_, entity_type, entity_id) in enumerate(chunk, start):
                item = found.get((entity_type, entity_id))
                if item is not None:
                    docs += self._missing_vectors(entity_type, item)
                following = position + 1
                if len(docs) >= self.config.vector_batch_passages and following < len(entities):
                    return docs, entities[following][0] - 1
        return docs, last_seq

    def _fetch_all(self, entities: Sequence[tuple[int, str, int]]) -> dict[tuple[str, int], Any]:
        by_type: dict[str, list[int]] = {}
        for _, entity_type, entity_id in entities:
            by_type.setdefault(entity_type, []).append(entity_id)
        return {
            (entity_type, entity_id): item
            for entity_type, ids in by_type.items()
            for entity_id, item in self._reader.fetch(entity_type, ids).items()
        }

    def _missing_vectors(self, entity_type: str, item: Any) -> list[Document]:
        docs = (
            self._page_docs(item) if entity_type == "page" else [item_document(entity_type, item)]
        )
        return [doc for doc in docs if embedding_text(doc) and self._needs_vector(doc)]

    def _needs_vector(self, doc: Document) -> bool:
        stored = self.index.get(doc["id"])
        return not (
            stored is not None
            and stored.get("vector") is not None
            and stored["title"] == doc["title"]
            and stored["body"] == doc["body"]
        )

    def _embed_and_commit(
        self, embedder: TextEmbedder, docs: list[Document], current: Watermark, final: Watermark
    ) -> None:
        size = self.config.vector_batch_passages
        for start in range(0, len(docs), size):
            part = docs[start : start + size]
            vectors = self._embed(embedder, [embedding_text(doc) for doc in part])
            with_vectors = [{**doc, "vector": v} for doc, v in zip(part, vectors, strict=True)]
            self.index.upsert(cast("list[_core.Document]", with_vectors))
            self._commit(final if start + size >= len(docs) else current)
            self.embedded += len(part)
        if not docs:
            self._commit(final)

    def _embed(self, embedder: TextEmbedder, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, a piece at a time with a checkpoint before each."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _EMBED_PIECE):
            self._checkpoint()
            vectors += embedder.embed(texts[start : start + _EMBED_PIECE])
            self.embedded_texts += len(texts[start : start + _EMBED_PIECE])
            if self._on_piece is not None and threading.current_thread() is not self._thread:
                self._on_piece()
        return vectors

    def _vector_scan_step(self, mark: Watermark, embedder: TextEmbedder) -> bool:
        """Embed the next batch of a rebuild scan, in entity id order."""
        docs: list[Document] = []
        position: tuple[str, int] | None = mark.vector_scan
        while position is not None and len(docs) < self.config.vector_batch_passages:
            self._checkpoint()
            entity_type, after = position
            ids = self._reader.ids_after(entity_type, after, FETCH_CHUNK)
            if not ids:
                position = next_scan(entity_type)
                continue
            found = self._reader.fetch(entity_type, ids)
            for entity_id in ids:
                if entity_id in found:
                    docs += self._missing_vectors(entity_type, found[entity_id])
                position = (entity_type, entity_id)
                if len(docs) >= self.config.vector_batch_passages:
                    break
        self._embed_and_commit(embedder, docs, mark, replace(mark, vector_scan=position))
        return True
