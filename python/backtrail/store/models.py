"""Plain, immutable records the ledger returns, and the limits it enforces.

Times are integer unix seconds (UTC) everywhere; durations (``dwell_ms``) are integer
milliseconds. Ids are SQLite integer row ids, never reused after deletion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from backtrail.errors import InvalidInput

__all__ = [
    "Limits",
    "Page",
    "PageVersion",
    "CaptureOutcome",
    "CaptureResult",
    "Visit",
    "VisitInput",
    "VisitResult",
    "ImportResult",
    "Bookmark",
    "BookmarkInput",
    "SyncResult",
    "Highlight",
    "Note",
    "Tab",
    "TabInput",
    "TabEventKind",
    "Fact",
    "Event",
    "Change",
    "EntityType",
    "ChangeOp",
    "ForgetResult",
    "VacuumMode",
    "Stats",
]


@dataclass(frozen=True)
class Limits:
    """Size limits. Web content (page text, titles) is cut to fit; values a client
    writes on purpose (facts, notes, highlights, settings) are refused with
    ``LimitExceeded`` instead."""

    max_text_bytes: int = 1_048_576
    """Page text kept per version, in UTF-8 bytes; longer text is cut on a character
    boundary and the version is marked ``truncated``."""
    max_title_chars: int = 1_000
    """Titles (pages, bookmarks, tabs) are cut to this many characters."""
    max_fact_key_chars: int = 256
    max_fact_value_chars: int = 16_384
    max_highlight_chars: int = 20_000
    """Highlighted text, and separately its surrounding context."""
    max_note_chars: int = 100_000
    """Notes, and notes attached to highlights."""
    max_setting_bytes: int = 1_000_000
    """A setting's value, as UTF-8 JSON."""
    max_label_chars: int = 256
    """Short identifiers: client names, sources, transitions, profiles, external ids,
    bookmark ids, setting keys."""
    max_folder_chars: int = 4_096
    """A bookmark's folder path."""
    max_versions_per_page: int = 20
    """Older versions beyond this many are deleted when a new one is stored."""
    version_similarity: float = 0.9
    """A new capture whose text is at least this similar to the current version (weighted
    Jaccard similarity of word 3-shingles, digits masked) updates that version in place
    instead of adding a new one."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if name == "version_similarity":
                if not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                    raise InvalidInput(f"limits.{name}", f"must be in (0, 1], got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"limits.{name}", f"must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class Page:
    """A page, identified by its canonical URL. ``text`` (and ``outline``) is the current
    version's, filled only when asked for (``with_text=True``)."""

    id: int
    url: str
    canonical_url: str
    domain: str
    title: str | None
    language: str | None
    first_seen: int
    last_seen: int
    visit_count: int
    dwell_ms: int
    current_version: int | None
    last_captured_at: int | None
    text: str | None = None
    outline: tuple[tuple[int, int, str], ...] = ()
    """The current version's headings, ``(offset in text, level, words)`` each, filled
    with ``text``."""


@dataclass(frozen=True)
class PageVersion:
    """One stored version of a page's main text. ``captured_at`` is when this version
    first appeared, ``updated_at`` the last capture that matched or updated it."""

    id: int
    page_id: int
    version: int
    title: str | None
    language: str | None
    content_hash: str
    text_bytes: int
    truncated: bool
    captured_at: int
    updated_at: int
    text: str | None = None


CaptureOutcome = Literal["created", "new_version", "updated", "unchanged"]


@dataclass(frozen=True)
class CaptureResult:
    """What a capture did: ``created`` the page's first text, kept a ``new_version``,
    ``updated`` the current version in place (minor change), or found it ``unchanged``."""

    page: Page
    version: PageVersion
    outcome: CaptureOutcome


@dataclass(frozen=True)
class RawCapture:
    """A capture whose HTML is stored but whose main text is not extracted yet."""

    id: int
    page_id: int
    url: str
    html: str
    title: str | None
    language: str | None
    captured_at: int
    attempts: int


@dataclass(frozen=True)
class Visit:
    id: int
    page_id: int
    visited_at: int
    tab_id: int | None
    window_id: int | None
    transition: str | None
    referrer: str | None
    dwell_ms: int | None
    source: str
    external_id: str | None


HISTORY_TWIN_SECONDS = 2
"""How close (seconds) a history copy of a visit may be to one already stored from
another source and still count as the same page load."""


BACKFILL_SOURCE = "history"
"""``source`` of visits the extension backfills from ``chrome.history``."""
IMPORT_SOURCE_PREFIX = "import:"
"""``source`` prefix of visits ``backtrail import history`` reads from a browser's files."""


def is_history_copy(source: str) -> bool:
    """Whether visits of ``source`` are copies of a browser's history (see VisitInput)."""
    return source == BACKFILL_SOURCE or source.startswith(IMPORT_SOURCE_PREFIX)


@dataclass(frozen=True)
class VisitInput:
    """One visit to record or import. With ``external_id`` (the browser's visit id, or a
    client-made uuid) the visit is unique per ``(source, external_id)``; without it, per
    ``(page, visited_at, source)``. Re-recording an existing visit adds nothing.

    Sources named ``history`` (the extension's backfill from ``chrome.history``) or
    ``import:<browser>`` (``backtrail import history``) are copies of a browser's own
    history: such a visit is also skipped when the page already has a visit from another
    source within ``HISTORY_TWIN_SECONDS`` of it, since both name the same page load
    (e.g. the extension recorded it live and the browser's history file has it too)."""

    url: str
    visited_at: int
    title: str | None = None
    tab_id: int | None = None
    window_id: int | None = None
    transition: str | None = None
    referrer: str | None = None
    dwell_ms: int | None = None
    source: str = "extension"
    external_id: str | None = None


@dataclass(frozen=True)
class VisitResult:
    visit: Visit
    page: Page
    created: bool


@dataclass(frozen=True)
class ImportResult:
    added: int
    skipped: int
    pages_created: int


@dataclass(frozen=True)
class Bookmark:
    id: int
    profile: str
    browser_id: str
    url: str
    canonical_url: str
    domain: str
    title: str | None
    folder: str | None
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class BookmarkInput:
    browser_id: str
    url: str
    title: str | None = None
    folder: str | None = None
    created_at: int | None = None


@dataclass(frozen=True)
class SyncResult:
    """Outcome of replacing a profile's bookmarks; ``skipped`` counts non-http(s)
    bookmarks (bookmarklets, ``file:``...), which are never stored."""

    added: int
    updated: int
    removed: int
    unchanged: int
    skipped: int


@dataclass(frozen=True)
class Highlight:
    id: int
    url: str
    canonical_url: str
    domain: str
    text: str
    context: str | None
    note: str | None
    created_at: int
    updated_at: int
    external_id: str | None


@dataclass(frozen=True)
class Note:
    id: int
    content: str
    url: str | None
    canonical_url: str | None
    domain: str | None
    created_at: int
    updated_at: int
    external_id: str | None
    author: str | None = None
    """The assistant (MCP client) that wrote the note; ``None``: the user did."""


@dataclass(frozen=True)
class Tab:
    """An open tab. ``url`` is scrubbed for http(s) tabs and reduced to
    ``scheme://host`` for others (``chrome://newtab``); ``canonical_url`` and ``domain``
    are set only for http(s) tabs."""

    profile: str
    tab_id: int
    window_id: int
    index: int | None
    url: str | None
    canonical_url: str | None
    domain: str | None
    title: str | None
    active: bool
    pinned: bool
    group_id: int | None
    last_accessed: int | None
    updated_at: int


@dataclass(frozen=True)
class TabInput:
    tab_id: int
    window_id: int
    url: str | None = None
    title: str | None = None
    active: bool = False
    pinned: bool = False
    group_id: int | None = None
    last_accessed: int | None = None
    index: int | None = None


TabEventKind = Literal["opened", "closed", "activated", "updated"]


@dataclass(frozen=True)
class Fact:
    """A key/value fact. ``version`` counts successful writes to the key and keeps
    counting across deletion (a re-created key continues from the deleted version)."""

    id: int
    key: str
    value: str
    version: int
    client: str
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class Event:
    """One entry of the append-only audit log. ``details`` never holds captured
    content (no URLs, titles, text or fact values): only ids, counts and outcomes."""

    id: int
    at: int
    client: str
    action: str
    target_type: str
    target: str | None
    details: dict[str, Any] = field(default_factory=dict)


EntityType = Literal["page", "highlight", "note", "bookmark", "fact"]
ChangeOp = Literal["upsert", "delete"]


@dataclass(frozen=True)
class Change:
    """One entry of the change feed. ``aspect`` is ``"content"`` when indexed text may
    have changed, ``"stats"`` when only ranking signals did (visits, last seen, dwell)."""

    seq: int
    entity_type: EntityType
    entity_id: int
    op: ChangeOp
    aspect: Literal["content", "stats"]
    at: int


VacuumMode = Literal["none", "incremental", "full"]


@dataclass(frozen=True)
class ForgetResult:
    """``selector`` is ``"url"``, ``"domain"``, ``"time_range"`` or ``"everything"``;
    ``counts`` maps each table to the rows removed (``pages_updated`` and
    ``referrers_cleared`` count rows changed). ``purged`` is true when the WAL was
    checkpointed and truncated, so no copy of the removed content is left on disk."""

    selector: str
    counts: dict[str, int]
    purged: bool


@dataclass(frozen=True)
class Stats:
    path: str
    schema_version: int
    counts: dict[str, int]
    last_capture_at: int | None
    last_visit_at: int | None
    db_bytes: int
    wal_bytes: int
    max_change_seq: int
