"""Insights over the memory: research sessions, the weekly digest, tab clean-up advice
and the inputs of topic summaries.

Built only on :class:`~backtrail.service.memory.Memory`'s public API. Every result is bounded
(lists are capped and paged), so ten thousand pages give answers the size of ten pages'.

- A *research session* is a run of visits close in time and related in subject: a new
  session starts after a long pause (``gap``), or after a shorter pause (``soft_gap``)
  when the next page shares too little vocabulary (title, URL words, site) with the
  session so far. Times are each page's last visit (the timeline), so a page read in two
  sessions counts in the later one.
- The *weekly digest* covers one ISO week (Monday 00:00 UTC to the next Monday).
- *Tab clean-up* advice (keep / read later / close) cites the data each verdict rests
  on: how long the tab sat untouched, visits, whether the text is captured, bookmarks,
  highlights and notes, duplicates.
- *Related content* is found from the page's passage vectors (several passages spread
  over the page, so the whole page counts, not one paragraph), leaving out the page
  itself and its near-duplicates; without vectors, from its key words.
- *Open-tab summaries* take the captured text of the open tabs as the summaries' sources.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from backtrail.errors import InvalidInput, NotFound
from backtrail.service.summaries import Source, terms
from backtrail.service.types import Bookmark, Highlight, PageText, Tab, TimelineEntry

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = [
    "SessionSettings", "SessionPage", "ResearchSession", "SessionList", "Week", "Digest",
    "DomainCount", "DigestItem", "TabAdvice", "TabCleanup", "research_sessions",
    "parse_week", "weekly_digest", "digest_sources", "tab_cleanup", "topic_sources",
    "find_bookmarks", "find_highlights", "RelatedPage", "Related", "related_content",
    "OpenTabs", "open_tab_sources",
]  # fmt: skip

MAX_SESSIONS_PER_PAGE = 20
MAX_PAGES_PER_SESSION = 25
MAX_TABS_PER_PAGE = 200
_DAY = 86_400


def _now(now: int | None) -> int:
    return int(time.time()) if now is None else now


def _when(ts: int | None) -> str:
    if ts is None:
        return "unknown time"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _ago(seconds: int) -> str:
    if seconds < 3_600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 2 * _DAY:
        return f"{seconds // 3_600} h"
    return f"{seconds // _DAY} days"


def _bounded(value: int, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(field, f"must be an integer from {low} to {high}, got {value!r:.40}")
    return value


# ------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionSettings:
    """How visits are grouped into sessions."""

    gap: int = 30 * 60
    """A pause longer than this (seconds) always starts a new session."""
    soft_gap: int = 8 * 60
    """After a pause longer than this, a page unrelated to the session starts a new one."""
    min_similarity: float = 0.1
    """Cosine similarity (page terms vs session terms) below which a page is unrelated."""
    scan: int = 5_000
    """Most pages of the timeline looked at for one answer."""


@dataclass(frozen=True)
class SessionPage:
    page_id: int
    url: str
    title: str | None
    domain: str
    last_seen: int
    visit_count: int


@dataclass(frozen=True)
class ResearchSession:
    """A run of related visits. ``pages`` holds at most the asked-for number (most
    visited first); ``page_count`` counts them all."""

    id: str
    start: int
    end: int
    page_count: int
    topics: tuple[str, ...]
    domains: tuple[str, ...]
    pages: tuple[SessionPage, ...]
    pages_omitted: int

    @property
    def label(self) -> str:
        about = ", ".join(self.topics) or ", ".join(self.domains[:2]) or "browsing"
        return f"{_when(self.start)} – {_when(self.end)[11:]}: {about}"


@dataclass(frozen=True)
class SessionList:
    """One page of sessions, newest first; pass ``next_offset`` for the next page."""

    sessions: tuple[ResearchSession, ...]
    total: int
    offset: int
    next_offset: int | None
    scanned_pages: int
    truncated_scan: bool


def _page_terms(entry: TimelineEntry) -> Counter[str]:
    words = terms(entry.title or "")
    path = re.sub(r"^https?://[^/]+", "", entry.url).split("?", 1)[0]
    words += terms(re.sub(r"[-_/.+]", " ", path))
    site = entry.domain.removeprefix("www.").split(".")
    if site and site[0]:
        words.append(site[0] if len(site) <= 2 else site[-2])
    return Counter(words)


def _similarity(a: Counter[str], b: Counter[str]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(count * b[term] for term, count in a.items() if term in b)
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return dot / norm if norm else 0.0


def _cluster(entries: Sequence[TimelineEntry], cfg: SessionSettings) -> list[list[TimelineEntry]]:
    """Oldest-first runs of entries (``entries`` newest first, as the timeline gives)."""
    runs: list[list[TimelineEntry]] = []
    profile: Counter[str] = Counter()
    for entry in sorted(entries, key=lambda e: (e.last_seen, e.page_id)):
        words = _page_terms(entry)
        if runs:
            pause = entry.last_seen - runs[-1][-1].last_seen
            unrelated = _similarity(words, profile) < cfg.min_similarity
            if pause <= cfg.gap and not (pause > cfg.soft_gap and unrelated):
                runs[-1].append(entry)
                profile.update(words)
                continue
        runs.append([entry])
        profile = Counter(words)
    return runs


def _describe(
    run: list[TimelineEntry], df: Counter[str], total: int, max_pages: int
) -> ResearchSession:
    """A session named by its distinctive terms: words of its pages' titles and URLs
    that many of its pages share and few pages elsewhere in the memory have (``df``:
    pages with the term among the ``total`` pages scanned)."""
    counts: Counter[str] = Counter()
    for entry in run:
        counts.update(set(_page_terms(entry)))
    weight = {
        t: c * math.log((1 + total) / (1 + df[t]))
        for t, c in counts.items()
        if c > 1 or len(run) == 1
    }
    ranked_terms = sorted(weight.items(), key=lambda kv: (-kv[1], -counts[kv[0]], kv[0]))
    topics = tuple(t for t, w in ranked_terms if w > 0)[:4]
    domains = tuple(d for d, _ in Counter(e.domain for e in run).most_common(5))
    ranked = sorted(run, key=lambda e: (-e.visit_count, -e.last_seen, e.page_id))
    pages = tuple(
        SessionPage(e.page_id, e.url, e.title, e.domain, e.last_seen, e.visit_count)
        for e in ranked[:max_pages]
    )
    return ResearchSession(
        id=f"s{run[0].last_seen}-{run[0].page_id}", start=run[0].last_seen, end=run[-1].last_seen,
        page_count=len(run), topics=topics, domains=domains, pages=pages,
        pages_omitted=max(0, len(run) - max_pages),
    )  # fmt: skip


def _sessions(
    entries: Sequence[TimelineEntry], cfg: SessionSettings, max_pages: int, min_pages: int
) -> list[ResearchSession]:
    runs = [run for run in _cluster(entries, cfg) if len(run) >= min_pages]
    df: Counter[str] = Counter()
    for entry in entries:
        df.update(set(_page_terms(entry)))
    described = [_describe(run, df, len(entries), max_pages) for run in runs]
    described.sort(key=lambda s: (-s.end, s.id))
    return described


def research_sessions(
    memory: Memory,
    since: int | None = None,
    until: int | None = None,
    *,
    limit: int = 5,
    offset: int = 0,
    pages_per_session: int = 8,
    min_pages: int = 2,
    settings: SessionSettings | None = None,
) -> SessionList:
    """Sessions of related reading within [since, until), newest first, ``limit`` at a
    time from ``offset``. Sessions of fewer than ``min_pages`` pages are left out."""
    limit = _bounded(limit, "limit", 1, MAX_SESSIONS_PER_PAGE)
    offset = _bounded(offset, "offset", 0, 100_000)
    pages_per_session = _bounded(pages_per_session, "pages_per_session", 1, MAX_PAGES_PER_SESSION)
    min_pages = _bounded(min_pages, "min_pages", 1, 100)
    cfg = settings if settings is not None else SessionSettings()
    entries = memory.timeline(since, until, limit=cfg.scan)
    sessions = _sessions(entries, cfg, pages_per_session, min_pages)
    chosen = tuple(sessions[offset : offset + limit])
    following = offset + limit if offset + limit < len(sessions) else None
    return SessionList(
        chosen, len(sessions), offset, following, len(entries), len(entries) >= cfg.scan
    )


# --------------------------------------------------------------------- digest


@dataclass(frozen=True)
class Week:
    """An ISO week: ``label`` like ``2024-W05``, [start, end) in unix seconds (UTC)."""

    label: str
    start: int
    end: int


def parse_week(value: str | None, *, now: int | None = None) -> Week:
    """``None``/``""``/``"this"`` (this week), ``"last"``, ``"2024-W05"``, or any date
    ``"2024-02-01"`` (its week)."""
    today = datetime.fromtimestamp(_now(now), timezone.utc).date()
    text = (value or "this").strip().lower()
    day: date
    if text in ("this", "current", "this week"):
        day = today
    elif text in ("last", "previous", "last week"):
        day = today - timedelta(days=7)
    else:
        match = re.fullmatch(r"(\d{4})-?w(\d{1,2})", text)
        try:
            if match:
                day = date.fromisocalendar(int(match.group(1)), int(match.group(2)), 1)
            else:
                day = date.fromisoformat(text[:10])
        except ValueError:
            raise InvalidInput(
                "week", f"{value!r:.40} is not a week: use 'this', 'last', '2024-W05' or a date"
            ) from None
    monday = day - timedelta(days=day.weekday())
    start = int(datetime(monday.year, monday.month, monday.day, tzinfo=timezone.utc).timestamp())
    year, number, _ = monday.isocalendar()
    return Week(f"{year}-W{number:02d}", start, start + 7 * _DAY)


@dataclass(frozen=True)
class DomainCount:
    domain: str
    pages: int


@dataclass(frozen=True)
class DigestItem:
    """A page, highlight or note of the week (text cut to a preview)."""

    kind: str
    id: int
    title: str | None
    url: str | None
    at: int
    preview: str
    visit_count: int | None = None
    author: str | None = None
    """For a note an assistant wrote: its client (``None``: the user's own note)."""


@dataclass(frozen=True)
class Digest:
    """One week of reading, every list capped."""

    week: Week
    pages_seen: int
    new_pages: int
    truncated_scan: bool
    top_domains: tuple[DomainCount, ...]
    sessions: tuple[ResearchSession, ...]
    session_count: int
    top_pages: tuple[DigestItem, ...]
    highlights: tuple[DigestItem, ...]
    notes: tuple[DigestItem, ...]


def _preview(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def weekly_digest(
    memory: Memory,
    week: str | None = None,
    *,
    now: int | None = None,
    max_items: int = 10,
    max_sessions: int = 5,
    settings: SessionSettings | None = None,
) -> Digest:
    """What the user read in one week: counts, top sites, the largest sessions, the most
    visited pages, highlights and notes."""
    span = parse_week(week, now=now)
    max_items = _bounded(max_items, "max_items", 1, 50)
    max_sessions = _bounded(max_sessions, "max_sessions", 1, MAX_SESSIONS_PER_PAGE)
    cfg = settings if settings is not None else SessionSettings()
    entries = memory.timeline(span.start, span.end, limit=cfg.scan)
    sessions = _sessions(entries, cfg, 5, min_pages=2)
    largest = tuple(sorted(sessions, key=lambda s: (-s.page_count, -s.end))[:max_sessions])
    domains = Counter(e.domain for e in entries).most_common(8)
    top = sorted(entries, key=lambda e: (-e.visit_count, -e.last_seen))[:max_items]
    highlights = memory.list_highlights(since=span.start, until=span.end, limit=max_items)
    notes = memory.list_notes(since=span.start, until=span.end, limit=max_items)
    return Digest(
        week=span, pages_seen=len(entries),
        new_pages=sum(1 for e in entries if e.first_seen >= span.start),
        truncated_scan=len(entries) >= cfg.scan,
        top_domains=tuple(DomainCount(d, n) for d, n in domains),
        sessions=largest, session_count=len(sessions),
        top_pages=tuple(
            DigestItem("page", e.page_id, e.title, e.url, e.last_seen, e.title or e.url,
                       e.visit_count)
            for e in top
        ),
        highlights=tuple(
            DigestItem("highlight", h.id, None, h.url, h.created_at, _preview(h.text))
            for h in highlights
        ),
        notes=tuple(
            DigestItem("note", n.id, None, n.url, n.created_at, _preview(n.content),
                       author=n.author)
            for n in notes
        ),
    )  # fmt: skip


def digest_sources(memory: Memory, digest: Digest, *, chars: int = 1_200) -> list[Source]:
    """Sources for summarising a digest: the pages of its largest sessions (labelled by
    session), then its highlights and notes."""
    sources: list[Source] = []
    seen: set[int] = set()
    for session in digest.sessions:
        for page in session.pages[:3]:
            if page.page_id in seen:
                continue
            seen.add(page.page_id)
            sources.append(_page_source(memory, page.page_id, chars, session.label))
    for item in digest.highlights[:4]:
        sources.append(Source(None, item.url, item.preview, "highlight", "web",
                              _domain(item.url), item.at, "Highlights"))  # fmt: skip
    for item in digest.notes[:4]:
        origin, group = (
            ("assistant", "Assistants' notes") if item.author else ("user", "Your notes")
        )
        sources.append(Source(None, item.url, item.preview, "note", origin,
                              _domain(item.url), item.at, group))  # fmt: skip
    return [s for s in sources if s.text.strip()]


def _domain(url: str | None) -> str | None:
    return urlsplit(url).hostname if url else None


def _page_source(memory: Memory, page_id: int, chars: int, session: str | None) -> Source:
    try:
        page = memory.get_page(page_id=page_id, length=chars)
    except NotFound:
        return Source(None, None, "", "page")
    return Source(page.title, page.url, page.text, "page", "web", page.domain, page.last_seen,
                  session)  # fmt: skip


# ---------------------------------------------------------------------- topic


def topic_sources(
    memory: Memory, topic: str, since: int | None = None, *, limit: int = 8, chars: int = 1_500
) -> list[Source]:
    """What the memory holds about ``topic``: the best matching pages (their opening
    text), highlights and notes, each labelled with the day it was read."""
    limit = _bounded(limit, "limit", 1, 20)
    found = memory.search(topic, limit=limit, since=since, kinds=["page", "highlight", "note"])
    sources: list[Source] = []
    for result in found.results:
        day = f"Read on {_when(result.last_seen)[:10]}" if result.last_seen else None
        try:
            if result.kind == "page":
                source = _page_source(memory, result.id, chars, day)
                excerpt = " ".join([result.snippet.replace("**", ""), *result.passages])
                text = source.text if len(source.text) >= len(excerpt) else excerpt
                sources.append(Source(source.title, source.url, text, "page", "web",
                                      source.domain, source.at, day))  # fmt: skip
            elif result.kind == "highlight":
                h = memory.get_highlight(result.id)
                text = h.text + (f"\n(the user's note on it: {h.note})" if h.note else "")
                sources.append(Source(None, h.url, text, "highlight", "web", h.domain,
                                      h.created_at, day))  # fmt: skip
            elif result.kind == "note":
                n = memory.get_note(result.id)
                sources.append(Source(None, n.url, n.content, "note",
                                      "assistant" if n.author else "user", n.domain,
                                      n.updated_at, day))  # fmt: skip
        except NotFound:
            continue  # forgotten between the search and the read
    return [s for s in sources if s.text.strip()]


# ------------------------------------------------------------------- lookups


def find_bookmarks(
    memory: Memory, query: str | None = None, folder: str | None = None, *, limit: int = 50
) -> list[Bookmark]:
    """Bookmarks matching ``query`` (best first), or the newest ones; ``folder`` keeps
    those whose folder path contains it (any case)."""
    limit = _bounded(limit, "limit", 1, 200)
    every = memory.list_bookmarks(limit=20_000)
    if query:
        by_id = {b.id: b for b in every}
        found = memory.search_bookmarks(query, limit=min(100, limit * 4 if folder else limit))
        chosen = [by_id[r.id] for r in found.results if r.id in by_id]
    else:
        chosen = sorted(every, key=lambda b: (-b.created_at, -b.id))
    if folder:
        wanted = folder.casefold()
        chosen = [b for b in chosen if b.folder and wanted in b.folder.casefold()]
    return chosen[:limit]


def find_highlights(
    memory: Memory, query: str | None = None, url: str | None = None, *, limit: int = 20
) -> list[Highlight]:
    """Highlights matching ``query`` (best first), or the newest ones; ``url`` keeps
    those made on that page."""
    limit = _bounded(limit, "limit", 1, 100)
    if not query:
        return memory.list_highlights(url=url, limit=limit)
    on_page = {h.id for h in memory.list_highlights(url=url, limit=10_000)} if url else None
    chosen: list[Highlight] = []
    for result in memory.search_highlights(query, limit=100 if url else limit).results:
        if on_page is not None and result.id not in on_page:
            continue
        try:
            chosen.append(memory.get_highlight(result.id))
        except NotFound:
            continue
    return chosen[:limit]


# ----------------------------------------------------------------------- tabs


@dataclass(frozen=True)
class TabAdvice:
    """A verdict on one open tab with the facts behind it."""

    tab_id: int
    window_id: int
    title: str | None
    url: str | None
    action: str
    reasons: tuple[str, ...]
    idle_seconds: int | None
    visit_count: int
    captured_at: int | None
    bookmarked: bool


@dataclass(frozen=True)
class TabCleanup:
    tabs: tuple[TabAdvice, ...]
    counts: dict[str, int]
    total: int
    offset: int
    next_offset: int | None


READ_LATER_AFTER = 3 * _DAY
CLOSE_SAVED_AFTER = _DAY
RECENT = 6 * 3_600
FREQUENT = 5


def tab_cleanup(
    memory: Memory,
    *,
    now: int | None = None,
    profile: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> TabCleanup:
    """Keep / read later / close for every open tab, with reasons from the tab itself
    (pinned, active, idle time, duplicates) and from the memory (visits, captured
    text, bookmarks, highlights, notes). ``counts`` covers all tabs; ``tabs`` is one
    page of them."""
    limit = _bounded(limit, "limit", 1, MAX_TABS_PER_PAGE)
    offset = _bounded(offset, "offset", 0, 100_000)
    moment = _now(now)
    tabs = sorted(
        memory.list_tabs(profile=profile), key=lambda t: (t.window_id, t.index or 0, t.tab_id)
    )
    bookmarked = {b.canonical_url for b in memory.list_bookmarks(limit=20_000)}
    keeper: dict[str, Tab] = {}
    for tab in tabs:  # of tabs showing the same page, the most recently used one stays
        if tab.canonical_url is None:
            continue
        best = keeper.get(tab.canonical_url)
        if best is None or _recency(tab) > _recency(best):
            keeper[tab.canonical_url] = tab
    advice = [_advise(memory, tab, moment, bookmarked, keeper) for tab in tabs]
    counts = Counter(a.action for a in advice)
    page = tuple(advice[offset : offset + limit])
    following = offset + limit if offset + limit < len(advice) else None
    return TabCleanup(page, {k: counts.get(k, 0) for k in ("keep", "read_later", "close")},
                      len(advice), offset, following)  # fmt: skip


def _recency(tab: Tab) -> int:
    return tab.last_accessed or tab.updated_at


def _advise(
    memory: Memory, tab: Tab, moment: int, bookmarked: set[str], keeper: dict[str, Tab]
) -> TabAdvice:
    visits, captured, last_seen = 0, None, None
    marked = False
    annotated = False
    if tab.canonical_url is not None:
        try:
            info = memory.get_page(tab.url, length=1)
            visits, captured, last_seen = info.visit_count, info.captured_at, info.last_seen
        except NotFound:
            pass
        marked = tab.canonical_url in bookmarked
        annotated = bool(
            memory.list_highlights(url=tab.url, limit=1) or memory.list_notes(url=tab.url, limit=1)
        )
    touched = tab.last_accessed or last_seen
    idle = max(0, moment - touched) if touched else None
    facts: list[str] = []
    if idle is not None:
        facts.append(f"last looked at {_ago(idle)} ago")
    facts.append(f"visited {visits} time{'s' if visits != 1 else ''}")
    if captured:
        facts.append(f"its text is saved in your memory (captured {_when(captured)[:10]})")
    else:
        facts.append("its text is not captured yet")
    if marked:
        facts.append("bookmarked")
    if annotated:
        facts.append("has your highlights or notes")

    def verdict(action: str, *why: str) -> TabAdvice:
        return TabAdvice(tab.tab_id, tab.window_id, tab.title, tab.url, action,
                         (*why, *facts), idle, visits, captured, marked)  # fmt: skip

    if tab.pinned:
        return verdict("keep", "pinned")
    if tab.active:
        return verdict("keep", "the tab in front of you")
    if tab.canonical_url is None:
        return verdict("close", "a browser page with nothing to read")
    if keeper[tab.canonical_url] is not tab:
        return verdict("close", f"duplicate of tab {keeper[tab.canonical_url].tab_id} (same page)")
    if idle is not None and idle < RECENT:
        return verdict("keep", "in use recently")
    if visits >= FREQUENT and (idle is None or idle < READ_LATER_AFTER):
        return verdict("keep", "a page you return to often")
    if captured and (marked or annotated) and (idle is None or idle >= CLOSE_SAVED_AFTER):
        return verdict(
            "close",
            "nothing is lost by closing it: reopen it from your bookmarks "
            "or ask your assistant for it",
        )
    if idle is not None and idle >= READ_LATER_AFTER:
        if captured and visits > 1:
            return verdict(
                "close", "untouched for days and already read; the text stays searchable"
            )
        return verdict("read_later", "open for days without being read")
    return verdict("keep", "opened recently enough to still be in use")


# ------------------------------------------------------------- related content


MAX_RELATED = 25
DUPLICATE_SHINGLES = 0.8
"""Word 5-shingle Jaccard similarity at or above which two pages are near-duplicates."""
DUPLICATE_VECTORS = 0.97
"""Mean passage-vector similarity at or above which two pages are near-duplicates."""
_COMPARE_CHARS = 20_000
_KEYWORDS = 12
_MIN_KEYWORD_SCORE = 0.15
"""Keyword matches scoring below this fraction of the best one are noise (a shared
common word), not related pages."""


@dataclass(frozen=True)
class RelatedPage:
    """A page related to the one asked about. ``score`` is the mean cosine similarity
    of its passages to the probe passages (``vectors``), or the BM25 score relative to
    the best match (``keywords``); ``snippet`` is its closest passage (web text)."""

    page_id: int
    url: str
    title: str | None
    domain: str
    score: float
    snippet: str
    last_seen: int
    visit_count: int
    captured_at: int | None


@dataclass(frozen=True)
class Related:
    """Pages related to ``page_id``, best first. ``method`` is ``vectors`` (passage
    embeddings) or ``keywords`` (BM25 over the page's title and key terms, when the
    page has no vectors); ``duplicates`` are near-copies of the page that were left
    out; ``note`` says why keywords were used."""

    page_id: int
    url: str
    title: str | None
    method: str
    pages: tuple[RelatedPage, ...]
    duplicates: tuple[RelatedPage, ...]
    note: str | None


def _shingles(text: str, size: int = 5) -> set[int]:
    words = text[:_COMPARE_CHARS].lower().split()
    if len(words) < size:
        return {hash(" ".join(words))} if words else set()
    return {hash(" ".join(words[i : i + size])) for i in range(len(words) - size + 1)}


def _jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def related_content(
    memory: Memory,
    url: str | None = None,
    *,
    page_id: int | None = None,
    limit: int = 10,
) -> Related:
    """Pages similar to the page at ``url`` (or ``page_id``): by the vectors of several
    of its passages when they exist, else by its keywords. The page itself and its
    near-duplicates (same text at another address: shingle or vector similarity above
    the thresholds) are left out."""
    limit = _bounded(limit, "limit", 1, MAX_RELATED)
    page = memory.get_page(url, page_id=page_id, length=_COMPARE_CHARS)
    own = _shingles(page.text)
    probes = memory.similar_pages(page.page_id, k=limit * 3 + 10)
    note = None
    if probes:
        method = "vectors"
        scores = _vector_scores(probes)
    else:
        method = "keywords"
        note = (
            "semantic search is off (lean mode), so pages sharing its key words are listed"
            if not memory.config.embeddings
            else "its passages have no vectors yet, so pages sharing its key words are listed"
        )
        scores = _keyword_scores(memory, page, limit * 3 + 5)
    kept: list[RelatedPage] = []
    duplicates: list[RelatedPage] = []
    for candidate, (score, snippet, closest) in sorted(scores.items(), key=lambda kv: -kv[1][0]):
        if len(kept) >= limit or len(kept) + len(duplicates) >= limit * 3:
            break
        try:
            other = memory.get_page(page_id=candidate, length=_COMPARE_CHARS)
        except NotFound:
            continue  # forgotten since it was indexed
        item = RelatedPage(
            other.page_id, other.url, other.title, other.domain, round(score, 4), snippet,
            other.last_seen, other.visit_count, other.captured_at,
        )  # fmt: skip
        copy = _jaccard(own, _shingles(other.text)) >= DUPLICATE_SHINGLES
        if copy or (method == "vectors" and closest >= DUPLICATE_VECTORS):
            duplicates.append(item)
        else:
            kept.append(item)
    return Related(page.page_id, page.url, page.title, method, tuple(kept), tuple(duplicates),
                   note)  # fmt: skip


def _vector_scores(
    probes: list[dict[int, tuple[float, str]]],
) -> dict[int, tuple[float, str, float]]:
    """``{page_id: (mean similarity over probes, best snippet, mean similarity)}``; a
    probe that did not reach a page counts as 0."""
    totals: dict[int, float] = {}
    best: dict[int, tuple[float, str]] = {}
    for probe in probes:
        for candidate, (similarity, snippet) in probe.items():
            totals[candidate] = totals.get(candidate, 0.0) + similarity
            if similarity > best.get(candidate, (-2.0, ""))[0]:
                best[candidate] = (similarity, snippet)
    count = len(probes)
    return {c: (t / count, best[c][1], t / count) for c, t in totals.items()}


def _keyword_scores(
    memory: Memory, page: PageText, count: int
) -> dict[int, tuple[float, str, float]]:
    words = Counter(terms(page.text))
    for word in terms(page.title or ""):
        words[word] += 3
    query = " ".join(word for word, _ in words.most_common(_KEYWORDS))
    if not query:
        return {}
    found = memory.search(query, limit=min(50, count), kinds=["page"], mode="bm25")
    hits = [r for r in found.results if r.id != page.page_id]
    top = max((r.score for r in hits), default=0.0) or 1.0
    return {
        r.id: (r.score / top, r.snippet.replace("**", ""), 0.0)
        for r in hits
        if r.score / top >= _MIN_KEYWORD_SCORE
    }


# ------------------------------------------------------------------ open tabs


MAX_SUMMARY_TABS = 50


@dataclass(frozen=True)
class OpenTabs:
    """The open tabs to summarise: ``sources`` (their captured text, grouped by
    window), the tabs whose text is not captured, and how many tabs are open."""

    sources: tuple[Source, ...]
    uncaptured: tuple[Tab, ...]
    total: int
    omitted: int


def open_tab_sources(memory: Memory, *, max_tabs: int = 30, chars: int = 1_500) -> OpenTabs:
    """The open web tabs (each page once, most recently used first, at most
    ``max_tabs``) as summary sources: each tab's captured text, labelled with its
    window."""
    max_tabs = _bounded(max_tabs, "max_tabs", 1, MAX_SUMMARY_TABS)
    tabs = memory.list_tabs()
    web: dict[str, Tab] = {}
    for tab in sorted(tabs, key=lambda t: -_recency(t)):
        if tab.canonical_url is not None and tab.canonical_url not in web:
            web[tab.canonical_url] = tab
    chosen = list(web.values())[:max_tabs]
    sources: list[Source] = []
    uncaptured: list[Tab] = []
    for tab in sorted(chosen, key=lambda t: (t.window_id, t.index or 0, t.tab_id)):
        try:
            page = memory.get_page(tab.url, length=chars)
        except NotFound:
            page = None
        if page is None or not page.text.strip():
            uncaptured.append(tab)
            continue
        group = f"Window {tab.window_id}"
        sources.append(Source(page.title or tab.title, page.url, page.text, "page", "web",
                              page.domain, page.captured_at, group))  # fmt: skip
    return OpenTabs(tuple(sources), tuple(uncaptured), len(tabs), max(0, len(web) - max_tabs))
