"""Tools over insights: research sessions, topic summaries, the weekly digest and tab
clean-up. Summaries go through the one summary chain (client sampling, Anthropic,
Ollama, extractive); every answer is capped and paginated."""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from backtrail.mcp_server.formatting import (
    TIME_HELP,
    iso,
    next_cursor,
    note_block,
    parse_cursor,
    parse_time,
    web_block,
)
from backtrail.mcp_server.server import READ_ONLY, SUMMARY, Caller, Reply, Runtime
from backtrail.service import insights
from backtrail.service.summaries import Attempt, Summary

__all__ = ["register", "render_sessions", "render_digest"]

When = Annotated[str | int | None, Field(description=f"A time: {TIME_HELP}.")]
Cursor = Annotated[
    str | None,
    Field(description="Pass the next_cursor of the previous answer to get the next page."),
]


class SessionsOutput(BaseModel):
    sessions: list[insights.ResearchSession]
    total: int
    next_cursor: str | None
    scanned_pages: int


class SourceRef(BaseModel):
    number: int
    title: str | None
    url: str | None
    kind: str
    origin: str
    at: int | None


class SummaryOutput(BaseModel):
    summary: str
    provider: str = Field(description="sampling, anthropic, ollama or extractive")
    model: str | None
    attempts: list[Attempt]
    sources: list[SourceRef]


class TopicOutput(SummaryOutput):
    topic: str


class DigestOutput(BaseModel):
    digest: insights.Digest
    summary: SummaryOutput | None


class TabCleanupOutput(BaseModel):
    tabs: list[insights.TabAdvice]
    counts: dict[str, int]
    total: int
    next_cursor: str | None


def _summary_output(summary: Summary) -> SummaryOutput:
    sources = [
        SourceRef(number=n, title=s.title, url=s.url, kind=s.kind, origin=s.origin, at=s.at)
        for n, s in enumerate(summary.sources, 1)
    ]
    return SummaryOutput(summary=summary.text, provider=summary.provider, model=summary.model,
                         attempts=list(summary.attempts), sources=sources)  # fmt: skip


def _provenance(summary: Summary) -> str:
    tried = "; ".join(f"{a.provider}: {a.detail}" for a in summary.attempts if not a.ok)
    model = f" ({summary.model})" if summary.model else ""
    note = f" Skipped: {tried}." if tried else ""
    return f"[Summary written by {summary.provider}{model}.{note}]"


def render_sessions(sessions: list[insights.ResearchSession]) -> str:
    parts = []
    for session in sessions:
        sites = ", ".join(session.domains[:3])
        parts.append(
            f"\nSession {session.id}: {session.label} — {session.page_count} pages on {sites}"
        )
        lines = [
            f"- {p.title or '(untitled)'} — {p.url} (page id {p.page_id}, {p.visit_count} visits)"
            for p in session.pages
        ]
        if session.pages_omitted:
            lines.append(f"(+{session.pages_omitted} more pages)")
        parts.append(web_block("\n".join(lines), source="browser", kind="page titles",
                               captured_at=None))  # fmt: skip
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
        pages = [
            f"- {p.title or '(untitled)'} — {p.url} ({p.visit_count} visits)"
            for p in digest.top_pages
        ]
        lines.append("\nMost visited pages:")
        lines.append(
            web_block("\n".join(pages), source="browser", kind="page titles", captured_at=None)
        )
    for item in digest.highlights:
        lines.append(f"\nHighlight on {item.url}:")
        lines.append(
            web_block(item.preview, source=item.url, kind="highlight", captured_at=item.at)
        )
    for item in digest.notes:
        lines.append(f"\nNote {item.id}:")
        lines.append(note_block(item.preview, about=item.url, written_at=item.at))
    return "\n".join(lines)


def register(server: MCPServer, rt: Runtime) -> None:
    @server.tool(annotations=READ_ONLY, title="Research sessions")
    async def get_research_sessions(
        ctx: Context,
        since: When = None,
        until: When = None,
        limit: Annotated[int, Field(description="Sessions per answer (1-20).")] = 5,
        cursor: Cursor = None,
    ) -> Annotated[CallToolResult, SessionsOutput]:
        """The user's research sessions, newest first: runs of related pages read close
        together in time, each with its time span, topics, sites and most visited pages.
        Use it to recall what the user was working on and when."""
        args = {"since": since, "until": until, "limit": limit, "cursor": cursor}

        async def work(caller: Caller) -> Reply:
            found = await rt.blocking(
                insights.research_sessions, rt.memory, parse_time(since, "since"),
                parse_time(until, "until"), limit=limit, offset=parse_cursor(cursor),
            )  # fmt: skip
            head = (
                f"{len(found.sessions)} of {found.total} research sessions (newest first, "
                f"from {found.scanned_pages} pages)"
            )
            text = head + (":" + render_sessions(list(found.sessions)) if found.sessions else ".")
            if found.next_offset is not None:
                text += f"\nMore: call again with cursor={str(found.next_offset)!r}."
            data = SessionsOutput(sessions=list(found.sessions), total=found.total,
                                  next_cursor=next_cursor(found.next_offset),
                                  scanned_pages=found.scanned_pages)  # fmt: skip
            return Reply(text, data)

        return await rt.run(ctx, "get_research_sessions", args, work)

    @server.tool(annotations=SUMMARY, title="Summarise a research topic")
    async def summarize_research_topic(
        topic: Annotated[str, Field(description="The subject, e.g. 'SQLite write-ahead logging'.")],
        ctx: Context,
        since: When = None,
    ) -> Annotated[CallToolResult, TopicOutput]:
        """Summarise what the user has read about a topic: the matching pages, highlights
        and notes, grouped by when they were read, with links to every source. The summary
        is written by the client's own model when it allows sampling, else by the
        configured Anthropic or Ollama model, else extracted from the sources' own key
        sentences."""
        args = {"topic": topic, "since": since}

        async def work(caller: Caller) -> Reply:
            sources = await rt.blocking(insights.topic_sources, rt.memory, topic,
                                        parse_time(since, "since"))  # fmt: skip
            summary = await rt.chain.summarize(
                f"Summarise what I have read about: {topic}", sources, sampler=rt.sampler(ctx)
            )
            data = TopicOutput(topic=topic, **_summary_output(summary).model_dump())
            return Reply(f"{summary.text}\n\n{_provenance(summary)}", data)

        return await rt.run(ctx, "summarize_research_topic", args, work)

    @server.tool(annotations=SUMMARY, title="Weekly digest")
    async def generate_weekly_digest(
        ctx: Context,
        week: Annotated[
            str | None,
            Field(
                description="'this' (default), 'last', an ISO week like '2024-W05', or any "
                "date in the week ('2024-02-01'). Weeks run Monday to Sunday, UTC."
            ),
        ] = None,
        summarize: Annotated[bool, Field(description="Also write a summary of the week.")] = True,
    ) -> Annotated[CallToolResult, DigestOutput]:
        """A digest of one week of the user's reading: how much, which sites, the largest
        research sessions, the most visited pages, highlights and notes, and (unless
        summarize=false) a summary with links."""
        args = {"week": week, "summarize": summarize}

        async def work(caller: Caller) -> Reply:
            memory = rt.memory
            digest = await rt.blocking(insights.weekly_digest, memory, week)
            text = render_digest(digest)
            summary = None
            if summarize and digest.pages_seen:
                sources = await rt.blocking(insights.digest_sources, memory, digest)
                written = await rt.chain.summarize(
                    f"Summarise my reading in week {digest.week.label}", sources,
                    sampler=rt.sampler(ctx),
                )  # fmt: skip
                summary = _summary_output(written)
                text += f"\n\nSummary of the week:\n{written.text}\n\n{_provenance(written)}"
            return Reply(text, DigestOutput(digest=digest, summary=summary))

        return await rt.run(ctx, "generate_weekly_digest", args, work)

    @server.tool(annotations=READ_ONLY, title="Tab clean-up suggestions")
    async def suggest_tab_cleanup(
        ctx: Context,
        limit: Annotated[int, Field(description="Tabs per answer (1-200).")] = 50,
        cursor: Cursor = None,
    ) -> Annotated[CallToolResult, TabCleanupOutput]:
        """Suggest, for each open tab, whether to keep it, save it to read later, or close
        it, with the reasons (idle time, visits, whether its text is already saved,
        bookmarks, highlights, duplicates). It only suggests: it closes nothing."""
        args = {"limit": limit, "cursor": cursor}

        async def work(caller: Caller) -> Reply:
            advice = await rt.blocking(insights.tab_cleanup, rt.memory, limit=limit,
                                       offset=parse_cursor(cursor))  # fmt: skip
            counts = advice.counts
            head = (
                f"{advice.total} open tabs: keep {counts['keep']}, read later "
                f"{counts['read_later']}, close {counts['close']}."
            )
            lines = [
                f"- {a.action.upper().replace('_', ' ')}: tab {a.tab_id} {a.title or '(untitled)'} "
                f"— {a.url}: {'; '.join(a.reasons)}"
                for a in advice.tabs
            ]
            text = head
            if lines:
                text += "\n" + web_block("\n".join(lines), source="browser", kind="tab titles",
                                         captured_at=None)  # fmt: skip
            if advice.next_offset is not None:
                text += f"\nMore: call again with cursor={str(advice.next_offset)!r}."
            data = TabCleanupOutput(tabs=list(advice.tabs), counts=counts, total=advice.total,
                                    next_cursor=next_cursor(advice.next_offset))  # fmt: skip
            return Reply(text, data)

        return await rt.run(ctx, "suggest_tab_cleanup", args, work)
