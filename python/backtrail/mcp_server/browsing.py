"""Browsing-memory tools: search, reading a page, the timeline and research sessions,
the user's saved items, notes, forgetting, and the status of the memory.

Every tool's docstring and parameter descriptions are written for the model that reads
them. The work happens in the service; here arguments are translated (times, cursors)
and the answer rendered (see :mod:`backtrail.mcp_server.server`).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated, Any, Literal

from pydantic import BaseModel

from backtrail.errors import InvalidInput, NotFound, PageNotFound
from backtrail.mcp_server.arguments import (
    Cursor,
    Doc,
    Domain,
    Flag,
    Id,
    Text,
    Until,
    Url,
    When,
    count,
)
from backtrail.mcp_server.formatting import (
    iso,
    next_cursor,
    note_block,
    parse_cursor,
    parse_time,
    web_block,
)
from backtrail.mcp_server.insight_tools import render_sessions
from backtrail.mcp_server.searching import (
    MAX_SEARCH_RESULTS,
    RESULT_CHARS,
    SEARCH_LIMIT,
    SearchKind,
    SearchOutput,
    render_results,
    search_output,
)
from backtrail.mcp_server.server import DESTRUCTIVE, READ_ONLY, WRITES, Call, Reply, tool
from backtrail.service import PageText, insights

__all__ = ["render_page", "PageOutput"]

MAX_PAGE_CHARS = 50_000
MAX_TIMELINE = 200


# --------------------------------------------------------------------- models


class PageOutput(BaseModel):
    page_id: int
    url: str
    offset: int
    chars: int
    total_chars: int
    next_offset: int | None = None
    visit_count: int
    last_seen: int
    captured_at: int | None = None
    tab_id: int | None = None


class Entry(BaseModel):
    page_id: int
    url: str
    last_seen: int
    visit_count: int


class Session(BaseModel):
    id: str
    start: int
    end: int
    page_count: int
    domains: list[str]
    page_ids: list[int]


class TimelineOutput(BaseModel):
    entries: list[Entry] | None = None
    sessions: list[Session] | None = None
    total_sessions: int | None = None
    next_cursor: str | None = None


class Saved(BaseModel):
    kind: str
    id: int
    url: str | None = None
    folder: str | None = None
    browser_id: str | None = None
    created_at: int
    author: str | None = None


class SavedOutput(BaseModel):
    items: list[Saved]


class NoteOutput(BaseModel):
    id: int
    url: str | None = None
    author: str


class ForgetOutput(BaseModel):
    done: bool
    selector: str
    counts: dict[str, int] | None = None
    pages_matched: int | None = None


class StatusOutput(BaseModel):
    counts: dict[str, int] | None = None
    db_bytes: int | None = None
    index_text_behind: int | None = None
    text_caught_up: bool | None = None
    index_vectors_behind: int | None = None
    vectors_caught_up: bool | None = None
    reembedding: bool | None = None
    model: str | None = None
    action_id: str | None = None
    action_status: str | None = None
    action_result: dict[str, Any] | None = None


# -------------------------------------------------------------------- helpers


def render_page(page: PageText) -> str:
    end = page.offset + len(page.text)
    more = (
        f" More: call get_page with offset={page.next_offset}."
        if page.next_offset is not None
        else " (end of the page)"
    )
    head = (
        f"Page {page.page_id}: {page.visit_count} visits, first seen {iso(page.first_seen)}, "
        f"last seen {iso(page.last_seen)}. Characters {page.offset}-{end} of "
        f"{page.total_chars}.{more}"
    )
    return head + "\n" + web_block(page.text, source=page.url, kind="page text",
                                   captured_at=page.captured_at, title=page.title)  # fmt: skip


def page_output(page: PageText, tab_id: int | None = None) -> PageOutput:
    return PageOutput(
        page_id=page.page_id, url=page.url, offset=page.offset, chars=len(page.text),
        total_chars=page.total_chars, next_offset=page.next_offset,
        visit_count=page.visit_count, last_seen=page.last_seen,
        captured_at=page.captured_at, tab_id=tab_id,
    )  # fmt: skip


def _one_of(field: str, **given: object) -> str:
    chosen = [name for name, value in given.items() if value not in (None, False)]
    if len(chosen) != 1:
        raise InvalidInput(field, f"give exactly one of {', '.join(given)}")
    return chosen[0]


# ---------------------------------------------------------------------- tools


@tool("Search browsing memory", READ_ONLY)
async def search_browsing(
    call: Call,
    *,
    query: Annotated[str | None, Text("Words or a question about what the user read.")] = None,
    vague: Annotated[bool, Flag("A half-remembered description: recency and visit counts "
                                "weigh more.")] = False,  # fmt: skip
    similar_to: Annotated[Id | None, Doc("A page id: pages similar to it (no query).")] = None,
    limit: Annotated[int, count("", MAX_SEARCH_RESULTS)] = SEARCH_LIMIT,
    since: When = None,
    until: Until = None,
    domains: Annotated[
        list[Domain] | None, Doc("Only these sites (and subdomains).")
    ] = None,
    kinds: list[SearchKind] | None = None,
    cursor: Cursor = None,
    explain: Annotated[bool, Flag("Add ranking signals.")] = False,
) -> Reply[SearchOutput]:
    """Search what the user read in their browser (pages, highlights, notes, bookmarks;
    facts if asked) by meaning and words, best first, whenever the user refers to
    something they read or saved."""
    if _one_of("query", query=query, similar_to=similar_to) == "similar_to":
        return await _similar(call, similar_to or 0, limit)
    memory = call.memory
    start, end = parse_time(since, "since"), parse_time(until, "until")
    if vague:
        if kinds is not None:
            raise InvalidInput("kinds", "cannot be combined with vague (it searches pages, "
                                        "highlights and bookmarks)")  # fmt: skip
        page = await call.blocking(
            memory.find_forgotten, query, limit=limit, since=start, until=end, domains=domains,
            cursor=cursor, max_chars_per_result=RESULT_CHARS,
        )  # fmt: skip
    else:
        page = await call.blocking(
            memory.search, query, limit=limit, since=start, until=end, domains=domains,
            kinds=kinds, cursor=cursor, max_chars_per_result=RESULT_CHARS,
        )  # fmt: skip
    heading = f"Results for {query!r} ({page.mode}{', vague' if vague else ''}):"
    return Reply(render_results(heading, page), search_output(page, explain=explain))


async def _similar(call: Call, page_id: int, limit: int) -> Reply[SearchOutput]:
    related = await call.blocking(insights.related_content, call.memory, page_id=page_id,
                                  limit=limit)  # fmt: skip
    how = "by meaning (passage vectors)" if related.method == "vectors" else "by key words"
    lines = [f"Pages similar to page {related.page_id}, {how}:"]
    if related.note:
        lines.append(f"({related.note}.)")
    if not related.pages:
        lines.append("No results.")
    hits = []
    for n, p in enumerate(related.pages, 1):
        lines.append(f"[{n}] page {p.page_id}, similarity {p.score:.2f}, last seen "
                     f"{iso(p.last_seen)}, {p.visit_count} visits")  # fmt: skip
        lines.append(web_block(p.snippet, source=p.url, kind="page", captured_at=p.captured_at,
                               title=p.title))  # fmt: skip
        hits.append({"n": n, "kind": "page", "id": p.page_id, "url": p.url, "domain": p.domain,
                     "origin": "web", "last_seen": p.last_seen, "visit_count": p.visit_count,
                     "score": round(p.score, 4)})  # fmt: skip
    if related.duplicates:
        copies = ", ".join(str(d.page_id) for d in related.duplicates)
        lines.append(f"Left out as copies of the same page: pages {copies}.")
    mode = "vector" if related.method == "vectors" else "bm25"
    return Reply("\n".join(lines), SearchOutput.model_validate({"mode": mode, "results": hits}))


@tool("Read a page", READ_ONLY)
async def get_page(
    call: Call,
    *,
    url: Url = None,
    id: Annotated[Id | None, Doc("The page id from a result.")] = None,
    active_tab: Annotated[bool, Flag("The page in the user's active tab.")] = False,
    offset: Annotated[int, count("Character to start at (next_offset).", 10**9, 0)] = 0,
    max_chars: Annotated[int, count("Characters to return.", MAX_PAGE_CHARS)] = 8_000,
) -> Reply[PageOutput]:
    """Read the captured main text of a page, in slices: give its url, its id, or
    active_tab=true for the page the user is looking at now."""
    chosen = _one_of("url", url=url, id=id, active_tab=active_tab)
    memory = call.memory
    tab_id = None
    if chosen == "active_tab":
        tab = await call.blocking(memory.active_tab)
        if tab is None:
            raise InvalidInput("active_tab", "no active tab is known (is the extension running?)")
        if not tab.canonical_url:
            raise InvalidInput("active_tab", "the active tab is not a web page")
        url, tab_id = tab.url, tab.tab_id
    try:
        page = await call.blocking(memory.get_page, url, page_id=id, offset=offset,
                                     length=max_chars)  # fmt: skip
    except PageNotFound:
        if tab_id is None:
            raise
        raise InvalidInput("active_tab", "the active tab's text is not captured yet "
                                         "(capture_page captures it)") from None  # fmt: skip
    return Reply(render_page(page), page_output(page, tab_id))


@tool("Browsing timeline", READ_ONLY)
async def get_timeline(
    call: Call,
    *,
    since: When = None,
    until: Until = None,
    domain: Annotated[Domain | None, Doc("Only this site (and subdomains).")] = None,
    sessions: Annotated[bool, Flag("Group into research sessions (related pages read "
                                   "together).")] = False,  # fmt: skip
    limit: Annotated[int | None, count("Pages (default 50) or sessions (default 5, at most "
                                       "20) per answer.", MAX_TIMELINE)] = None,
    cursor: Cursor = None,
) -> Reply[TimelineOutput]:
    """Pages the user visited, most recent first; with sessions=true, what they were
    working on and when."""
    start, end = parse_time(since, "since"), parse_time(until, "until")
    offset = parse_cursor(cursor)
    memory = call.memory
    if sessions:
        if domain is not None:
            raise InvalidInput("domain", "cannot be combined with sessions")
        limit = 5 if limit is None else limit
        if limit > insights.MAX_SESSIONS_PER_PAGE:
            raise InvalidInput("limit", f"must be at most {insights.MAX_SESSIONS_PER_PAGE} "
                                        "with sessions")  # fmt: skip
        found = await call.blocking(insights.research_sessions, memory, start, end, limit=limit,
                                    offset=offset)  # fmt: skip
        text = (f"{len(found.sessions)} of {found.total} research sessions, newest first "
                f"(from {found.scanned_pages} pages)")  # fmt: skip
        text += ":" + render_sessions(list(found.sessions)) if found.sessions else "."
        if found.next_offset is not None:
            text += f"\nMore: call again with cursor={str(found.next_offset)!r}."
        listed = [Session(id=s.id, start=s.start, end=s.end, page_count=s.page_count,
                          domains=list(s.domains), page_ids=[p.page_id for p in s.pages])
                  for s in found.sessions]  # fmt: skip
        return Reply(text, TimelineOutput(sessions=listed, total_sessions=found.total,
                                          next_cursor=next_cursor(found.next_offset)))
    limit = 50 if limit is None else limit
    entries = await call.blocking(memory.timeline, start, end, domain=domain, limit=limit + 1,
                                  offset=offset)  # fmt: skip
    following = offset + limit if len(entries) > limit else None
    entries = entries[:limit]
    if not entries:
        return Reply("No pages visited in that window.", TimelineOutput(entries=[]))
    lines = [f"- {iso(e.last_seen)} page {e.page_id} ({e.visit_count} visits): "
             f"{e.title or '(untitled)'} — {e.url}" for e in entries]  # fmt: skip
    text = f"{len(entries)} pages, most recent first:\n" + web_block(
        "\n".join(lines), source="browser", kind="page titles"
    )
    if following is not None:
        text += f"\nMore: call again with cursor={str(following)!r}."
    data = TimelineOutput(
        entries=[Entry(page_id=e.page_id, url=e.url, last_seen=e.last_seen,
                       visit_count=e.visit_count) for e in entries],
        next_cursor=next_cursor(following),
    )  # fmt: skip
    return Reply(text, data)


@tool("Bookmarks, highlights, notes", READ_ONLY)
async def get_saved(
    call: Call,
    *,
    kind: Literal["bookmark", "highlight", "note"],
    query: Annotated[str | None, Text("Words to look for (omit for the newest).")] = None,
    folder: Annotated[str | None, Text("Bookmarks: folder path contains this.", 500)] = None,
    url: Url = None,
    limit: Annotated[int, count("", 200)] = 20,
) -> Reply[SavedOutput]:
    """The user's bookmarks (by folder), highlights or notes (by page url), by words or
    newest first."""
    memory = call.memory
    if folder is not None and kind != "bookmark":
        raise InvalidInput("folder", "applies to bookmarks only")
    if url is not None and kind == "bookmark":
        raise InvalidInput("url", "applies to highlights and notes only")
    parts: list[str] = []
    items: list[Saved] = []
    if kind == "bookmark":
        found = await call.blocking(insights.find_bookmarks, memory, query, folder, limit=limit)
        lines = [f"- bookmark {b.id} in {b.folder or '/'}, added {iso(b.created_at)}: "
                 f"{b.title or '(untitled)'} — {b.url}" for b in found]  # fmt: skip
        if lines:
            parts.append(web_block("\n".join(lines), source="browser", kind="bookmark titles"))
        items = [Saved(kind="bookmark", id=b.id, url=b.url, folder=b.folder,
                       browser_id=b.browser_id, created_at=b.created_at)
                 for b in found]  # fmt: skip
    elif kind == "highlight":
        marks = await call.blocking(insights.find_highlights, memory, query, url, limit=limit)
        for h in marks:
            parts.append(f"Highlight {h.id} ({iso(h.created_at)}):")
            parts.append(web_block(h.text, source=h.url, kind="highlight",
                                   captured_at=h.created_at))  # fmt: skip
            if h.note:
                parts.append(note_block(h.note, about=h.url, written_at=h.updated_at))
        items = [Saved(kind="highlight", id=h.id, url=h.url, created_at=h.created_at)
                 for h in marks]  # fmt: skip
    else:
        notes = await call.blocking(_notes, memory, query, url, limit)
        for note in notes:
            parts.append(f"Note {note.id} ({iso(note.created_at)}):")
            parts.append(note_block(note.content, about=note.url, written_at=note.updated_at,
                                    author=note.author))  # fmt: skip
        items = [Saved(kind="note", id=n.id, url=n.url, created_at=n.created_at,
                       author=n.author) for n in notes]  # fmt: skip
    head = f"{len(items)} {kind}s:" if items else f"No {kind}s found."
    return Reply("\n".join([head, *parts]), SavedOutput(items=items))


def _notes(memory: Any, query: str | None, url: str | None, limit: int) -> list[Any]:
    if not query:
        return list(memory.list_notes(url=url, limit=limit))
    wanted = memory.list_notes(url=url, limit=10_000) if url else None
    ids = {n.id for n in wanted} if wanted is not None else None
    out = []
    for result in memory.search_notes(query, limit=min(100, limit * 4)).results:
        if ids is None or result.id in ids:
            try:
                out.append(memory.get_note(result.id))
            except NotFound:  # forgotten meanwhile
                continue
    return out[:limit]


@tool("Save a note", WRITES)
async def save_note(
    call: Call,
    *,
    content: Annotated[str, Text("The note, as the user wants it kept.", 100_000)],
    url: Url = None,
) -> Reply[NoteOutput]:
    """Save a note (optionally about a page), labelled as written by you. Only what the
    user asked to keep."""
    note = await call.blocking(call.memory.add_note, content, url=url,
                                 author=call.caller.client)  # fmt: skip
    about = f" about {note.url}" if note.url else ""
    return Reply(f"Saved note {note.id}{about} (written by {note.author}).",
                 NoteOutput(id=note.id, url=note.url, author=note.author or ""))


@tool("Forget browsing data", DESTRUCTIVE)
async def forget(
    call: Call,
    *,
    url: Url = None,
    domain: Annotated[Domain | None, Doc("Everything from this site (and subdomains).")] = None,
    since: When = None,
    until: Until = None,
    confirm: Annotated[bool, Flag("false: only preview. true: remove permanently.")] = False,
) -> Reply[ForgetOutput]:
    """Permanently remove browsing data: a page (url), a site (domain) or a time range
    (since/until). Without confirm=true only a preview. Only when the user asks."""
    start, end = parse_time(since, "since"), parse_time(until, "until")
    ranged = start is not None or end is not None
    if sum((url is not None, domain is not None, ranged)) != 1:
        raise InvalidInput("url", "give exactly one of url, domain, or since/until")
    selector = "url" if url else "domain" if domain else "time_range"
    if not confirm:
        return await _forget_preview(call, selector, url, domain, start, end)
    memory = call.memory
    if url is not None:
        report = await call.blocking(memory.forget, url=url)
    elif domain is not None:
        report = await call.blocking(memory.forget, domain=domain)
    else:
        report = await call.blocking(memory.forget, since=start, until=end)
    removed = ", ".join(f"{n} {table}" for table, n in report.counts.items() if n) or "nothing"
    data = ForgetOutput(done=True, selector=report.selector, counts=report.counts)
    return Reply(f"Forgot ({report.selector}): removed {removed}.", data)


async def _forget_preview(
    call: Call, selector: str, url: str | None, domain: str | None, start: int | None,
    end: int | None,
) -> Reply[ForgetOutput]:  # fmt: skip
    memory = call.memory
    if url is not None:
        try:
            page = await call.blocking(memory.get_page, url, length=1)
        except PageNotFound:
            nothing = ForgetOutput(done=False, selector=selector, pages_matched=0)
            return Reply("Nothing to forget: that page is not in the memory.", nothing)
        what = (f"page {page.page_id} ({page.visit_count} visits) with its text, visits, "
                "highlights and notes")  # fmt: skip
        matched = 1
    else:
        if domain is not None:
            domain = memory.forget_site(domain)  # a public suffix is refused, as by forget
        entries = await call.blocking(memory.timeline, start, end, domain=domain, limit=10_001)
        matched = len(entries)
        many = "more than 10000" if matched > 10_000 else str(matched)
        where = f"from {domain}" if domain else f"visited between {iso(start)} and {iso(end)}"
        what = f"{many} pages {where}, with their visits, highlights and notes"
    data = ForgetOutput(done=False, selector=selector, pages_matched=min(matched, 10_000))
    return Reply(
        f"Preview only, nothing was removed. This would permanently remove {what}. "
        "Ask the user, then call forget again with confirm=true.",
        data,
    )


@tool("Memory status", READ_ONLY)
async def get_status(
    call: Call,
    *,
    action_id: Annotated[str | None, Text("A browser action's id: its state instead.", 64)] = None,
) -> Reply[StatusOutput]:
    """What the memory holds, how far indexing is behind, whether semantic search is on;
    or, with action_id, a browser action's state."""
    if action_id is not None:
        from backtrail.mcp_server.action_tools import action_status

        return await action_status(call, action_id)
    stats = await call.blocking(call.memory.stats)
    ledger = stats.ledger
    counts = ", ".join(f"{n} {name}" for name, n in sorted(ledger.counts.items()))
    rebuilding = stats.lag.rebuilding_text
    text = (
        f"Memory: {counts}.\nLedger {ledger.db_bytes / 1e6:.1f} MB. Last capture "
        f"{iso(ledger.last_capture_at)}, last visit {iso(ledger.last_visit_at)}.\nIndex: "
        f"{stats.lag.text} changes not yet searchable"
        f"{' (a rebuild of the index from the ledger is not finished)' if rebuilding else ''}"
        f", {stats.lag.vectors} not yet embedded"
        f"{'' if stats.lag.vectors_caught_up else ' (embeddings are being computed)'}"
        f"{_reembedding(stats.lag)}. Embedding model: {stats.model}."
    )
    data = StatusOutput(
        counts=ledger.counts, db_bytes=ledger.db_bytes, index_text_behind=stats.lag.text,
        text_caught_up=stats.lag.text_caught_up, index_vectors_behind=stats.lag.vectors,
        vectors_caught_up=stats.lag.vectors_caught_up, model=stats.model,
        reembedding=stats.lag.reembedding,
    )  # fmt: skip
    return Reply(text, data)


def _reembedding(lag: Any) -> str:
    """``; re-embedding for the new model: N of M passages`` while that runs."""
    if not lag.reembedding or lag.passages is None or lag.vectors is None:
        return ""
    done = lag.passages - lag.vectors
    return f"; re-embedding for the new model: {done:,} of {lag.passages:,} passages"
