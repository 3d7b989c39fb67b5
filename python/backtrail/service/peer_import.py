"""Switching from the memory tools Backtrail replaces: mcp-memory-bridge's facts with
their history, and BraveMCP's pages, text, highlights, notes and bookmarks (read by
:mod:`backtrail.importers.memory_bridge` and :mod:`backtrail.importers.bravemcp`, each
database opened read-only).

Both keep the original times and are idempotent: importing the same file again adds
nothing. Facts: a key that holds another value here is reported and left as it is
unless ``overwrite``. BraveMCP keeps for each page only its visit count and its first
and last visit, so a page's visits are imported as that many visits, the first and last
at their times and the others spread evenly between them; its text becomes the page's
text when the page has none here yet, and its summary an assistant's note about the
page (author ``bravemcp``). URLs that are not web pages, or that match an exclusion
rule, are counted and left out; an item the ledger refuses is counted as invalid.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backtrail.errors import Excluded, InvalidInput, InvalidUrl
from backtrail.importers import bravemcp
from backtrail.importers.memory_bridge import read_facts
from backtrail.store.models import IMPORT_SOURCE_PREFIX

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = ["FactsImport", "BraveImport", "import_memory_bridge", "import_bravemcp",
           "MAX_VISITS_PER_PAGE"]  # fmt: skip

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
MAX_VISITS_PER_PAGE = 10_000
"""Visits imported at most for one page (a visit count beyond it is cut)."""
_BATCH = 500
_WEB = re.compile(r"^https?://", re.IGNORECASE)


@dataclass(frozen=True)
class FactsImport:
    """What importing mcp-memory-bridge's facts did: ``facts`` keys read (with a value
    or only a history), ``created``/``updated`` (with ``--overwrite``)/``unchanged``/
    ``deleted`` (a deletion there carried over with ``--overwrite``), ``history_only``
    (keys deleted there: their history alone), ``events`` added to the audit trail,
    ``conflicts`` (keys with another value here, left as they are), ``invalid`` (keys
    refused, with the reason) and ``events_left_out`` (events about no key)."""

    file: str
    facts: int
    created: int
    updated: int
    unchanged: int
    deleted: int
    history_only: int
    events: int
    events_read: int
    events_left_out: int
    conflicts: list[str]
    invalid: list[tuple[str, str]]


def import_memory_bridge(
    memory: Memory, path: Path, *, overwrite: bool = False, progress: Progress | None = None
) -> FactsImport:
    """Bring every fact of mcp-memory-bridge's ``memory.db`` at ``path`` into
    ``memory`` with its history (writes, refused compare-and-swaps, deletes, reads)."""
    names = ("created", "updated", "unchanged", "deleted", "history_only", "events")
    totals: dict[str, Any] = {name: 0 for name in names} | {"conflicts": [], "invalid": []}
    with read_facts(path) as found:
        items = [
            {"key": f.key, "value": f.value, "client": f.client, "created_at": f.created_at,
             "updated_at": f.updated_at, "version": f.version, "events": f.events}
            for f in found.facts
        ]  # fmt: skip
        _report(progress, 0, len(items), "facts")
        for start in range(0, len(items), _BATCH):
            counts = memory.import_facts(items[start : start + _BATCH], overwrite=overwrite)
            for name, value in counts.items():
                totals[name] += value
            _report(progress, min(start + _BATCH, len(items)), len(items), "facts")
    for key in totals["conflicts"]:
        logger.info("left %r as it is: it holds another value here", key)
    return FactsImport(file=str(path), facts=len(items), events_read=found.events_read,
                       events_left_out=found.events_left_out, **totals)  # fmt: skip


@dataclass
class BraveImport:
    """What importing BraveMCP's database did: ``read`` rows of each table, ``added``
    of each kind (``visits``, ``pages`` created, ``texts``, ``summaries``,
    ``highlights``, ``notes``; ``visits_there``: visits already imported, or recorded
    here by the extension at the same time), the bookmark sync's counts, and what was
    ``left_out`` (``not_web``, ``excluded``, ``invalid``, ``no_page``: a highlight whose
    page is gone, ``no_time``: a page without any time, ``visits_over_limit``: visits
    past :data:`MAX_VISITS_PER_PAGE`)."""

    file: str
    read: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    bookmarks: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)

    def count(self, group: str, name: str, amount: int = 1) -> None:
        table = getattr(self, group)
        table[name] = table.get(name, 0) + amount


def import_bravemcp(memory: Memory, path: Path, *, progress: Progress | None = None) -> BraveImport:
    """Bring BraveMCP's pages (visits with their times, text, summaries), highlights,
    notes and bookmarks at ``path`` into ``memory``."""
    result = BraveImport(file=str(path))
    with bravemcp.open_database(path) as conn:
        for table in ("pages", "highlights", "notes", "bookmarks"):
            result.read[table] = bravemcp.count(conn, table)
        total = sum(result.read.values())
        done = 0
        _report(progress, 0, total, "pages")
        for chunk in _chunks(bravemcp.pages(conn), _BATCH):
            _import_pages(memory, chunk, result)
            done += len(chunk)
            _report(progress, done, total, "pages")
        known = memory.imported_ids("highlight", f"{bravemcp.SOURCE}:")
        for chunk in _chunks(bravemcp.highlights(conn), _BATCH):
            with memory.batch():
                for item in chunk:
                    _import_highlight(memory, item, known, result)
            done += len(chunk)
            _report(progress, done, total, "pages")
        known = memory.imported_ids("note", f"{bravemcp.SOURCE}:")
        for chunk in _chunks(bravemcp.notes(conn), _BATCH):
            with memory.batch():
                for item in chunk:
                    _import_note(memory, item, known, result)
            done += len(chunk)
            _report(progress, done, total, "pages")
        _import_bookmarks(memory, bravemcp.bookmarks(conn), result)
        _report(progress, total, total, "pages")
    return result


def _import_pages(memory: Memory, pages: list[dict[str, Any]], result: BraveImport) -> None:
    visits: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for page in pages:
        if not _WEB.match(page["url"]):
            result.count("left_out", "not_web")
        elif page["first"] is None:
            result.count("left_out", "no_time")
        elif _web_and_kept(memory, page["url"], result):
            visits += _visits(page)
            kept.append(page)
            if page["visits"] > MAX_VISITS_PER_PAGE:
                result.count("left_out", "visits_over_limit", page["visits"] - MAX_VISITS_PER_PAGE)
    for start in range(0, len(visits), 2_000):
        _store(memory, visits[start : start + 2_000], result)
    known = memory.imported_ids("note", f"{bravemcp.SOURCE}:summary:")
    with memory.batch():
        for page in kept:
            if page["text"] is not None:
                stored = _try(result, memory.import_page_text, page["url"], page["text"],
                              title=page["title"], captured_at=page["last"])  # fmt: skip
                result.count("added", "texts", int(bool(stored)))
            external = f"{bravemcp.SOURCE}:summary:{page['id']}"
            if page["summary"] is not None and external not in known:
                added = _try(result, memory.add_note, page["summary"], url=page["url"],
                             created_at=page["last"], external_id=external,
                             author=bravemcp.SOURCE)  # fmt: skip
                result.count("added", "summaries", int(added is not None))


def _visits(page: dict[str, Any]) -> list[dict[str, Any]]:
    """``visits`` visits from the first to the last, the ones between spread evenly."""
    count = min(page["visits"], MAX_VISITS_PER_PAGE)
    first, last = page["first"], page["last"]
    times = [first] if count == 1 else [first + (last - first) * n // (count - 1)
                                         for n in range(count)]  # fmt: skip
    return [
        {"url": page["url"], "visited_at": at, "title": page["title"],
         "source": f"{IMPORT_SOURCE_PREFIX}{bravemcp.SOURCE}",
         "external_id": f"{page['id']}:{n}"}
        for n, at in enumerate(times)
    ]  # fmt: skip


def _store(memory: Memory, visits: list[dict[str, Any]], result: BraveImport) -> None:
    """Import ``visits``, leaving out (and counting) each one the ledger refuses."""
    while visits:
        try:
            stored = memory.import_visits(visits)
        except InvalidInput as error:
            match = re.match(r"^visits\[(\d+)\]", error.field)
            if match is None or int(match.group(1)) >= len(visits):
                raise
            bad = visits.pop(int(match.group(1)))
            result.count("left_out", "invalid")
            logger.info("left out a visit of %s: %s", bad["url"][:200], error.reason)
            continue
        result.count("added", "visits", stored.added)
        result.count("added", "pages", stored.pages_created)
        result.count("added", "visits_there", stored.skipped)
        return


def _import_highlight(
    memory: Memory, item: dict[str, Any], known: set[str], result: BraveImport
) -> None:
    external = f"{bravemcp.SOURCE}:{item['id']}"
    if external in known:
        return
    if item["url"] is None or item["text"] is None:
        result.count("left_out", "no_page" if item["url"] is None else "invalid")
        return
    if not _web_and_kept(memory, item["url"], result):
        return
    added = _try(result, memory.add_highlight, item["url"], item["text"], note=item["note"],
                 created_at=item["created_at"], external_id=external)  # fmt: skip
    result.count("added", "highlights", int(added is not None))


def _import_note(
    memory: Memory, item: dict[str, Any], known: set[str], result: BraveImport
) -> None:
    external = f"{bravemcp.SOURCE}:{item['id']}"
    if external in known:
        return
    if item["content"] is None:
        result.count("left_out", "invalid")
        return
    url = item["url"] if isinstance(item["url"], str) and _WEB.match(item["url"]) else None
    if url is not None and not _web_and_kept(memory, url, result):
        return
    added = _try(result, memory.add_note, item["content"], url=url,
                 created_at=item["created_at"], external_id=external)  # fmt: skip
    result.count("added", "notes", int(added is not None))


def _import_bookmarks(memory: Memory, found: list[dict[str, Any]], result: BraveImport) -> None:
    kept = []
    for item in found:
        if _web_and_kept(memory, item["url"], result):
            kept.append(item)
    while True:
        try:
            synced = memory.replace_bookmarks(kept, profile=bravemcp.SOURCE)
            break
        except InvalidInput as error:
            match = re.match(r"^bookmarks\[(\d+)\]", error.field)
            if match is None or int(match.group(1)) >= len(kept):
                raise
            kept.pop(int(match.group(1)))
            result.count("left_out", "invalid")
    result.bookmarks = {"added": synced.added, "updated": synced.updated,
                        "removed": synced.removed, "unchanged": synced.unchanged}  # fmt: skip


def _web_and_kept(memory: Memory, url: str, result: BraveImport) -> bool:
    """Whether ``url`` is a web page no exclusion rule matches (else counted)."""
    try:
        if memory.exclusion_for(url) is None:
            return True
        result.count("left_out", "excluded")
    except InvalidUrl:
        result.count("left_out", "not_web")
    return False


def _try(result: BraveImport, store: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``store(...)``, or ``None`` (counted) when the ledger refuses or excludes it."""
    try:
        return store(*args, **kwargs)
    except Excluded:
        result.count("left_out", "excluded")
    except InvalidUrl:
        result.count("left_out", "not_web")
    except InvalidInput as error:
        result.count("left_out", "invalid")
        logger.info("left out an item: %s", error)
    return None


def _chunks(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _report(progress: Progress | None, done: int, total: int, phase: str) -> None:
    if progress is not None:
        progress(done, total, phase)
