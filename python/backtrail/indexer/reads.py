"""What the indexer reads of the ledger, and where it has got to.

:class:`EntityReader` reads the current state of entities by id (a deleted entity is
simply absent). :class:`Watermark` is the JSON published with each index commit:
``{"format": 1, "text": T, "vectors": V, "text_scan": null, "vector_scan": null}``.
``T`` and ``V`` are ledger change sequence numbers: every change up to ``T`` is
searchable as text, every change up to ``V`` has its vectors. A fresh index (or a
rebuild) does not replay the change feed, which may have been pruned: it records the
current sequence ``M`` as ``T`` and ``V`` and *scans* every entity in id order, keeping
its position (``["page", 1234]``) in ``text_scan`` / ``vector_scan`` until the scan
ends, so a killed rebuild resumes where it stopped. :class:`IndexLag` is the distance
between the ledger and the index: changes, captures and passages still to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backtrail.indexer.ids import (
    ENTITY_TYPES,
)
from backtrail.store import Bookmark, Change, Fact, Highlight, Ledger, Note, Page

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
"""``progress(done, total, phase)``; ``phase`` is ``"extract"`` (captures whose main text
is extracted), ``"text"`` (changes), ``"vectors"`` (passages embedded, rebuilds too) or
``"rebuild-text"`` (entities scanned). Each phase is reported before its first batch and
after every batch (``"vectors"`` after every embedding piece too); ``total`` is an
estimate that may grow while writes arrive."""

FETCH_CHUNK = 50
"""Entities read from the ledger at a time."""


_ITEM_QUERIES: dict[str, tuple[str, str, str, type]] = {
    "highlight": ("highlights", "id, url, canonical_url, domain, text, context, note, "
                  "created_at, updated_at, external_id", "", Highlight),
    "note": ("notes", "id, content, url, canonical_url, domain, created_at, updated_at, "
             "external_id, author", "", Note),
    "bookmark": ("bookmarks", "id, profile, browser_id, url, canonical_url, domain, title, "
                 "folder, created_at, updated_at", "", Bookmark),
    "fact": ("facts", "id, key, value, version, client, created_at, updated_at",
             "AND deleted_at IS NULL", Fact),
    "page": ("pages", "id", "", Page),
}  # fmt: skip


class EntityReader:
    """Current state of indexable ledger entities, by id.

    Pages go through :meth:`Ledger.pages_by_id`. The ledger has no bulk by-id reads for
    highlights, notes, bookmarks and facts, nor an id-ordered scan, so those are plain
    SELECTs in one of its read transactions until it grows them (see the report of the
    service-layer issue).
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def fetch(
        self, entity_type: str, ids: Sequence[int], *, with_text: bool = True
    ) -> dict[int, Any]:
        """``{id: record}`` for the ids that still exist (live facts only)."""
        if entity_type == "page":
            return dict(self._ledger.pages_by_id(list(ids), with_text=with_text))
        table, columns, where, cls = _ITEM_QUERIES[entity_type]
        found: dict[int, Any] = {}
        with self._ledger._read() as conn:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT {columns} FROM {table} WHERE id IN ({marks}) {where}", chunk
                )
                for row in rows:
                    found[row["id"]] = cls(**{key: row[key] for key in row.keys()})
        return found

    def ids_after(self, entity_type: str, after: int, limit: int) -> list[int]:
        """Ids of existing entities greater than ``after``, ascending."""
        table, _, where, _ = _ITEM_QUERIES[entity_type]
        with self._ledger._read() as conn:
            rows = conn.execute(
                f"SELECT id FROM {table} WHERE id > ? {where} ORDER BY id LIMIT ?",
                (after, limit),
            ).fetchall()
        return [int(row[0]) for row in rows]

    def count(self, entity_type: str, upto: int | None = None) -> int:
        """How many entities exist (with ``upto``: with an id up to it)."""
        table, _, where, _ = _ITEM_QUERIES[entity_type]
        bound = 2**63 - 1 if upto is None else upto
        with self._ledger._read() as conn:
            row = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE id <= ? {where}", (bound,))
            return int(row.fetchone()[0])

    def scan_progress(self, position: tuple[str, int] | None) -> tuple[int, int]:
        """(entities before ``position`` in scan order, all entities); ``None`` is the end."""
        counts = [self.count(entity_type) for entity_type in ENTITY_TYPES]
        if position is None:
            return sum(counts), sum(counts)
        at = ENTITY_TYPES.index(position[0])
        return sum(counts[:at]) + self.count(position[0], position[1]), sum(counts)


@dataclass(frozen=True)
class Watermark:
    """How far the index is: see the module doc."""

    text: int = 0
    vectors: int = 0
    text_scan: tuple[str, int] | None = None
    vector_scan: tuple[str, int] | None = None
    forgets: int = 0
    """The newest ``forget`` event of the audit log whose deletions this index has
    applied and compacted away (0: none yet)."""

    FORMAT = 1

    @classmethod
    def rebuild(cls, seq: int) -> Watermark:
        """The watermark of an index that must scan every entity, starting at ``seq``."""
        start = (ENTITY_TYPES[0], 0)
        return cls(text=seq, vectors=seq, text_scan=start, vector_scan=start)

    def dumps(self) -> str:
        return json.dumps(
            {"format": self.FORMAT, "text": self.text, "vectors": self.vectors,
             "text_scan": self.text_scan, "vector_scan": self.vector_scan,
             "forgets": self.forgets},
            separators=(",", ":"),
        )  # fmt: skip

    @classmethod
    def loads(cls, raw: str | None) -> Watermark | None:
        """The watermark in ``raw``; ``None`` for no watermark or one this version
        cannot read (the index is then rebuilt)."""
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            if data.get("format") != cls.FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            return cls(
                text=_seq(data["text"]),
                vectors=_seq(data["vectors"]),
                text_scan=_scan(data.get("text_scan")),
                vector_scan=_scan(data.get("vector_scan")),
                forgets=_seq(data.get("forgets", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            logger.warning("the index watermark is unreadable (%s); rebuilding the index", error)
            return None


def _seq(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"bad sequence number {value!r:.40}")
    return value


def _scan(value: object) -> tuple[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2 or value[0] not in ENTITY_TYPES:
        raise ValueError(f"bad scan position {value!r:.60}")
    return str(value[0]), _seq(value[1])


def next_scan(entity_type: str) -> tuple[str, int] | None:
    position = ENTITY_TYPES.index(entity_type) + 1
    return (ENTITY_TYPES[position], 0) if position < len(ENTITY_TYPES) else None


@dataclass(frozen=True)
class IndexLag:
    """How far the index is behind the ledger.

    ``text`` counts changes not yet searchable (a sequence-number distance, so pruned or
    merged changes may make it overcount) and ``captures`` the captured pages waiting for
    main-text extraction (their text is not searchable yet either). ``vectors`` counts
    the passages waiting for vectors: documents of the index (a page's passages, the one
    document of a title-only page, highlight, note, bookmark or fact) without a vector
    for their current text; ``None`` where it was not counted (a search's lag: counting
    reads every document). ``vector_changes`` is how the indexer tracks its own vector
    pass: the changes searchable as text that it has not yet embedded. ``indexing``:
    a pass runs now (a process holds the pass lock) or a browser host serves the data
    directory (it works through the backlog while it runs); only then is a rebuild
    "rebuilding", else it waits for ``backtrail index``."""

    ledger_seq: int
    text_seq: int
    vector_seq: int
    text: int
    vectors: int | None
    rebuilding_text: bool
    rebuilding_vectors: bool
    captures: int = 0
    vector_changes: int = 0
    indexing: bool = False

    @property
    def text_caught_up(self) -> bool:
        return self.text == 0 and not self.rebuilding_text

    @property
    def vectors_caught_up(self) -> bool:
        """The vector pass has reached the text watermark (the indexer's own measure)."""
        return self.text_caught_up and self.vector_changes == 0 and not self.rebuilding_vectors


def entities_named(
    changes: Sequence[Change], *, upserts_only: bool = False
) -> list[tuple[int, str, int]]:
    """``(first seq, entity type, entity id)`` of each entity named, in first-seen order."""
    seen: set[tuple[str, int]] = set()
    out: list[tuple[int, str, int]] = []
    for change in changes:
        if upserts_only and change.op != "upsert":
            continue
        key = (change.entity_type, change.entity_id)
        if key not in seen:
            seen.add(key)
            out.append((change.seq, change.entity_type, change.entity_id))
    return out


def report(progress: Progress | None, done: int, total: int, phase: str) -> None:
    if progress is not None and max(done, total) > 0:  # a phase with nothing to do is silent
        progress(max(0, done), max(0, total, done), phase)
