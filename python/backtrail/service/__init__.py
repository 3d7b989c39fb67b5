"""The service layer (layer 4): the operations every front end calls.

:class:`Memory` is the facade: capture (:mod:`.capture`), search (:mod:`.search`),
reading and the user's own records (:mod:`.items`), shared facts (:mod:`.facts`),
forgetting, indexing and statistics, on top of the ledger and the indexer
(:mod:`.base`). Beside it, built on its API: what the browser sends
(:mod:`.browser_sync`, from :meth:`Memory.browser`; a device's, sent to a server:
:mod:`.devices`), tokens for servers (:mod:`.tokens`), browser actions assistants propose
(:mod:`.actions`, :attr:`Memory.actions`), insights over the memory (:mod:`.insights`),
the summary chain (:mod:`.summaries`), importing browser history (:mod:`.importing`),
export (:mod:`.export`) and health checks (:mod:`.health`); for a device that forwards
to a Backtrail server instead of keeping a ledger, the link to it (:mod:`.server_link`) and
its durable outbox (:mod:`.outbox`).

Front ends (the MCP server, the native host, the CLI) import from here and nowhere
lower: the records they show are in :mod:`.types`, and every rule (validation, capture
policy, ranking, labelling, pagination) lives in this package.
"""

import importlib
from typing import TYPE_CHECKING, Any

from backtrail.service.memory import Memory
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

_LAZY = {
    "ActionQueue": "actions", "NoActiveTab": "actions", "BrowserSync": "browser_sync",
    "CaptureOutcome": "browser_sync", "HistoryVisit": "browser_sync",
    "VisitRecord": "browser_sync", "EXPORT_KINDS": "browser_sync", "Sampler": "summaries",
    "SummaryChain": "summaries", "DeviceSync": "devices", "NewToken": "tokens",
    "TokenRecord": "tokens", "TokenVerifier": "tokens", "TOKEN_SCOPES": "tokens",
    "token_digest": "tokens",
}  # fmt: skip
"""Names of the parts beside ``Memory``, imported on first use: a front end loads only
the parts it calls (``from backtrail.service import insights`` imports that module)."""


_PARTS = (
    "actions", "export", "health", "importing", "insights", "outbox", "present",
    "server_link", "summaries",
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _PARTS:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

if TYPE_CHECKING:
    from backtrail.service import (
        actions,
        export,
        health,
        importing,
        insights,
        outbox,
        present,
        server_link,
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
    from backtrail.service.devices import DeviceSync
    from backtrail.service.summaries import Sampler, SummaryChain
    from backtrail.service.tokens import (
        TOKEN_SCOPES,
        NewToken,
        TokenRecord,
        TokenVerifier,
        token_digest,
    )

__all__ = [
    "Memory", "actions", "export", "health", "importing", "insights", "outbox", "present",
    "server_link", "summaries",
    "scrub_url", "validate_capture_url",
    "ActionQueue", "NoActiveTab", "BrowserSync", "CaptureOutcome", "HistoryVisit",
    "VisitRecord", "EXPORT_KINDS", "Sampler", "SummaryChain", "SEARCH_KINDS", "Action",
    "Bookmark", "BookmarkInput", "CaptureReceipt", "CaptureSettings", "Event", "Fact",
    "ForgetReport", "Highlight", "ImportResult", "IndexLag", "MemoryStats", "Note", "Origin",
    "Page", "PageText", "SearchPage", "SearchResult", "Stats", "SyncResult", "Tab", "TabInput",
    "TimelineEntry", "Visit", "VisitInfo", "VisitInput", "VisitResult", "DeviceSync",
    "NewToken", "TokenRecord", "TokenVerifier", "TOKEN_SCOPES", "token_digest",
]  # fmt: skip
