"""The indexer (DESIGN layer 3): brings the core index up to the ledger's change feed.

The ledger is the truth; the index in ``<data_dir>/index`` is derived from it and can
always be rebuilt. Indexing runs in two phases, because embedding is the expensive step
(about 35 passages a second on two cores) and text must become searchable first:

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

**Document ids** are stable 63-bit integers, ``(type << 56) | (entity_id << 16) |
passage``: 8 bits of type code (:data:`TYPE_PAGE` for a page without text, e.g. from a
history import; :data:`TYPE_PASSAGE`, :data:`TYPE_HIGHLIGHT`, :data:`TYPE_NOTE`,
:data:`TYPE_BOOKMARK`, :data:`TYPE_FACT`), 40 bits of ledger row id and 16 bits of passage
number. Every document of a page (its passages, or its title-only document) has the
page's base id ``doc_id(TYPE_PAGE, page_id)`` as ``parent``, so hits group per page and
``delete_parents`` removes a page whole.

**Watermark.** Each commit publishes a JSON watermark (:class:`Watermark`):
``{"format": 1, "text": T, "vectors": V, "text_scan": null, "vector_scan": null}``.
``T`` and ``V`` are ledger change sequence numbers: every change up to ``T`` is
searchable as text, every change up to ``V`` has its vectors. A fresh index (or
:meth:`Indexer.reindex`) does not replay the change feed, which may have been pruned: it
records the current sequence ``M`` as ``T`` and ``V`` and *scans* every entity in id
order, keeping its position (``["page", 1234]``) in ``text_scan`` / ``vector_scan``
until the scan ends, so a killed rebuild resumes where it stopped.

**Concurrency and threads.** Every process may index; only one at a time does. An
indexing *pass* (read changes, stage, commit) holds the indexer lock: a ``flock`` on
``<data_dir>/indexer.lock`` plus a thread lock, so the watermark can never move back and
a slow pass can never resurrect what a later pass deleted. Background passes try the
lock without waiting and skip quietly when another process holds it (that process will
index these changes too; the skipping process checks again a little later). Ledger
writers never wait for indexing: the indexer reads the ledger through its own SQLite
connection (WAL readers never block writers), and :meth:`Indexer.schedule` only sets an
event. In long-running processes one daemon thread per :class:`Indexer` runs passes
after writes, debounced by ``indexer_debounce`` (but at least every
``indexer_max_delay`` seconds under a steady stream), text first and then vector
batches, releasing the lock between batches so other processes' text and ``forget``
get their turn. Short-lived commands call :meth:`Indexer.catch_up` instead.

**Who does the work.** The native host announces itself (:class:`HostPresence`, a shared
``flock`` on ``<data_dir>/host.lock`` that the kernel drops when the host dies). While a
host runs, the background threads of other processes (MCP servers, one per assistant
window) index and embed only up to their own writes and leave the browser's backlog to
the host (``defer_vectors_to_host``), so N assistants do not all spend the machine's two
cores on the same pages; with no host they do everything as before.

**Vector merges.** Each commit that brings vectors adds a vector segment. Merging the
small ones rebuilds an HNSW graph (seconds at 100k pages), so it runs on its own thread
beside the indexing thread, at the same low priority, and builds the graph without the
index's write lock (``_core.Index.merge_vectors``): commits, and so captures becoming
searchable, never wait for a merge.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Protocol, cast

from backtrail import _core
from backtrail.config import Config
from backtrail.errors import BacktrailError, StoreError
from backtrail.extract import extract_main_text
from backtrail.store import Bookmark, Change, Fact, Highlight, Ledger, Note, Page

__all__ = [
    "TYPE_PAGE", "TYPE_PASSAGE", "TYPE_HIGHLIGHT", "TYPE_NOTE", "TYPE_BOOKMARK", "TYPE_FACT",
    "ENTITY_TYPES", "MAX_ENTITY_ID", "MAX_PASSAGES", "DocRef", "doc_id", "parse_doc_id",
    "page_parent", "entity_doc_id", "chunk_text", "page_documents", "item_document",
    "embedding_text", "EntityReader", "Watermark", "IndexLag", "IndexBusy", "IndexFailure",
    "Indexer", "Progress", "TextEmbedder",
]  # fmt: skip

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- ids

TYPE_PAGE = 1
TYPE_PASSAGE = 2
TYPE_HIGHLIGHT = 3
TYPE_NOTE = 4
TYPE_BOOKMARK = 5
TYPE_FACT = 6

_TYPE_SHIFT = 56
_ENTITY_SHIFT = 16
MAX_ENTITY_ID = (1 << (_TYPE_SHIFT - _ENTITY_SHIFT)) - 1
MAX_PASSAGES = 1 << _ENTITY_SHIFT

ENTITY_TYPES = ("page", "highlight", "note", "bookmark", "fact")
_ENTITY_OF_TYPE = {
    TYPE_PAGE: "page", TYPE_PASSAGE: "page", TYPE_HIGHLIGHT: "highlight", TYPE_NOTE: "note",
    TYPE_BOOKMARK: "bookmark", TYPE_FACT: "fact",
}  # fmt: skip
_TYPE_OF_ENTITY = {
    "page": TYPE_PAGE, "highlight": TYPE_HIGHLIGHT, "note": TYPE_NOTE,
    "bookmark": TYPE_BOOKMARK, "fact": TYPE_FACT,
}  # fmt: skip

Document = dict[str, Any]
Progress = Callable[[int, int, str], None]
"""``progress(done, total, phase)``; ``phase`` is ``"text"``, ``"vectors"``,
``"rebuild-text"`` or ``"rebuild-vectors"``. Counts are changes (or entities, while
rebuilding); ``total`` is an estimate that may grow while writes arrive."""


class TextEmbedder(Protocol):
    """What the indexer needs from :class:`backtrail._core.Embedder`."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class DocRef(NamedTuple):
    """A decoded document id."""

    type_code: int
    entity_id: int
    passage: int

    @property
    def entity_type(self) -> str:
        """The ledger entity the document comes from (``page`` for passages too)."""
        return _ENTITY_OF_TYPE[self.type_code]


def doc_id(type_code: int, entity_id: int, passage: int = 0) -> int:
    """The stable index id of ``passage`` of the entity ``entity_id`` of ``type_code``."""
    if type_code not in _ENTITY_OF_TYPE:
        raise ValueError(f"unknown document type code {type_code}")
    if not 1 <= entity_id <= MAX_ENTITY_ID:
        raise ValueError(f"entity id {entity_id} is out of range (1..{MAX_ENTITY_ID})")
    if not 0 <= passage < MAX_PASSAGES:
        raise ValueError(f"passage number {passage} is out of range (0..{MAX_PASSAGES - 1})")
    return (type_code << _TYPE_SHIFT) | (entity_id << _ENTITY_SHIFT) | passage


def parse_doc_id(value: int) -> DocRef:
    """Inverse of :func:`doc_id`; ``ValueError`` for an id it could not have made."""
    ref = DocRef(
        value >> _TYPE_SHIFT,
        (value >> _ENTITY_SHIFT) & MAX_ENTITY_ID,
        value & (MAX_PASSAGES - 1),
    )
    if ref.type_code not in _ENTITY_OF_TYPE or ref.entity_id == 0:
        raise ValueError(f"{value} is not a Backtrail document id")
    return ref


def page_parent(page_id: int) -> int:
    """The grouping key (and title-only document id) of a page."""
    return doc_id(TYPE_PAGE, page_id)


def entity_doc_id(entity_type: str, entity_id: int) -> int:
    """The base document id of a ledger entity (a page's parent id)."""
    return doc_id(_TYPE_OF_ENTITY[entity_type], entity_id)


# ----------------------------------------------------------------------- chunking

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")
_URL_SEPARATORS = re.compile(r"[/?#&=+_.\-]+")


def chunk_text(
    text: str, size: int = 1_000, overlap: int = 100, max_passages: int | None = None
) -> list[str]:
    """Split ``text`` into passages of at most ``size`` characters.

    Passages break between lines (paragraphs) when they can, else between sentences,
    else between words (or anywhere, for text without spaces). Each passage after the
    first starts with up to ``overlap`` characters from the end of the previous one,
    cut at a word boundary. The result depends only on the arguments, so re-chunking
    unchanged text yields the same passages (and the index keeps their vectors).
    """
    if overlap < 0 or overlap * 2 > size:
        raise ValueError(f"overlap must be between 0 and size / 2, got {overlap}")
    limit = size - overlap - 1 if overlap else size
    passages: list[str] = []
    current = ""
    for piece, starts_line in _units(text, limit):
        sep = "\n" if starts_line else " "
        if current and len(current) + len(sep) + len(piece) > size:
            passages.append(current)
            if max_passages is not None and len(passages) >= max_passages:
                return passages
            tail = _tail(current, overlap)
            current = f"{tail}{sep}{piece}" if tail else piece
        else:
            current = f"{current}{sep}{piece}" if current else piece
    if current:
        passages.append(current)
    return passages


def _units(text: str, limit: int) -> Iterator[tuple[str, bool]]:
    """(piece, starts a line) pieces of at most ``limit`` characters, in order."""
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if len(line) <= limit:
            yield line, True
            continue
        first = True
        for sentence in _SENTENCE_END.split(line):
            for piece in _split_words(sentence, limit):
                yield piece, first
                first = False


def _split_words(text: str, limit: int) -> Iterator[str]:
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        if cut < limit // 2:
            cut = limit
        head, text = text[:cut].rstrip(), text[cut:].lstrip()
        if head:
            yield head
    if text:
        yield text


def _tail(passage: str, overlap: int) -> str:
    if overlap <= 0 or len(passage) <= overlap:
        return ""
    tail = passage[-overlap:]
    space = next((i for i, ch in enumerate(tail) if ch.isspace()), -1)
    if 0 <= space < len(tail) - 1:
        tail = tail[space + 1 :]
    return tail.strip()


# ---------------------------------------------------------------------- documents


def _url_words(url: str) -> str:
    """A URL as searchable words: ``github.com rust lang rust issues``."""
    rest = url.split("://", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    host, _, path = rest.partition("/")
    words = [word for word in _URL_SEPARATORS.split(path) if word]
    return " ".join([host, *words])


def page_documents(
    page: Page, *, passage_chars: int = 1_000, overlap: int = 100, max_passages: int = 4_000
) -> list[Document]:
    """The documents of a page: one ``passage`` per chunk of its current text, or one
    title-only ``page`` document (title and URL words) when it has no text."""
    base = page_parent(page.id)
    common = {
        "url": page.url, "domain": page.domain, "title": page.title or "", "parent": base,
        "first_seen": page.first_seen, "last_seen": page.last_seen,
        "visits": page.visit_count,
    }  # fmt: skip
    chunks = chunk_text(page.text or "", passage_chars, overlap, min(max_passages, MAX_PASSAGES))
    if not chunks:
        return [{"id": base, "kind": "page", "body": _url_words(page.url), **common}]
    return [
        {"id": doc_id(TYPE_PASSAGE, page.id, n), "kind": "passage", "body": chunk, **common}
        for n, chunk in enumerate(chunks)
    ]


def item_document(entity_type: str, item: Any) -> Document:
    """The one document of a highlight, note, bookmark or fact."""
    base = {"id": entity_doc_id(entity_type, item.id), "kind": entity_type, "visits": 0,
            "first_seen": item.created_at, "last_seen": item.updated_at}  # fmt: skip
    if isinstance(item, Highlight):
        body = item.text if not item.note else f"{item.text}\n{item.note}"
        return {**base, "url": item.url, "domain": item.domain, "title": "", "body": body}
    if isinstance(item, Note):
        return {**base, "url": item.url or "", "domain": item.domain or "", "title": "",
                "body": item.content}  # fmt: skip
    if isinstance(item, Bookmark):
        body = " ".join(part for part in (item.folder, _url_words(item.url)) if part)
        return {**base, "url": item.url, "domain": item.domain, "title": item.title or "",
                "body": body}  # fmt: skip
    if isinstance(item, Fact):
        return {**base, "url": "", "domain": "", "title": item.key,
                "body": f"{item.key}: {item.value}"}  # fmt: skip
    raise TypeError(f"cannot index {type(item).__name__}")


def embedding_text(doc: Document) -> str:
    """What is embedded for a document: its title, then its body."""
    title, body = doc.get("title") or "", doc.get("body") or ""
    return f"{title}\n{body}".strip() if title else body.strip()


# ------------------------------------------------------------------ ledger reads


_ITEM_QUERIES: dict[str, tuple[str, str, str, type]] = {
    "highlight": ("highlights", "id, url, canonical_url, domain, text, context, note, "
                  "created_at, updated_at, external_id", "", Highlight),
    "note": ("notes", "id, content, url, canonical_url, domain, created_at, updated_at, "
             "external_id", "", Note),
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


# ------------------------------------------------------------------- watermark


@dataclass(frozen=True)
class Watermark:
    """How far the index is: see the module doc."""

    text: int = 0
    vectors: int = 0
    text_scan: tuple[str, int] | None = None
    vector_scan: tuple[str, int] | None = None

    FORMAT = 1

    @classmethod
    def rebuild(cls, seq: int) -> Watermark:
        """The watermark of an index that must scan every entity, starting at ``seq``."""
        start = (ENTITY_TYPES[0], 0)
        return cls(text=seq, vectors=seq, text_scan=start, vector_scan=start)

    def dumps(self) -> str:
        return json.dumps(
            {"format": self.FORMAT, "text": self.text, "vectors": self.vectors,
             "text_scan": self.text_scan, "vector_scan": self.vector_scan},
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


def _next_scan(entity_type: str) -> tuple[str, int] | None:
    position = ENTITY_TYPES.index(entity_type) + 1
    return (ENTITY_TYPES[position], 0) if position < len(ENTITY_TYPES) else None


@dataclass(frozen=True)
class IndexLag:
    """How far the index is behind the ledger. ``text`` counts changes not yet
    searchable, ``vectors`` changes searchable as text but not yet embedded (both are
    sequence-number distances, so pruned or merged changes may make them overcount)."""

    ledger_seq: int
    text_seq: int
    vector_seq: int
    text: int
    vectors: int
    rebuilding_text: bool
    rebuilding_vectors: bool

    @property
    def text_caught_up(self) -> bool:
        return self.text == 0 and not self.rebuilding_text

    @property
    def vectors_caught_up(self) -> bool:
        return self.text_caught_up and self.vectors == 0 and not self.rebuilding_vectors


class IndexBusy(BacktrailError):
    """Another process kept the index busy for longer than the wait allowed."""

    code = "index_busy"

    def __init__(self, waited: float) -> None:
        super().__init__(
            f"another process is indexing and did not finish within {waited:g} s; try again"
        )
        self.waited = waited


class IndexFailure(StoreError):
    """The search index could not be read or written."""

    code = "index_error"


# ------------------------------------------------------------------------- lock


class PassLock:
    """Mutual exclusion of indexing passes: within the process (a re-entrant thread lock)
    and across processes (``flock`` on a file; released by the kernel if we die)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._mutex = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextmanager
    def hold(self, wait: float) -> Iterator[bool]:
        """Yields True with the lock held, or False if it was not free within ``wait``."""
        deadline = time.monotonic() + wait
        got = self._mutex.acquire(timeout=wait) if wait > 0 else self._mutex.acquire(False)
        if not got:
            yield False
            return
        try:
            if self._depth == 0 and not self._lock_file(deadline):
                yield False
                return
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
                if self._depth == 0:
                    _unlock_fd(self._file_fd())
        finally:
            self._mutex.release()

    def _file_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd

    def _lock_file(self, deadline: float) -> bool:
        fd = self._file_fd()
        while not _try_lock_fd(fd):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class HostPresence:
    """Whether a native host is serving this data directory: the host holds a shared
    ``flock`` on ``host.lock`` for as long as it runs (the kernel drops it when the
    process dies, however it dies); others test for it with a non-blocking exclusive
    lock, which fails while any host holds its shared one. Several hosts (one per
    browser profile) may hold it at once. Without ``flock`` (Windows) no host is ever
    seen, and every process embeds as if it were alone."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    @property
    def announced(self) -> bool:
        """True in the host process itself."""
        return self._fd is not None

    def announce(self) -> None:
        """Hold the shared lock until :meth:`close` (the host does this)."""
        if self._fd is not None or _lock_shared is None:
            return
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock_shared(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def present(self) -> bool:
        """True if a host (in another process, or announced here) holds the lock."""
        if self._fd is not None:
            return True
        if _lock_shared is None:
            return False
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            # Another process probing at the same moment holds the exclusive lock for
            # a few microseconds: only a lock that stays taken means a host.
            for attempt in range(3):
                if _try_lock_fd(fd):
                    _unlock_fd(fd)
                    return False
                time.sleep(0.005 * (attempt + 1))
            return True
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock_fd(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock_fd(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    _lock_shared: Callable[[int], None] | None = None

else:
    import fcntl

    def _try_lock_fd(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_shared(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_SH)


# ---------------------------------------------------------------------- indexer

_FETCH_CHUNK = 50
_EXTRACT_BATCH = 20
_SCAN_BATCH = {"page": 50}
_SCAN_BATCH_DEFAULT = 500
_VECTOR_CHANGES = 1_000
_YIELD_SECONDS = 0.05
_MAX_RETRY_SECONDS = 300.0


def lower_thread_priority(steps: int) -> None:
    """Lower the calling thread's CPU priority by ``steps`` nice levels (at most to 19).
    Linux only: there a thread's nice value is its own (threads it starts, e.g.
    onnxruntime's pool when it loads the model, inherit it); elsewhere ``setpriority``
    would lower the whole process, so nothing is done."""
    if steps <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + steps))
    except OSError as error:  # e.g. a sandbox forbids it: indexing works as before
        logger.debug("could not lower the indexing thread's priority: %s", error)


def _entities(
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


def _report(progress: Progress | None, done: int, total: int, phase: str) -> None:
    if progress is not None:
        progress(max(0, done), max(0, total, done), phase)


class Indexer:
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
            config.ledger_path, client="backtrail-indexer",
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
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_guard = threading.Lock()
        self._compact_requested = False
        self._merging = threading.Event()
        self._merge_thread: threading.Thread | None = None

    # ----------------------------------------------------------- lifecycle

    def _open_index(self) -> _core.Index:
        path = self.config.index_dir
        try:
            return _core.Index(str(path), lock_timeout=self.config.index_lock_timeout)
        except _core.IndexCorrupt as error:
            logger.error("the search index is damaged (%s); rebuilding it from the ledger", error)
        with self._lock.hold(self.config.index_lock_timeout) as held:
            if not held:
                raise IndexBusy(self.config.index_lock_timeout)
            shutil.rmtree(path, ignore_errors=True)
            return _core.Index(str(path), lock_timeout=self.config.index_lock_timeout)

    def close(self) -> None:
        """Stop the background thread (after its current batch) and release files."""
        self.stop()
        self._ledger.close()
        self._lock.close()
        self._presence.close()

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

    def lag(self, ledger_seq: int | None = None) -> IndexLag:
        """The lag behind ``ledger_seq`` (default: the ledger's newest change)."""
        seq = self._ledger.max_change_seq() if ledger_seq is None else ledger_seq
        mark = self.watermark()
        if mark is None:
            return IndexLag(seq, 0, 0, seq, 0, True, True)
        return IndexLag(
            ledger_seq=seq,
            text_seq=mark.text,
            vector_seq=mark.vectors,
            text=max(0, seq - mark.text),
            vectors=max(0, mark.text - mark.vectors),
            rebuilding_text=mark.text_scan is not None,
            rebuilding_vectors=mark.vector_scan is not None,
        )

    def _mark(self) -> Watermark:
        """The current watermark, or a rebuild from the current sequence for a fresh index."""
        mark = self.watermark()
        return mark if mark is not None else Watermark.rebuild(self._ledger.max_change_seq())

    def _commit(self, mark: Watermark) -> Watermark:
        try:
            self.index.commit(mark.dumps())
        except _core.CoreError as error:
            self.index.rollback()
            raise IndexFailure(f"index commit failed: {error}") from error
        self.commits += 1
        return mark

    # ------------------------------------------------------- explicit runs

    def run_text(self, *, wait: float = 0.0, progress: Progress | None = None) -> bool:
        """One text pass up to the current change; False if another pass held the lock
        for longer than ``wait`` seconds."""
        with self._lock.hold(wait) as held:
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
        embedder = self._embedder()
        start = self._mark()
        while embedder is not None and self._vector_turn(embedder, wait, progress, start):
            pass
        self.merge_vectors()
        return self.lag()

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
        should visit. Merging rebuilds a graph (seconds at 100k pages), so it runs beside
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
        with self._lock.hold(wait) as held:
            if not held:
                raise IndexBusy(wait)
            self.index.rollback()
            self.index.delete_all()
            self._commit(Watermark.rebuild(self._ledger.max_change_seq()))
        return self.catch_up(progress=progress, vectors=vectors)

    def purge(self, *, wait: float | None = None) -> bool:
        """After a ``forget``: apply the deletions now and compact the index, so deleted
        words and vectors leave the index files. False (and retried in the background)
        if another pass kept the lock for longer than ``wait``."""
        wait = self.config.index_lock_timeout if wait is None else wait
        with self._lock.hold(wait) as held:
            if held:
                self._text_pass(None)
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

    def _extract_pending(self) -> int:
        """Turns queued HTML captures into page versions (main text by trafilatura), so
        their text joins this pass. Only those queued when it starts: under a steady
        stream of captures the pass still ends and commits, and the captures that came
        meanwhile (each of which scheduled another pass) wait for the next one. Returns
        how many were processed."""
        done = 0
        budget = self._ledger.count_pending_captures()
        while done < budget and (
            batch := self._ledger.pending_captures(min(_EXTRACT_BATCH, budget - done))
        ):
            for raw in batch:
                try:
                    found = extract_main_text(raw.html, raw.url)
                    self._ledger.complete_capture(
                        raw, text=found.text, title=found.title, language=found.language
                    )
                except BacktrailError:
                    logger.warning("dropping a queued capture that cannot be stored", exc_info=True)
                    self._ledger.drop_capture(raw.id)
                done += 1
        return done

    def _text_pass(self, progress: Progress | None) -> None:
        self._extract_pending()
        mark = self._mark()
        if mark.text_scan is not None:
            mark = self._text_scan(mark, progress)
        start = mark.text
        end = self._ledger.max_change_seq()
        while True:
            changes = self._ledger.changes_since(mark.text, limit=self.config.text_batch_changes)
            if not changes:
                return
            mark = self._apply_changes(mark, changes)
            _report(progress, mark.text - start, end - start, "text")

    def _apply_changes(self, mark: Watermark, changes: Sequence[Change]) -> Watermark:
        touched = self._touch_stats_only_pages(changes)
        entities = [e for e in _entities(changes) if e[1] != "page" or e[2] not in touched]
        staged = 0
        for start in range(0, len(entities), _FETCH_CHUNK):
            staged += self._stage_entities(entities[start : start + _FETCH_CHUNK])
            following = start + _FETCH_CHUNK
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
        while mark.text_scan is not None:
            entity_type, after = mark.text_scan
            batch = _SCAN_BATCH.get(entity_type, _SCAN_BATCH_DEFAULT)
            ids = self._reader.ids_after(entity_type, after, batch)
            if not ids:
                mark = replace(mark, text_scan=_next_scan(entity_type))
                if mark.text_scan is None:
                    mark = self._commit(mark)
                continue
            self._stage(entity_type, ids, self._reader.fetch(entity_type, ids))
            mark = self._commit(replace(mark, text_scan=(entity_type, ids[-1])))
            done += len(ids)
            _report(progress, done, total, "rebuild-text")
        return mark

    # ------------------------------------------------------ vector phase

    def _vector_turn(
        self,
        embedder: TextEmbedder,
        wait: float,
        progress: Progress | None,
        start: Watermark,
        upto: int | None = None,
    ) -> bool:
        """Under the lock: text first, then one vector batch (of changes up to ``upto``
        if given). True if more remain."""
        with self._lock.hold(wait) as held:
            if not held:
                return False
            self._text_pass(progress)
            more = self._vector_step(embedder, upto)
            mark = self._mark()
        if progress is None:
            return more
        if mark.vector_scan is not None or start.vector_scan is not None:
            _report(progress, *self._reader.scan_progress(mark.vector_scan), "rebuild-vectors")
        else:
            _report(progress, mark.vectors - start.vectors, mark.text - start.vectors, "vectors")
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
            e for e in _entities(changes, upserts_only=True)
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
        for start in range(0, len(entities), _FETCH_CHUNK):
            chunk = entities[start : start + _FETCH_CHUNK]
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
            vectors = embedder.embed([embedding_text(doc) for doc in part])
            with_vectors = [{**doc, "vector": v} for doc, v in zip(part, vectors, strict=True)]
            self.index.upsert(cast("list[_core.Document]", with_vectors))
            self._commit(final if start + size >= len(docs) else current)
        if not docs:
            self._commit(final)

    def _vector_scan_step(self, mark: Watermark, embedder: TextEmbedder) -> bool:
        """Embed the next batch of a rebuild scan, in entity id order."""
        docs: list[Document] = []
        position: tuple[str, int] | None = mark.vector_scan
        while position is not None and len(docs) < self.config.vector_batch_passages:
            entity_type, after = position
            ids = self._reader.ids_after(entity_type, after, _FETCH_CHUNK)
            if not ids:
                position = _next_scan(entity_type)
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

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the background thread after its current batch, and a running merge."""
        self._stop.set()
        self._wake.set()
        self.index.stop_merging()
        for thread in (self._thread, self._merge_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)

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
                self._merge_soon()
                return  # a host runs and indexes the rest
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
                embedder, 0.0, None, self._mark(), upto
            )
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
        lag = self.lag()
        if not lag.text_caught_up:
            return False
        return no_vector_work or lag.vectors_caught_up
