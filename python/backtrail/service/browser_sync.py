"""What the browser extension sends, applied to a :class:`~backtrail.service.memory.Memory`.

The native host (a thin front end) validates frames and calls :class:`BrowserSync`;
the policies that come with the extension's records live here, next to the service
layer, not in the host:

- one browser profile per sync (``profile`` in the ledger for tabs and bookmarks,
  and the scope of browser history visit ids);
- the extension's own settings document per profile, stored in the ledger, whose
  exclusion rules apply as a second line of defence after Backtrail's own;
- pause applies to every kind of record the browser sends (``Memory`` enforces it for
  pages and visits; tabs, bookmarks, highlights, notes and history are checked here);
- a repeated visit only raises its dwell time (``max(old, new)``);
- replays of highlights, notes and captures are recognised (``duplicate``);
- a bookmark import in batches removes stale bookmarks only if every batch arrived;
- :meth:`batch` groups many writes into one durable ledger commit;
- browser actions proposed by assistants are claimed for this profile's browser and
  their outcomes recorded (:mod:`backtrail.service.actions`).

All times are unix seconds; the host converts the protocol's milliseconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backtrail import urls
from backtrail.errors import (
    BookmarkNotFound,
    Excluded,
    InvalidInput,
    InvalidUrl,
    Paused,
)
from backtrail.service.types import (
    Action,
    BookmarkInput,
    ForgetReport,
    ImportResult,
    SearchPage,
    TabInput,
    VisitInput,
)
from backtrail.store import Ledger
from backtrail.store.models import BACKFILL_SOURCE

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = [
    "BrowserSync",
    "VisitRecord",
    "HistoryVisit",
    "CaptureOutcome",
    "BookmarkImport",
    "EXPORT_KINDS",
]

logger = logging.getLogger(__name__)

_SETTINGS_KEY = "browser.settings.{profile}"
_IMPORTS_KEPT = 8
EXPORT_KINDS = ("page", "visit", "bookmark", "highlight", "note", "tab")
_LIST_ALL = 100_000


@dataclass(frozen=True)
class VisitRecord:
    """One visit as the extension reports it (``visit_id`` is its uuid)."""

    visit_id: str
    visited_at: int
    tab_id: int | None = None
    window_id: int | None = None
    transition: str | None = None
    referrer: str | None = None
    dwell_ms: int | None = None


@dataclass(frozen=True)
class HistoryVisit:
    """One visit from ``chrome.history`` (``visit_id`` is the browser's, per profile)."""

    url: str
    title: str | None
    visit_id: str
    visited_at: int
    transition: str | None = None


@dataclass(frozen=True)
class CaptureOutcome:
    page_id: int
    outcome: str
    visit_created: bool
    duplicate: bool


@dataclass(frozen=True)
class BookmarkImport:
    upserted: int
    skipped: int
    removed: int
    complete: bool


@dataclass
class _Import:
    batches: set[int]
    seen: set[str]


class BrowserSync:
    """The extension's records, applied to ``memory`` for one browser ``profile``."""

    def __init__(self, memory: Memory, ledger: Ledger, profile: str = "default") -> None:
        self.memory = memory
        # The memory's own connection (see Memory.browser), so that a batch of the
        # browser's records is one transaction with the memory's writes.
        self._ledger = ledger
        self.actions = memory.actions
        self._imports: OrderedDict[str, _Import] = OrderedDict()
        self._lock = threading.RLock()
        self.profile = "default"
        self._rules: urls.ExclusionRules | None = None
        self.use_profile(profile)

    # ------------------------------------------------------------ profile

    def use_profile(self, profile: str) -> None:
        """Scope later calls to ``profile`` and load its settings' exclusion rules."""
        if not isinstance(profile, str) or not 1 <= len(profile) <= 64:
            raise InvalidInput("profile_id", "must be 1 to 64 characters")
        self.profile = profile
        document, _ = self.settings()
        self._rules = _profile_rules(document)

    def settings(self) -> tuple[dict[str, Any] | None, int]:
        """The profile's stored settings document and its version (``None``, 0 if none)."""
        stored = self._ledger.get_setting(self._settings_key())
        if not isinstance(stored, dict) or not isinstance(stored.get("settings"), dict):
            return None, 0
        return stored["settings"], int(stored.get("version") or 0)

    def set_settings(self, document: dict[str, Any]) -> int:
        """Replace the profile's settings document (unknown keys kept); returns its new
        version. The exclusion rules in it are checked first (``InvalidInput``)."""
        rules = _profile_rules(document)
        with self._ledger.transaction():
            _, version = self.settings()
            self._ledger.set_setting(
                self._settings_key(), {"version": version + 1, "settings": document}
            )
        self._rules = rules
        return version + 1

    def _settings_key(self) -> str:
        return _SETTINGS_KEY.format(profile=self.profile)

    # -------------------------------------------------------- transactions

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One ledger transaction around many calls: they commit (durably) together
        when the block ends, and each call that raised inside it was rolled back
        alone. Indexing is scheduled after the commit."""
        try:
            with self._ledger.transaction():
                yield
        finally:
            self.memory.indexer.schedule()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """All or nothing (a savepoint inside :meth:`batch`)."""
        with self._ledger.transaction():
            yield

    # ------------------------------------------------------------- policy

    def paused(self) -> bool:
        return self.memory.capture_settings().paused

    def _require_capturing(self) -> None:
        settings = self.memory.capture_settings()
        if settings.paused:
            raise Paused(settings.paused_until)

    def exclusion_for(self, url: str) -> str | None:
        """The rule (Backtrail's own, then the profile's) that excludes ``url``."""
        rule = self.memory.exclusion_for(url)
        if rule is None and self._rules is not None:
            rule = self._rules.match(url)
        return rule

    def _require_allowed(self, url: str) -> None:
        rule = self.exclusion_for(url)
        if rule is not None:
            raise Excluded(urls.scrub_url(url), rule)

    def _allowed(self, url: str) -> bool:
        try:
            return self.exclusion_for(url) is None
        except InvalidUrl:
            return False

    # ------------------------------------------------------- pages, visits

    def capture(
        self,
        url: str,
        *,
        html: str | None = None,
        text: str | None = None,
        title: str | None = None,
        language: str | None = None,
        captured_at: int | None = None,
        visit: VisitRecord,
    ) -> CaptureOutcome:
        """Store a page's content and the visit it was captured in. A replay (same
        visit, same text) is a ``duplicate``."""
        if self._rules is not None:
            self._require_allowed(url)
        with self.atomic():
            # The visit first: a page it creates is dated by the visit, not the capture.
            _, created = self._visit(url, title, visit)
            receipt = self.memory.capture_page(
                url, html=html, text=text, title=title, language=language,
                captured_at=captured_at,
            )  # fmt: skip
        duplicate = not created and receipt.outcome == "unchanged"
        return CaptureOutcome(receipt.page_id, receipt.outcome, created, duplicate)

    def visit(self, url: str, title: str | None, visit: VisitRecord) -> tuple[int, bool]:
        """Record a visit, or raise a known one's dwell; ``(page_id, created)``."""
        if self._rules is not None:
            self._require_allowed(url)
        with self.atomic():
            return self._visit(url, title, visit)

    def _visit(self, url: str, title: str | None, visit: VisitRecord) -> tuple[int, bool]:
        result = self.memory.record_visit(
            url, visited_at=visit.visited_at, title=title, tab_id=visit.tab_id,
            window_id=visit.window_id, transition=visit.transition, referrer=visit.referrer,
            dwell_ms=visit.dwell_ms, source="extension", external_id=visit.visit_id,
        )  # fmt: skip
        old = result.visit.dwell_ms or 0
        if not result.created and visit.dwell_ms is not None and visit.dwell_ms > old:
            self.memory.set_visit_dwell(result.visit.id, visit.dwell_ms)
        return result.page.id, result.created

    def import_history(self, visits: Sequence[HistoryVisit]) -> ImportResult:
        """Import browser history; visit ids are scoped by the profile. Visits of URLs
        the profile's rules exclude are skipped (and counted)."""
        self._require_capturing()
        kept = [v for v in visits if self._rules is None or self._rules.match(v.url) is None]
        result = self.memory.import_visits(
            VisitInput(
                url=v.url, visited_at=v.visited_at, title=v.title, transition=v.transition,
                source=BACKFILL_SOURCE, external_id=f"{self.profile}:{v.visit_id}",
            )  # fmt: skip
            for v in kept
        )
        excluded = len(visits) - len(kept)
        return ImportResult(result.added, result.skipped + excluded, result.pages_created)

    # ----------------------------------------------------------------- tabs

    def _tab(self, tab: TabInput) -> TabInput:
        """The tab with its URL and title dropped when the URL is excluded."""
        if tab.url is None:
            return tab
        try:
            allowed = self.exclusion_for(tab.url) is None
        except InvalidUrl:
            return tab  # not http(s): the ledger keeps only scheme://host
        if allowed:
            return tab
        return TabInput(
            tab.tab_id, tab.window_id, None, None, tab.active, tab.pinned, tab.group_id,
            tab.last_accessed, tab.index,
        )  # fmt: skip

    def snapshot_tabs(self, tabs: Sequence[TabInput]) -> int:
        self._require_capturing()
        return self.memory.snapshot_tabs([self._tab(tab) for tab in tabs], profile=self.profile)

    def session_ended(self) -> int:
        """The browser closed this session (its port): the profile's tabs stored until
        now are no longer open; a session that connects next sends them again. Returns
        how many were removed."""
        return self._ledger.close_tabs(profile=self.profile, before=int(time.time()) + 1)

    def tab_event(self, kind: str, tab: TabInput) -> None:
        """Apply a tab event; ``closed`` for an unknown tab is a no-op."""
        self._require_capturing()
        if kind == "closed":
            self.memory.apply_tab_event("closed", tab.tab_id, profile=self.profile)
            return
        tab = self._tab(tab)
        self.memory.apply_tab_event(
            kind, tab.tab_id, profile=self.profile, window_id=tab.window_id, url=tab.url,
            title=tab.title, active=tab.active, pinned=tab.pinned, group_id=tab.group_id,
            index=tab.index, last_accessed=tab.last_accessed,
        )  # fmt: skip

    # ------------------------------------------------------------ bookmarks

    def upsert_bookmarks(self, bookmarks: Sequence[BookmarkInput]) -> tuple[int, int]:
        """Add or update bookmarks; excluded ones are skipped. ``(upserted, skipped)``."""
        self._require_capturing()
        return self._upsert_bookmarks(bookmarks)[:2]  # type: ignore[return-value]

    def _upsert_bookmarks(self, bookmarks: Sequence[BookmarkInput]) -> tuple[int, int, set[str]]:
        upserted = skipped = 0
        stored: set[str] = set()
        for item in bookmarks:
            if not self._allowed(item.url):
                skipped += 1
                continue
            self.memory.upsert_bookmark(
                item.browser_id, item.url, title=item.title, folder=item.folder,
                created_at=item.created_at, profile=self.profile,
            )  # fmt: skip
            upserted += 1
            stored.add(item.browser_id)
        return upserted, skipped, stored

    def remove_bookmarks(self, browser_ids: Sequence[str]) -> int:
        """Remove bookmarks by browser id; unknown ids are not an error."""
        self._require_capturing()
        removed = 0
        for browser_id in dict.fromkeys(browser_ids):
            try:
                self.memory.delete_bookmark(browser_id, profile=self.profile)
            except BookmarkNotFound:
                continue
            removed += 1
        return removed

    def import_bookmarks(
        self, import_id: str, batch: int, final: bool, bookmarks: Sequence[BookmarkInput]
    ) -> BookmarkImport:
        """One batch of a whole-tree import. On the final batch, if batches
        ``0..batch`` of ``import_id`` all arrived in this process, the profile's stored
        bookmarks that were in none of them are removed."""
        self._require_capturing()
        upserted, skipped, stored = self._upsert_bookmarks(bookmarks)
        with self._lock:
            state = self._imports.setdefault(import_id, _Import(set(), set()))
            self._imports.move_to_end(import_id)
            while len(self._imports) > _IMPORTS_KEPT:
                self._imports.popitem(last=False)
            state.batches.add(batch)
            state.seen |= stored
            complete = final and state.batches >= set(range(batch + 1))
        removed = 0
        if complete:
            stale = [
                b.browser_id
                for b in self.memory.list_bookmarks(profile=self.profile, limit=_LIST_ALL)
                if b.browser_id not in state.seen
            ]
            for browser_id in stale:
                self.memory.delete_bookmark(browser_id, profile=self.profile)
            removed = len(stale)
        if final:
            with self._lock:
                self._imports.pop(import_id, None)
        return BookmarkImport(upserted, skipped, removed, complete)

    # ----------------------------------------------------- highlights, notes

    def _changed(self) -> int:
        return self._ledger.max_change_seq()

    def highlight(
        self,
        url: str,
        text: str,
        *,
        context: str | None,
        note: str | None,
        created_at: int | None,
        dedupe_key: str,
    ) -> tuple[int, bool]:
        """Keep a highlight; ``(highlight_id, duplicate)``."""
        self._require_capturing()
        self._require_allowed(url)
        with self.atomic():
            before = self._changed()
            highlight = self.memory.add_highlight(
                url, text, context=context, note=note, created_at=created_at,
                external_id=dedupe_key,
            )  # fmt: skip
            duplicate = self._changed() == before
        return highlight.id, duplicate

    def note(
        self, content: str, *, url: str | None, created_at: int | None, dedupe_key: str
    ) -> tuple[int, bool]:
        """Keep a note; its URL is dropped (the note kept) when the URL is excluded.
        ``(note_id, duplicate)``."""
        self._require_capturing()
        if url is not None and self.exclusion_for(url) is not None:
            url = None
        with self.atomic():
            before = self._changed()
            note = self.memory.add_note(
                content, url=url, created_at=created_at, external_id=dedupe_key
            )
            duplicate = self._changed() == before
        return note.id, duplicate

    def skipped(self, rule: str) -> int:
        """The browser did not capture a page because of ``rule``: count it (no URL)."""
        return self.memory.count_skipped(rule)

    # ------------------------------------------------------- reading, state

    def search(
        self,
        query: str,
        *,
        limit: int,
        cursor: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        kinds: Sequence[str] | None = None,
        max_chars: int = 500,
    ) -> SearchPage:
        return self.memory.search(
            query, limit=limit, cursor=cursor, domains=[domain] if domain else None,
            since=since, until=until, kinds=kinds, max_chars_per_result=max_chars,
        )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """Counts, last capture, index lag (changes not yet searchable) and sizes."""
        stats = self.memory.stats()
        counts = stats.ledger.counts
        return {
            "paused": self.paused(),
            "counts": {
                name: int(counts.get(name, 0))
                for name in ("pages", "visits", "highlights", "notes", "bookmarks", "tabs")
            },
            "last_capture_at": stats.ledger.last_capture_at,
            "index_lag": stats.lag.text,
            "vector_lag": stats.lag.vectors,
            "db_bytes": stats.ledger.db_bytes + stats.ledger.wal_bytes,
            "model": stats.model,
        }

    def pause(self, until: int | None) -> bool:
        return self.memory.pause_capture(until).paused

    def resume(self) -> bool:
        return self.memory.resume_capture().paused

    def forget(self, **selector: Any) -> ForgetReport:
        return self.memory.forget(**selector)

    # -------------------------------------------------------------- actions

    def claim_actions(self, claimer: str, *, limit: int = 10) -> list[Action]:
        """Pending browser actions for this profile's browser, claimed by ``claimer``."""
        return self.actions.claim(claimer, self.profile, limit=limit)

    def action_result(
        self,
        action_id: str,
        *,
        ok: bool,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> Action | None:
        """Record the extension's answer to an action (``None``: not ours, or already
        answered)."""
        return self.actions.record_result(
            action_id, ok=ok, result=result, error=error, profile=self.profile
        )

    # --------------------------------------------------------------- export

    def export_plan(self, kinds: Sequence[str] | None = None) -> list[tuple[str, int]]:
        """The blocks of an export, in order: ``("page", id)`` for every page (read
        later with its visits), then one block each for bookmarks, highlights, notes
        and this profile's tabs (``id`` 0). Taking the page ids once keeps an export
        stable while the user goes on browsing."""
        wanted = set(EXPORT_KINDS if kinds is None else kinds)
        plan: list[tuple[str, int]] = []
        if wanted & {"page", "visit"}:
            plan.extend(("page", page_id) for page_id in self._page_ids())
        blocks = ("bookmark", "highlight", "note", "tab")
        plan.extend((kind, 0) for kind in blocks if kind in wanted)
        return plan

    def _page_ids(self) -> list[int]:
        ids: set[int] = set()
        offset = 0
        while True:
            chunk = self.memory.timeline(limit=1000, offset=offset)
            ids.update(entry.page_id for entry in chunk)
            if len(chunk) < 1000:
                return sorted(ids)
            offset += 1000

    def export_block(self, kind: str, ident: int, kinds: Sequence[str] | None = None) -> list[Any]:
        """The records of one block of :meth:`export_plan`, oldest first: a page (with
        its text) and its visits; or every bookmark, highlight, note or tab. A page
        forgotten since the plan was made gives nothing."""
        wanted = set(EXPORT_KINDS if kinds is None else kinds)
        memory = self.memory
        if kind == "page":
            records: list[Any] = []
            try:
                if "page" in wanted:
                    records.append(self._ledger.get_page(page_id=ident, with_text=True))
                if "visit" in wanted:
                    visits = self._ledger.list_visits(page_id=ident, limit=_LIST_ALL)
                    records.extend(sorted(visits, key=lambda v: v.id))
            except LookupError:
                return []
            return records
        if kind == "bookmark":
            found: list[Any] = memory.list_bookmarks(profile=self.profile, limit=_LIST_ALL)
        elif kind == "highlight":
            found = memory.list_highlights(limit=_LIST_ALL)
        elif kind == "note":
            found = memory.list_notes(limit=_LIST_ALL)
        elif kind == "tab":
            return list(memory.list_tabs(profile=self.profile))
        else:
            raise InvalidInput("kind", f"is not an export block: {kind!r:.40}")
        return sorted(found, key=lambda record: record.id)


def _profile_rules(document: object) -> urls.ExclusionRules | None:
    """The exclusion rules of an extension settings document (``exclusions.rules``, plus
    the default list when ``exclusions.use_defaults``); ``None`` when it has none."""
    if document is None:
        return None
    if not isinstance(document, dict):
        raise InvalidInput("settings", "must be an object")
    exclusions = document.get("exclusions")
    if exclusions is None:
        return None
    if not isinstance(exclusions, dict):
        raise InvalidInput("settings.exclusions", "must be an object")
    rules = exclusions.get("rules") or []
    if not isinstance(rules, list):
        raise InvalidInput("settings.exclusions.rules", "must be an array of rules")
    use_defaults = exclusions.get("use_defaults", True)
    if not isinstance(use_defaults, bool):
        raise InvalidInput("settings.exclusions.use_defaults", "must be true or false")
    chosen = [*rules, *(urls.DEFAULT_EXCLUSIONS if use_defaults else ())]
    try:
        return urls.ExclusionRules(chosen) if chosen else None
    except InvalidUrl as error:
        raise InvalidInput("settings.exclusions.rules", error.message) from None
