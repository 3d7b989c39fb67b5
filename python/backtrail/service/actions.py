"""Browser actions an assistant proposes, delivered through the native host (service
layer; the rows live in :mod:`backtrail.store.actions`).

Nothing listens on a network port. The ledger is the mailbox between processes:

1. an MCP tool proposes an action (:class:`ActionQueue` ``group_tabs``, ``close_tabs``,
   ``capture_tab``, ``create_bookmark``): a ``pending`` row, audit event
   ``action.create`` by the assistant;
2. the native host of the targeted browser profile, which holds the extension's open
   port, polls the ledger (:meth:`ActionQueue.claim`, one indexed read when idle),
   claims the row (``sent``, event ``action.sent``) and pushes it to the extension as an
   ``action`` message (PROTOCOL.md section 5);
3. the extension performs it only if the user's switch for that action is on (closing
   tabs is off by default) and answers with a queued ``action_result``, which the host
   records (:meth:`ActionQueue.record_result`): ``done``, ``refused`` (not allowed,
   paused, excluded, unsupported) or ``failed`` (e.g. the tabs no longer exist), each
   with its event;
4. the proposing tool waits for the outcome (:meth:`ActionQueue.wait`, bounded) and
   reports it, or reports the action as still pending with its id.

Whoever looks at the queue (the host's poll, a waiting tool, a status query) first
marks actions nobody claimed before their deadline ``expired``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from backtrail import urls
from backtrail.errors import BacktrailError, Excluded, InvalidInput, NotFound, Paused
from backtrail.indexer.extract import extract_main_text
from backtrail.service.types import Action, PageText, Tab
from backtrail.store import ActionNotFound, Ledger
from backtrail.store import checks as store_checks

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = [
    "ActionQueue", "NoActiveTab", "DEFAULT_TTL", "GROUP_COLORS", "MAX_TABS", "wire_id",
    "parse_wire_id", "describe",
]  # fmt: skip

logger = logging.getLogger(__name__)

DEFAULT_TTL = 120
"""Seconds a proposed action waits for a browser to pick it up before it expires."""
GROUP_COLORS = ("grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange")
MAX_TABS = 500
MAX_GROUP_TITLE = 200
_MAX_TITLE = 1_000
_MAX_FOLDER = 4_096
_REFUSALS = frozenset({9, 10, 18, 19})
"""Protocol error codes meaning the browser side declined: excluded, paused, not
allowed by the user, unsupported."""
_WIRE_PREFIX = "a-"


class NoActiveTab(BacktrailError):
    """No open tab is known to be active (no browser has reported its tabs)."""

    code = "no_active_tab"

    def __init__(self) -> None:
        super().__init__(
            "no active tab is known: is the browser open, with the Backtrail extension "
            "connected?"
        )


def wire_id(action: Action) -> str:
    """The ``action_id`` the extension sees (``a-<id>``)."""
    return f"{_WIRE_PREFIX}{action.id}"


def parse_wire_id(value: object) -> int | None:
    """The ledger id in an ``action_id``; ``None`` for one Backtrail did not make."""
    if not isinstance(value, str) or not value.startswith(_WIRE_PREFIX):
        return None
    digits = value[len(_WIRE_PREFIX) :]
    if not digits.isdigit() or len(digits) > 18 or digits.startswith("0"):
        return None
    return int(digits)


def describe(action: Action) -> str:
    """One line for people and models: what, its state, and its outcome."""
    head = f"{action.type} {wire_id(action)}: {action.status}"
    if action.error:
        return f"{head} ({action.error.get('message', 'no reason given')})"
    if action.status == "done" and action.result:
        shown = ", ".join(f"{k} {v}" for k, v in sorted(action.result.items()))
        return f"{head} ({shown})"
    return head


def _tab_ids(value: object) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInput("tab_ids", f"must be a list of 1 to {MAX_TABS} tab ids")
    ids = [store_checks.integer(item, f"tab_ids[{n}]", minimum=0) for n, item in enumerate(value)]
    if not 1 <= len(ids) <= MAX_TABS:
        raise InvalidInput("tab_ids", f"must hold 1 to {MAX_TABS} tab ids, got {len(ids)}")
    return list(dict.fromkeys(ids))


def _short(value: object, field: str, limit: int) -> str | None:
    """Optional one-line text, cut to ``limit`` characters."""
    if value is None:
        return None
    clean = store_checks.label(value, field, 1 << 20)
    return clean.strip()[:limit] or None


class ActionQueue:
    """Browser actions of ``memory``'s ledger: proposing and following them (MCP
    servers) and delivering them (native hosts)."""

    def __init__(self, memory: Memory, ledger: Ledger) -> None:
        self.memory = memory
        self._ledger = ledger  # the memory's own connection (see Memory.actions)

    # --------------------------------------------------------------- proposing

    def group_tabs(
        self,
        tab_ids: Sequence[int],
        *,
        title: str | None = None,
        color: str | None = None,
        ttl: int = DEFAULT_TTL,
    ) -> Action:
        """Propose putting ``tab_ids`` in one new tab group named ``title``."""
        ids = _tab_ids(tab_ids)
        name = _short(title, "title", MAX_GROUP_TITLE)
        if color is not None:
            color = store_checks.one_of(color, "color", GROUP_COLORS)
        payload = {"tab_ids": ids, "title": name, "color": color}
        return self._ledger.create_action(
            "group_tabs", payload, profile=self._profile_of(ids), ttl=ttl
        )

    def close_tabs(self, tab_ids: Sequence[int], *, ttl: int = DEFAULT_TTL) -> Action:
        """Propose closing ``tab_ids`` (the user must have allowed it)."""
        ids = _tab_ids(tab_ids)
        return self._ledger.create_action(
            "close_tabs", {"tab_ids": ids}, profile=self._profile_of(ids), ttl=ttl
        )

    def capture_tab(self, tab_id: int | None = None, *, ttl: int = DEFAULT_TTL) -> Action:
        """Propose capturing a tab's page now (the active tab when ``tab_id`` is
        ``None``). Refused at once when capture is paused or the tab's last reported
        page is excluded; anything else (a tab whose page is not known yet, or not a web
        page) is for the browser to judge."""
        tab = self._tab(tab_id)
        settings = self.memory.capture_settings()
        if settings.paused:
            raise Paused(settings.paused_until)
        url = tab.url if tab is not None and tab.canonical_url is not None else None
        if url is not None:
            rule = self.memory.exclusion_for(url)
            if rule is not None:
                raise Excluded(urls.scrub_url(url), rule)
        target = tab.tab_id if tab is not None else tab_id
        return self._ledger.create_action(
            "capture_tab", {"tab_id": target}, url=url, ttl=ttl,
            profile=tab.profile if tab is not None else None,
        )  # fmt: skip

    def create_bookmark(
        self,
        url: str,
        *,
        title: str | None = None,
        folder: str | None = None,
        ttl: int = DEFAULT_TTL,
    ) -> Action:
        """Propose a browser bookmark of ``url`` in ``folder`` (a folder name or path
        such as ``Bookmarks bar/Research``; found or created by the extension)."""
        clean = urls.scrub_url(url)  # InvalidUrl unless http(s)
        rule = self.memory.exclusion_for(clean)
        if rule is not None:
            raise Excluded(clean, rule)
        name = _short(title, "title", _MAX_TITLE)
        path = _short(folder, "folder", _MAX_FOLDER)
        if path is not None:
            path = "/".join(part.strip() for part in path.split("/") if part.strip()) or None
        payload = {"url": clean, "title": name, "parent_id": None, "folder": path}
        return self._ledger.create_action("create_bookmark", payload, url=clean, ttl=ttl)

    def _tab(self, tab_id: int | None) -> Tab | None:
        if tab_id is None:
            tab = self.memory.active_tab()
            if tab is None:
                raise NoActiveTab()
            return tab
        ident = store_checks.integer(tab_id, "tab_id", minimum=0)
        known = [tab for tab in self.memory.list_tabs() if tab.tab_id == ident]
        return max(known, key=lambda t: t.updated_at) if known else None

    def _profile_of(self, tab_ids: list[int]) -> str | None:
        """The browser profile these tabs are open in (by the newest report), or
        ``None`` (any browser) when no profile reported them."""
        wanted = set(tab_ids)
        known = [tab for tab in self.memory.list_tabs() if tab.tab_id in wanted]
        return max(known, key=lambda t: t.updated_at).profile if known else None

    # ---------------------------------------------------------------- following

    def get(self, ident: int | str) -> Action:
        """The action with this id (``12`` or ``"a-12"``), expiring it first if its
        time is up."""
        number = parse_wire_id(ident) if isinstance(ident, str) else ident
        if number is None:
            raise ActionNotFound(ident)
        self._ledger.expire_actions()
        return self._ledger.get_action(number)

    def wait(
        self,
        ident: int | str,
        *,
        claim_timeout: float,
        timeout: float,
        poll: float = 0.1,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> Action:
        """Follow an action until it has an outcome, for at most ``timeout`` seconds,
        or ``claim_timeout`` seconds while no browser has picked it up; returns its
        latest state."""
        started = time.monotonic()
        while True:
            action = self.get(ident)
            elapsed = time.monotonic() - started
            if action.finished or elapsed >= timeout:
                return action
            if action.status == "pending" and elapsed >= claim_timeout:
                return action
            sleep(poll)

    def recent(self, *, status: str | None = None, limit: int = 100) -> list[Action]:
        """The newest ``limit`` actions (in one ``status``), oldest first."""
        self._ledger.expire_actions()
        count = store_checks.limit(limit)
        found: list[Action] = []
        after = 0
        while True:
            page = self._ledger.list_actions(status=status, after_id=after, limit=1000)
            found = (found + page)[-count:]
            if len(page) < 1000:
                return found
            after = page[-1].id

    def captured_page(self, action: Action, *, length: int) -> PageText | None:
        """The text of the page a finished ``capture_tab`` captured (extracting it now
        if it still waits for extraction), or ``None``."""
        page_id = (action.result or {}).get("page_id")
        if action.type != "capture_tab" or action.status != "done" or not page_id:
            return None
        self._extract(int(page_id))
        try:
            return self.memory.get_page(page_id=int(page_id), length=length)
        except NotFound:
            return None

    def _extract(self, page_id: int) -> None:
        """Turn the page's queued HTML captures into text now (tens of milliseconds)
        instead of waiting for an indexing pass. Safe against another process doing
        the same: each queued capture is completed at most once."""
        done = 0
        for raw in self._ledger.pending_captures(20, page_id=page_id):
            try:
                found = extract_main_text(raw.html, raw.url)
            except Exception:  # left to the indexer, which logs and drops it
                logger.exception("could not extract queued capture %d", raw.id)
                continue
            self._ledger.complete_capture(
                raw, text=found.text, title=found.title, language=found.language,
                        outline=found.outline,
            )
            done += 1
        if done:
            self.memory.indexer.schedule()

    # --------------------------------------------------------------- delivering

    def claim(self, claimer: str, profile: str | None, *, limit: int = 10) -> list[Action]:
        """Pending actions for the browser of ``profile``, now marked sent by
        ``claimer`` (one host only ever gets each action)."""
        return self._ledger.claim_actions(claimer, profile=profile, limit=limit)

    def record_result(
        self,
        action_id: str,
        *,
        ok: bool,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
        profile: str,
    ) -> Action | None:
        """Record the extension's answer to an action; ``None`` for an action id this
        ledger does not know or an action already answered. A created bookmark is
        stored at once (for ``profile``); a capture's result gains the page it
        stored."""
        number = parse_wire_id(action_id)
        if number is None:
            return None
        try:
            action = self._ledger.get_action(number)
        except ActionNotFound:
            return None
        if not ok:
            code = error.get("code") if isinstance(error, dict) else None
            status = "refused" if code in _REFUSALS else "failed"
            clean = _error(error)
            return self._ledger.finish_action(number, status, error=clean)
        outcome = dict(result) if isinstance(result, dict) else {}
        with self._ledger.transaction():
            if action.type == "capture_tab":
                outcome.update(self._captured(outcome))
            elif action.type == "create_bookmark":
                outcome.update(self._bookmarked(action, outcome, profile))
            finished = self._ledger.finish_action(number, "done", result=outcome)
        if finished is not None and action.type == "create_bookmark":
            self.memory.indexer.schedule()
        return finished

    def _captured(self, result: dict[str, Any]) -> dict[str, Any]:
        key = result.get("dedupe_key")
        if not isinstance(key, str) or not key.startswith("capture:"):
            return {}
        try:
            visit = self._ledger.find_visit("extension", key.removeprefix("capture:"))
        except (NotFound, InvalidInput):
            return {}
        page = self._ledger.get_page(page_id=visit.page_id)
        return {"page_id": page.id, "url": page.url}

    def _bookmarked(
        self, action: Action, result: dict[str, Any], profile: str
    ) -> dict[str, Any]:
        browser_id = result.get("browser_id")
        if not isinstance(browser_id, str) or not browser_id:
            return {}
        folder = result.get("folder", action.payload.get("folder"))
        try:
            bookmark = self._ledger.upsert_bookmark(
                browser_id, action.payload["url"], title=action.payload.get("title"),
                folder=folder if isinstance(folder, str) and folder else None, profile=profile,
            )  # fmt: skip
        except BacktrailError as err:
            logger.warning("could not store the bookmark of action %d: %s", action.id, err)
            return {}
        return {"bookmark_id": bookmark.id}


def _error(error: object) -> dict[str, Any]:
    """The extension's error object, reduced to what is kept: code, name, message."""
    if not isinstance(error, dict):
        return {"code": 14, "name": "internal_error", "message": "the browser gave no reason"}
    code = error.get("code")
    name = error.get("name")
    message = error.get("message")
    return {
        "code": code if isinstance(code, int) and not isinstance(code, bool) else 14,
        "name": name[:64] if isinstance(name, str) else "error",
        "message": message[:1_000] if isinstance(message, str) else "the browser gave no reason",
    }
