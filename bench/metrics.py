"""Known-item retrieval metrics: where the right passage and the right page land in a ranking.

Why here and not in each engine's runner: every engine (FTS5, numpy, Backtrail's core) must be
scored the same way, including the replica rule (a hit on any replica of the target passage
counts) and the page rule (a page is found when any of its passages, or the page document
itself, is ranked).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench.corpus import PASSAGE_ID_FACTOR, source_id


def page_of(doc_id: int) -> int:
    """The real page id of a page, passage or replica id."""
    sid = source_id(doc_id)
    return sid // PASSAGE_ID_FACTOR if sid >= PASSAGE_ID_FACTOR else sid


def first_rank(ranked: Iterable[int], target: int) -> int | None:
    """1-based position of the first element equal to target, None when absent."""
    for rank, x in enumerate(ranked, start=1):
        if x == target:
            return rank
    return None


def unique_in_order(items: Iterable[int]) -> list[int]:
    """Items without repeats, keeping the first occurrence (page-level grouping of a ranking)."""
    seen: set[int] = set()
    out = []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def ranks(ranked_ids: Sequence[int], query: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(passage rank, page rank) of the query's target in one ranked list of document ids."""
    passage_rank = first_rank((source_id(i) for i in ranked_ids), query["passage_id"])
    page_rank = first_rank(unique_in_order(page_of(i) for i in ranked_ids), query["page_id"])
    return passage_rank, page_rank


def _summary(rank_list: Sequence[int | None], k: int) -> dict[str, float]:
    n = len(rank_list)
    hits = [r for r in rank_list if r is not None and r <= k]
    return {
        f"mrr@{k}": sum(1.0 / r for r in hits) / n if n else 0.0,
        f"recall@{k}": len(hits) / n if n else 0.0,
        "recall@1": sum(r == 1 for r in hits) / n if n else 0.0,
    }


def score_run(
    results: Mapping[str, Sequence[int]], queries: Sequence[Mapping[str, Any]], k: int = 10
) -> dict[str, dict[str, float]]:
    """Per-family and overall passage- and page-level MRR@k / recall@k / recall@1.

    ``results`` maps qid to the ranked document ids an engine returned; a query missing from
    results scores as a miss. For page-level figures of a passage engine, ask it for more
    than k passages (several may share a page), or pass page-grouped ids.
    """
    by_family: dict[str, list[tuple[int | None, int | None]]] = {}
    for q in queries:
        pair = ranks(list(results.get(q["qid"], ())), q)
        by_family.setdefault(q["family"], []).append(pair)
        by_family.setdefault("all", []).append(pair)
    out: dict[str, dict[str, float]] = {}
    for family, pairs in by_family.items():
        row: dict[str, float] = {"n": float(len(pairs))}
        for level, idx in (("passage", 0), ("page", 1)):
            for name, value in _summary([p[idx] for p in pairs], k).items():
                row[f"{level}_{name}"] = value
        out[family] = row
    return out
