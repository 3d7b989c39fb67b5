"""The records the service returns, and the ledger's records it passes on.

Front ends import these from :mod:`backtrail.service` and never from the store: the
service decides what a caller sees. Records are frozen dataclasses; times are unix
seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from backtrail.indexer import IndexLag
from backtrail.store import (
    Action,
    Bookmark,
    BookmarkInput,
    Event,
    Fact,
    Highlight,
    ImportResult,
    Note,
    Page,
    Stats,
    SyncResult,
    Tab,
    TabInput,
    Visit,
    VisitInput,
    VisitResult,
)

__all__ = [
    # the service's own records
    "SEARCH_KINDS", "Origin", "VisitInfo", "CaptureReceipt", "SearchResult", "SearchPage",
    "PageText", "TimelineEntry", "CaptureSettings", "ForgetReport", "MemoryStats", "IndexLag",
    # the ledger's records, passed on as they are
    "Action", "Bookmark", "BookmarkInput", "Event", "Fact", "Highlight", "ImportResult", "Note",
    "Page", "Stats", "SyncResult", "Tab", "TabInput", "Visit", "VisitInput", "VisitResult",
]  # fmt: skip


SEARCH_KINDS = ("page", "highlight", "note", "bookmark", "fact")
"""Kinds a search can ask for; ``fact`` only when asked (see :meth:`Memory.search_facts`)."""

Origin = Literal["web", "user", "assistant"]
"""Who wrote a result's text: ``web`` (a web page: untrusted), ``user`` (a note) or
``assistant`` (a fact written by an AI client)."""


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
    author: str | None = None
    """For ``origin`` ``assistant``: the client that wrote the note or fact."""
    display_title: str | None = None
    """The title as a person reads it: without the site's name its pages repeat
    (``os.path — Common pathname manipulations``; see :mod:`backtrail.service.present`)."""
    site: str | None = None
    """The registrable domain (``python.org`` for ``docs.python.org``)."""


@dataclass(frozen=True)
class SearchPage:
    """A page of results; pass ``next_cursor`` (with the same query and filters) for the
    next page. ``lag`` tells how far the index was behind the ledger. ``no_match``: the
    memory holds nothing close to the query (no result is closer in meaning than chance
    brings an unrelated query in a memory that size, and none holds half its words), so
    no result is returned rather than unrelated ones."""

    results: list[SearchResult]
    next_cursor: str | None
    mode: str
    lag: IndexLag
    no_match: bool = False
    notice: str | None = None
    """Why the search could not use meaning (the index's vectors are another embedding
    model's), or how far their re-embedding for a new model is."""


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
    skipped: dict[str, int] = field(default_factory=dict)
    """Pages the browser did not capture, per rule (most first); no URLs."""
