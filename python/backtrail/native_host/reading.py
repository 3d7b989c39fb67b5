"""The reading messages of the extension's memory page (PROTOCOL.md section 3):
``recent``, ``timeline``, ``page_get``, ``saved_list`` and ``forget_preview``.

Each handler reads its fields, calls the service and shapes the answer as protocol
objects (times in milliseconds). Lists come a page at a time (``limit`` and
``offset``, answered with ``next_offset``) so a large memory is never sent whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from backtrail.native_host.codes import Code, HostError
from backtrail.native_host.export import fit
from backtrail.native_host.schema import Fields
from backtrail.service import BrowserSync, Highlight, Note, TimelineEntry, insights

__all__ = ["READING_HANDLERS"]

_DAY = 86_400
_CHART_DAYS = 90
_MAX_CHART_DAYS = 3_660
_MAX_OFFSET = 1_000_000
_SAVED_KINDS = ("highlight", "note", "bookmark")


def _ms(seconds: int | None) -> int | None:
    return None if seconds is None else seconds * 1000


def _paging(f: Fields, default: int, maximum: int) -> tuple[int, int]:
    limit = f.integer("limit", required=False, nullable=True, minimum=1, maximum=maximum)
    offset = f.integer("offset", required=False, nullable=True, minimum=0, maximum=_MAX_OFFSET)
    return limit or default, offset or 0


def _range(f: Fields) -> tuple[int | None, int | None]:
    since = f.time("since_time", required=False, nullable=True)
    until = f.time("until_time", required=False, nullable=True)
    if since is not None and until is not None and since >= until:
        raise f.invalid("until_time", "must be later than since_time")
    return since, until


def _filters(f: Fields) -> tuple[Fields, str | None, int | None, int | None]:
    filters = f.object("filters", required=False, nullable=True) or Fields({}, "filters")
    domain = filters.string("domain", required=False, nullable=True, max_chars=255)
    since, until = _range(filters)
    return filters, domain, since, until


def _page(entry: TimelineEntry) -> dict[str, Any]:
    return {
        "id": entry.page_id, "url": entry.url, "title": entry.title, "domain": entry.domain,
        "first_seen_time": _ms(entry.first_seen), "last_seen_time": _ms(entry.last_seen),
        "visit_count": entry.visit_count, "captured_time": _ms(entry.captured_at),
    }  # fmt: skip


def _highlight(h: Highlight) -> dict[str, Any]:
    return {
        "kind": "highlight", "id": h.id, "url": h.url, "domain": h.domain, "text": h.text,
        "context": h.context, "note": h.note, "time": _ms(h.created_at),
        "updated_time": _ms(h.updated_at),
    }  # fmt: skip


def _note(n: Note) -> dict[str, Any]:
    return {
        "kind": "note", "id": n.id, "content": n.content, "url": n.url, "domain": n.domain,
        "time": _ms(n.created_at), "updated_time": _ms(n.updated_at), "author": n.author,
    }  # fmt: skip


def _bookmark(b: Any) -> dict[str, Any]:
    return {
        "kind": "bookmark", "id": b.id, "url": b.url, "domain": b.domain, "title": b.title,
        "folder": b.folder, "time": _ms(b.created_at),
    }  # fmt: skip


def _page_list(items: list[Any], limit: int, offset: int) -> tuple[list[Any], int | None]:
    """The first ``limit`` of ``items`` (asked for ``limit + 1``) and the next offset."""
    return items[:limit], (offset + limit if len(items) > limit else None)


# ------------------------------------------------------------------- handlers


def recent(sync: BrowserSync, f: Fields) -> dict[str, Any]:
    """Pages by last visit, newest first, optionally of one site and time range."""
    limit, offset = _paging(f, 50, 200)
    _, domain, since, until = _filters(f)

    def build(count: int) -> dict[str, Any]:
        entries = sync.memory.timeline(since, until, domain=domain, limit=count + 1,
                                       offset=offset)  # fmt: skip
        chosen, following = _page_list(entries, count, offset)
        return {"pages": [_page(e) for e in chosen], "next_offset": following}

    return fit(build, limit)


def timeline(sync: BrowserSync, f: Fields) -> dict[str, Any]:
    """Research sessions (runs of related visits, a single page is a session too) in a
    time range, newest first, and the visits per local day for a chart of reading."""
    limit, offset = _paging(f, 10, insights.MAX_SESSIONS_PER_PAGE)
    since, until = _range(f)
    shift = f.integer("utc_offset_minutes", required=False, nullable=True, minimum=-14 * 60,
                      maximum=14 * 60) or 0  # fmt: skip
    per_session = f.integer("pages_per_session", required=False, nullable=True, minimum=1,
                            maximum=insights.MAX_PAGES_PER_SESSION) or 8  # fmt: skip
    found = insights.research_sessions(sync.memory, since, until, limit=limit, offset=offset,
                                       pages_per_session=per_session, min_pages=1)  # fmt: skip
    end = until if until is not None else int(time.time()) + _DAY
    start = since if since is not None else end - _CHART_DAYS * _DAY
    if end - start > _MAX_CHART_DAYS * _DAY:
        start = end - _MAX_CHART_DAYS * _DAY
    days = sync.memory.reading_by_day(start, end, utc_offset=shift * 60)
    return {
        "sessions": [
            {
                "id": s.id, "start_time": _ms(s.start), "end_time": _ms(s.end),
                "page_count": s.page_count, "topics": list(s.topics), "domains": list(s.domains),
                "pages": [{"id": p.page_id, "url": p.url, "title": p.title, "domain": p.domain,
                           "last_seen_time": _ms(p.last_seen), "visit_count": p.visit_count}
                          for p in s.pages],
                "pages_omitted": s.pages_omitted,
            }
            for s in found.sessions
        ],
        "total_sessions": found.total,
        "next_offset": found.next_offset,
        "days": [{"time": _ms(day), "visits": n, "dwell_ms": dwell} for day, n, dwell in days],
        "chart_start_time": _ms(start),
        "chart_end_time": _ms(end),
    }  # fmt: skip


def page_get(sync: BrowserSync, f: Fields) -> dict[str, Any]:
    """A page with a slice of its stored text, its latest visits, and the highlights,
    notes and bookmarks on it."""
    given = [name for name in ("page_id", "url") if f.has(name)]
    if len(given) != 1:
        raise HostError(Code.MISSING_FIELD if not given else Code.INVALID_VALUE,
                        "page_get needs exactly one of page_id or url",
                        {"field": "page_id"})  # fmt: skip
    page_id = f.integer("page_id", required=False, minimum=1)
    url = f.url("url", required=False)
    offset = f.integer("offset", required=False, nullable=True, minimum=0) or 0
    chars = f.integer("max_chars", required=False, nullable=True, minimum=1,
                      maximum=200_000) or 20_000  # fmt: skip
    memory = sync.memory
    text = memory.get_page(url, page_id=page_id, offset=offset, length=chars)
    visits = memory.list_visits(text.page_id, limit=101)
    marks = memory.list_highlights(url=text.url, limit=200)
    notes = memory.list_notes(url=text.url, limit=200)
    bookmarks = memory.list_bookmarks(profile=sync.profile, url=text.url, limit=20)
    return {
        "page": {
            "id": text.page_id, "url": text.url, "title": text.title, "domain": text.domain,
            "language": text.language, "captured_time": _ms(text.captured_at),
            "first_seen_time": _ms(text.first_seen), "last_seen_time": _ms(text.last_seen),
            "visit_count": text.visit_count,
        },
        "text": text.text, "offset": text.offset, "total_chars": text.total_chars,
        "next_offset": text.next_offset,
        "visits": [{"time": _ms(v.visited_at), "dwell_ms": v.dwell_ms,
                    "transition": v.transition, "source": v.source} for v in visits[:100]],
        "more_visits": len(visits) > 100,
        "highlights": [_highlight(h) for h in marks],
        "notes": [_note(n) for n in notes],
        "bookmarks": [_bookmark(b) for b in bookmarks],
    }  # fmt: skip


def saved_list(sync: BrowserSync, f: Fields) -> dict[str, Any]:
    """Highlights, notes or bookmarks, newest first, a page at a time."""
    kind = f.choice("kind", _SAVED_KINDS)
    limit, offset = _paging(f, 50, 200)
    filters, domain, since, until = _filters(f)
    memory = sync.memory
    if kind == "bookmark" and (since is not None or until is not None):
        raise filters.invalid("since_time", "does not apply to bookmarks")

    def build(count: int) -> dict[str, Any]:
        shown: Callable[[Any], dict[str, Any]]
        if kind == "highlight":
            found: list[Any] = memory.list_highlights(domain=domain, since=since, until=until,
                                                      limit=count + 1, offset=offset)  # fmt: skip
            shown = _highlight
        elif kind == "note":
            found = memory.list_notes(domain=domain, since=since, until=until, limit=count + 1,
                                      offset=offset)  # fmt: skip
            shown = _note
        else:
            found = memory.list_bookmarks(profile=sync.profile, domain=domain, limit=count + 1,
                                          offset=offset)  # fmt: skip
            shown = _bookmark
        chosen, following = _page_list(found, count, offset)
        return {"items": [shown(item) for item in chosen], "next_offset": following}

    return fit(build, limit)


def forget_preview(sync: BrowserSync, f: Fields) -> dict[str, Any]:
    """What ``forget`` with this url (or domain) would remove, counted; nothing changes."""
    given = [name for name in ("url", "domain") if f.has(name)]
    if len(given) != 1:
        raise HostError(Code.MISSING_FIELD if not given else Code.INVALID_VALUE,
                        "forget_preview needs exactly one of url or domain",
                        {"field": "url"})  # fmt: skip
    url = f.url("url", required=False)
    domain = f.string("domain", required=False, max_chars=255)
    return {"counts": sync.memory.forget_preview(url=url, domain=domain)}


READING_HANDLERS: dict[str, Callable[[BrowserSync, Fields], dict[str, Any]]] = {
    "recent": recent, "timeline": timeline, "page_get": page_get, "saved_list": saved_list,
    "forget_preview": forget_preview,
}  # fmt: skip
"""Handlers of the memory page's messages, by type."""
