"""The vector phase of indexing (phase 2 in :mod:`~backtrail.indexer.passes`): embed the
current passages named by the changes between the vector watermark and the text
watermark that have no vector yet (or a vector of older text), ``vector_batch_passages``
at a time, and commit each batch with the watermark it reaches; during a rebuild, scan
every entity in id order instead (``vector_scan``).

:class:`VectorPhase` is mixed into :class:`~backtrail.indexer.passes.Indexer`, whose pass
lock, watermark commits, checkpoints and text phase it uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, cast

from backtrail import _core
from backtrail.indexer.documents import Document, embedding_text, item_document
from backtrail.indexer.reads import (
    FETCH_CHUNK,
    Progress,
    Watermark,
    entities_named,
    next_scan,
    report,
)

if TYPE_CHECKING:
    from backtrail.config import Config
    from backtrail.indexer.reads import EntityReader
    from backtrail.store import Ledger

__all__ = ["TextEmbedder", "VectorStart", "VectorPhase"]

_VECTOR_CHANGES = 1_000
_EMBED_PIECE = 16  # texts per embedding call: a shutdown waits for one piece at most


class TextEmbedder(Protocol):
    """What the indexer needs from :class:`backtrail._core.Embedder`."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


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
    embedded_texts: int
    _on_piece: Callable[[], None] | None
    _thread: threading.Thread | None
    _ledger: Ledger
    _reader: EntityReader

    def _vector_turn(
        self,
        embedder: TextEmbedder,
        wait: float,
        progress: Progress | None,
        start: VectorStart,
        upto: int | None = None,
    ) -> bool:
        """Under the lock: text first, then one vector batch (of changes up to ``upto``
        if given). True if more remain."""
        with self._pass(wait) as held:
            if not held:
                return False
            self._text_pass(progress)
            more = self._vector_step(embedder, upto)
        if progress is None:
            return more
        done = self.embedded - start.embedded
        if more and done >= start.waiting:  # more arrived meanwhile: count again
            start.waiting = done + self.passages_without_vectors()
        report(progress, done, start.waiting if more else done, "vectors")
        return more

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
