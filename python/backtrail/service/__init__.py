"""The service layer (layer 4): the operations every front end calls.

:class:`Memory` is the facade: capture (:mod:`.capture`), search (:mod:`.search`),
reading and the user's own records (:mod:`.items`), shared facts (:mod:`.facts`),
forgetting, indexing and statistics, on top of the ledger and the indexer
(:mod:`.base`). Beside it, built on its API: what the browser sends
(:mod:`.browser_sync`, from :meth:`Memory.browser`), browser actions assistants propose
(:mod:`.actions`, :attr:`Memory.actions`), insights over the memory (:mod:`.insights`),
the summary chain (:mod:`.summaries`), importing browser history (:mod:`.importing`),
export (:mod:`.export`) and health checks (:mod:`.health`).

Front ends (the MCP server, the native host, the CLI) import from here and nowhere
lower: the records they show are in :mod:`.types`, and every rule (validation, capture
policy, ranking, labelling, pagination) lives in this package.
"""

from backtrail.service import (
    actions,
    export,
    health,
    importing,
    insights,
    summaries,
)
from backtrail.service.actions import ActionQueue, NoActiveTab
from backtrail.service.browser_sync import (
    EXPORT_KINDS,
    BrowserSync,
    CaptureOutcome,
    HistoryVisit,
    VisitRecord,
)
from backtrail.service.memory import Memory
from backtrail.service.summaries import Sampler, SummaryChain
from backtrail.service.types import (
    SEARCH_KINDS,
    Action,
    Bookmark,
    BookmarkInput,
    CaptureReceipt,
    CaptureSettings,
    Event,
    Fact,
    ForgetReport,
    Highlight,
    ImportResult,
    IndexLag,
    MemoryStats,
    Note,
    Origin,
    Page,
    PageText,
    SearchPage,
    SearchResult,
    Stats,
    SyncResult,
    Tab,
    TabInput,
    TimelineEntry,
    Visit,
    VisitInfo,
    VisitInput,
    VisitResult,
)
from backtrail.urls import scrub_url, validate_capture_url

__all__ = [
    "Memory", "actions", "export", "health", "importing", "insights", "summaries",
    "scrub_url", "validate_capture_url",
    "ActionQueue", "NoActiveTab", "BrowserSync", "CaptureOutcome", "HistoryVisit",
    "VisitRecord", "EXPORT_KINDS", "Sampler", "SummaryChain", "SEARCH_KINDS", "Action",
    "Bookmark", "BookmarkInput", "CaptureReceipt", "CaptureSettings", "Event", "Fact",
    "ForgetReport", "Highlight", "ImportResult", "IndexLag", "MemoryStats", "Note", "Origin",
    "Page", "PageText", "SearchPage", "SearchResult", "Stats", "SyncResult", "Tab", "TabInput",
    "TimelineEntry", "Visit", "VisitInfo", "VisitInput", "VisitResult",
]  # fmt: skip
