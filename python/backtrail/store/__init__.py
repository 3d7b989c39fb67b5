"""The ledger (the store layer): SQLite in WAL mode (or PostgreSQL, given a
``postgresql://`` URL), the single source of truth.

``from backtrail.store import Ledger`` is all most callers need; the records it
returns and the :class:`Limits` it enforces live in :mod:`backtrail.store.models`.

Module map: ``core`` (connection, transactions, events, change feed), ``pages`` (pages,
versions, visits), ``items`` (highlights, notes, bookmarks), ``tabs``, ``facts``,
``actions`` (browser actions proposed by assistants), ``forget``, ``access`` (tokens
and devices' deliveries), ``schema`` (DDL and
migrations; ``schema_pg`` on PostgreSQL), ``postgres`` (the PostgreSQL connection),
``versioning`` (when a capture is a new version), ``checks`` (input
validation), ``paths`` (data directory), ``ledger`` (the class that puts them together,
plus settings, stats and change-feed reads).
"""

from backtrail.store.access import TOKEN_SCOPES, TokenRecord
from backtrail.store.actions import ACTION_TYPES, Action, ActionNotFound
from backtrail.store.ledger import Ledger
from backtrail.store.models import (
    Bookmark,
    BookmarkInput,
    CaptureResult,
    Change,
    Event,
    Fact,
    ForgetResult,
    Highlight,
    ImportResult,
    Limits,
    Note,
    Page,
    PageVersion,
    RawCapture,
    Stats,
    SyncResult,
    Tab,
    TabInput,
    Visit,
    VisitInput,
    VisitResult,
)
from backtrail.store.paths import APP_NAME, HOME_ENV, LEDGER_FILENAME, data_dir, ledger_path
from backtrail.store.schema import SCHEMA_VERSION
from backtrail.store.tabs import UNSET

__all__ = [
    "ACTION_TYPES",
    "Action",
    "ActionNotFound",
    "RawCapture",
    "APP_NAME",
    "HOME_ENV",
    "LEDGER_FILENAME",
    "SCHEMA_VERSION",
    "TOKEN_SCOPES",
    "TokenRecord",
    "UNSET",
    "Bookmark",
    "BookmarkInput",
    "CaptureResult",
    "Change",
    "Event",
    "Fact",
    "ForgetResult",
    "Highlight",
    "ImportResult",
    "Ledger",
    "Limits",
    "Note",
    "Page",
    "PageVersion",
    "Stats",
    "SyncResult",
    "Tab",
    "TabInput",
    "Visit",
    "VisitInput",
    "VisitResult",
    "data_dir",
    "ledger_path",
]
