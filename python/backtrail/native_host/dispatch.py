"""Requests to responses: validation of each message type against PROTOCOL.md section 3
and translation to :class:`~backtrail.service.browser_sync.BrowserSync` / ``Memory`` calls.

No rule about what is stored lives here: handlers read fields (``schema.Fields``),
convert milliseconds to seconds, call the service, and shape its answer. The dispatcher
also keeps the session's protocol state: whether ``hello`` succeeded, the responses of
recent queued requests (a resent id gets the stored answer), and open exports; and it
hands the session loop the browser actions waiting for this browser (:meth:`pushes`).
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backtrail import __version__
from backtrail.errors import BacktrailError, InvalidUrl
from backtrail.native_host.codes import RETRYABLE, Code, HostError, error_for
from backtrail.native_host.export import ExportPager, fit, search_item
from backtrail.native_host.framing import MAX_RESPONSE_BYTES, Inbound
from backtrail.native_host.reading import READING_HANDLERS
from backtrail.native_host.schema import MAX_URL_CHARS, Fields
from backtrail.service import (
    EXPORT_KINDS,
    Action,
    BookmarkInput,
    BrowserSync,
    HistoryVisit,
    TabInput,
    VisitRecord,
    validate_capture_url,
)
from backtrail.service.actions import wire_id

__all__ = [
    "PROTOCOL_VERSION", "MESSAGE_TYPES", "BATCHED_TYPES", "QUEUED_TYPES", "HOST_CAPABILITIES",
    "Dispatcher", "Hello", "read_hello", "response",
]  # fmt: skip

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
HOST_CAPABILITIES = ("search", "export", "actions")

MESSAGE_TYPES = (
    "hello", "capture_page", "visit", "tab_snapshot", "tab_event", "history_import",
    "bookmark_upsert", "bookmark_remove", "bookmark_import", "settings_set", "action_result",
    "highlight", "note", "pause", "resume", "forget", "search", "status", "settings_get",
    "export", "skipped", "recent", "timeline", "page_get", "saved_list", "forget_preview",
)  # fmt: skip
"""Every request type of protocol version 1 (PROTOCOL.md section 3)."""
QUEUED_TYPES = frozenset({
    "capture_page", "visit", "tab_snapshot", "tab_event", "history_import",
    "bookmark_upsert", "bookmark_remove", "bookmark_import", "settings_set",
    "action_result", "highlight", "note", "pause", "resume", "forget", "skipped",
})  # fmt: skip
"""Types the extension sends through its persistent queue (answers are remembered)."""
BATCHED_TYPES = frozenset({
    "capture_page", "visit", "tab_snapshot", "tab_event", "history_import",
    "bookmark_upsert", "bookmark_remove", "bookmark_import", "highlight", "note", "skipped",
})  # fmt: skip
"""Types whose writes may share one ledger commit with the requests around them."""

_REMEMBERED = 1_000
_BATCH_SECONDS = 0.25
_ACTION_POLL_SECONDS = 0.25
_ACTIONS_PER_POLL = 10
_MAX_KEY_CHARS = 200
_MAX_LABEL_CHARS = 256
_SEARCH_KINDS = ("page", "highlight", "note", "bookmark")


def response(ident: str | None, result: dict[str, Any] | None = None,
             error: HostError | None = None) -> dict[str, Any]:  # fmt: skip
    """A response frame: ``{id, ok, result}`` or ``{id, ok: false, error}``."""
    if error is not None:
        return {"id": ident, "ok": False, "error": error.to_error()}
    return {"id": ident, "ok": True, "result": result if result is not None else {}}


def _ms(seconds: int | None) -> int | None:
    return None if seconds is None else seconds * 1000


def _kind(request: dict[str, Any]) -> str | None:
    """The request's type when it is a string (anything else is no type at all)."""
    kind = request.get("type")
    return kind if isinstance(kind, str) else None


@dataclass
class _Outcome:
    request: dict[str, Any]
    response: dict[str, Any]


class Dispatcher:
    """Answers requests for one connection. ``sync`` is ``None`` when the store could
    not be opened: every request then gets error 14 with ``failure`` as its message."""

    def __init__(
        self,
        sync: BrowserSync | None,
        *,
        max_request_bytes: int,
        failure: str | None = None,
        batch_seconds: float = _BATCH_SECONDS,
        action_poll_seconds: float = _ACTION_POLL_SECONDS,
    ) -> None:
        self.sync = sync
        self.failure = failure
        self.max_request_bytes = max_request_bytes
        self.batch_seconds = batch_seconds
        self.action_poll_seconds = action_poll_seconds
        self.greeted = False
        self.profile: str | None = None
        self.takes_actions = False  # the extension said it handles `action` pushes
        self.claimer = f"native-host:{os.getpid()}"
        self._next_poll = 0.0
        self._answers: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        self._exports = ExportPager()
        self._handlers: dict[str, Callable[[Fields], dict[str, Any]]] = {
            "hello": self._hello, "capture_page": self._capture_page, "visit": self._visit,
            "tab_snapshot": self._tab_snapshot, "tab_event": self._tab_event,
            "history_import": self._history_import, "bookmark_upsert": self._bookmark_upsert,
            "bookmark_remove": self._bookmark_remove, "bookmark_import": self._bookmark_import,
            "settings_set": self._settings_set, "settings_get": self._settings_get,
            "action_result": self._action_result, "highlight": self._highlight,
            "note": self._note, "pause": self._pause, "resume": self._resume,
            "forget": self._forget, "search": self._search, "status": self._status,
            "export": self._export, "skipped": self._skipped,
        }  # fmt: skip
        for kind, read in READING_HANDLERS.items():
            self._handlers[kind] = self._reader(read)

    # ------------------------------------------------------------ sessions

    def handle_all(self, items: Sequence[Inbound]) -> list[dict[str, Any]]:
        """Responses to ``items`` in order. Consecutive batched requests share ledger
        commits (each at most ``batch_seconds`` long); a response is produced only
        after its writes are durable."""
        out: list[dict[str, Any]] = []
        index = 0
        while index < len(items):
            end = index
            while end < len(items) and self._batchable(items[end]):
                end += 1
            if end == index:
                out.append(self.handle(items[index]))
                index += 1
                continue
            while index < end:
                done, responses = self._batch(items[index:end])
                out.extend(responses)
                index += done
        return out

    def _batchable(self, item: Inbound) -> bool:
        request = item.request
        return (
            self.sync is not None
            and self.greeted
            and request is not None
            and _kind(request) in BATCHED_TYPES
            and request["id"] not in self._answers
        )

    def _batch(self, items: Sequence[Inbound]) -> tuple[int, list[dict[str, Any]]]:
        """Handle a prefix of ``items`` in one transaction: ``(count, responses)``."""
        assert self.sync is not None
        outcomes: list[_Outcome] = []
        started = time.monotonic()
        try:
            with self.sync.batch():
                for item in items:
                    assert item.request is not None
                    outcomes.append(_Outcome(item.request, self._execute(item.request)))
                    if time.monotonic() - started > self.batch_seconds:
                        break
        except Exception as exc:  # the commit (or BEGIN) failed: nothing was stored
            error = error_for(exc, "storing the messages")
            logger.warning("%d message(s) were not stored: %s", len(outcomes) or len(items),
                           error.message)  # fmt: skip
            if not outcomes:  # the transaction could not even begin: answer them all
                return len(items), [response(i.id, error=error) for i in items]
            return len(outcomes), [
                response(o.request["id"], error=error) if o.response["ok"] else o.response
                for o in outcomes
            ]
        for outcome in outcomes:
            self._remember(outcome.request, outcome.response)
        return len(outcomes), [o.response for o in outcomes]

    def handle(self, item: Inbound) -> dict[str, Any]:
        """The response to one frame (a refused frame, or a request)."""
        if item.error is not None:
            return response(item.id, error=item.error)
        request = item.request
        assert request is not None
        kind = _kind(request)
        stored = self._answers.get(request["id"])
        if stored is not None and stored[0] == kind:
            return stored[1]
        answer = self._execute(request)
        self._remember(request, answer)
        return answer

    def _remember(self, request: dict[str, Any], answer: dict[str, Any]) -> None:
        kind = _kind(request)
        if kind not in QUEUED_TYPES:
            return
        if not answer["ok"] and answer["error"]["code"] in RETRYABLE:
            return
        self._answers[request["id"]] = (kind or "", answer)
        self._answers.move_to_end(request["id"])
        while len(self._answers) > _REMEMBERED:
            self._answers.popitem(last=False)

    def _execute(self, request: dict[str, Any]) -> dict[str, Any]:
        ident = request["id"]
        kind = _kind(request)
        started = time.perf_counter()
        try:
            result = self._run(kind, request.get("type"), Fields(request))
            answer = response(ident, result)
        except Exception as exc:
            error = error_for(exc, kind if kind in self._handlers else "the request")
            answer = response(ident, error=error)
        code = 0 if answer["ok"] else answer["error"]["code"]
        logger.debug("%s %s -> %s in %.1f ms", kind if kind in self._handlers else "?", ident,
                     code or "ok", (time.perf_counter() - started) * 1000)  # fmt: skip
        return answer

    def _run(self, kind: str | None, given: object, fields: Fields) -> dict[str, Any]:
        if kind is None or kind not in self._handlers:
            shown = "missing" if given is None else repr(given)[:40]
            raise HostError(Code.UNKNOWN_TYPE,
                            f"message type {shown} is not part of protocol version 1")  # fmt: skip
        if self.sync is None:
            raise HostError(Code.INTERNAL_ERROR, self.failure or "the store is not open")
        if kind != "hello" and not self.greeted:
            raise HostError(Code.HELLO_REQUIRED, "send hello first")
        if kind in BATCHED_TYPES:
            with self.sync.atomic():
                return self._handlers[kind](fields)
        return self._handlers[kind](fields)

    def _reader(self, read: Callable[[BrowserSync, Fields], dict[str, Any]]
                ) -> Callable[[Fields], dict[str, Any]]:  # fmt: skip
        def handle(fields: Fields) -> dict[str, Any]:
            assert self.sync is not None
            return read(self.sync, fields)

        return handle

    # -------------------------------------------------------------- hello

    def _hello(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        hello = read_hello(f)
        self.sync.use_profile(hello.profile)
        self.profile = hello.profile
        self.greeted = True
        self.takes_actions = "actions" in hello.capabilities
        self._next_poll = 0.0
        logger.info("hello from %s extension %s", hello.browser, hello.extension_version)
        return {
            "protocol": PROTOCOL_VERSION,
            "host_version": __version__,
            "capabilities": list(HOST_CAPABILITIES),
            "limits": {
                "max_request_bytes": self.max_request_bytes,
                "max_response_bytes": MAX_RESPONSE_BYTES,
            },
            "paused": self.sync.paused(),
        }

    # ------------------------------------------------------- pages, visits

    def _capture_page(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        url = f.url("url")
        title = f.title()
        language = f.string("language", required=False, nullable=True, min_chars=0,
                            max_chars=64, cut=True)  # fmt: skip
        content_type = f.choice("content_type", ("html", "text"))
        other = "text" if content_type == "html" else "html"
        body = f.string(content_type or "html", min_chars=0)
        if f.has(other):
            raise f.invalid(other, f"must be absent when content_type is {content_type!r}")
        f.boolean("truncated", required=False)
        f.string("dedupe_key", max_chars=_MAX_KEY_CHARS)
        captured = f.time("captured_time")
        visit = _visit_record(f.object("visit"))
        outcome = self.sync.capture(
            url or "", html=body if content_type == "html" else None,
            text=body if content_type == "text" else None, title=title, language=language,
            captured_at=captured, visit=visit,
        )  # fmt: skip
        return {
            "page_id": outcome.page_id, "outcome": outcome.outcome,
            "visit_created": outcome.visit_created, "duplicate": outcome.duplicate,
        }  # fmt: skip

    def _visit(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        url = f.url("url")
        title = f.title()
        visit = _visit_record(f.object("visit"))
        page_id, created = self.sync.visit(url or "", title, visit)
        return {"page_id": page_id, "visit_created": created}

    def _history_import(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        f.string("import_id", max_chars=_MAX_KEY_CHARS)
        f.integer("batch", minimum=0)
        f.boolean("final")
        span = f.object("range")
        assert span is not None
        span.time("start_time")
        span.time("end_time")
        visits: list[HistoryVisit] = []
        invalid = 0
        for item in list(f.objects("items", max_items=500)):
            url = item.string("url", max_chars=MAX_URL_CHARS)
            title = item.title()
            item.integer("visit_count", required=False, minimum=0)
            item.integer("typed_count", required=False, minimum=0)
            item.time("last_visit_time", required=False, nullable=True)
            entries = [
                HistoryVisit(
                    url=url or "", title=title,
                    visit_id=v.string("visit_id", max_chars=64) or "",
                    visited_at=v.time("time") or 0,
                    transition=v.string("transition", required=False, nullable=True,
                                        min_chars=0, max_chars=64),
                )  # fmt: skip
                for v in item.objects("visits", max_items=5_000)
            ]
            try:
                validate_capture_url(url)
            except InvalidUrl:
                invalid += len(entries)  # not http(s): the extension should have dropped it
                continue
            visits.extend(entries)
            if len(visits) + invalid > 5_000:
                raise f.invalid("items", "hold more than 5000 visits", limit=5_000)
        result = self.sync.import_history(visits)
        return {
            "added": result.added, "skipped": result.skipped + invalid,
            "pages_created": result.pages_created,
        }  # fmt: skip

    # ----------------------------------------------------------------- tabs

    def _tab_snapshot(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        tabs = [_tab(item) for item in f.objects("tabs", max_items=5_000)]
        f.time("time")
        return {"tabs": self.sync.snapshot_tabs(tabs)}

    def _tab_event(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        event = f.choice("event", ("opened", "closed", "activated", "updated"))
        holder = f.object("tab")
        assert holder is not None and event is not None
        f.time("time")
        if event == "closed":
            tab_id = holder.integer("tab_id")
            holder.integer("window_id", required=False, nullable=True)
            self.sync.tab_event("closed", TabInput(tab_id=tab_id or 0, window_id=0))
        else:
            self.sync.tab_event(event, _tab(holder))
        return {}

    # ------------------------------------------------------------ bookmarks

    def _bookmark_upsert(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        items = [_bookmark(b) for b in f.objects("bookmarks", min_items=1, max_items=1_000)]
        upserted, skipped = self.sync.upsert_bookmarks(items)
        return {"upserted": upserted, "skipped": skipped}

    def _bookmark_remove(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        ids = f.strings("browser_ids", min_items=1, max_items=10_000, max_chars=_MAX_LABEL_CHARS)
        return {"removed": self.sync.remove_bookmarks(ids or [])}

    def _bookmark_import(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        import_id = f.string("import_id", max_chars=_MAX_KEY_CHARS)
        batch = f.integer("batch", minimum=0, maximum=1_000_000)
        final = f.boolean("final")
        f.integer("total", required=False, nullable=True, minimum=0)
        items = [_bookmark(b) for b in f.objects("bookmarks", max_items=1_000)]
        done = self.sync.import_bookmarks(import_id or "", batch or 0, final, items)
        return {
            "upserted": done.upserted, "skipped": done.skipped, "removed": done.removed,
            "complete": done.complete,
        }  # fmt: skip

    def _skipped(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        rule = f.string("rule", max_chars=1_024)
        f.time("time")
        return {"count": self.sync.skipped(rule or "")}

    # ----------------------------------------------------- highlights, notes

    def _highlight(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        key = f.string("dedupe_key", max_chars=_MAX_KEY_CHARS)
        url = f.url("url")
        f.title()
        text = f.string("text", max_chars=20_000)
        context = f.text("context", required=False, max_chars=20_000)
        note = f.text("note", required=False, max_chars=100_000)
        at = f.time("time")
        highlight_id, duplicate = self.sync.highlight(
            url or "", text or "", context=context or None, note=note or None, created_at=at,
            dedupe_key=key or "",
        )  # fmt: skip
        return {"highlight_id": highlight_id, "duplicate": duplicate}

    def _note(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        key = f.string("dedupe_key", max_chars=_MAX_KEY_CHARS)
        content = f.string("content", max_chars=100_000)
        url = f.url("url", required=False, nullable=True)
        f.title()
        at = f.time("time")
        note_id, duplicate = self.sync.note(
            content or "", url=url, created_at=at, dedupe_key=key or ""
        )
        return {"note_id": note_id, "duplicate": duplicate}

    # ------------------------------------------------------- settings, state

    def _settings_set(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        document = f.object("settings")
        assert document is not None
        return {"version": self.sync.set_settings(document.obj)}

    def _settings_get(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        document, version = self.sync.settings()
        return {"settings": document, "version": version}

    def _action_result(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        action_id = f.string("action_id", max_chars=_MAX_KEY_CHARS)
        ok = f.boolean("ok")
        result = f.object("result", required=False, nullable=True)
        error = f.object("error", required=False, nullable=True)
        recorded = self.sync.action_result(
            action_id or "", ok=bool(ok), result=result.obj if result is not None else None,
            error=error.obj if error is not None else None,
        )  # fmt: skip
        if recorded is not None:
            logger.info("action %s: %s", action_id, recorded.status)
        return {}  # an unknown (or already answered) action_id is not an error

    # --------------------------------------------------------------- pushes

    def push_wait(self) -> float | None:
        """How long the session loop may wait for frames before calling
        :meth:`pushes` again (``None``: no pushes on this connection yet)."""
        if self.sync is None or not self.greeted or not self.takes_actions:
            return None
        return max(0.0, self._next_poll - time.monotonic())

    def pushes(self) -> list[dict[str, Any]]:
        """``action`` messages for the extension: the pending actions for this browser,
        claimed for this host (at most one ledger read per ``action_poll_seconds``)."""
        if self.push_wait() != 0.0:
            return []
        assert self.sync is not None
        self._next_poll = time.monotonic() + self.action_poll_seconds
        try:
            claimed = self.sync.claim_actions(self.claimer, limit=_ACTIONS_PER_POLL)
        except BacktrailError as error:
            logger.warning("could not read pending browser actions: %s", error.message)
            return []
        for action in claimed:
            logger.info("pushing action %s (%s)", wire_id(action), action.type)
        return [_push(action) for action in claimed]

    def undelivered(self, push: dict[str, Any]) -> None:
        """A push could not be written (the browser went away): record it as failed."""
        assert self.sync is not None
        error = {"code": int(Code.INTERNAL_ERROR), "name": "internal_error",
                 "message": "the browser disconnected before the action reached it"}  # fmt: skip
        try:
            self.sync.action_result(str(push.get("action_id")), ok=False, result=None,
                                    error=error)  # fmt: skip
        except BacktrailError as problem:
            logger.warning("could not record an undelivered action: %s", problem.message)

    def _pause(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        until = f.time("until_time", required=False, nullable=True)
        return {"paused": self.sync.pause(until)}

    def _resume(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        return {"paused": self.sync.resume()}

    def _forget(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        chosen: dict[str, Any] = {}
        if f.has("url"):
            chosen["url"] = f.url("url")
        if f.has("domain"):
            chosen["domain"] = f.string("domain", max_chars=255)
        if f.has("since_time") or f.has("until_time"):
            chosen["since"] = f.time("since_time", required=False, nullable=True)
            chosen["until"] = f.time("until_time", required=False, nullable=True)
        if f.boolean("everything", required=False):
            chosen["everything"] = True
        selectors = [name for name in ("url", "domain", "since", "everything") if name in chosen]
        if not selectors:
            raise HostError(Code.MISSING_FIELD,
                            "forget needs one of url, domain, since_time/until_time or everything",
                            {"field": "url"})  # fmt: skip
        if len(selectors) > 1:
            raise HostError(Code.INVALID_VALUE,
                            "give exactly one of url, domain, a time range or everything",
                            {"field": "selector"})  # fmt: skip
        report = self.sync.forget(**chosen)
        return {
            "selector": report.selector, "counts": report.counts,
            "purged": report.ledger_purged and report.index_purged,
        }  # fmt: skip

    def _status(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        status = self.sync.status()
        return {
            "host_version": __version__, "paused": status["paused"], "counts": status["counts"],
            "last_capture_time": _ms(status["last_capture_at"]),
            "index_lag": status["index_lag"], "vector_lag": status["vector_lag"],
            "db_bytes": status["db_bytes"], "model": status["model"],
            "profile_id": self.profile,
        }  # fmt: skip

    # ---------------------------------------------------------------- reading

    def _search(self, f: Fields) -> dict[str, Any]:
        sync = self.sync
        assert sync is not None
        query = f.string("query", max_chars=1_000)
        limit = f.integer("limit", required=False, nullable=True, minimum=1, maximum=50) or 10
        cursor = f.string("cursor", required=False, nullable=True, max_chars=512)
        filters = f.object("filters", required=False, nullable=True) or Fields({}, "filters")
        domain = filters.string("domain", required=False, nullable=True, max_chars=255)
        since = filters.time("since_time", required=False, nullable=True)
        until = filters.time("until_time", required=False, nullable=True)
        kinds = filters.strings("kinds", required=False, nullable=True, min_items=1,
                                max_items=len(_SEARCH_KINDS), max_chars=16)  # fmt: skip
        for index, kind in enumerate(kinds or []):
            if kind not in _SEARCH_KINDS:
                raise filters.invalid(f"kinds[{index}]",
                                      f"must be one of {', '.join(_SEARCH_KINDS)}")  # fmt: skip

        def build(count: int) -> dict[str, Any]:
            page = sync.search(query or "", limit=count, cursor=cursor, domain=domain,
                               since=since, until=until, kinds=kinds)  # fmt: skip
            return {
                "results": [search_item(r) for r in page.results],
                "next_cursor": page.next_cursor, "mode": page.mode, "no_match": page.no_match,
                "notice": page.notice,
            }  # fmt: skip

        return fit(build, limit)

    def _export(self, f: Fields) -> dict[str, Any]:
        assert self.sync is not None
        cursor = f.string("cursor", required=False, nullable=True, max_chars=128)
        kinds = f.strings("kinds", required=False, nullable=True, min_items=1,
                          max_items=len(EXPORT_KINDS), max_chars=16)  # fmt: skip
        for index, kind in enumerate(kinds or []):
            if kind not in EXPORT_KINDS:
                raise f.invalid(f"kinds[{index}]", f"must be one of {', '.join(EXPORT_KINDS)}")
        limit = f.integer("limit", required=False, nullable=True, minimum=1, maximum=10_000)
        return self._exports.page(self.sync, cursor, kinds, limit or 1_000)


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Hello:
    """The members of a ``hello`` the host uses."""

    profile: str
    browser: str
    extension_version: str
    capabilities: list[str]
    paused: bool


def read_hello(f: Fields) -> Hello:
    """Validate a ``hello`` (PROTOCOL.md section 3.1; error 15 for another protocol)."""
    protocol = f.integer("protocol")
    if protocol != PROTOCOL_VERSION:
        raise HostError(
            Code.UNSUPPORTED_PROTOCOL,
            f"this host speaks protocol version {PROTOCOL_VERSION}, not {protocol}; "
            "update Backtrail or the extension so both match",
            {"supported": [PROTOCOL_VERSION]},
        )
    version = f.string("extension_version", max_chars=64)
    f.string("extension_id", max_chars=64)
    browser = f.object("browser")
    assert browser is not None
    name = browser.string("name", max_chars=64)
    browser.string("version", required=False, nullable=True, min_chars=0, max_chars=64)
    profile = f.string("profile_id", max_chars=64)
    capabilities = f.strings("capabilities", max_items=64, max_chars=64, required=False)
    paused = f.boolean("paused", required=False)
    assert profile is not None
    return Hello(profile, name or "", version or "", list(capabilities or []), bool(paused))


def _push(action: Action) -> dict[str, Any]:
    """The ``action`` push for an action (PROTOCOL.md section 5)."""
    return {"type": "action", "action_id": wire_id(action), "action": action.type,
            **action.payload}  # fmt: skip


def _visit_record(f: Fields | None) -> VisitRecord:
    assert f is not None
    return VisitRecord(
        visit_id=f.string("visit_id", max_chars=_MAX_KEY_CHARS) or "",
        visited_at=f.time("time") or 0,
        tab_id=f.integer("tab_id", required=False, nullable=True),
        window_id=f.integer("window_id", required=False, nullable=True),
        transition=f.string("transition", required=False, nullable=True, min_chars=0,
                            max_chars=64),  # fmt: skip
        referrer=f.string("referrer", required=False, nullable=True, min_chars=0,
                          max_chars=MAX_URL_CHARS),  # fmt: skip
        dwell_ms=f.duration("dwell_ms", required=False),
    )


def _tab(f: Fields) -> TabInput:
    return TabInput(
        tab_id=f.integer("tab_id") or 0,
        window_id=f.integer("window_id") or 0,
        url=f.string("url", required=False, nullable=True, min_chars=0, max_chars=MAX_URL_CHARS),
        title=f.title(),
        active=f.boolean("active", required=False),
        pinned=f.boolean("pinned", required=False),
        group_id=f.integer("group_id", required=False, nullable=True),
        last_accessed=f.time("last_accessed_time", required=False, nullable=True),
        index=f.integer("index", required=False, nullable=True, minimum=0),
    )


def _bookmark(f: Fields) -> BookmarkInput:
    browser_id = f.string("browser_id", max_chars=_MAX_LABEL_CHARS)
    f.string("parent_id", required=False, nullable=True, min_chars=0, max_chars=_MAX_LABEL_CHARS)
    f.integer("index", required=False, nullable=True, minimum=0)
    return BookmarkInput(
        browser_id=browser_id or "",
        url=f.string("url", max_chars=MAX_URL_CHARS) or "",
        title=f.title(),
        folder=f.string("folder", required=False, nullable=True, min_chars=0, max_chars=4_096,
                        cut=True),  # fmt: skip
        created_at=f.time("added_time", required=False, nullable=True),
    )
