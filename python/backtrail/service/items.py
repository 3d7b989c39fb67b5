"""Reading pages and the timeline, and the records the user keeps in their browser:
highlights, notes, bookmarks and open tabs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from backtrail.errors import (
    InvalidInput,
)
from backtrail.service.base import MemoryBase, label
from backtrail.service.types import (
    PageText,
    TimelineEntry,
)
from backtrail.store import (
    Bookmark,
    BookmarkInput,
    Highlight,
    Note,
    SyncResult,
    Tab,
    TabInput,
    Visit,
    checks,
)
from backtrail.urls import site_domain

logger = logging.getLogger(__name__)

_MAX_READ_CHARS = 1_000_000


class ItemOps(MemoryBase):
    """Reading pages, the timeline, and the records of the user's browser."""

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
            source=label("page", page.url, page.last_captured_at, page.last_seen),
        )  # fmt: skip

    def list_visits(self, page_id: int, *, limit: int = 100) -> list[Visit]:
        """A page's visits, newest first."""
        return self._ledger.list_visits(page_id=page_id, limit=limit)

    def reading_by_day(
        self, since: int, until: int, *, utc_offset: int = 0
    ) -> list[tuple[int, int, int]]:
        """``(day, visits, dwell_ms)`` for each local day with visits in [since, until)."""
        return self._ledger.count_visits_by_day(since, until, utc_offset=utc_offset)

    def forget_preview(
        self, *, url: str | None = None, domain: str | None = None
    ) -> dict[str, int]:
        """What ``forget(url=...)`` or ``forget(domain=...)`` would remove, per table,
        without removing anything (for a confirmation that says what goes)."""
        return self._ledger.forget_preview(url=url, domain=domain)

    def forget_site(self, domain: str) -> str:
        """The site ``forget(domain=...)`` would remove, for previews: the lower-cased
        host; ``InvalidUrl`` for a public suffix (``org``, ``co.uk``), as forget itself."""
        return site_domain(domain)

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
        offset: int = 0,
    ) -> list[Highlight]:
        return self._ledger.list_highlights(
            url=url, domain=domain, since=since, until=until, limit=limit, offset=offset
        )

    def add_note(
        self,
        content: str,
        *,
        url: str | None = None,
        created_at: int | None = None,
        external_id: str | None = None,
        author: str | None = None,
    ) -> Note:
        """Keep a note, optionally about ``url`` (idempotent per ``external_id``).
        ``author``: the assistant that wrote it (its results say so); ``None``, the
        default, is the user's own note."""
        note = self._ledger.add_note(
            content, url=url, created_at=created_at, external_id=external_id, author=author
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
        offset: int = 0,
    ) -> list[Note]:
        return self._ledger.list_notes(url=url, domain=domain, since=since, until=until,
                                       limit=limit, offset=offset)  # fmt: skip

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
        offset: int = 0,
    ) -> list[Bookmark]:
        return self._ledger.list_bookmarks(profile=profile, url=url, domain=domain, limit=limit,
                                           offset=offset)  # fmt: skip

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
