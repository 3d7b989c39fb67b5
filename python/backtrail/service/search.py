"""Searching: one ranking from the core, checked against the ledger and labelled.

Results are checked against the ledger, so nothing forgotten or deleted is ever returned
even while the index lags, and each says where its text came from (``origin``: ``web``
text is untrusted) with its URL, kind and capture/visit times. A search first makes
this process's own earlier writes searchable. Cursors carry the offset, the time the
first page was ranked at and the mode, so a next page continues the same ranking.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from backtrail import _core, urls
from backtrail.errors import (
    BacktrailError,
    IndexFailure,
    InvalidInput,
    SearchUnavailable,
)
from backtrail.indexer import (
    TYPE_PASSAGE,
    IndexLag,
    chunk_text,
    doc_id,
    parse_doc_id,
)
from backtrail.service import present
from backtrail.service.base import MemoryBase, label, when
from backtrail.service.types import (
    SEARCH_KINDS,
    SearchPage,
    SearchResult,
)
from backtrail.store import (
    Bookmark,
    Fact,
    Note,
    Page,
    checks,
)

logger = logging.getLogger(__name__)

_DEFAULT_KINDS = ("page", "highlight", "note", "bookmark")
_CORE_KINDS = {"page": ("page", "passage")}
_MAX_RESULT_CHARS = 100_000
_MIN_EXTRA_PASSAGE = 40
_POOL_DEPTH = 50  # BM25 and vector candidates ranked for the first results (the core's default)
_POOL_GROWTH = 4
_MAX_POOL_DEPTH = 3_200
_EVIDENCE_HITS = 10  # the first hits whose evidence decides whether anything matches
_REFILLS = 3  # times a page short of hits whose entity was forgotten asks for more
COVERAGE_PASS = 0.5
"""A search whose first hits include one holding this share of the query's words (rare
words counting most) always has an answer (chosen with ``bench.quality --calibrate``)."""
_FLOOR_SIZE = 10_000  # passages at which the floor is search_min_similarity itself
_LEAST_FLOOR = 0.25  # unrelated short texts reach 0.15 with MiniLM: the floor of a tiny memory


def chance_floor(base: float, documents: int) -> float:
    """The similarity an unrelated query's best match reaches by chance among ``documents``
    passages: ``base`` at 10,000, and growing with the memory as the largest of n
    unrelated similarities does, like sqrt(ln n) (over the real corpus, the 85th
    percentile of an absent topic's best match is 0.12 sqrt(ln n) from 3 passages to
    175,000). A memory 20 times larger meets more near neighbours of any topic; a small
    one fewer, so a vague query still finds its page there. Never below 0.25 (or
    ``base``, if lower)."""
    grown = base * math.sqrt(math.log(max(documents, 2)) / math.log(_FLOOR_SIZE))
    return max(grown, min(base, _LEAST_FLOOR))


@dataclass(frozen=True)
class _Request:
    """A validated search."""

    profile: str
    query: str
    limit: int
    offset: int
    since: int | None
    until: int | None
    domains: tuple[str, ...]
    kinds: tuple[str, ...]
    budget: int
    mode: str | None
    now: int | None

    def fingerprint(self) -> str:
        key = [self.profile, self.query, self.since, self.until, self.domains, self.kinds]
        return hashlib.sha256(json.dumps(key).encode("utf-8")).hexdigest()[:16]


class SearchOps(MemoryBase):
    """Searching the memory: ranked, labelled, paged results."""

    # ----------------------------------------------------------------- search

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        since: int | None = None,
        until: int | None = None,
        domains: Sequence[str] | str | None = None,
        kinds: Sequence[str] | None = None,
        cursor: str | None = None,
        max_chars_per_result: int | None = None,
        mode: str | None = None,
    ) -> SearchPage:
        """Search pages, highlights, notes and bookmarks (``kinds`` narrows; ``"fact"``
        is searched only when asked). ``mode`` defaults to hybrid when the model is
        available, else BM25. ``since``/``until`` bound the last visit, ``domains``
        include subdomains. Each result's text is cut to ``max_chars_per_result``."""
        request = self._request(
            "search", query, limit, since, until, domains, kinds, cursor,
            max_chars_per_result, mode,
        )  # fmt: skip
        return self._search(request)

    def find_forgotten(
        self,
        description: str,
        *,
        limit: int | None = None,
        since: int | None = None,
        until: int | None = None,
        domains: Sequence[str] | str | None = None,
        cursor: str | None = None,
        max_chars_per_result: int | None = None,
    ) -> SearchPage:
        """Find something half-remembered from a vague ``description``: semantic
        matching weighs more, and recency and visit counts re-rank more strongly
        (``forgotten_*`` settings)."""
        request = self._request(
            "forgotten", description, limit, since, until, domains,
            ("page", "highlight", "bookmark"), cursor, max_chars_per_result, None,
            field="description",
        )  # fmt: skip
        return self._search(request)

    def search_facts(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        """Facts whose key or value match ``query`` (any wording, in hybrid mode)."""
        return self.search(query, limit=limit, kinds=["fact"], cursor=cursor)

    def search_highlights(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["highlight"], cursor=cursor)

    def search_notes(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["note"], cursor=cursor)

    def search_bookmarks(
        self, query: str, *, limit: int | None = None, cursor: str | None = None
    ) -> SearchPage:
        return self.search(query, limit=limit, kinds=["bookmark"], cursor=cursor)

    def _request(
        self,
        profile: str,
        query: object,
        limit: object,
        since: object,
        until: object,
        domains: object,
        kinds: object,
        cursor: object,
        budget: object,
        mode: object,
        *,
        field: str = "query",
    ) -> _Request:
        cfg = self.config
        text = checks.text(query, field, cfg.max_query_chars)
        count = cfg.search_limit if limit is None else checks.integer(limit, "limit", minimum=1)
        if count > cfg.max_search_limit:
            raise InvalidInput("limit", f"must be at most {cfg.max_search_limit}, got {count}")
        start = None if since is None else checks.timestamp(since, "since")
        end = None if until is None else checks.timestamp(until, "until")
        if start is not None and end is not None and start >= end:
            raise InvalidInput("until", f"must be later than since ({start}), got {end}")
        chars = (
            cfg.result_chars
            if budget is None
            else checks.integer(budget, "max_chars_per_result", minimum=_MIN_EXTRA_PASSAGE)
        )
        if chars > _MAX_RESULT_CHARS:
            raise InvalidInput("max_chars_per_result", f"must be at most {_MAX_RESULT_CHARS}")
        if mode is not None:
            mode = checks.one_of(mode, "mode", ("bm25", "vector", "hybrid"))
        request = _Request(
            profile, text, count, 0, start, end, _domains(domains), _kinds(kinds), chars,
            mode, None,  # type: ignore[arg-type]
        )  # fmt: skip
        if cursor is None:
            return request
        return self._resume(request, cursor)

    def _resume(self, request: _Request, cursor: object) -> _Request:
        state = _decode_cursor(cursor)
        if state["f"] != request.fingerprint():
            raise InvalidInput("cursor", "belongs to a different search (query or filters changed)")
        if state["o"] > self.config.max_search_offset:
            raise InvalidInput("cursor", f"pages beyond result {self.config.max_search_offset}")
        mode = request.mode if request.mode is not None else state["m"]
        return dataclasses.replace(request, offset=state["o"], now=state["n"], mode=mode)

    def _search(self, request: _Request) -> SearchPage:
        self._make_own_writes_searchable()
        mode, embedder, notice = self._query_model(request)
        record = self._indexer.vector_model()
        now = request.now if request.now is not None else self._now()
        end = request.offset + request.limit
        lag = self.index_lag(passages=False)
        results, mode, no_match = self._rank(request, mode, embedder, now, end, lag)
        if embedder is not None and mode != "bm25" and self._indexer.vector_model() != record:
            # Another process gave the index another model meanwhile: this query's vector
            # must not be scored against that model's vectors.
            notice = "the index changed embedding model during this search; searched by words"
            results, mode, no_match = self._rank(request, "bm25", None, now, end, lag)
        notice = notice or reembedding_notice(lag)
        if no_match:
            return SearchPage([], None, mode, lag, no_match=True, notice=notice)
        cursor = None
        if len(results) > end and end <= self.config.max_search_offset:
            cursor = _encode_cursor(
                {"v": 1, "o": end, "n": now, "m": mode, "f": request.fingerprint()}
            )
        shown = results[request.offset : end]
        return SearchPage(shown, cursor, _mode_used(mode, shown), lag, notice=notice)

    def _rank(
        self, request: _Request, mode: str, embedder: _core.Embedder | None, now: int, end: int,
        lag: IndexLag,
    ) -> tuple[list[SearchResult], str, bool]:  # fmt: skip
        """The results up to ``end`` (one more tells whether a next page exists), the mode
        that ranked them, and whether nothing matches (see :meth:`_no_good_match`; not
        judged while the index is re-embedded, when most passages have no vector)."""
        # One hit past the page tells whether there is a next one.
        wanted = max(end + 1, _EVIDENCE_HITS)
        try:
            hits = self._core_search(request, mode, embedder, now, wanted)
        except _core.ModelError as error:
            if request.mode == "vector":
                raise SearchUnavailable("vector", str(error)) from error
            logger.warning("could not embed the query, searching with BM25 only: %s", error)
            mode = "bm25"
            embedder = None
            hits = self._core_search(request, mode, embedder, now, wanted)
        if mode == "hybrid" and not lag.reembedding and self._no_good_match(request, hits):
            return [], mode, True
        results = self._results(hits, request.budget, end + 1)
        for _ in range(_REFILLS):
            # Hits whose entity was forgotten after the index was written leave gaps: ask
            # the same ranking for as many more hits as went missing, twice over.
            missing = end + 1 - len(results)
            if missing <= 0 or len(hits) < wanted:
                break
            wanted += 2 * missing
            hits = self._core_search(request, mode, embedder, now, wanted)
            results = self._results(hits, request.budget, end + 1)
        return results, mode, False

    def _no_good_match(self, request: _Request, hits: Sequence[_core.Hit]) -> bool:
        """True when the best of the first hits of the ranking is no closer in meaning to the
        query than chance would bring an unrelated query in a memory this size
        (:func:`chance_floor`), and none holds half of the query's words, rare words
        counting most. Facts keep their nearest-first answer (mcp-memory-bridge's
        ``memory_search``)."""
        base = self.config.search_min_similarity
        if base <= 0 or not hits or "fact" in request.kinds:
            return False
        top = hits[:_EVIDENCE_HITS]
        if max(hit["explanation"]["coverage"] for hit in top) >= COVERAGE_PASS:
            return False
        best = max((hit["explanation"]["vector_similarity"] or -1.0) for hit in top)
        return best < chance_floor(base, self._indexer.index.documents())

    def _core_search(
        self, request: _Request, mode: str, embedder: _core.Embedder | None, now: int,
        wanted: int,
    ) -> list[_core.Hit]:  # fmt: skip
        """The first ``wanted`` hits of ``request``'s ranking, one ranking whatever page is
        asked for: the core ranks candidate pools of a fixed depth, and when a page reaches
        past what that pool holds, deeper pools (each :data:`_POOL_GROWTH` times the last)
        continue the ranking with the pages they add. The core embeds the query with
        ``embedder`` (keeping recent query vectors) while it gathers the BM25 candidates."""
        hits: list[_core.Hit] = []
        seen: set[int] = set()
        options = self._options(request)
        depth = _POOL_DEPTH
        while True:
            # Asking for no more hits than the pool is deep keeps the core's pools as set.
            k = min(wanted, depth)
            tier = self._core_tier(request, mode, embedder, now, k, options, depth)
            fresh = [hit for hit in tier if hit["parent"] not in seen]
            hits += fresh[: wanted - len(hits)]
            seen.update(hit["parent"] for hit in fresh)
            if len(hits) >= wanted or (not fresh and len(tier) < k) or depth >= _MAX_POOL_DEPTH:
                return hits
            depth *= _POOL_GROWTH

    def _core_tier(
        self, request: _Request, mode: str, embedder: _core.Embedder | None, now: int,
        wanted: int, options: dict[str, Any], depth: int,
    ) -> list[_core.Hit]:  # fmt: skip
        try:
            return self._indexer.index.search(
                request.query, wanted,
                kinds=[k for kind in request.kinds for k in _CORE_KINDS.get(kind, (kind,))],
                domains=list(request.domains) or None, since=request.since,
                until=request.until, now=now, mode=cast(Any, mode), embedder=embedder,
                options=cast(Any, {**options, "bm25_candidates": depth,
                                   "vector_candidates": depth}),
            )  # fmt: skip
        except _core.ModelError:
            raise
        except _core.CoreError as error:
            raise IndexFailure(f"search failed: {error}") from error

    def _make_own_writes_searchable(self) -> None:
        """Read-your-writes: index the calling client's earlier writes (see
        :meth:`acting_as`) before searching, waiting at most ``search_fresh_wait`` for
        another process's pass. A backlog larger than one text batch is left to the
        background thread; other clients' writes never make a search wait."""
        wait = self.config.search_fresh_wait
        own = self._own_seq()
        if wait <= 0 or own == 0:
            return
        mark = self._indexer.watermark()
        done = 0 if mark is None or mark.text_scan is not None else mark.text
        if done >= own:
            return
        backlog = own - done
        if self.config.background_indexing and backlog > self.config.text_batch_changes:
            return
        try:
            self._indexer.run_text(wait=wait)
        except BacktrailError as error:
            logger.warning("could not index recent writes before searching: %s", error)

    def _query_model(self, request: _Request) -> tuple[str, _core.Embedder | None, str | None]:
        """The search mode, the model that embeds the query (none for BM25) and, when the
        model cannot be used, why (searches then rank by words)."""
        if request.mode == "bm25":
            return "bm25", None, None
        model = self._model()
        if model is None:
            if request.mode == "vector":
                reason = self._model_error or "embeddings are disabled in the settings"
                raise SearchUnavailable("vector", reason)
            return "bm25", None, None
        unusable = self._vectors_unusable(model)
        if unusable is not None:
            if request.mode == "vector":
                raise SearchUnavailable("vector", unusable)
            return "bm25", None, f"searched by words only: {unusable}"
        return request.mode or "hybrid", cast("_core.Embedder", model.embedder), None

    def _options(self, request: _Request) -> dict[str, Any]:
        cfg = self.config
        profile = "forgotten" if request.profile == "forgotten" else "search"
        return {
            "bm25_weight": getattr(cfg, f"{profile}_bm25_weight"),
            "decay_half_life_days": getattr(cfg, f"{profile}_decay_half_life_days"),
            "decay_floor": getattr(cfg, f"{profile}_decay_floor"),
            "visit_weight": getattr(cfg, f"{profile}_visit_weight"),
            "duplicate_similarity": getattr(cfg, f"{profile}_duplicate_similarity"),
            "snippet_chars": min(cfg.snippet_chars, request.budget),
        }

    def _results(
        self, hits: Sequence[Mapping[str, Any]], budget: int, wanted: int
    ) -> list[SearchResult]:
        """The first ``wanted`` hits whose entity still exists in the ledger, as labelled
        results. Entities are read for as many hits as are still needed at a time."""
        refs = []
        for hit in hits:
            try:
                refs.append((hit, parse_doc_id(hit["id"])))
            except ValueError:
                logger.warning("ignoring index document %d that Backtrail did not write", hit["id"])
        out: list[SearchResult] = []
        start = 0
        while start < len(refs) and len(out) < wanted:
            chunk = refs[start : start + wanted - len(out)]
            start += len(chunk)
            ids: dict[str, list[int]] = {}
            for _, ref in chunk:
                ids.setdefault(ref.entity_type, []).append(ref.entity_id)
            found = {
                entity_type: self._reader.fetch(entity_type, chosen, with_text=False)
                for entity_type, chosen in ids.items()
            }
            out += [
                self._presented(
                    _result(hit, ref.entity_type, found[ref.entity_type][ref.entity_id], budget)
                )
                for hit, ref in chunk
                if ref.entity_id in found[ref.entity_type]
            ]
        return out

    def _presented(self, result: SearchResult) -> SearchResult:
        """``result`` with its site and the title a person reads (:mod:`.present`)."""
        if result.kind != "page":
            site = present.site(result.domain)
            return dataclasses.replace(result, display_title=result.title, site=site)
        title, site = self.presented_title(result.title, result.domain)
        return dataclasses.replace(result, display_title=title, site=site)

    def presented_title(
        self, title: str | None, domain: str | None
    ) -> tuple[str | None, str | None]:
        """A page's title as a person reads it (without the suffix its site's pages
        share in the ledger or that names the site) and its site: :mod:`.present`."""
        for field, value in (("title", title), ("domain", domain)):
            if value is not None and not isinstance(value, str):
                raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
        suffixes = getattr(self, "_site_suffixes", None)
        if suffixes is None:
            suffixes = self._site_suffixes = present.SiteSuffixes(self._ledger.page_titles)
        site = present.site(domain)
        return present.display_title(title, site, suffixes.of(domain)), site

    def similar_pages(
        self, page_id: int, *, probes: int = 6, k: int = 30
    ) -> list[dict[int, tuple[float, str]]] | None:
        """Pages near a page by meaning: for up to ``probes`` of its passages (spread
        over its text), the pages whose passages lie closest to that passage's vector,
        as ``{page_id: (cosine similarity, snippet)}`` (the page itself left out).
        ``None`` when there is nothing to compare by: embeddings are off, or none of
        these passages has its vector yet."""
        page = self._ledger.get_page(page_id=checks.identifier(page_id, "page_id"),
                                     with_text=True)  # fmt: skip
        count = checks.integer(probes, "probes", minimum=1)
        wanted = checks.integer(k, "k", minimum=1)
        if not self.config.embeddings or not page.text:
            return None
        cfg = self.config
        total = len(chunk_text(page.text, cfg.passage_chars, cfg.passage_overlap,
                               cfg.max_passages_per_page))  # fmt: skip
        numbers = sorted({round(i * (total - 1) / max(1, count - 1)) for i in range(count)})
        found: list[dict[int, tuple[float, str]]] = []
        for number in numbers:
            try:
                hits = self._indexer.index.similar(doc_id(TYPE_PASSAGE, page.id, number), wanted)
            except _core.InvalidArgument:
                continue  # not indexed yet
            except _core.CoreError as error:
                raise IndexFailure(f"similarity search failed: {error}") from error
            if not hits:
                continue  # this passage has no vector yet
            near: dict[int, tuple[float, str]] = {}
            for hit in hits:
                try:
                    ref = parse_doc_id(hit["id"])
                except ValueError:
                    continue
                similarity = hit["explanation"].get("vector_similarity")
                if ref.entity_type != "page" or ref.entity_id == page.id or similarity is None:
                    continue
                if similarity > near.get(ref.entity_id, (-2.0, ""))[0]:
                    near[ref.entity_id] = (float(similarity), hit["snippet"])
            found.append(near)
        return found or None


def reembedding_notice(lag: IndexLag) -> str | None:
    """What a search says while the index's vectors are re-embedded for a new model."""
    if not lag.reembedding or lag.passages is None or lag.vectors is None:
        return None
    done = max(0, lag.passages - lag.vectors)
    return (f"re-embedding for the new model: {done:,} of {lag.passages:,} passages; "
            "meanwhile results are found by words and by the passages done")  # fmt: skip


def _mode_used(mode: str, results: Sequence[SearchResult]) -> str:
    """The mode that made ``results``: a hybrid search none of whose results was matched
    by meaning (no passage had its vector yet) ranked by words alone."""
    if mode != "hybrid" or any(r.explanation.get("vector_similarity") is not None for r in results):
        return mode
    return "bm25"


def _domains(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidInput("domains", "must be a list of domain names")
    return tuple(sorted({urls.normalize_domain(item) for item in items}))


def _kinds(value: object) -> tuple[str, ...]:
    if value is None:
        return _DEFAULT_KINDS
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidInput("kinds", f"must be a list of kinds ({', '.join(SEARCH_KINDS)})")
    kinds = tuple(checks.one_of(kind, "kinds[]", SEARCH_KINDS) for kind in value)
    if not kinds:
        raise InvalidInput("kinds", "must name at least one kind")
    return tuple(sorted(set(kinds)))


def _encode_cursor(state: dict[str, Any]) -> str:
    raw = json.dumps(state, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: object) -> dict[str, Any]:
    bad = InvalidInput("cursor", "is not a cursor returned by a previous search")
    if not isinstance(cursor, str) or len(cursor) > 512:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        state = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeError):
        raise bad from None
    valid = (
        isinstance(state, dict)
        and state.get("v") == 1
        and all(
            isinstance(state.get(k), int) and not isinstance(state.get(k), bool) and state[k] >= 0
            for k in ("o", "n")
        )  # fmt: skip
        and state.get("m") in ("bm25", "vector", "hybrid")
        and isinstance(state.get("f"), str)
    )
    if not valid:
        raise bad
    return state


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with ``…``
    and no unpaired ``**`` marker."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    if head.count("**") % 2:
        at = head.rfind("**")
        head = head[:at] + head[at + 2 :]
    return head.rstrip() + "…"


def _fit(snippet: str, extras: Sequence[str], budget: int) -> tuple[str, tuple[str, ...]]:
    """The snippet and as many extra passages as fit in ``budget`` characters."""
    first = _cut(snippet, budget)
    left = budget - len(first)
    out: list[str] = []
    for text in extras:
        if left < _MIN_EXTRA_PASSAGE:
            break
        piece = _cut(text, left)
        out.append(piece)
        left -= len(piece)
    return first, tuple(out)


def _result(hit: Mapping[str, Any], kind: str, item: Any, budget: int) -> SearchResult:
    snippet, extras = _fit(hit["snippet"], [p["snippet"] for p in hit["passages"][1:]], budget)
    common = {"kind": kind, "snippet": snippet, "passages": extras, "score": hit["score"],
              "explanation": dict(hit["explanation"])}  # fmt: skip
    if isinstance(item, Page):
        if item.last_captured_at is None:  # a visit only: its document is pieces of the URL
            common.update(snippet="", passages=())
        return SearchResult(
            id=item.id, title=item.title, url=item.url, domain=item.domain, origin="web",
            source=label("web page", item.url, item.last_captured_at, item.last_seen),
            first_seen=item.first_seen, last_seen=item.last_seen,
            captured_at=item.last_captured_at, visit_count=item.visit_count, **common,
        )  # fmt: skip
    if isinstance(item, Fact):
        return SearchResult(
            id=item.id, title=item.key, url=None, domain=None, origin="assistant",
            source=f"fact written by {item.client} at {when(item.updated_at)}",
            first_seen=item.created_at, last_seen=item.updated_at,
            captured_at=item.updated_at, visit_count=None, author=item.client, **common,
        )  # fmt: skip
    if isinstance(item, Note):
        about = f" about {item.url}" if item.url else ""
        writer = item.author or "the user"
        return SearchResult(
            id=item.id, title=None, url=item.url, domain=item.domain,
            origin="assistant" if item.author else "user",
            source=f"note written by {writer}{about} at {when(item.updated_at)}",
            first_seen=item.created_at, last_seen=item.updated_at,
            captured_at=item.created_at, visit_count=None, author=item.author, **common,
        )  # fmt: skip
    title = item.title if isinstance(item, Bookmark) else None
    return SearchResult(
        id=item.id, title=title, url=item.url, domain=item.domain, origin="web",
        source=label(kind, item.url, item.created_at, item.updated_at),
        first_seen=item.created_at, last_seen=item.updated_at, captured_at=item.created_at,
        visit_count=None, **common,
    )  # fmt: skip
