"""Protocol shapes of stored records (``search`` results and ``export`` items) and the
paging that keeps every response frame under the browser's 1 MiB.

Records come from the service layer in unix seconds with the ledger's names; here they
become protocol objects: times in milliseconds named ``time`` or ``*_time``.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from backtrail.native_host.codes import Code, HostError
from backtrail.native_host.framing import MAX_RESPONSE_BYTES, encode_json
from backtrail.service import (
    Bookmark,
    BrowserSync,
    Highlight,
    Note,
    Page,
    SearchResult,
    Tab,
    Visit,
    present,
)

__all__ = ["RESULT_BUDGET", "ExportPager", "fit", "record_item", "search_item"]

RESULT_BUDGET = MAX_RESPONSE_BYTES - 4096
"""Bytes a result may use inside a response frame (the rest is the envelope)."""
_MAX_SNIPPET_CHARS = 500
_SESSIONS_KEPT = 4
_CURSOR_RE = re.compile(r"^([0-9a-f]{16})\.(\d{1,9})\.(\d{1,9})\.(\d{1,10})$")


def _ms(seconds: int | None) -> int | None:
    return None if seconds is None else seconds * 1000


def size_of(value: Any) -> int:
    """Encoded size of a JSON value inside a frame."""
    return len(encode_json({"v": value})) - 6


def fit(build: Callable[[int], dict[str, Any]], limit: int) -> dict[str, Any]:
    """``build(limit)``, asked again with half the limit while its result is larger
    than a response may be (error 14 when even one item does not fit)."""
    while True:
        result = build(limit)
        if size_of(result) <= RESULT_BUDGET:
            return result
        if limit <= 1:
            raise HostError(Code.INTERNAL_ERROR, "the result is too large for one message")
        limit //= 2


# ----------------------------------------------------------------------- search


def search_item(result: SearchResult) -> dict[str, Any]:
    """One ``search`` result: kind, title, url, snippet (at most 500 characters), the
    last visit (or update) time and the score, plus id, domain and origin, and what a
    person reads (``service.present``): the title without the site's suffix, the site,
    the visit count, the last visit, and both in words."""
    return {
        "kind": result.kind,
        "title": result.title,
        "url": result.url,
        "snippet": result.snippet[:_MAX_SNIPPET_CHARS],
        "visit_time": _ms(result.last_seen),
        "score": result.score,
        "id": result.id,
        "domain": result.domain,
        "origin": result.origin,
        "display_title": result.display_title,
        "site": result.site,
        "visits": result.visit_count,
        "last_visit_ms": _ms(result.last_seen),
        "when": present.relative_time(result.last_seen),
        "visits_text": present.visits_text(result.visit_count),
    }


# ----------------------------------------------------------------------- export


def record_item(record: Any) -> dict[str, Any]:
    """A stored record as an export item with its ``kind``."""
    if isinstance(record, Page):
        return {
            "kind": "page", "id": record.id, "url": record.url,
            "canonical_url": record.canonical_url, "domain": record.domain,
            "title": record.title, "language": record.language,
            "first_seen_time": _ms(record.first_seen), "last_seen_time": _ms(record.last_seen),
            "visit_count": record.visit_count, "dwell_ms": record.dwell_ms,
            "captured_time": _ms(record.last_captured_at), "text": record.text,
        }  # fmt: skip
    if isinstance(record, Visit):
        return {
            "kind": "visit", "id": record.id, "page_id": record.page_id,
            "time": _ms(record.visited_at), "tab_id": record.tab_id,
            "window_id": record.window_id, "transition": record.transition,
            "referrer": record.referrer, "dwell_ms": record.dwell_ms, "source": record.source,
            "external_id": record.external_id,
        }  # fmt: skip
    if isinstance(record, Bookmark):
        return {
            "kind": "bookmark", "id": record.id, "profile": record.profile,
            "browser_id": record.browser_id, "url": record.url, "title": record.title,
            "folder": record.folder, "added_time": _ms(record.created_at),
            "updated_time": _ms(record.updated_at),
        }  # fmt: skip
    if isinstance(record, Highlight):
        return {
            "kind": "highlight", "id": record.id, "url": record.url, "text": record.text,
            "context": record.context, "note": record.note, "time": _ms(record.created_at),
            "updated_time": _ms(record.updated_at), "dedupe_key": record.external_id,
        }  # fmt: skip
    if isinstance(record, Note):
        return {
            "kind": "note", "id": record.id, "content": record.content, "url": record.url,
            "time": _ms(record.created_at), "updated_time": _ms(record.updated_at),
            "dedupe_key": record.external_id,
        }  # fmt: skip
    if isinstance(record, Tab):
        return {
            "kind": "tab", "profile": record.profile, "tab_id": record.tab_id,
            "window_id": record.window_id, "index": record.index, "url": record.url,
            "title": record.title, "active": record.active, "pinned": record.pinned,
            "group_id": record.group_id, "last_accessed_time": _ms(record.last_accessed),
        }  # fmt: skip
    raise TypeError(f"cannot export {type(record).__name__}")


class ExportPager:
    """Pages of an export. The first request takes the plan (which blocks to read, see
    :meth:`BrowserSync.export_plan`); cursors point into it, so they live as long as
    this host process (a few exports at a time). A page's text that does not fit one
    frame continues in ``page_text`` items."""

    def __init__(self) -> None:
        self._plans: OrderedDict[str, tuple[list[tuple[str, int]], tuple[str, ...] | None]]
        self._plans = OrderedDict()

    def page(
        self,
        sync: BrowserSync,
        cursor: str | None,
        kinds: Sequence[str] | None,
        limit: int,
    ) -> dict[str, Any]:
        if cursor is None:
            token = secrets.token_hex(8)
            wanted = None if kinds is None else tuple(kinds)
            self._plans[token] = (sync.export_plan(wanted), wanted)
            while len(self._plans) > _SESSIONS_KEPT:
                self._plans.popitem(last=False)
            block = item = offset = 0
        else:
            token, block, item, offset = self._parse(cursor)
        plan, wanted = self._plans[token]
        items: list[dict[str, Any]] = []
        room = RESULT_BUDGET - 200
        while block < len(plan) and len(items) < limit:
            records = sync.export_block(*plan[block], kinds=wanted)
            while item < len(records) and len(items) < limit:
                piece, offset = _piece(records[item], offset, room, first=not items)
                if piece is None:
                    return _page(items, token, block, item, offset)
                items.append(piece)
                room -= size_of(piece) + 1
                if offset == 0:
                    item += 1
            if item >= len(records):
                block, item = block + 1, 0
        if block >= len(plan):
            self._plans.pop(token, None)
            return {"items": items, "next_cursor": None}
        return _page(items, token, block, item, offset)

    def _parse(self, cursor: str) -> tuple[str, int, int, int]:
        match = _CURSOR_RE.match(cursor)
        if match is None:
            raise HostError(Code.INVALID_VALUE, "cursor is not one this host returned",
                            {"field": "cursor"})  # fmt: skip
        token = match.group(1)
        if token not in self._plans:
            raise HostError(
                Code.NOT_FOUND,
                "the export this cursor belongs to is no longer open (the host restarted or "
                "started newer exports); start the export again",
                {"field": "cursor"},
            )
        return token, int(match.group(2)), int(match.group(3)), int(match.group(4))


def _page(items: list[dict[str, Any]], token: str, block: int, item: int, offset: int) -> dict:
    return {"items": items, "next_cursor": f"{token}.{block}.{item}.{offset}"}


def _piece(
    record: Any, offset: int, room: int, *, first: bool
) -> tuple[dict[str, Any] | None, int]:
    """The item for ``record`` from text ``offset`` on, fitting in ``room`` bytes, and
    the text offset to continue from (0: the record is done). ``None`` when nothing of
    it fits (only when other items are already on the page)."""
    item = record_item(record)
    text = item.get("text") if item["kind"] == "page" else None
    if offset == 0 and size_of(item) <= room:
        return item, 0
    if text is None or room < 4096:
        if first:
            raise HostError(Code.INTERNAL_ERROR, "a record is too large for one message")
        return None, offset
    if offset == 0:
        item["text_chars"] = len(text)
        head = dict(item, text="")
        budget = room - size_of(head)
    else:
        head = {"kind": "page_text", "page_id": record.id, "offset": offset, "text": ""}
        budget = room - size_of(head)
    chars = max(1, budget // 4)  # a character takes at most 4 bytes in JSON here
    head["text"] = text[offset : offset + chars]
    end = offset + len(head["text"])
    return head, 0 if end >= len(text) else end
