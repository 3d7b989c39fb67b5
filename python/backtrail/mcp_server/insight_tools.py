"""Tools over insights: the open tabs (with clean-up advice on request) and summaries of
what the user read, about a topic, in a week, or in the open tabs. Summaries go through
the one summary chain (client sampling, Anthropic, Ollama, extractive); a summary is
built from web pages, so it is shown inside a labelled untrusted block like the pages."""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from pydantic import BaseModel

from backtrail.errors import InvalidInput
from backtrail.mcp_server.arguments import Cursor, Flag, Text, When, count
from backtrail.mcp_server.formatting import iso, next_cursor, note_block, parse_cursor, parse_time
from backtrail.mcp_server.formatting import web_block as block
from backtrail.mcp_server.server import READ_ONLY, SUMMARY, Call, Reply, tool
from backtrail.service import Tab, insights
from backtrail.service.summaries import Summary

__all__ = ["render_sessions", "render_digest", "render_summary", "tab_line"]


class TabInfo(BaseModel):
    tab_id: int
    window_id: int
    url: str | None = None
    active: bool
    pinned: bool
    last_accessed: int | None = None
    advice: str | None = None


class TabsOutput(BaseModel):
    tabs: list[TabInfo]
    total: int
    counts: dict[str, int] | None = None
    next_cursor: str | None = None


class SourceRef(BaseModel):
    n: int
    kind: str
    origin: str
    url: str | None = None
    at: int | None = None


class SummaryOutput(BaseModel):
    provider: str
    model: str | None = None
    sources: list[SourceRef]
    week: str | None = None
    pages_seen: int | None = None
    open_tabs: int | None = None
    summarised_tabs: int | None = None
    uncaptured_tab_ids: list[int] | None = None


# ------------------------------------------------------------------ rendering


def tab_line(tab: Tab) -> str:
    flags = [f for f, on in (("active", tab.active), ("pinned", tab.pinned)) if on]
    seen = f", last used {iso(tab.last_accessed)}" if tab.last_accessed else ""
    state = f" [{', '.join(flags)}]" if flags else ""
    return (f"- tab {tab.tab_id} (window {tab.window_id}){state}{seen}: "
            f"{tab.title or '(untitled)'} — {tab.url}")  # fmt: skip


def render_sessions(sessions: list[insights.ResearchSession]) -> str:
    parts = []
    for s in sessions:
        sites = ", ".join(s.domains[:3])
        parts.append(f"\nSession {s.id}: {iso(s.start)} to {iso(s.end)}, {s.page_count} pages "
                     f"on {sites}")  # fmt: skip
        lines = [f"about: {', '.join(s.topics) or '(no common words)'}"]
        lines += [f"- page {p.page_id} ({p.visit_count} visits): {p.title or '(untitled)'} — "
                  f"{p.url}" for p in s.pages]  # fmt: skip
        if s.pages_omitted:
            lines.append(f"(+{s.pages_omitted} more pages)")
        parts.append(block("\n".join(lines), source="browser", kind="session topics and titles"))
    return "\n".join(parts)


def render_digest(digest: insights.Digest) -> str:
    week = digest.week
    lines = [
        f"Week {week.label} ({iso(week.start)[:10]} to {iso(week.end - 1)[:10]}): "
        f"{digest.pages_seen} pages visited, {digest.new_pages} for the first time, "
        f"{digest.session_count} research sessions.",
    ]
    if digest.top_domains:
        lines.append(
            "Top sites: " + ", ".join(f"{d.domain} ({d.pages})" for d in digest.top_domains)
        )
    if digest.sessions:
        lines.append("\nLargest sessions:" + render_sessions(list(digest.sessions)))
    if digest.top_pages:
        pages = [f"- page {p.id} ({p.visit_count} visits): {p.title or '(untitled)'} — {p.url}"
                 for p in digest.top_pages]  # fmt: skip
        lines.append("\nMost visited pages:")
        lines.append(block("\n".join(pages), source="browser", kind="page titles"))
    for item in digest.highlights:
        lines.append(f"\nHighlight {item.id}:")
        lines.append(block(item.preview, source=item.url, kind="highlight", captured_at=item.at))
    for item in digest.notes:
        lines.append(f"\nNote {item.id}:")
        lines.append(note_block(item.preview, about=item.url, written_at=item.at,
                                author=item.author))  # fmt: skip
    return "\n".join(lines)


def render_summary(summary: Summary) -> str:
    tried = "; ".join(f"{a.provider}: {a.detail}" for a in summary.attempts if not a.ok)
    model = f" ({summary.model})" if summary.model else ""
    skipped = f" Skipped: {tried}." if tried else ""
    body = block(summary.text, source="summary of the sources below", kind="summary")
    return f"Summary written by {summary.provider}{model}.{skipped}\n{body}"


def summary_output(summary: Summary, **extra: object) -> SummaryOutput:
    sources = [SourceRef(n=n, kind=s.kind, origin=s.origin, url=s.url, at=s.at)
               for n, s in enumerate(summary.sources, 1)]  # fmt: skip
    return SummaryOutput(provider=summary.provider, model=summary.model, sources=sources,
                         **extra)  # type: ignore[arg-type]  # fmt: skip


# ---------------------------------------------------------------------- tools


@tool("Open tabs", READ_ONLY)
async def get_open_tabs(
    call: Call,
    *,
    advise: Annotated[bool, Flag("Suggest keep, read later or close for each tab, with "
                                 "reasons (it closes nothing).")] = False,  # fmt: skip
    limit: Annotated[int, count("", insights.MAX_TABS_PER_PAGE)] = 100,
    cursor: Cursor = None,
) -> Reply[TabsOutput]:
    """The tabs open in the user's browser now: window, active or pinned, last used."""
    memory, start = call.memory, parse_cursor(cursor)
    if advise:
        advice = await call.blocking(insights.tab_cleanup, memory, limit=limit, offset=start)
        c = advice.counts
        text = (f"{advice.total} open tabs: keep {c['keep']}, read later {c['read_later']}, "
                f"close {c['close']}.")  # fmt: skip
        lines = [f"- {a.action.upper().replace('_', ' ')}: tab {a.tab_id}: "
                 f"{'; '.join(a.reasons)} — {a.title or '(untitled)'} — {a.url}"
                 for a in advice.tabs]  # fmt: skip
        if lines:
            text += "\n" + block("\n".join(lines), source="browser", kind="tab titles")
        if advice.next_offset is not None:
            text += f"\nMore: call again with cursor={str(advice.next_offset)!r}."
        infos = {t.tab_id: t for t in await call.blocking(memory.list_tabs)}
        tabs = [_info(infos[a.tab_id], a.action) for a in advice.tabs if a.tab_id in infos]
        return Reply(text, TabsOutput(tabs=tabs, total=advice.total, counts=c,
                                      next_cursor=next_cursor(advice.next_offset)))
    every = await call.blocking(memory.list_tabs)
    chosen = every[start : start + limit]
    following = start + limit if start + limit < len(every) else None
    text = f"{len(every)} open tabs" + (
        f" (showing {start + 1}-{start + len(chosen)})" if chosen else ""
    )
    if chosen:
        text += ":\n" + block("\n".join(tab_line(t) for t in chosen), source="browser",
                              kind="tab titles")  # fmt: skip
    if following is not None:
        text += f"\nMore: call again with cursor={str(following)!r}."
    return Reply(text, TabsOutput(tabs=[_info(t) for t in chosen], total=len(every),
                                  next_cursor=next_cursor(following)))


def _info(tab: Tab, advice: str | None = None) -> TabInfo:
    return TabInfo(tab_id=tab.tab_id, window_id=tab.window_id, url=tab.url, active=tab.active,
                   pinned=tab.pinned, last_accessed=tab.last_accessed, advice=advice)


@tool("Summarise reading", SUMMARY)
async def summarize_reading(
    call: Call,
    *,
    topic: Annotated[str | None, Text("What the user read about, e.g. 'SQLite WAL'.")] = None,
    week: Annotated[str | None, Text("'this', 'last', '2024-W05' or a date in the week: "
                                     "a digest of that week.", 40)] = None,  # fmt: skip
    open_tabs: Annotated[bool, Flag("What the user is working on in the open tabs.")] = False,
    since: When = None,
    max_tabs: Annotated[int, count("open_tabs: most tabs to read.",
                                   insights.MAX_SUMMARY_TABS)] = 30,  # fmt: skip
) -> Reply[SummaryOutput]:
    """A linked summary of what the user read: about a topic, in one week (with counts,
    sites, sessions, highlights, notes), or in the open tabs. By your model (sampling),
    else Anthropic, Ollama, or extracted."""
    chosen = [n for n, v in (("topic", topic), ("week", week), ("open_tabs", open_tabs)) if v]
    if len(chosen) != 1:
        raise InvalidInput("topic", "give exactly one of topic, week or open_tabs")
    if since is not None and not topic:
        raise InvalidInput("since", "applies to topic only")
    memory, sampler = call.memory, call.sampler()
    if topic:
        sources = await call.blocking(insights.topic_sources, memory, topic,
                                      parse_time(since, "since"))  # fmt: skip
        summary = await call.rt.chain.summarize(f"Summarise what I have read about: {topic}",
                                                sources, sampler=sampler)  # fmt: skip
        return Reply(render_summary(summary), summary_output(summary))
    if week:
        digest = await call.blocking(insights.weekly_digest, memory, week)
        text = render_digest(digest)
        summary = None
        if digest.pages_seen:
            sources = await call.blocking(insights.digest_sources, memory, digest)
            summary = await call.rt.chain.summarize(
                f"Summarise my reading in week {digest.week.label}", sources, sampler=sampler
            )
            text += "\n\n" + render_summary(summary)
        extra = {"week": digest.week.label, "pages_seen": digest.pages_seen}
        if summary is None:
            return Reply(text, SummaryOutput(provider="none", sources=[], **extra))  # type: ignore[arg-type]
        return Reply(text, summary_output(summary, **extra))
    tabs = await call.blocking(insights.open_tab_sources, memory, max_tabs=max_tabs)
    summary = await call.rt.chain.summarize(
        "Summarise what I am reading and working on in my open browser tabs", tabs.sources,
        sampler=sampler,
    )  # fmt: skip
    text = render_summary(summary)
    if tabs.uncaptured:
        text += (f"\n{len(tabs.uncaptured)} open tabs have no captured text yet (capture_page "
                 "captures one):\n" + block("\n".join(tab_line(t) for t in tabs.uncaptured),
                                            source="browser", kind="tab titles"))  # fmt: skip
    if tabs.omitted:
        text += f"\n({tabs.omitted} more tabs were not read: raise max_tabs.)"
    return Reply(text, summary_output(summary, open_tabs=tabs.total,
                                      summarised_tabs=len(tabs.sources),
                                      uncaptured_tab_ids=[t.tab_id for t in tabs.uncaptured]))
