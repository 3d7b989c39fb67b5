"""How search answers read: the text of ``search_browsing`` (and of the prompts that
search), and its lean structured content.

Each result is a header line made only of Backtrail's own data (its number, kind, id,
times, visits) followed by its text in a labelled block: web text (title, snippet,
further passages, address) in ``<web_content>``, the user's notes in ``<user_note>``,
assistants' notes and facts naming their writer. The structured content carries the
same results without their text: kind, id, URL, times, visits, score, and the ranking
explanation only when asked for.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel

from backtrail.mcp_server.formatting import fact_block, iso, note_block, web_block
from backtrail.service import SearchPage, SearchResult, present

__all__ = ["MAX_SEARCH_RESULTS", "SEARCH_LIMIT", "RESULT_CHARS", "SearchKind", "SEARCH_KINDS",
           "Hit", "SearchOutput", "render_results", "search_output"]  # fmt: skip

MAX_SEARCH_RESULTS = 25
SEARCH_LIMIT = 10
RESULT_CHARS = 450
"""Characters of text per result (snippet and further passages); get_page reads more."""
TITLE_CHARS = 200
"""A result's title is cut to this (get_page shows it whole)."""
SearchKind = Literal["page", "highlight", "note", "bookmark", "fact"]
SEARCH_KINDS: tuple[str, ...] = get_args(SearchKind)


class Hit(BaseModel):
    n: int
    kind: str
    id: int
    url: str | None = None
    domain: str | None = None
    origin: str
    author: str | None = None
    last_seen: int | None = None
    visit_count: int | None = None
    score: float
    explanation: dict[str, Any] | None = None


class SearchOutput(BaseModel):
    mode: str
    results: list[Hit]
    next_cursor: str | None = None
    index_behind: int = 0
    no_match: bool = False
    notice: str | None = None


def _block(result: SearchResult) -> str:
    body = "\n…\n".join([result.snippet, *result.passages])
    if result.kind == "fact":
        return fact_block(body, key=result.title or "", client=result.author or "",
                          updated_at=result.last_seen)  # fmt: skip
    if result.kind == "note":
        return note_block(body, about=result.url, written_at=result.last_seen,
                          author=result.author)  # fmt: skip
    shown = result.display_title or result.title
    title = shown if not shown or len(shown) <= TITLE_CHARS else shown[: TITLE_CHARS - 1] + "…"
    return web_block(body, source=result.url, kind=result.kind, captured_at=result.captured_at,
                     title=title)  # fmt: skip


def render_results(heading: str, page: SearchPage) -> str:
    lines = [heading]
    if page.no_match:
        lines.append("Nothing in memory matches this: no page is close in meaning and none "
                     "holds half of its words. Try other words, or narrow by site or time.")
    elif not page.results:
        lines.append("No results.")
    for number, r in enumerate(page.results, 1):
        parts = [f"[{number}] {r.kind} {r.id}", r.site or ""]
        if r.last_seen is not None:
            parts.append(f"last seen {present.relative_time(r.last_seen)} ({iso(r.last_seen)})")
        parts.append(present.visits_text(r.visit_count))
        lines.append(", ".join(part for part in parts if part))
        lines.append(_block(r))
    if page.next_cursor:
        lines.append(f"More: call again with cursor={page.next_cursor!r}.")
    if page.lag.text:
        lines.append(f"({page.lag.text} recent changes are not searchable yet.)")
    if page.notice:
        lines.append(f"({page.notice[0].upper()}{page.notice[1:]}.)")
    return "\n".join(lines)


def search_output(page: SearchPage, *, explain: bool = False) -> SearchOutput:
    hits = [
        Hit(n=n, kind=r.kind, id=r.id, url=r.url, domain=r.domain, origin=r.origin,
            author=r.author, last_seen=r.last_seen, visit_count=r.visit_count,
            score=round(r.score, 4), explanation=r.explanation if explain else None)
        for n, r in enumerate(page.results, 1)
    ]  # fmt: skip
    return SearchOutput(mode=page.mode, results=hits, next_cursor=page.next_cursor,
                        index_behind=page.lag.text, no_match=page.no_match,
                        notice=page.notice)  # fmt: skip
