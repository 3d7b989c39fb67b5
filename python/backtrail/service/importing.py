"""Importing what browsers already know: history and bookmarks of Chrome, Chromium,
Brave, Edge and Firefox profiles (read by :mod:`backtrail.importers`) into the memory.

Visits are imported in batches, each one ledger transaction, so an interrupted import
keeps what it stored and a re-run adds only what is missing (visits are keyed by
``(source, external_id)``: ``import:<browser>`` and ``<profile directory>:<browser visit
id>``). Visits of URLs that cannot be stored (``chrome://``, ``file:``, ``about:``...)
are counted and left out; any other visit the ledger refuses is counted as invalid and
left out, never failing the whole import.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backtrail.errors import InvalidInput
from backtrail.importers import (
    BROWSERS,
    CHROMIUM_BROWSERS,
    BrowserDataUnreadable,
    BrowserFileNotFound,
    Profile,
    ProfileNotFound,
    browser_roots,
    find_profiles,
    history_source,
    read_bookmarks,
    read_visits,
    resolve_profile,
)

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = [
    "BROWSERS", "CHROMIUM_BROWSERS", "Profile", "ProfileNotFound", "BrowserFileNotFound",
    "BrowserDataUnreadable", "HistoryImport", "BookmarkImport", "browser_roots",
    "find_profiles", "resolve_profile", "import_history", "import_bookmarks", "DEFAULT_BATCH",
    "INDEX_BATCH_CHANGES",
]  # fmt: skip

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 2_000
"""Visits per ledger transaction."""

INDEX_BATCH_CHANGES = 20_000
"""Changes per index commit when indexing after a bulk import (``text_batch_changes``):
an import makes one change per visit, mostly visit-count updates of the same pages."""

Progress = Callable[[int, int, str], None]
_WEB = re.compile(r"^https?://", re.IGNORECASE)
_INDEX = re.compile(r"^(?:visits|bookmarks)\[(\d+)\]")


@dataclass(frozen=True)
class HistoryImport:
    """What an import did. ``read``: visits read from the browser; ``added``: new in
    the ledger; ``skipped``: already imported or matching an exclusion rule;
    ``unsupported``: URLs Backtrail never stores (not http/https); ``invalid``: refused
    by the ledger (logged)."""

    profile: str
    file: str
    read: int
    added: int
    skipped: int
    unsupported: int
    invalid: int
    pages_created: int


@dataclass(frozen=True)
class BookmarkImport:
    """Outcome of making the ledger's bookmarks of ``profile`` equal to the browser's."""

    profile: str
    file: str
    read: int
    added: int
    updated: int
    removed: int
    unchanged: int
    skipped: int
    invalid: int


def import_history(
    memory: Memory,
    profile: Profile,
    *,
    since: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> HistoryImport:
    """Import the visits of ``profile`` (from ``since``, unix seconds) into ``memory``.
    ``progress(done, total, "import")`` is called after each batch."""
    path = profile.history_file
    source = history_source(profile)
    prefix = profile.directory.name
    totals = {"read": 0, "added": 0, "skipped": 0, "unsupported": 0, "invalid": 0, "pages": 0}
    with read_visits(profile, since) as (total, visits):
        _report(progress, 0, total)
        batch: list[dict[str, Any]] = []
        for visit in visits:
            totals["read"] += 1
            if not _WEB.match(visit["url"]):
                totals["unsupported"] += 1
            else:
                visit["source"] = source
                visit["external_id"] = f"{prefix}:{visit['external_id']}"
                batch.append(visit)
            if len(batch) >= batch_size:
                _store_visits(memory, batch, totals)
                batch = []
                _report(progress, totals["read"], total)
        if batch:
            _store_visits(memory, batch, totals)
        _report(progress, totals["read"], max(total, totals["read"]))
    return HistoryImport(
        profile=profile.key,
        file=str(path),
        read=totals["read"],
        added=totals["added"],
        skipped=totals["skipped"],
        unsupported=totals["unsupported"],
        invalid=totals["invalid"],
        pages_created=totals["pages"],
    )


def _store_visits(memory: Memory, batch: list[dict[str, Any]], totals: dict[str, int]) -> None:
    result = _without_refused(batch, "visits", memory.import_visits, totals)
    if result is None:
        return
    totals["added"] += result.added
    totals["skipped"] += result.skipped
    totals["pages"] += result.pages_created


def _without_refused(
    items: list[dict[str, Any]],
    name: str,
    store: Callable[[list[dict[str, Any]]], Any],
    totals: dict[str, int],
) -> Any:
    """``store(items)``, leaving out (and counting) each item the ledger refuses."""
    items = list(items)
    while items:
        try:
            return store(items)
        except InvalidInput as error:
            match = _INDEX.match(error.field)
            if match is None or int(match.group(1)) >= len(items):
                raise
            bad = items.pop(int(match.group(1)))
            totals["invalid"] += 1
            logger.info("left out %s %s: %s", name[:-1], bad.get("url", "?")[:200], error.reason)
    return None


def import_bookmarks(memory: Memory, profile: Profile) -> BookmarkImport:
    """Make the ledger's bookmarks of this profile (``profile.key``) equal to the
    browser's: new ones added, changed ones updated, deleted ones removed."""
    found = read_bookmarks(profile)
    totals = {"invalid": 0}
    web = [item for item in found if _WEB.match(item["url"])]

    def store(items: list[dict[str, Any]]) -> Any:
        return memory.replace_bookmarks(items, profile=profile.key)

    result = _without_refused(web, "bookmarks", store, totals)
    if result is None:  # every bookmark was refused: still remove the stale ones
        result = memory.replace_bookmarks([], profile=profile.key)
    return BookmarkImport(
        profile=profile.key,
        file=str(profile.bookmarks_file),
        read=len(found),
        added=result.added,
        updated=result.updated,
        removed=result.removed,
        unchanged=result.unchanged,
        skipped=result.skipped + len(found) - len(web),
        invalid=totals["invalid"],
    )


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total, "import")
