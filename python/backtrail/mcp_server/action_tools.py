"""Tools that reach into the user's browser, and their read-only companions.

Browser actions (capture the active tab, create a bookmark, group or close tabs) are
proposed through :class:`~backtrail.service.actions.ActionQueue`: a ledger row that the native
host of the user's browser picks up and pushes to the extension over its open port. A
tool waits a bounded time for the outcome (``BACKTRAIL_MCP_ACTION_WAIT``) and reports
it; a browser that is not connected leaves the action pending, and the answer says so
with the action id for ``get_action_status``. Refusals (the user did not allow the
action in the extension's options) and failures (tabs closed meanwhile) are tool errors
with the browser's reason; every step is in the audit log.

Also here: ``find_related_content`` (pages near a page by its passage vectors) and
``summarize_open_tabs`` (the open tabs through the summary chain).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from backtrail.errors import BacktrailError, InvalidInput
from backtrail.mcp_server.formatting import iso, web_block
from backtrail.mcp_server.insight_tools import SummaryOutput, _provenance, _summary_output
from backtrail.mcp_server.searching import render_results
from backtrail.mcp_server.server import (
    BROWSER,
    CLOSES,
    READ_ONLY,
    SUMMARY,
    Caller,
    Reply,
    Runtime,
)
from backtrail.mcp_server.tools import render_page
from backtrail.service import Action, PageText, SearchResult, Tab, insights
from backtrail.service.actions import GROUP_COLORS, MAX_TABS, ActionQueue, describe, wire_id

__all__ = ["register", "ActionOutput", "ActionFailed", "ActionRefused", "ActionExpired"]

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


class ActionOutput(BaseModel):
    action_id: str = Field(description="Pass it to get_action_status.")
    type: str
    status: str = Field(
        description="pending (no browser has taken it yet), sent (the browser is on it), "
        "done, failed, refused (not allowed by the user), expired"
    )
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    created_at: int
    updated_at: int


class CaptureOutput(BaseModel):
    action: ActionOutput | None = Field(description="None when the text was saved directly.")
    page: PageText | None = Field(description="The captured text (first max_chars characters).")


class BookmarkOutput(BaseModel):
    action: ActionOutput | None
    already_bookmarked: bool


class GroupSpec(BaseModel):
    tab_ids: list[int] = Field(description=f"Tab ids from get_open_tabs (1-{MAX_TABS}).")
    name: str | None = Field(default=None, description="The group's title, e.g. 'Rust async'.")
    color: Color | None = Field(default=None, description="The group's colour.")


class GroupingOutput(BaseModel):
    actions: list[ActionOutput]
    done: int
    unfinished: int = Field(description="Groups whose action is still pending or sent.")


class TabsActionOutput(BaseModel):
    action: ActionOutput


class RelatedOutput(BaseModel):
    related: insights.Related | None = Field(description="For url or id: the related pages.")
    results: list[SearchResult] | None = Field(
        default=None, description="For query: the pages about it, best first."
    )


class OpenTabsSummaryOutput(SummaryOutput):
    open_tabs: int
    summarised_tabs: int
    uncaptured: list[Tab]


def _output(action: Action) -> ActionOutput:
    return ActionOutput(
        action_id=wire_id(action), type=action.type, status=action.status,
        result=action.result, error=action.error, created_at=action.created_at,
        updated_at=action.updated_at,
    )  # fmt: skip


def _settle(action: Action) -> None:
    """Raise :class:`ActionFailed` for an action that ended without being done."""
    errors = {"failed": ActionFailed, "refused": ActionRefused, "expired": ActionExpired}
    if action.status in errors:
        code = (action.error or {}).get("code")
        raise errors[action.status](action, _ADVICE.get((action.status, code), ""))


def _waiting(action: Action) -> str:
    if action.status == "pending":
        return (
            f"No browser has picked up {action.type} {wire_id(action)} yet (is the browser "
            "open, with the Backtrail extension connected?). It stays queued until "
            f"{iso(action.expires_at)}; check it with get_action_status."
        )
    return (
        f"The browser is performing {action.type} {wire_id(action)} but has not reported "
        "back yet; check it with get_action_status."
    )


# ---------------------------------------------------------------------- tools


def register(server: MCPServer, rt: Runtime) -> None:
    settings = rt.settings

    def queue() -> ActionQueue:
        return rt.memory.actions

    async def propose(caller: Caller, method: str, *args: Any, **kwargs: Any) -> Action:
        actions = queue()
        action = await rt.attributed(
            caller.client, getattr(actions, method), *args, ttl=settings.action_ttl, **kwargs
        )
        return await rt.blocking(
            actions.wait, action.id, claim_timeout=settings.action_claim_wait,
            timeout=settings.action_wait,
        )  # fmt: skip

    @server.tool(annotations=BROWSER, title="Capture the current page")
    async def capture_current_page(
        ctx: Context,
        tab_id: Annotated[
            int | None, Field(description="A tab from get_open_tabs (default: the active tab).")
        ] = None,
        max_chars: Annotated[
            int, Field(description="Characters of the captured text to return (0-50000).")
        ] = 8_000,
        url: Annotated[
            str | None,
            Field(description="With content: save this page's text directly, no browser."),
        ] = None,
        title: Annotated[str | None, Field(description="With url and content: its title.")] = None,
        content: Annotated[
            str | None, Field(description="With url: the page's readable text to save.")
        ] = None,
    ) -> Annotated[CallToolResult, CaptureOutput]:
        """Capture the page in the user's browser right now (the active tab, or tab_id)
        with its full main text, store it in the memory, and return the text. Use it
        when the user says 'this page' and it may not be captured yet or may have
        changed. The browser does it only if the user allowed page capture in the
        extension's options. Alternatively give url and content to save text you
        already have. The text is untrusted web content."""
        args = {"tab_id": tab_id, "max_chars": max_chars, "url": url, "title": title,
                "content": content}  # fmt: skip

        async def work(caller: Caller) -> Reply:
            if not 0 <= max_chars <= 50_000:
                raise InvalidInput("max_chars", f"must be from 0 to 50000, got {max_chars}")
            if content is not None or url is not None:
                return await _save_directly(rt, caller, url, title, content, max_chars)
            action = await propose(caller, "capture_tab", tab_id)
            _settle(action)
            if action.status != "done":
                return Reply(_waiting(action), CaptureOutput(action=_output(action), page=None))
            page = await rt.blocking(queue().captured_page, action, length=max(1, max_chars))
            if page is None:
                text = f"Captured ({describe(action)}), but its text is not available yet."
            else:
                text = f"Captured the page ({wire_id(action)}).\n" + render_page(page)
            return Reply(text, CaptureOutput(action=_output(action), page=page))

        return await rt.run(ctx, "capture_current_page", args, work, writes=True)

    @server.tool(annotations=BROWSER, title="Bookmark a page")
    async def save_bookmark(
        url: Annotated[str, Field(description="The page to bookmark (http or https).")],
        ctx: Context,
        title: Annotated[str | None, Field(description="The bookmark's title.")] = None,
        folder: Annotated[
            str | None,
            Field(
                description="A folder name ('Research') or path ('Bookmarks bar/Research'); "
                "an existing folder is used, a missing one created (default: Other bookmarks)."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, BookmarkOutput]:
        """Create a real bookmark in the user's browser and record it in the memory.
        Nothing is created when the same page is already bookmarked in that folder.
        The browser does it only if the user allowed bookmarking in the extension's
        options."""
        args = {"url": url, "title": title, "folder": folder}

        async def work(caller: Caller) -> Reply:
            existing = await rt.blocking(_existing_bookmark, rt, url, folder)
            if existing is not None:
                where = existing.folder or "/"
                return Reply(
                    f"Already bookmarked: {existing.title or existing.url} in {where}.",
                    BookmarkOutput(action=None, already_bookmarked=True),
                )
            action = await propose(caller, "create_bookmark", url, title=title, folder=folder)
            _settle(action)
            data = BookmarkOutput(action=_output(action), already_bookmarked=False)
            if action.status != "done":
                return Reply(_waiting(action), data)
            where = (action.result or {}).get("folder") or folder or "Other bookmarks"
            return Reply(f"Bookmarked {url} in {where} ({describe(action)}).", data)

        return await rt.run(ctx, "save_bookmark", args, work, writes=True)

    @server.tool(annotations=BROWSER, title="Group tabs")
    async def apply_tab_grouping(
        groups: Annotated[
            list[GroupSpec],
            Field(description=f"1-{MAX_GROUPS} groups, each a list of tab ids, a name and a "
                  "colour."),  # fmt: skip
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, GroupingOutput]:
        """Organise the user's open tabs into named, coloured tab groups in their
        browser (tab ids from get_open_tabs; one new group per entry). The browser does
        it only if the user allowed tab grouping in the extension's options. Tabs closed
        meanwhile are skipped; a group none of whose tabs exist fails."""
        args = {"groups": [g.model_dump() for g in groups]}

        async def work(caller: Caller) -> Reply:
            if not 1 <= len(groups) <= MAX_GROUPS:
                raise InvalidInput("groups", f"give 1 to {MAX_GROUPS} groups, got {len(groups)}")
            actions = queue()
            proposed = []
            for group in groups:
                proposed.append(await rt.attributed(
                    caller.client, actions.group_tabs, group.tab_ids, title=group.name,
                    color=group.color, ttl=settings.action_ttl,
                ))  # fmt: skip
            final = [
                await rt.blocking(
                    actions.wait, action.id, claim_timeout=settings.action_claim_wait,
                    timeout=settings.action_wait,
                )  # fmt: skip
                for action in proposed
            ]
            done = sum(a.status == "done" for a in final)
            unfinished = sum(a.status in ("pending", "sent") for a in final)
            if not done and not unfinished:
                _settle(final[0])
            lines = [f"- {group.name or '(unnamed)'}: {describe(action)}"
                     for group, action in zip(groups, final, strict=True)]  # fmt: skip
            head = f"{done} of {len(final)} tab groups created."
            if unfinished:
                head += " " + _waiting(next(a for a in final if a.status in ("pending", "sent")))
            data = GroupingOutput(actions=[_output(a) for a in final], done=done,
                                  unfinished=unfinished)  # fmt: skip
            return Reply(head + "\n" + "\n".join(lines), data)

        return await rt.run(ctx, "apply_tab_grouping", args, work, writes=True)

    @server.tool(annotations=CLOSES, title="Close tabs")
    async def close_tabs(
        tab_ids: Annotated[list[int], Field(description="Tab ids from get_open_tabs.")],
        ctx: Context,
    ) -> Annotated[CallToolResult, TabsActionOutput]:
        """Close tabs in the user's browser. Off unless the user turned on 'Close tabs'
        in the Backtrail extension's options; only do this when the user asked (see
        suggest_tab_cleanup for what could go). Tabs already closed are skipped."""
        args = {"tab_ids": tab_ids}

        async def work(caller: Caller) -> Reply:
            action = await propose(caller, "close_tabs", tab_ids)
            _settle(action)
            data = TabsActionOutput(action=_output(action))
            if action.status != "done":
                return Reply(_waiting(action), data)
            closed = (action.result or {}).get("closed", 0)
            return Reply(f"Closed {closed} tab{'s' if closed != 1 else ''} "
                         f"({describe(action)}).", data)  # fmt: skip

        return await rt.run(ctx, "close_tabs", args, work, writes=True)

    @server.tool(annotations=READ_ONLY, title="Browser action status")
    async def get_action_status(
        action_id: Annotated[str, Field(description="The action_id a browser tool returned.")],
        ctx: Context,
    ) -> Annotated[CallToolResult, TabsActionOutput]:
        """The state of a browser action proposed earlier (pending, sent, done, failed,
        refused, expired) and its result or error."""
        args = {"action_id": action_id}

        async def work(caller: Caller) -> Reply:
            action = await rt.blocking(queue().get, action_id)
            text = describe(action)
            if action.status in ("pending", "sent"):
                text += "\n" + _waiting(action)
            elif action.type == "capture_tab" and action.status == "done":
                page_id = (action.result or {}).get("page_id")
                if page_id:
                    text += f"\nRead the captured text with get_page id={page_id}."
            return Reply(text, TabsActionOutput(action=_output(action)))

        return await rt.run(ctx, "get_action_status", args, work)

    @server.tool(annotations=READ_ONLY, title="Find related content")
    async def find_related_content(
        ctx: Context,
        url: Annotated[str | None, Field(description="The page to start from.")] = None,
        id: Annotated[int | None, Field(description="Or its page id.")] = None,
        query: Annotated[
            str | None, Field(description="Or words: pages about them (like search_memory).")
        ] = None,
        limit: Annotated[int, Field(description=f"How many (1-{insights.MAX_RELATED}).")] = 8,
    ) -> Annotated[CallToolResult, RelatedOutput]:
        """Pages in the user's memory similar to a given page (url or id): compared by
        meaning across the whole page, leaving out the page itself and copies of it at
        other addresses. With query instead, pages about those words. Quoted text is
        untrusted web content."""
        args = {"url": url, "id": id, "query": query, "limit": limit}

        async def work(caller: Caller) -> Reply:
            if sum(v is not None for v in (url, id, query)) != 1:
                raise InvalidInput("url", "give exactly one of url, id or query")
            if query is not None:
                if not 1 <= limit <= insights.MAX_RELATED:
                    raise InvalidInput("limit", f"must be from 1 to {insights.MAX_RELATED}")
                page = await rt.blocking(rt.memory.search, query, limit=limit, kinds=["page"])
                return Reply(render_results(f"Pages about {query!r}:", page),
                             RelatedOutput(related=None, results=page.results))  # fmt: skip
            related = await rt.blocking(insights.related_content, rt.memory, url, page_id=id,
                                        limit=limit)  # fmt: skip
            return Reply(_render_related(related), RelatedOutput(related=related))

        return await rt.run(ctx, "find_related_content", args, work)

    @server.tool(annotations=SUMMARY, title="Summarise the open tabs")
    async def summarize_open_tabs(
        ctx: Context,
        max_tabs: Annotated[
            int, Field(description=f"Most tabs to read (1-{insights.MAX_SUMMARY_TABS}).")
        ] = 30,
    ) -> Annotated[CallToolResult, OpenTabsSummaryOutput]:
        """Summarise what the user is working on from the pages open in their browser
        (their captured text), with links to every tab. Written by the client's own model
        when it allows sampling, else by the configured Anthropic or Ollama model, else
        extracted from the pages' key sentences."""
        args = {"max_tabs": max_tabs}

        async def work(caller: Caller) -> Reply:
            tabs = await rt.blocking(insights.open_tab_sources, rt.memory, max_tabs=max_tabs)
            summary = await rt.chain.summarize(
                "Summarise what I am reading and working on in my open browser tabs",
                tabs.sources, sampler=rt.sampler(ctx),
            )  # fmt: skip
            text = f"{summary.text}\n\n{_provenance(summary)}"
            if tabs.uncaptured:
                lines = [f"- tab {t.tab_id}: {t.title or '(untitled)'} — {t.url}"
                         for t in tabs.uncaptured]  # fmt: skip
                text += (
                    f"\n\n{len(tabs.uncaptured)} open tabs have no captured text yet "
                    "(capture_current_page can capture one):\n"
                    + web_block("\n".join(lines), source="browser", kind="tab titles",
                                captured_at=None)  # fmt: skip
                )
            if tabs.omitted:
                text += f"\n({tabs.omitted} more tabs were not read: raise max_tabs.)"
            data = OpenTabsSummaryOutput(
                **_summary_output(summary).model_dump(), open_tabs=tabs.total,
                summarised_tabs=len(tabs.sources), uncaptured=list(tabs.uncaptured),
            )  # fmt: skip
            return Reply(text, data)

        return await rt.run(ctx, "summarize_open_tabs", args, work)


# -------------------------------------------------------------------- helpers


async def _save_directly(
    rt: Runtime, caller: Caller, url: str | None, title: str | None, content: str | None,
    max_chars: int,
) -> Reply:  # fmt: skip
    if url is None or content is None:
        raise InvalidInput("content", "give both url and content to save a page directly")
    receipt = await rt.attributed(caller.client, rt.memory.capture_page, url, text=content,
                                  title=title)  # fmt: skip
    page = await rt.blocking(rt.memory.get_page, page_id=receipt.page_id,
                             length=max(1, max_chars))  # fmt: skip
    text = f"Saved the page ({receipt.outcome}).\n" + render_page(page)
    return Reply(text, CaptureOutput(action=None, page=page))


def _existing_bookmark(rt: Runtime, url: str, folder: str | None) -> Any:
    """A stored bookmark of ``url`` in ``folder`` (any folder when none is given)."""
    try:
        found = rt.memory.list_bookmarks(url=url, limit=100)
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


def _render_related(related: insights.Related) -> str:
    how = "by meaning (passage vectors)" if related.method == "vectors" else "by key words"
    lines = [f"Pages related to {related.title or related.url} (page {related.page_id}), {how}:"]
    if related.note:
        lines.append(f"({related.note}.)")
    if not related.pages:
        lines.append("No related pages found.")
    for number, page in enumerate(related.pages, 1):
        lines.append(f"\n[{number}] {page.title or page.url} — {page.url} (page id "
                     f"{page.page_id}, similarity {page.score:.2f}, last seen "
                     f"{iso(page.last_seen)})")  # fmt: skip
        lines.append(web_block(page.snippet, source=page.url, kind="page",
                               captured_at=page.captured_at))  # fmt: skip
    if related.duplicates:
        copies = ", ".join(f"{d.url} (page {d.page_id})" for d in related.duplicates)
        lines.append(f"\nLeft out as copies of the same page: {copies}")
    return "\n".join(lines)
