"""The service layer (DESIGN layer 4): :class:`Memory`, the one API every front end calls.

A ``Memory`` owns a :class:`~backtrail.store.Ledger` (the truth), an
:class:`~backtrail.indexer.Indexer` with the core search index, and, lazily, the
embedding model. Front ends (MCP server, native host, CLI) translate their protocol to
these calls and back; every rule (validation, capture policy, ranking profiles, result
labelling, pagination) lives here.

Guarantees:

- Writes return as soon as the ledger transaction is durable; indexing follows in the
  background (or on :meth:`Memory.catch_up`), and a search first makes this process's
  own earlier writes searchable (waiting at most ``search_fresh_wait`` seconds).
- Bad input raises a :class:`~backtrail.errors.BacktrailError` subclass with a clear
  message before anything is written; nothing stored changes.
- Search results are checked against the ledger, so nothing forgotten or deleted is ever
  returned even while the index lags, and each result says where its text came from
  (``origin``: ``web`` text is untrusted) with its URL, kind and capture/visit times.
- :meth:`Memory.forget` removes data from the ledger, the index and the vectors, and
  compacts both files so the words are gone from disk.

Threading: a ``Memory`` may be shared between threads. Ledger calls are serialised by
the ledger; searches run in parallel (the core releases the GIL); indexing runs on the
indexer's own thread and ledger connection (see :mod:`backtrail.indexer`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any, Literal, cast

from backtrail import _core, urls
from backtrail.config import Config
from backtrail.embedding import load_embedder
from backtrail.errors import (
    BacktrailError,
    Excluded,
    InvalidInput,
    InvalidUrl,
    LimitExceeded,
    Paused,
)
from backtrail.extract import decode_html, extract_main_text
from backtrail.indexer import (
    TYPE_PASSAGE,
    EntityReader,
    Indexer,
    IndexFailure,
    IndexLag,
    Progress,
    chunk_text,
    doc_id,
    parse_doc_id,
)
from backtrail.store import (
    Bookmark,
    BookmarkInput,
    Event,
    Fact,
    Highlight,
    ImportResult,
    Ledger,
    Note,
    Page,
    Stats,
    SyncResult,
    Tab,
    TabInput,
    Visit,
    VisitInput,
    VisitResult,
    checks,
)

__all__ = [
    "Memory", "VisitInfo", "CaptureReceipt", "SearchResult", "SearchPage", "PageText",
    "TimelineEntry", "CaptureSettings", "ForgetReport", "MemoryStats", "SearchUnavailable",
    "SEARCH_KINDS", "Origin",
]  # fmt: skip

logger = logging.getLogger(__name__)

SEARCH_KINDS = ("page", "highlight", "note", "bookmark", "fact")
"""Kinds a search can ask for; ``fact`` only when asked (see :meth:`Memory.search_facts`)."""
_DEFAULT_KINDS = ("page", "highlight", "note", "bookmark")
_CORE_KINDS = {"page": ("page", "passage")}
_PAUSE_KEY = "capture.pause"
_EXCLUSIONS_KEY = "capture.exclusions"
_MAX_RESULT_CHARS = 100_000
_MAX_READ_CHARS = 1_000_000
_MIN_EXTRA_PASSAGE = 40

Origin = Literal["web", "user", "assistant"]
"""Who wrote a result's text: ``web`` (a web page: untrusted), ``user`` (a note) or
``assistant`` (a fact written by an AI client)."""


class SearchUnavailable(BacktrailError):
    """The search mode asked for needs the embedding model, which is not available."""

    code = "search_unavailable"

    def __init__(self, mode: str, reason: str) -> None:
        super().__init__(f"{mode} search is unavailable: {reason}; use mode 'bm25'")
        self.mode = mode
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"mode": self.mode, "reason": self.reason}


# ---------------------------------------------------------------------- records


@dataclass(frozen=True)
class VisitInfo:
    """A visit recorded together with a capture (``visited_at`` defaults to the
    capture time)."""

    visited_at: int | None = None
    tab_id: int | None = None
    window_id: int | None = None
    transition: str | None = None
    referrer: str | None = None
    dwell_ms: int | None = None
    source: str = "extension"
    external_id: str | None = None


@dataclass(frozen=True)
class CaptureReceipt:
    """What :meth:`Memory.capture_page` stored (durably, before it returned). An HTML
    capture whose extraction was deferred has ``outcome`` ``"queued"``, ``version`` 0
    and ``text_chars`` 0: its text becomes a version in the next indexing pass."""

    page_id: int
    url: str
    canonical_url: str
    title: str | None
    outcome: str
    version: int
    text_chars: int
    truncated: bool
    visit_id: int | None


@dataclass(frozen=True)
class SearchResult:
    """One result. ``id`` is the ledger id of the ``kind`` (page id, note id...);
    ``snippet`` marks matched terms with ``**``; ``passages`` are further matching
    passages of the same page. ``origin``/``source`` say where the text came from."""

    kind: str
    id: int
    title: str | None
    url: str | None
    domain: str | None
    snippet: str
    passages: tuple[str, ...]
    score: float
    origin: Origin
    source: str
    first_seen: int | None
    last_seen: int | None
    captured_at: int | None
    visit_count: int | None
    explanation: dict[str, Any]


@dataclass(frozen=True)
class SearchPage:
    """A page of results; pass ``next_cursor`` (with the same query and filters) for the
    next page. ``lag`` tells how far the index was behind the ledger."""

    results: list[SearchResult]
    next_cursor: str | None
    mode: str
    lag: IndexLag


@dataclass(frozen=True)
class PageText:
    """A slice of a page's current text: ``text`` starts at ``offset`` of
    ``total_chars``; ``next_offset`` is where the next slice starts (``None`` at the end)."""

    page_id: int
    url: str
    title: str | None
    domain: str
    language: str | None
    captured_at: int | None
    first_seen: int
    last_seen: int
    visit_count: int
    offset: int
    text: str
    total_chars: int
    next_offset: int | None
    origin: Origin
    source: str


@dataclass(frozen=True)
class TimelineEntry:
    page_id: int
    url: str
    title: str | None
    domain: str
    first_seen: int
    last_seen: int
    visit_count: int
    captured_at: int | None


@dataclass(frozen=True)
class CaptureSettings:
    """Capture policy shared by every process (stored in the ledger)."""

    paused: bool
    paused_until: int | None
    exclusions: tuple[str, ...]
    default_exclusions: bool


@dataclass(frozen=True)
class ForgetReport:
    """``counts`` per ledger table; ``ledger_purged``/``index_purged`` are true when no
    copy of the removed content is left in the ledger's files / the index's files."""

    selector: str
    counts: dict[str, int]
    ledger_purged: bool
    index_purged: bool


@dataclass(frozen=True)
class MemoryStats:
    ledger: Stats
    index: dict[str, Any]
    lag: IndexLag
    model: str


@dataclass(frozen=True)
class _Request:
    """A validated search."""

    profile: str
    query: str
    limit: int
    offset: int
    since: int | None
    until: int | None
    domains: tuple[str, ...]
    kinds: tuple[str, ...]
    budget: int
    mode: str | None
    now: int | None

    def fingerprint(self) -> str:
        key = [self.profile, self.query, self.since, self.until, self.domains, self.kinds]
        return hashlib.sha256(json.dumps(key).encode("utf-8")).hexdigest()[:16]


# ----------------------------------------------------------------------- memory


class Memory:
    """Backtrail's service API. ``Memory(config, client="mcp:claude")``; use as a
    context manager or call :meth:`close`. With ``background_indexing`` (the default)
    a daemon thread indexes after writes; otherwise call :meth:`catch_up`."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        client: str = "backtrail",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config if config is not None else Config.load()
        if not isinstance(self.config, Config):
            raise InvalidInput("config", f"must be a Config, not {type(config).__name__}")
        self._clock = clock if clock is not None else time.time
        cfg = self.config
        self._ledger = Ledger(
            cfg.ledger_path, client=client, busy_timeout_ms=cfg.busy_timeout_ms,
            limits=cfg.limits(), clock=clock, log_reads=cfg.log_reads,
            synchronous=cfg.synchronous,
        )  # fmt: skip
        self._reader = EntityReader(self._ledger)
        self._model_lock = threading.Lock()
        self._embedder_obj: _core.Embedder | None = None
        self._model_error: str | None = None
        self._seq_lock = threading.Lock()
        # Writes made before this process opened the memory count as its own: the first
        # search makes them searchable unless the background indexer already did.
        self._own_seq = self._ledger.max_change_seq()
        try:
            self._indexer = Indexer(cfg, embedder=self._embedder)
        except BaseException:
            self._ledger.close()
            raise
        self._indexer.schedule()  # catch up with whatever others wrote meanwhile

    @classmethod
    def open(
        cls, data_dir: str | None = None, *, client: str = "backtrail", **overrides: Any
    ) -> Memory:
        """``Memory(Config.load(data_dir, overrides=overrides), client=client)``."""
        return cls(Config.load(data_dir, overrides=overrides), client=client)

    def close(self) -> None:
        """Stop background indexing (after its current batch) and close the files."""
        self._indexer.close()
        self._ledger.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def acting_as(self, client: str) -> Iterator[None]:
        """Record writes inside the block as made by ``client``."""
        with self._ledger.acting_as(client):
            yield

    @property
    def indexer(self) -> Indexer:
        return self._indexer

    @property
    def ledger(self) -> Ledger:
        """The ledger under this service, for the service layer's own modules
        (``browser_sync``, ``actions``) that share its connection and transactions.
        Front ends call the service methods instead."""
        return self._ledger

    # ------------------------------------------------------------- internals

    def _now(self) -> int:
        return int(self._clock())

    def _wrote(self) -> None:
        """After a write: remember it (read-your-writes) and schedule indexing."""
        seq = self._ledger.max_change_seq()
        with self._seq_lock:
            self._own_seq = max(self._own_seq, seq)
        self._indexer.note_own_write(seq)
        self._indexer.schedule()

    def _embedder(self) -> _core.Embedder | None:
        """The embedder, loaded on first use; ``None`` when off or unavailable."""
        if not self.config.embeddings:
            return None
        with self._model_lock:
            if self._embedder_obj is None and self._model_error is None:
                try:
                    self._embedder_obj = load_embedder(
                        self.config.model_dir, threads=self.config.embed_threads,
                        sessions=self.config.embed_sessions,
                        batch_size=self.config.embed_batch_size,
                        cache_dir=self.config.model_cache_dir,
                    )  # fmt: skip
                except _core.ModelError as error:
                    self._model_error = str(error)
                    logger.warning("embeddings unavailable, searching with BM25 only: %s", error)
            return self._embedder_obj

    def load_model(self) -> str:
        """Load the embedding model now rather than at the first search that needs it;
        returns :meth:`model_status`."""
        self._embedder()
        return self.model_status()

    def model_status(self) -> str:
        """``disabled``, ``not loaded``, ``ready`` or ``unavailable: <reason>``."""
        if not self.config.embeddings:
            return "disabled"
        if self._model_error is not None:
            return f"unavailable: {self._model_error}"
        return "ready" if self._embedder_obj is not None else "not loaded"

    # ---------------------------------------------------------------- capture

    def capture_page(
        self,
        url: str,
        *,
        html: str | bytes | None = None,
        text: str | None = None,
        title: str | None = None,
        language: str | None = None,
        captured_at: int | None = None,
        visit: VisitInfo | Mapping[str, Any] | None = None,
    ) -> CaptureReceipt:
        """Store a page's main text: give ``text``, or ``html`` to extract it from.
        Refuses with ``Paused`` while capture is paused and ``Excluded`` for URLs that
        match an exclusion rule. ``title``/``language`` override what the HTML says.
        With ``visit`` a visit is recorded in the same transaction. Returns once the
        ledger commit is durable; indexing follows."""
        self._check_capture(url)
        info = _visit_info(visit)
        if html is not None and text is None and self.config.defer_extraction:
            return self._queue_capture(url, html, title, language, captured_at, info)
        body, found_title, found_language = self._main_text(url, html, text)
        with self._ledger.transaction():
            result = self._ledger.capture_page(
                url, text=body, title=title if title is not None else found_title,
                language=language if language is not None else found_language,
                captured_at=captured_at,
            )  # fmt: skip
            visit_id = None
            if info is not None:
                recorded = self._record(url, info, result.page.title, captured_at)
                visit_id = recorded.visit.id
        self._wrote()
        page, version = result.page, result.version
        return CaptureReceipt(
            page_id=page.id, url=page.url, canonical_url=page.canonical_url, title=page.title,
            outcome=result.outcome, version=version.version, text_chars=len(version.text or ""),
            truncated=version.truncated, visit_id=visit_id,
        )  # fmt: skip

    def _queue_capture(
        self,
        url: str,
        html: str | bytes,
        title: str | None,
        language: str | None,
        captured_at: int | None,
        info: VisitInfo | None,
    ) -> CaptureReceipt:
        limit = self.config.max_capture_bytes
        if isinstance(html, bytes):
            if len(html) > limit:
                raise LimitExceeded("html", limit, len(html), "bytes")
            html = decode_html(html)
        elif isinstance(html, str):
            _utf8_size(html, "html", limit)
        else:
            raise InvalidInput("html", f"must be a string, got {type(html).__name__}")
        with self._ledger.transaction():
            page, _ = self._ledger.queue_capture(
                url, html=html, title=title, language=language, captured_at=captured_at
            )
            visit_id = None
            if info is not None:
                visit_id = self._record(url, info, page.title, captured_at).visit.id
        self._wrote()
        return CaptureReceipt(
            page_id=page.id, url=page.url, canonical_url=page.canonical_url, title=page.title,
            outcome="queued", version=0, text_chars=0, truncated=False, visit_id=visit_id,
        )  # fmt: skip

    def _record(
        self, url: str, info: VisitInfo, title: str | None, default_at: int | None
    ) -> VisitResult:
        at = info.visited_at if info.visited_at is not None else default_at
        return self._ledger.record_visit(
            url, visited_at=at, title=title, tab_id=info.tab_id, window_id=info.window_id,
            transition=info.transition, referrer=info.referrer, dwell_ms=info.dwell_ms,
            source=info.source, external_id=info.external_id,
        )  # fmt: skip

    def _main_text(
        self, url: str, html: object, text: object
    ) -> tuple[str, str | None, str | None]:
        if (html is None) == (text is None):
            raise InvalidInput("text", "give exactly one of html or text")
        limit = self.config.max_capture_bytes
        if text is not None:
            _utf8_size(text, "text", limit)
            return str(text), None, None
        if isinstance(html, bytes):
            if len(html) > limit:
                raise LimitExceeded("html", limit, len(html), "bytes")
        else:
            _utf8_size(html, "html", limit)
        extracted = extract_main_text(html, url)  # type: ignore[arg-type]
        return extracted.text, extracted.title, extracted.language

    def record_visit(
        self,
        url: str,
        *,
        visited_at: int | None = None,
        title: str | None = None,
        tab_id: int | None = None,
        window_id: int | None = None,
        transition: str | None = None,
        referrer: str | None = None,
        dwell_ms: int | None = None,
        source: str = "extension",
        external_id: str | None = None,
    ) -> VisitResult:
        """Record a visit (idempotent per ``(source, external_id)``); honours pause and
        exclusions like :meth:`capture_page`."""
        self._check_capture(url)
        info = VisitInfo(visited_at, tab_id, window_id, transition, referrer, dwell_ms, source,
                         external_id)  # fmt: skip
        result = self._record(url, info, title, None)
        if result.created:
            self._wrote()
        return result

    def import_visits(self, visits: Iterable[VisitInput | Mapping[str, Any]]) -> ImportResult:
        """Import browser history in one transaction. Excluded URLs are skipped (and
        counted as skipped); a bad item raises ``InvalidInput`` naming its index and
        nothing is stored. The user asked for it, so a pause does not apply."""
        if isinstance(visits, (str, bytes, Mapping)) or not isinstance(visits, Iterable):
            raise InvalidInput("visits", "must be a list of visits")
        rules = self._exclusions()
        kept: list[Any] = []
        positions: list[int] = []
        excluded = 0
        for position, item in enumerate(visits):
            url = item.get("url") if isinstance(item, Mapping) else getattr(item, "url", None)
            try:
                if urls.matching_rule(url, rules) is not None:
                    excluded += 1
                    continue
            except InvalidUrl:
                pass  # the ledger names the bad item
            kept.append(dict(item) if isinstance(item, Mapping) else item)
            positions.append(position)
        try:
            result = self._ledger.import_visits(kept)
        except InvalidInput as error:
            raise _renumbered(error, "visits", positions) from None
        if result.added:
            self._wrote()
        return ImportResult(result.added, result.skipped + excluded, result.pages_created)

    def set_visit_dwell(self, visit_id: int, dwell_ms: int) -> Visit:
        """Set a visit's active dwell time, known when the user leaves the page."""
        visit = self._ledger.set_visit_dwell(visit_id, dwell_ms)
        self._wrote()
        return visit

    # ----------------------------------------------------------- capture policy

    def _check_capture(self, url: object) -> None:
        rule = urls.matching_rule(url, self._exclusions())  # InvalidUrl first
        settings = self._pause()
        if settings is not None:
            raise Paused(settings)
        if rule is not None:
            raise Excluded(urls.scrub_url(url), rule)

    def _pause(self) -> int | None:
        """``None`` when capturing, else the pause's end (0 for "until resumed")."""
        value = self._ledger.get_setting(_PAUSE_KEY)
        if value is None:
            return None
        until = value.get("until") if isinstance(value, dict) else None
        if isinstance(until, int) and not isinstance(until, bool):
            return until if until > self._now() else None
        return 0

    def _exclusions(self) -> tuple[str, ...]:
        stored = self._ledger.get_setting(_EXCLUSIONS_KEY)
        if isinstance(stored, list) and all(isinstance(rule, str) for rule in stored):
            return tuple(stored)
        return urls.DEFAULT_EXCLUSIONS

    def capture_settings(self) -> CaptureSettings:
        until = self._pause()
        stored = self._ledger.get_setting(_EXCLUSIONS_KEY)
        return CaptureSettings(
            paused=until is not None, paused_until=until or None,
            exclusions=self._exclusions(), default_exclusions=stored is None,
        )  # fmt: skip

    def pause_capture(self, until: int | None = None) -> CaptureSettings:
        """Pause capturing in every process, until ``until`` (unix seconds) or until
        :meth:`resume_capture`."""
        if until is not None:
            until = checks.timestamp(until, "until")
            if until <= self._now():
                raise InvalidInput("until", "must be in the future")
        self._ledger.set_setting(_PAUSE_KEY, {"until": until})
        return self.capture_settings()

    def resume_capture(self) -> CaptureSettings:
        self._ledger.delete_setting(_PAUSE_KEY)
        return self.capture_settings()

    def set_exclusions(self, rules: Sequence[str] | None) -> CaptureSettings:
        """Replace the exclusion rules (syntax: :class:`backtrail.urls.ExclusionRules`);
        ``None`` restores the defaults."""
        if rules is None:
            self._ledger.delete_setting(_EXCLUSIONS_KEY)
        else:
            if isinstance(rules, (str, bytes)) or not isinstance(rules, Sequence):
                raise InvalidInput("rules", "must be a list of exclusion rules")
            clean = list(dict.fromkeys(urls.ExclusionRules(rules).rules))
            self._ledger.set_setting(_EXCLUSIONS_KEY, clean)
        return self.capture_settings()

    def add_exclusion(self, rule: str) -> CaptureSettings:
        clean = urls.validate_exclusion_rule(rule)
        return self.set_exclusions([*self._exclusions(), clean])

    def remove_exclusion(self, rule: str) -> CaptureSettings:
        clean = urls.validate_exclusion_rule(rule)
        current = self._exclusions()
        if clean not in current:
            raise InvalidInput("rule", f"{clean!r:.80} is not an exclusion rule in use")
        return self.set_exclusions([r for r in current if r != clean])

    def exclusion_for(self, url: str) -> str | None:
        """The exclusion rule ``url`` matches, or ``None`` (``InvalidUrl`` if it cannot
        be captured at all)."""
        return urls.matching_rule(url, self._exclusions())

    # ----------------------------------------------------------------- search

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        since: int | None = None,
        until: int | None = None,
        domains: Sequence[str] | str | None = None,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        max_chars_per_result: int | None = None,
        mode: str | None = None,
    ) -> SearchPage:
        """Search pages, highlights, notes and bookmarks (``kinds`` narrows; ``"fact"``
        is searched only when asked). ``mode`` defaults to hybrid when the model is
        available, else BM25. ``since``/``until`` bound the last visit, ``domains``
        include subdomains. Each result's text is cut to ``max_chars_per_result``."""
        request = self._request(
            "search", query, limit, since, until, domains, kinds, cursor,
            max_chars_per_result, mode,
        )  # fmt: skip
        return self._search(request)

    def find_forgotten(
        self,
        description: str,
        *,
        limit: int | None = None,
        since: int | None = None,
        until: int | None = None,
        domains: Sequence[str] | str | None = None,
        cursor: str | None = None,
        max_chars_per_result: int | None = None,
    ) -> SearchPage:
        """Find something half-remembered from a vague ``description``: semantic
        matching weighs more, and recency and visit counts re-rank more strongly
        (``forgotten_*`` settings)."""
        request = self._request(
            "forgotten", description, limit, since, until, domains,
            ("page", "highlight", "bookmark"), cursor, max_chars_per_result, None,
            field="description",
        )  # fmt: skip
        return self._search(request)

    def search_facts(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        """Facts whose key or value match ``query`` (any wording, in hybrid mode)."""
        return self.search(query, limit=limit, kinds=["fact"], cursor=cursor)

    def search_highlights(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["highlight"], cursor=cursor)

    def search_notes(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["note"], cursor=cursor)

    def search_bookmarks(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["bookmark"], cursor=cursor)

    def _request(
        self,
        profile: str,
        query: object,
        limit: object,
        since: object,
        until: object,
        domains: object,
        kinds: object,
        cursor: object,
        budget: object,
        mode: object,
        *,
        field: str = "query",
    ) -> _Request:
        cfg = self.config
        text = checks.text(query, field, cfg.max_query_chars)
        count = cfg.search_limit if limit is None else checks.integer(limit, "limit", minimum=1)
        if count > cfg.max_search_limit:
            raise InvalidInput("limit", f"must be at most {cfg.max_search_limit}, got {count}")
        start = None if since is None else checks.timestamp(since, "since")
        end = None if until is None else checks.timestamp(until, "until")
        if start is not None and end is not None and start >= end:
            raise InvalidInput("until", f"must be later than since ({start}), got {end}")
        chars = (
            cfg.result_chars
            if budget is None
            else checks.integer(budget, "max_chars_per_result", minimum=_MIN_EXTRA_PASSAGE)
        )
        if chars > _MAX_RESULT_CHARS:
            raise InvalidInput("max_chars_per_result", f"must be at most {_MAX_RESULT_CHARS}")
        if mode is not None:
            mode = checks.one_of(mode, "mode", ("bm25", "vector", "hybrid"))
        request = _Request(
            profile, text, count, 0, start, end, _domains(domains), _kinds(kinds), chars,
            mode, None,  # type: ignore[arg-type]
        )  # fmt: skip
        if cursor is None:
            return request
        return self._resume(request, cursor)

    def _resume(self, request: _Request, cursor: object) -> _Request:
        state = _decode_cursor(cursor)
        if state["f"] != request.fingerprint():
            raise InvalidInput("cursor", "belongs to a different search (query or filters changed)")
        if state["o"] > self.config.max_search_offset:
            raise InvalidInput("cursor", f"pages beyond result {self.config.max_search_offset}")
        mode = request.mode if request.mode is not None else state["m"]
        return dataclasses.replace(request, offset=state["o"], now=state["n"], mode=mode)

    def _search(self, request: _Request) -> SearchPage:
        self._make_own_writes_searchable()
        mode, embedder = self._query_model(request)
        now = request.now if request.now is not None else self._now()
        try:
            hits = self._core_search(request, mode, embedder, now)
        except _core.ModelError as error:
            if request.mode == "vector":
                raise SearchUnavailable("vector", str(error)) from error
            logger.warning("could not embed the query, searching with BM25 only: %s", error)
            mode = "bm25"
            hits = self._core_search(request, mode, None, now)
        results = self._results(hits, request.budget)
        end = request.offset + request.limit
        cursor = None
        if len(results) > end and end <= self.config.max_search_offset:
            cursor = _encode_cursor(
                {"v": 1, "o": end, "n": now, "m": mode, "f": request.fingerprint()}
            )
        return SearchPage(results[request.offset : end], cursor, mode, self.index_lag())

    def _core_search(
        self, request: _Request, mode: str, embedder: _core.Embedder | None, now: int
    ) -> list[_core.Hit]:
        """The core's hits for ``request``; the core embeds the query with ``embedder``
        (keeping recent query vectors) while it gathers the BM25 candidates."""
        wanted = request.offset + request.limit + 1
        try:
            return self._indexer.index.search(
                request.query, wanted + request.limit // 2 + 2,
                kinds=[k for kind in request.kinds for k in _CORE_KINDS.get(kind, (kind,))],
                domains=list(request.domains) or None, since=request.since,
                until=request.until, now=now, mode=cast(Any, mode), embedder=embedder,
                options=cast(Any, self._options(request)),
            )  # fmt: skip
        except _core.ModelError:
            raise
        except _core.CoreError as error:
            raise IndexFailure(f"search failed: {error}") from error

    def _make_own_writes_searchable(self) -> None:
        """Read-your-writes: index this process's earlier writes before searching,
        waiting at most ``search_fresh_wait`` for another process's pass. A backlog
        larger than one text batch is left to the background thread."""
        wait = self.config.search_fresh_wait
        if wait <= 0 or self._own_seq == 0:
            return
        mark = self._indexer.watermark()
        done = 0 if mark is None or mark.text_scan is not None else mark.text
        if done >= self._own_seq:
            return
        backlog = self._own_seq - done
        if self.config.background_indexing and backlog > self.config.text_batch_changes:
            return
        try:
            self._indexer.run_text(wait=wait)
        except BacktrailError as error:
            logger.warning("could not index recent writes before searching: %s", error)

    def _query_model(self, request: _Request) -> tuple[str, _core.Embedder | None]:
        """The search mode and the model that embeds the query (none for BM25)."""
        if request.mode == "bm25":
            return "bm25", None
        embedder = self._embedder()
        if embedder is None:
            if request.mode == "vector":
                reason = self._model_error or "embeddings are disabled in the settings"
                raise SearchUnavailable("vector", reason)
            return "bm25", None
        return request.mode or "hybrid", embedder

    def _options(self, request: _Request) -> dict[str, Any]:
        cfg = self.config
        profile = "forgotten" if request.profile == "forgotten" else "search"
        return {
            "bm25_weight": getattr(cfg, f"{profile}_bm25_weight"),
            "decay_half_life_days": getattr(cfg, f"{profile}_decay_half_life_days"),
            "decay_floor": getattr(cfg, f"{profile}_decay_floor"),
            "visit_weight": getattr(cfg, f"{profile}_visit_weight"),
            "duplicate_similarity": getattr(cfg, f"{profile}_duplicate_similarity"),
            "snippet_chars": min(cfg.snippet_chars, request.budget),
        }

    def _results(self, hits: Sequence[Mapping[str, Any]], budget: int) -> list[SearchResult]:
        """Hits whose entity still exists in the ledger, as labelled results."""
        refs = []
        for hit in hits:
            try:
                refs.append((hit, parse_doc_id(hit["id"])))
            except ValueError:
                logger.warning("ignoring index document %d that Backtrail did not write", hit["id"])
        wanted: dict[str, list[int]] = {}
        for _, ref in refs:
            wanted.setdefault(ref.entity_type, []).append(ref.entity_id)
        found = {
            entity_type: self._reader.fetch(entity_type, ids, with_text=False)
            for entity_type, ids in wanted.items()
        }
        return [
            _result(hit, ref.entity_type, found[ref.entity_type][ref.entity_id], budget)
            for hit, ref in refs
            if ref.entity_id in found[ref.entity_type]
        ]

    # ------------------------------------------------------------------ reading

    def get_page(
        self,
        url: str | None = None,
        *,
        page_id: int | None = None,
        offset: int = 0,
        length: int | None = None,
    ) -> PageText:
        """Read a page's current text from ``offset`` (characters), ``length``
        characters at a time (default ``page_read_chars``)."""
        start = checks.integer(offset, "offset", minimum=0)
        count = (
            self.config.page_read_chars
            if length is None
            else checks.integer(length, "length", minimum=1)
        )
        if count > _MAX_READ_CHARS:
            raise InvalidInput("length", f"must be at most {_MAX_READ_CHARS}, got {count}")
        page = self._ledger.get_page(url, page_id=page_id, with_text=True)
        text = page.text or ""
        piece = text[start : start + count]
        following = start + len(piece)
        return PageText(
            page_id=page.id, url=page.url, title=page.title, domain=page.domain,
            language=page.language, captured_at=page.last_captured_at,
            first_seen=page.first_seen, last_seen=page.last_seen,
            visit_count=page.visit_count, offset=start, text=piece, total_chars=len(text),
            next_offset=following if following < len(text) else None, origin="web",
            source=_label("page", page.url, page.last_captured_at, page.last_seen),
        )  # fmt: skip

    def timeline(
        self,
        since: int | None = None,
        until: int | None = None,
        *,
        domain: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[TimelineEntry]:
        """Pages by last visit, newest first, within [since, until) and a domain."""
        pages = self._ledger.list_pages(
            domain=domain, since=since, until=until, limit=limit, offset=offset
        )
        return [
            TimelineEntry(
                p.id,
                p.url,
                p.title,
                p.domain,
                p.first_seen,
                p.last_seen,
                p.visit_count,
                p.last_captured_at,
            )  # fmt: skip
            for p in pages
        ]

    # ------------------------------------------------------- highlights, notes

    def add_highlight(
        self,
        url: str,
        text: str,
        *,
        context: str | None = None,
        note: str | None = None,
        created_at: int | None = None,
        external_id: str | None = None,
    ) -> Highlight:
        """Keep text the user highlighted on ``url`` (idempotent per ``external_id``)."""
        highlight = self._ledger.add_highlight(
            url, text, context=context, note=note, created_at=created_at,
            external_id=external_id,
        )  # fmt: skip
        self._wrote()
        return highlight

    def set_highlight_note(self, highlight_id: int, note: str | None) -> Highlight:
        highlight = self._ledger.set_highlight_note(highlight_id, note)
        self._wrote()
        return highlight

    def delete_highlight(self, highlight_id: int) -> None:
        self._ledger.delete_highlight(highlight_id)
        self._wrote()

    def get_highlight(self, highlight_id: int) -> Highlight:
        return self._ledger.get_highlight(highlight_id)

    def list_highlights(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
    ) -> list[Highlight]:
        return self._ledger.list_highlights(
            url=url, domain=domain, since=since, until=until, limit=limit
        )

    def add_note(
        self,
        content: str,
        *,
        url: str | None = None,
        created_at: int | None = None,
        external_id: str | None = None,
    ) -> Note:
        """Keep a note, optionally about ``url`` (idempotent per ``external_id``)."""
        note = self._ledger.add_note(
            content, url=url, created_at=created_at, external_id=external_id
        )
        self._wrote()
        return note

    def update_note(self, note_id: int, content: str) -> Note:
        note = self._ledger.update_note(note_id, content)
        self._wrote()
        return note

    def delete_note(self, note_id: int) -> None:
        self._ledger.delete_note(note_id)
        self._wrote()

    def get_note(self, note_id: int) -> Note:
        return self._ledger.get_note(note_id)

    def list_notes(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
    ) -> list[Note]:
        return self._ledger.list_notes(url=url, domain=domain, since=since, until=until,
                                       limit=limit)  # fmt: skip

    # -------------------------------------------------------------- bookmarks

    def upsert_bookmark(
        self,
        browser_id: str,
        url: str,
        *,
        title: str | None = None,
        folder: str | None = None,
        created_at: int | None = None,
        profile: str = "default",
    ) -> Bookmark:
        bookmark = self._ledger.upsert_bookmark(
            browser_id, url, title=title, folder=folder, created_at=created_at, profile=profile
        )
        self._wrote()
        return bookmark

    def delete_bookmark(self, browser_id: str, *, profile: str = "default") -> None:
        self._ledger.delete_bookmark(browser_id, profile=profile)
        self._wrote()

    def replace_bookmarks(
        self, bookmarks: Iterable[BookmarkInput | Mapping[str, Any]], *, profile: str = "default"
    ) -> SyncResult:
        """Make the stored bookmarks of ``profile`` equal to the browser's."""
        if isinstance(bookmarks, Iterable) and not isinstance(bookmarks, (str, bytes, Mapping)):
            bookmarks = [dict(b) if isinstance(b, Mapping) else b for b in bookmarks]
        result = self._ledger.replace_bookmarks(bookmarks, profile=profile)  # type: ignore[arg-type]
        self._wrote()
        return result

    def list_bookmarks(
        self,
        *,
        profile: str | None = None,
        url: str | None = None,
        domain: str | None = None,
        limit: int = 1000,
    ) -> list[Bookmark]:
        return self._ledger.list_bookmarks(profile=profile, url=url, domain=domain, limit=limit)

    # ------------------------------------------------------------------- tabs

    def snapshot_tabs(
        self,
        tabs: Sequence[TabInput | Mapping[str, Any]],
        *,
        profile: str = "default",
        window_id: int | None = None,
    ) -> int:
        """Replace the open-tabs snapshot of a profile (or of one window)."""
        if isinstance(tabs, Sequence) and not isinstance(tabs, (str, bytes)):
            tabs = [dict(t) if isinstance(t, Mapping) else t for t in tabs]
        return self._ledger.snapshot_tabs(tabs, profile=profile, window_id=window_id)  # type: ignore[arg-type]

    def apply_tab_event(self, kind: str, tab_id: int, **changes: Any) -> Tab | None:
        """Apply a tab event (``opened``, ``closed``, ``activated``, ``updated``); the
        keyword arguments are those of :meth:`Ledger.apply_tab_event`."""
        allowed = {"profile", "window_id", "url", "title", "active", "pinned", "group_id",
                   "index", "last_accessed"}  # fmt: skip
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise InvalidInput(unknown[0], "is not a tab field")
        return self._ledger.apply_tab_event(kind, tab_id, **changes)  # type: ignore[arg-type]

    def list_tabs(self, *, profile: str | None = None, window_id: int | None = None) -> list[Tab]:
        return self._ledger.list_tabs(profile=profile, window_id=window_id)

    def active_tab(self, *, profile: str | None = None) -> Tab | None:
        """The active tab most recently used (across windows), or ``None``."""
        active = [tab for tab in self.list_tabs(profile=profile) if tab.active]
        if not active:
            return None
        return max(active, key=lambda tab: (tab.last_accessed or 0, tab.updated_at))

    # ------------------------------------------------------------------ facts

    def set_fact(
        self,
        key: str,
        value: str,
        *,
        expected_value: str | None = None,
        expected_version: int | None = None,
        require_absent: bool = False,
    ) -> Fact:
        """Set a fact; compare-and-swap with ``expected_version`` / ``expected_value``
        (``VersionConflict``), create-only with ``require_absent`` (``KeyExists``)."""
        fact = self._ledger.set_fact(
            key, value, expected_value=expected_value, expected_version=expected_version,
            require_absent=require_absent,
        )  # fmt: skip
        self._wrote()
        return fact

    def get_fact(self, key: str) -> Fact:
        return self._ledger.get_fact(key)

    def list_facts(
        self, prefix: str = "", *, case_insensitive: bool = False, limit: int = 1000,
        offset: int = 0,
    ) -> list[Fact]:  # fmt: skip
        return self._ledger.list_facts(
            prefix, case_insensitive=case_insensitive, limit=limit, offset=offset
        )

    def delete_fact(self, key: str, *, expected_version: int | None = None) -> Fact:
        fact = self._ledger.delete_fact(key, expected_version=expected_version)
        self._wrote()
        return fact

    def fact_history(self, key: str, *, limit: int = 100) -> list[Event]:
        return self._ledger.fact_history(key, limit=limit)

    # ----------------------------------------------------------------- forget

    def forget(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        everything: bool = False,
        include_facts: bool = False,
    ) -> ForgetReport:
        """Remove browsing data chosen by exactly one selector from the ledger, the
        index and the vectors, then compact both so no copy is left on disk. The audit
        log records that a deletion happened (with counts), never what was deleted."""
        result = self._ledger.forget(
            url=url, domain=domain, since=since, until=until, everything=everything,
            include_facts=include_facts,
        )  # fmt: skip
        self._wrote()
        index_purged = self._indexer.purge()
        ledger_purged = self._ledger.checkpoint() or result.purged
        return ForgetReport(result.selector, result.counts, ledger_purged, index_purged)

    # ------------------------------------------------------------------ index

    def catch_up(self, *, vectors: bool = True, progress: Progress | None = None) -> IndexLag:
        """Index everything written so far (text, then vectors unless ``vectors`` is
        false); for commands that do not keep a background thread."""
        vectors = checks.boolean(vectors, "vectors")
        return self._indexer.catch_up(
            vectors=vectors and self.config.embeddings, progress=_progress(progress)
        )

    def reindex(self, *, progress: Progress | None = None) -> IndexLag:
        """Rebuild the whole index from the ledger."""
        return self._indexer.reindex(progress=_progress(progress), vectors=self.config.embeddings)

    def similar_pages(
        self, page_id: int, *, probes: int = 6, k: int = 30
    ) -> list[dict[int, tuple[float, str]]] | None:
        """Pages near a page by meaning: for up to ``probes`` of its passages (spread
        over its text), the pages whose passages lie closest to that passage's vector,
        as ``{page_id: (cosine similarity, snippet)}`` (the page itself left out).
        ``None`` when there is nothing to compare by: embeddings are off, or none of
        these passages has its vector yet."""
        page = self._ledger.get_page(page_id=checks.identifier(page_id, "page_id"),
                                     with_text=True)  # fmt: skip
        count = checks.integer(probes, "probes", minimum=1)
        wanted = checks.integer(k, "k", minimum=1)
        if not self.config.embeddings or not page.text:
            return None
        cfg = self.config
        total = len(chunk_text(page.text, cfg.passage_chars, cfg.passage_overlap,
                               cfg.max_passages_per_page))  # fmt: skip
        numbers = sorted({round(i * (total - 1) / max(1, count - 1)) for i in range(count)})
        found: list[dict[int, tuple[float, str]]] = []
        for number in numbers:
            try:
                hits = self._indexer.index.similar(doc_id(TYPE_PASSAGE, page.id, number), wanted)
            except _core.InvalidArgument:
                continue  # not indexed yet
            except _core.CoreError as error:
                raise IndexFailure(f"similarity search failed: {error}") from error
            if not hits:
                continue  # this passage has no vector yet
            near: dict[int, tuple[float, str]] = {}
            for hit in hits:
                try:
                    ref = parse_doc_id(hit["id"])
                except ValueError:
                    continue
                similarity = hit["explanation"].get("vector_similarity")
                if ref.entity_type != "page" or ref.entity_id == page.id or similarity is None:
                    continue
                if similarity > near.get(ref.entity_id, (-2.0, ""))[0]:
                    near[ref.entity_id] = (float(similarity), hit["snippet"])
            found.append(near)
        return found or None

    def hold_write_lock(self, seconds: float, *, client: str | None = None) -> float:
        """Hold the ledger's write lock for ``seconds`` on a connection of its own (so
        this process's reads go on), recording a ``demo.lock_hold`` event as ``client``
        (default: this memory's); returns how long it was held. Writers everywhere
        meanwhile wait up to their ``busy_timeout_ms``, then fail with ``StoreBusy``:
        the contention demo of mcp-memory-bridge's ``lock_hold``."""
        cfg = self.config
        holder = Ledger(
            cfg.ledger_path, client=client or self._ledger.client,
            busy_timeout_ms=cfg.busy_timeout_ms,
            limits=cfg.limits(), clock=self._clock, synchronous=cfg.synchronous,
        )  # fmt: skip
        try:
            return holder.hold_write_lock(seconds)
        finally:
            holder.close()

    def index_lag(self) -> IndexLag:
        """How far the index is behind the ledger (text and vectors)."""
        return self._indexer.lag(self._ledger.max_change_seq())

    def stats(self) -> MemoryStats:
        """Ledger counts and sizes, index counts, index lag and model status."""
        try:
            index = dict(self._indexer.index.stats())
        except _core.CoreError as error:
            raise IndexFailure(f"cannot read index statistics: {error}") from error
        return MemoryStats(self._ledger.stats(), index, self.index_lag(), self.model_status())


# --------------------------------------------------------------------- helpers


def _utf8_size(value: object, field: str, limit: int) -> int:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise LimitExceeded(field, limit, len(value.encode("utf-8", "replace")), "bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidInput(
            field, f"contains invalid Unicode (a lone surrogate at index {error.start})"
        ) from None
    if size > limit:
        raise LimitExceeded(field, limit, size, "bytes")
    return size


def _progress(progress: object) -> Progress | None:
    if progress is not None and not callable(progress):
        raise InvalidInput("progress", "must be a function (done, total, phase) or None")
    return progress  # type: ignore[return-value]


def _renumbered(error: InvalidInput, name: str, positions: list[int]) -> InvalidInput:
    """``error`` about ``name[i]`` of a filtered list, renamed to the caller's index."""
    match = re.match(rf"{name}\[(\d+)\]", error.field)
    if match is None or int(match.group(1)) >= len(positions):
        return error
    field = f"{name}[{positions[int(match.group(1))]}]{error.field[match.end() :]}"
    if isinstance(error, InvalidUrl):
        return InvalidUrl(error.url, error.reason, field)
    if isinstance(error, LimitExceeded):
        return LimitExceeded(field, error.limit, error.actual, error.unit)
    return InvalidInput(field, error.reason)


def _visit_info(visit: object) -> VisitInfo | None:
    if visit is None or isinstance(visit, VisitInfo):
        return visit
    if isinstance(visit, Mapping):
        names = {f.name for f in fields(VisitInfo)}
        unknown = sorted(str(key) for key in visit if key not in names)
        if unknown:
            raise InvalidInput("visit", f"unknown field {unknown[0]!r:.60}")
        return VisitInfo(**visit)
    raise InvalidInput("visit", f"must be a mapping of visit fields, not {type(visit).__name__}")


def _domains(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidInput("domains", "must be a list of domain names")
    return tuple(sorted({urls.normalize_domain(item) for item in items}))


def _kinds(value: object) -> tuple[str, ...]:
    if value is None:
        return _DEFAULT_KINDS
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidInput("kinds", f"must be a list of kinds ({', '.join(SEARCH_KINDS)})")
    kinds = tuple(checks.one_of(kind, "kinds[]", SEARCH_KINDS) for kind in value)
    if not kinds:
        raise InvalidInput("kinds", "must name at least one kind")
    return tuple(sorted(set(kinds)))


def _encode_cursor(state: dict[str, Any]) -> str:
    raw = json.dumps(state, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: object) -> dict[str, Any]:
    bad = InvalidInput("cursor", "is not a cursor returned by a previous search")
    if not isinstance(cursor, str) or len(cursor) > 512:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        state = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeError):
        raise bad from None
    valid = (
        isinstance(state, dict)
        and state.get("v") == 1
        and all(
            isinstance(state.get(k), int) and not isinstance(state.get(k), bool) and state[k] >= 0
            for k in ("o", "n")
        )  # fmt: skip
        and state.get("m") in ("bm25", "vector", "hybrid")
        and isinstance(state.get("f"), str)
    )
    if not valid:
        raise bad
    return state


def _when(ts: int | None) -> str:
    if ts is None:
        return "unknown time"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _label(kind: str, url: str | None, captured_at: int | None, last_seen: int | None) -> str:
    where = f" from {url}" if url else ""
    return (
        f"{kind}{where}, captured {_when(captured_at)}, last seen {_when(last_seen)}; "
        "untrusted web content"
    )


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with ``…``
    and no unpaired ``**`` marker."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    if head.count("**") % 2:
        at = head.rfind("**")
        head = head[:at] + head[at + 2 :]
    return head.rstrip() + "…"


def _fit(snippet: str, extras: Sequence[str], budget: int) -> tuple[str, tuple[str, ...]]:
    """The snippet and as many extra passages as fit in ``budget`` characters."""
    first = _cut(snippet, budget)
    left = budget - len(first)
    out: list[str] = []
    for text in extras:
        if left < _MIN_EXTRA_PASSAGE:
            break
        piece = _cut(text, left)
        out.append(piece)
        left -= len(piece)
    return first, tuple(out)


def _result(hit: Mapping[str, Any], kind: str, item: Any, budget: int) -> SearchResult:
    snippet, extras = _fit(hit["snippet"], [p["snippet"] for p in hit["passages"][1:]], budget)
    common = {"kind": kind, "snippet": snippet, "passages": extras, "score": hit["score"],
              "explanation": dict(hit["explanation"])}  # fmt: skip
    if isinstance(item, Page):
        return SearchResult(
            id=item.id, title=item.title, url=item.url, domain=item.domain, origin="web",
            source=_label("web page", item.url, item.last_captured_at, item.last_seen),
            first_seen=item.first_seen, last_seen=item.last_seen,
            captured_at=item.last_captured_at, visit_count=item.visit_count, **common,
        )  # fmt: skip
    if isinstance(item, Fact):
        return SearchResult(
            id=item.id, title=item.key, url=None, domain=None, origin="assistant",
            source=f"fact written by {item.client} at {_when(item.updated_at)}",
            first_seen=item.created_at, last_seen=item.updated_at,
            captured_at=item.updated_at, visit_count=None, **common,
        )  # fmt: skip
    if isinstance(item, Note):
        about = f" about {item.url}" if item.url else ""
        return SearchResult(
            id=item.id, title=None, url=item.url, domain=item.domain, origin="user",
            source=f"note written by the user{about} at {_when(item.updated_at)}",
            first_seen=item.created_at, last_seen=item.updated_at,
            captured_at=item.created_at, visit_count=None, **common,
        )  # fmt: skip
    title = item.title if isinstance(item, Bookmark) else None
    return SearchResult(
        id=item.id, title=title, url=item.url, domain=item.domain, origin="web",
        source=_label(kind, item.url, item.created_at, item.updated_at),
        first_seen=item.created_at, last_seen=item.updated_at, captured_at=item.created_at,
        visit_count=None, **common,
    )  # fmt: skip
