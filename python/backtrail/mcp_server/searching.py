"""What the search tools do and how their answers read: ``search_memory`` and
``find_forgotten_content`` (:mod:`backtrail.mcp_server.tools`) and the prompts that
search run through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, Field

from backtrail.errors import InvalidInput
from backtrail.mcp_server.formatting import fact_block, iso, note_block, parse_time, web_block
from backtrail.service import Memory, SearchPage, SearchResult

__all__ = ["FORGOTTEN_LIMIT", "MAX_SEARCH_RESULTS", "SEARCH_KINDS", "SEARCH_LIMIT", "SearchKind",
           "SearchOutput", "bounded", "find_forgotten", "render_results", "search_answer",
           "search_memory"]  # fmt: skip

MAX_SEARCH_RESULTS = 25
SEARCH_LIMIT = 8
"""``search_memory``'s results per page unless the call says."""
FORGOTTEN_LIMIT = 5
"""``find_forgotten_content``'s candidates unless the call says."""
SearchKind = Literal["page", "highlight", "note", "bookmark", "fact"]
"""The kinds ``search_memory`` may be narrowed to."""
SEARCH_KINDS: tuple[str, ...] = get_args(SearchKind)


class SearchOutput(BaseModel):
    query: str
    mode: str = Field(description="bm25, vector or hybrid")
    results: list[SearchResult]
    next_cursor: str | None
    index_behind: int = Field(description="Recent changes not yet searchable (0: up to date).")


def bounded(value: int, field: str, high: int) -> int:
    if value < 1 or value > high:
        raise InvalidInput(field, f"must be from 1 to {high}, got {value}")
    return value


def _result_block(result: SearchResult) -> str:
    body = "\n…\n".join([result.snippet, *result.passages])
    if result.origin == "user":
        return note_block(body, about=result.url, written_at=result.last_seen)
    if result.origin == "assistant":
        return fact_block(body, key=result.title or "", client=result.source,
                          updated_at=result.last_seen)  # fmt: skip
    return web_block(body, source=result.url, kind=result.kind, captured_at=result.captured_at)


def render_results(heading: str, page: SearchPage) -> str:
    lines = [heading]
    if not page.results:
        lines.append("No results.")
    for number, r in enumerate(page.results, 1):
        visits = f", {r.visit_count} visits" if r.visit_count is not None else ""
        where = f" — {r.url}" if r.url else ""
        lines.append(
            f"\n[{number}] {r.title or r.url or r.kind}{where} ({r.kind} id {r.id}, last seen "
            f"{iso(r.last_seen)}{visits})"
        )
        lines.append(_result_block(r))
    if page.next_cursor:
        lines.append(f"\nMore results: call again with cursor={page.next_cursor!r}.")
    if page.lag.text:
        lines.append(f"({page.lag.text} recent changes are not searchable yet.)")
    return "\n".join(lines)


def search_answer(query: str, page: SearchPage, heading: str) -> tuple[str, SearchOutput]:
    """The readable text and the structured content of a search tool's answer."""
    data = SearchOutput(
        query=query, mode=page.mode, results=page.results, next_cursor=page.next_cursor,
        index_behind=page.lag.text,
    )  # fmt: skip
    return render_results(heading, page), data


def search_memory(
    memory: Memory,
    query: str,
    *,
    limit: int = SEARCH_LIMIT,
    since: str | int | None = None,
    until: str | int | None = None,
    domains: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    cursor: str | None = None,
) -> tuple[str, SearchOutput]:
    """The whole of the ``search_memory`` tool (blocking): its arguments already have
    their declared types."""
    bounded(limit, "limit", MAX_SEARCH_RESULTS)
    page = memory.search(
        query, limit=limit, since=parse_time(since, "since"), until=parse_time(until, "until"),
        domains=domains, kinds=kinds, cursor=cursor,
    )  # fmt: skip
    return search_answer(query, page, f"Results for {query!r} ({page.mode} search):")


def find_forgotten(
    memory: Memory, description: str, *, limit: int = FORGOTTEN_LIMIT
) -> tuple[str, SearchOutput]:
    """The whole of the ``find_forgotten_content`` tool (blocking)."""
    bounded(limit, "limit", MAX_SEARCH_RESULTS)
    page = memory.find_forgotten(description, limit=limit)
    return search_answer(description, page, f"Candidates for {description!r}:")
