"""Tools that reach into the user's browser: capture a page, bookmark one, group or
close tabs.

Each action is proposed through :class:`~backtrail.service.actions.ActionQueue`: a
ledger row the native host of the user's browser picks up and pushes to the extension
over its open port. A tool waits a bounded time for the outcome
(``BACKTRAIL_MCP_ACTION_WAIT``) and reports it; a browser that is not connected leaves
the action pending, and the answer says so with the action id for
``get_status(action_id=...)``. Refusals (the user did not allow the action in the
extension's options) and failures (tabs closed meanwhile) are tool errors with the
browser's reason; every step is in the audit log.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from backtrail.errors import BacktrailError, InvalidInput
from backtrail.mcp_server.arguments import Text, Url, count
from backtrail.mcp_server.browsing import PageOutput, StatusOutput, page_output, render_page
from backtrail.mcp_server.formatting import iso
from backtrail.mcp_server.server import BROWSER, CLOSES, Call, Reply, tool
from backtrail.service import Action
from backtrail.service.actions import GROUP_COLORS, MAX_TABS, wire_id

__all__ = ["ActionFailed", "ActionRefused", "ActionExpired", "action_status"]

MAX_GROUPS = 20
Color = Literal["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"]
assert set(Color.__args__) == set(GROUP_COLORS)  # type: ignore[attr-defined]


class ActionFailed(BacktrailError):
    """The browser tried an action and it did not work."""

    code = "action_failed"
    verb = "could not do"

    def __init__(self, action: Action, advice: str = "") -> None:
        reason = (action.error or {}).get("message", "no reason given")
        super().__init__(
            f"The browser {self.verb} {action.type} (action {wire_id(action)}): {reason}."
            f"{advice} The attempt is recorded in the audit log."
        )


class ActionRefused(ActionFailed):
    """The browser declined an action (not allowed by the user, paused, excluded)."""

    code = "action_refused"
    verb = "refused"


class ActionExpired(ActionFailed):
    """No browser performed the action before it expired."""

    code = "action_expired"
    verb = "never performed"


_ADVICE: dict[tuple[str, object], str] = {
    ("refused", 18): " The user turns this action on in the Backtrail extension's options "
    "(Browser actions); ask them first.",
    ("failed", 11): " The tabs were closed or changed meanwhile: call get_open_tabs and try "
    "again with current tab ids.",
}


# --------------------------------------------------------------------- models


class ActionInfo(BaseModel):
    action_id: str
    type: str
    status: str
    result: dict[str, Any] | None = None


class CaptureOutput(BaseModel):
    action: ActionInfo | None = None
    page: PageOutput | None = None


class BookmarkOutput(BaseModel):
    action: ActionInfo | None = None
    already_bookmarked: bool


class GroupSpec(BaseModel):
    tab_ids: list[Annotated[int, Field(strict=True, ge=0)]] = Field(
        min_length=1, max_length=MAX_TABS
    )
    name: str | None = Field(default=None, max_length=200, description="e.g. 'Rust async'")
    color: Color | None = None


class TabsActionOutput(BaseModel):
    actions: list[ActionInfo]
    done: int
    unfinished: int


def _info(action: Action) -> ActionInfo:
    numbers = {k: v for k, v in (action.result or {}).items()
               if isinstance(v, (int, float, bool)) or k in ("folder",)}  # fmt: skip
    return ActionInfo(action_id=wire_id(action), type=action.type, status=action.status,
                      result=numbers or None)  # fmt: skip


def _line(action: Action) -> str:
    """One line about an action, with no text from a web page in it."""
    head = f"{action.type} {wire_id(action)}: {action.status}"
    if action.error:
        return f"{head} ({action.error.get('message', 'no reason given')})"
    numbers = {k: v for k, v in (action.result or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip
    if action.status == "done" and numbers:
        return f"{head} ({', '.join(f'{k} {v}' for k, v in sorted(numbers.items()))})"
    return head


def _settle(action: Action) -> None:
    """Raise :class:`ActionFailed` for an action that ended without being done."""
    errors = {"failed": ActionFailed, "refused": ActionRefused, "expired": ActionExpired}
    if action.status in errors:
        code = (action.error or {}).get("code")
        raise errors[action.status](action, _ADVICE.get((action.status, code), ""))


def _waiting(action: Action) -> str:
    check = f"check it with get_status(action_id={wire_id(action)!r})"
    if action.status == "pending":
        return (
            f"No browser has picked up {action.type} {wire_id(action)} yet (is the browser "
            f"open, with the Backtrail extension connected?). It stays queued until "
            f"{iso(action.expires_at)}; {check}."
        )
    return (f"The browser is performing {action.type} {wire_id(action)} but has not "
            f"reported back yet; {check}.")  # fmt: skip


async def _propose(call: Call, method: str, *args: Any, **kwargs: Any) -> Action:
    actions = call.memory.actions
    settings = call.settings
    action = await call.blocking(getattr(actions, method), *args, ttl=settings.action_ttl,
                                   **kwargs)  # fmt: skip
    return await _wait(call, action)


async def _wait(call: Call, action: Action) -> Action:
    settings = call.settings
    return await call.blocking(call.memory.actions.wait, action.id,
                               claim_timeout=settings.action_claim_wait,
                               timeout=settings.action_wait)  # fmt: skip


async def action_status(call: Call, action_id: str) -> Reply[StatusOutput]:
    """``get_status(action_id=...)``: the state of a browser action."""
    action = await call.blocking(call.memory.actions.get, action_id)
    text = _line(action)
    if action.status in ("pending", "sent"):
        text += "\n" + _waiting(action)
    elif action.type == "capture_tab" and action.status == "done":
        page_id = (action.result or {}).get("page_id")
        if page_id:
            text += f"\nRead the captured text with get_page id={page_id}."
    info = _info(action)
    return Reply(text, StatusOutput(action_id=info.action_id, action_status=info.status,
                                    action_result=info.result))


# ---------------------------------------------------------------------- tools


@tool("Capture a page", BROWSER)
async def capture_page(
    call: Call,
    *,
    tab_id: Annotated[int | None, count("A tab from get_open_tabs (default: the active "
                                        "tab).", 2**31, 0)] = None,  # fmt: skip
    url: Url = None,
    title: Annotated[str | None, Text("With url and content: its title.", 1_000)] = None,
    content: Annotated[str | None, Text("With url: the page's readable text to save, no "
                                        "browser needed.", 1_000_000)] = None,  # fmt: skip
    max_chars: Annotated[int, count("Characters of the captured text to return.", 50_000,
                                    0)] = 8_000,  # fmt: skip
) -> Reply[CaptureOutput]:
    """Capture the page open in the user's browser now (active tab or tab_id) and return
    its text, if the user allowed it; or save text you have (url + content)."""
    if content is not None or url is not None:
        if url is None or content is None:
            raise InvalidInput("content", "give both url and content to save a page directly")
        receipt = await call.blocking(call.memory.capture_page, url, text=content, title=title)
        page = await call.blocking(call.memory.get_page, page_id=receipt.page_id,
                                   length=max(1, max_chars))  # fmt: skip
        text = f"Saved the page ({receipt.outcome}).\n" + render_page(page)
        return Reply(text, CaptureOutput(page=page_output(page)))
    action = await _propose(call, "capture_tab", tab_id)
    _settle(action)
    if action.status != "done":
        return Reply(_waiting(action), CaptureOutput(action=_info(action)))
    page = await call.blocking(call.memory.actions.captured_page, action,
                               length=max(1, max_chars))  # fmt: skip
    if page is None:
        text = f"Captured ({_line(action)}), but its text is not available yet."
        return Reply(text, CaptureOutput(action=_info(action)))
    text = f"Captured the page ({wire_id(action)}).\n" + render_page(page)
    return Reply(text, CaptureOutput(action=_info(action), page=page_output(page)))


@tool("Bookmark a page", BROWSER)
async def save_bookmark(
    call: Call,
    *,
    url: Annotated[str, Text("The page to bookmark (http or https).", 2048)],
    title: Annotated[str | None, Text("The bookmark's title.", 1_000)] = None,
    folder: Annotated[str | None, Text("A folder name or path ('Bookmarks bar/Research'); "
                                       "missing folders are created.", 500)] = None,  # fmt: skip
) -> Reply[BookmarkOutput]:
    """Create a bookmark in the user's browser (nothing new if already there), if the
    user allowed it."""
    existing = await call.blocking(_existing_bookmark, call, url, folder)
    if existing is not None:
        return Reply(f"Already bookmarked (bookmark {existing.id}, folder "
                     f"{existing.folder or '/'}).", BookmarkOutput(already_bookmarked=True))
    action = await _propose(call, "create_bookmark", url, title=title, folder=folder)
    _settle(action)
    data = BookmarkOutput(action=_info(action), already_bookmarked=False)
    if action.status != "done":
        return Reply(_waiting(action), data)
    where = (action.result or {}).get("folder") or folder or "Other bookmarks"
    return Reply(f"Bookmarked it in {where} ({_line(action)}).", data)


@tool("Group or close tabs", CLOSES)
async def organize_tabs(
    call: Call,
    *,
    groups: Annotated[list[GroupSpec] | None, Field(
        min_length=1, max_length=MAX_GROUPS,
        description="New tab groups: tab_ids (from get_open_tabs), name, color.")] = None,
    close: Annotated[list[Annotated[int, Field(strict=True, ge=0)]] | None, Field(
        min_length=1, max_length=MAX_TABS,
        description="Tab ids to close (off unless the user allowed it; only when asked).")]
    = None,
) -> Reply[TabsActionOutput]:
    """Group the user's open tabs into named, coloured groups and/or close tabs, as far as
    the user allowed each in the extension's options."""
    if not groups and not close:
        raise InvalidInput("groups", "give groups, close, or both")
    actions = call.memory.actions
    proposed: list[tuple[str, Action]] = []
    for group in groups or []:
        action = await call.blocking(actions.group_tabs, group.tab_ids, title=group.name,
                                       color=group.color, ttl=call.settings.action_ttl)
        proposed.append((f"group {group.name or '(unnamed)'}", action))
    if close:
        action = await call.blocking(actions.close_tabs, close, ttl=call.settings.action_ttl)
        proposed.append(("close", action))
    final = [(what, await _wait(call, action)) for what, action in proposed]
    done = sum(a.status == "done" for _, a in final)
    unfinished = sum(a.status in ("pending", "sent") for _, a in final)
    if not done and not unfinished:
        _settle(final[0][1])
    lines = [f"- {what}: {_line(a)}" for what, a in final]
    head = f"{done} of {len(final)} tab actions done."
    if unfinished:
        head += " " + _waiting(next(a for _, a in final if a.status in ("pending", "sent")))
    return Reply(head + "\n" + "\n".join(lines),
                 TabsActionOutput(actions=[_info(a) for _, a in final], done=done,
                                  unfinished=unfinished))  # fmt: skip


def _existing_bookmark(call: Call, url: str, folder: str | None) -> Any:
    """A stored bookmark of ``url`` in ``folder`` (any folder when none is given)."""
    try:
        found = call.memory.list_bookmarks(url=url, limit=100)
    except InvalidInput:
        return None  # the proposal reports the bad URL
    if folder is None:
        return found[0] if found else None
    wanted = "/".join(p.strip() for p in folder.split("/") if p.strip()).casefold()
    for bookmark in found:
        path = (bookmark.folder or "").casefold()
        if wanted and (path == wanted or path.endswith("/" + wanted)):
            return bookmark
    return None
