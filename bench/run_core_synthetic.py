"""The synthetic sections of ``bench.run_core`` (replicas of the Python + PostgreSQL corpus):
known-item quality of every mode and fusion, the temporal check, and scale."""

from __future__ import annotations

import argparse
import math
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backtrail import _core
from bench import baselines, common, corpus, metrics, queries
from bench.common import say
from bench.run_core_measure import (
    DAY,
    NOW,
    build_core,
    cold_start,
    core_docs,
    latency,
    ranked_ids,
)

#: Fusion weights fixed at one half (no coverage weighting): the naive baselines.
FIXED_HALF: dict[str, Any] = {"coverage_weighting": False, "bm25_weight": 0.5}


# --------------------------------------------------------------------------- quality


def run_queries(
    index: _core.Index,
    qs: Sequence[dict[str, Any]],
    qvecs: np.ndarray,
    mode: str,
    options: dict[str, Any],
    k: int = 50,
) -> dict[str, list[dict[str, Any]]]:
    """Ungrouped top-k hits per query (page ranks follow from the passage order)."""
    opts = {"group": False, "snippet_chars": 20, **options}
    out = {}
    for q, v in zip(qs, qvecs, strict=True):
        vec = v.tolist() if mode != "bm25" else None
        out[q["qid"]] = index.search(
            q["query"], k, mode=mode, query_vector=vec, now=NOW, options=opts
        )
    return out


def bravemcp_rerank(hits: Sequence[dict[str, Any]]) -> list[int]:
    """BraveMCP's re-ranking of fused candidates: max(0.5, exp(-0.01 d)) * (1 + 0.2 ln v)."""

    def score(h: dict[str, Any]) -> float:
        days = max(0.0, (NOW - h["last_seen"]) / DAY)
        visits = max(1, h["visits"])
        return (
            h["explanation"]["fusion"]
            * max(0.5, math.exp(-0.01 * days))
            * (1 + 0.2 * math.log(visits))
        )

    return [h["id"] for h in sorted(hits, key=score, reverse=True)]


def quality_rows(
    name: str, results: dict[str, list[int]], qs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Per-family page- and passage-level MRR@10 / recall@10 of one configuration."""
    scores = metrics.score_run(results, qs, k=10)
    row: dict[str, Any] = {"config": name}
    for family in (*queries.FAMILIES, "all"):
        s = scores.get(family, {})
        row[f"{family}_page_mrr"] = s.get("page_mrr@10", 0.0)
        row[f"{family}_page_recall"] = s.get("page_recall@10", 0.0)
        row[f"{family}_passage_mrr"] = s.get("passage_mrr@10", 0.0)
    return row


def quality_section(
    workdir: Path, vectors: np.ndarray, embedder: _core.Embedder, fts5_path: Path
) -> dict[str, Any]:
    """Known-item quality of every mode and fusion on the real corpus."""
    passages = corpus.load_passages()
    qs = queries.load_queries()
    qvecs = np.array(embedder.embed([q["query"] for q in qs]), dtype=np.float32)
    path = workdir / "quality"
    build = build_core(path, core_docs(iter(passages), iter(vectors), varied=True))
    index = _core.Index(str(path))
    configs: list[tuple[str, str, dict[str, Any]]] = [
        ("bm25 title 0, no proximity", "bm25", {"title_boost": 0.0, "proximity_boost": 0.0}),
        ("bm25 title 0.5, no proximity", "bm25", {"proximity_boost": 0.0}),
        ("bm25 title 0.2, proximity 2", "bm25", {"title_boost": 0.2}),
        ("bm25 (default: title 0.5, proximity 2)", "bm25", {}),
        ("vector", "vector", {}),
        ("hybrid rrf k=60 (naive)", "hybrid", {"fusion": "rrf", **FIXED_HALF}),
        ("hybrid convex w=0.5", "hybrid", {"fusion": "convex", **FIXED_HALF}),
        (
            "hybrid convex w=0.7",
            "hybrid",
            {"fusion": "convex", "coverage_weighting": False, "bm25_weight": 0.7},
        ),
        (
            "hybrid zscore fixed w=0.7",
            "hybrid",
            {"coverage_weighting": False, "bm25_weight": 0.7},
        ),
        (
            "hybrid zscore fixed w=0.7, vector z clipped at 1",
            "hybrid",
            {"coverage_weighting": False, "bm25_weight": 0.7, "vector_z_clip": 1.0},
        ),
        ("hybrid (default: zscore, w 0.3 rising to 1 with coverage of top 2)", "hybrid", {}),
        (
            "hybrid default + search decay 180d/0.8, visits 0.05",
            "hybrid",
            {"decay_half_life_days": 180, "decay_floor": 0.8, "visit_weight": 0.05},
        ),
        (
            "find_forgotten profile (w=0.3, decay 30d/0.3, visits 0.15)",
            "hybrid",
            {
                "bm25_weight": 0.3,
                "decay_half_life_days": 30,
                "decay_floor": 0.3,
                "visit_weight": 0.15,
            },
        ),
    ]
    rows = []
    for name, mode, opts in configs:
        res = run_queries(index, qs, qvecs, mode, opts)
        rows.append(quality_rows(name, {k: ranked_ids(v) for k, v in res.items()}, qs))
        say(f"  quality: {name}: all page MRR@10 {rows[-1]['all_page_mrr']:.3f}")
    brave = run_queries(
        index,
        qs,
        qvecs,
        "hybrid",
        {"bm25_candidates": 10, "vector_candidates": 10, "fusion": "rrf", **FIXED_HALF},
        k=20,
    )
    rows.append(
        quality_rows(
            "BraveMCP-style (10+10, rrf, its multipliers)",
            {k: bravemcp_rerank(v) for k, v in brave.items()},
            qs,
        )
    )
    fts = baselines.Fts5Index(fts5_path)
    rows.append(
        quality_rows(
            "SQLite FTS5 bm25 (OR)",
            {q["qid"]: [i for i, _ in fts.search(q["query"], 50)] for q in qs},
            qs,
        )
    )
    temporal = temporal_check(workdir, passages, vectors, embedder)
    return {"build": build, "rows": rows, "temporal": temporal}


def temporal_check(
    workdir: Path, passages: list[dict[str, Any]], vectors: np.ndarray, embedder: _core.Embedder
) -> dict[str, Any]:
    """Near-duplicates: does the copy visited recently and often come first?

    For 200 passages, three near-duplicate copies (the passage and two replicas) are indexed:
    one visited yesterday 12 times, one 200 days ago once, one 400 days ago 3 times. The query
    is a sentence of the passage. Counted: how often the recent, frequent copy ranks first,
    with the find-forgotten settings of the core and with BraveMCP's formula.
    """
    rng = random.Random(7)
    chosen = rng.sample(range(len(passages)), 200)
    profiles = [(NOW - DAY, 12), (NOW - 200 * DAY, 1), (NOW - 400 * DAY, 3)]
    docs = []
    for i in chosen:
        p = passages[i]
        for r, (seen, visits) in enumerate(profiles):
            rec = corpus.replica_record(p, r)
            d = corpus.core_document(rec)
            d["parent"] = rec["id"]
            d["last_seen"], d["first_seen"], d["visits"] = seen, seen - DAY, visits
            v = (
                vectors[i]
                if r == 0
                else next(corpus.replica_vectors(vectors[i : i + 1], 2 * (r + 1), seed=r))[-1]
            )
            d["vector"] = np.asarray(v).tolist()
            docs.append(d)
    path = workdir / "temporal"
    build_core(path, iter(docs))
    index = _core.Index(str(path))
    ours = brave = 0
    forgotten = {
        "bm25_weight": 0.3,
        "decay_half_life_days": 30,
        "decay_floor": 0.3,
        "visit_weight": 0.15,
    }
    for i in chosen:
        body = passages[i]["body"]
        sentence = max(body.split(". "), key=len)[:200]
        qv = embedder.embed([sentence])[0]
        hits = index.search(
            sentence,
            3,
            mode="hybrid",
            query_vector=qv,
            now=NOW,
            options={"group": False, **forgotten},
        )
        ours += bool(hits) and hits[0]["id"] == passages[i]["id"]
        raw = index.search(
            sentence,
            20,
            mode="hybrid",
            query_vector=qv,
            now=NOW,
            options={
                "group": False,
                "bm25_candidates": 10,
                "vector_candidates": 10,
                "fusion": "rrf",
                **FIXED_HALF,
            },
        )
        brave += bool(raw) and bravemcp_rerank(raw)[0] == passages[i]["id"]
    return {
        "queries": len(chosen),
        "core_find_forgotten_top1": ours / len(chosen),
        "bravemcp_top1": brave / len(chosen),
        "settings": forgotten,
    }


# --------------------------------------------------------------------------- scale


def recall_with_replicas(
    found: Sequence[Sequence[int]], exact: np.ndarray, ids: np.ndarray
) -> float:
    """Share of exact top-10 entries whose source passage appears among the found top-10."""
    total = 0.0
    for got, truth in zip(found, exact, strict=True):
        got_sources = {corpus.source_id(int(i)) for i in got[:10]}
        hits = sum(corpus.source_id(int(ids[j])) in got_sources for j in truth[:10])
        total += hits / 10
    return total / len(found)


def measure_core(
    path: Path,
    texts: list[str],
    families: list[str],
    qvecs: np.ndarray,
    exact: np.ndarray,
    ids: np.ndarray,
    embedder: _core.Embedder,
    expansions: Sequence[int],
) -> dict[str, Any]:
    """Vector recall and latency per HNSW expansion, BM25 and hybrid latency, cold start."""
    index = _core.Index(str(path))
    vecs = [v.tolist() for v in qvecs]
    sweep = []
    for ef in expansions:
        opts = {"group": False, "expansion": ef}

        def vector(v: list[float], o: dict[str, Any] = opts) -> list[dict[str, Any]]:
            return index.search("", 10, mode="vector", query_vector=v, options=o)

        found = [ranked_ids(vector(v)) for v in vecs]
        lat = latency(vector, vecs)
        sweep.append(
            {
                "expansion": ef,
                "recall@10": recall_with_replicas(found, exact, ids),
                **{f"vector_{k}": x for k, x in lat.items()},
            }
        )
        say(f"   ef={ef}: recall@10 {sweep[-1]['recall@10']:.3f}, p50 {lat['p50_ms']:.3f} ms")
    with_model = _core.Index(str(path), embedder=embedder)
    return {
        "sweep": sweep,
        "bm25": latency(lambda q: index.search(q, 10, mode="bm25"), texts, families),
        "bm25_ungrouped": latency(
            lambda q: index.search(q, 10, mode="bm25", options={"group": False}), texts
        ),
        # warmed up on other wordings: the core keeps recent query vectors, and a timed
        # query must pay for its embedding
        "hybrid_with_embedding": latency(
            lambda q: with_model.search(q, 10),
            texts,
            families,
            warmup=[f"{t} warm-up" for t in texts[:30]],
        ),
        "cold_start": cold_start(path, texts[0]),
    }


def scale_section(
    n: int, workdir: Path, vectors: np.ndarray, embedder: _core.Embedder, args: argparse.Namespace
) -> dict[str, Any]:
    """Build, latency and recall at n passages."""
    passages = corpus.load_passages()
    every = queries.load_queries()  # four families in turn; spread evenly over them
    qs = every[:: max(1, len(every) // args.queries)][: args.queries]
    texts = [q["query"] for q in qs]
    families = [q["family"] for q in qs]
    qvecs = np.array(embedder.embed(texts), dtype=np.float32)
    ids = corpus.replica_ids(passages, n)
    matrix = np.concatenate(list(corpus.replica_vectors(vectors, n)))
    out: dict[str, Any] = {"n": n}

    say(f"[{n:,}] exact top-10 for {len(qs)} queries (numpy) ...")
    exact, _ = baselines.exact_topk(matrix, qvecs, 10)
    bf = baselines.BruteForce(matrix, ids)
    out["numpy"] = {
        "latency": latency(lambda v: bf.search(v, 10), list(qvecs)),
        "bytes": int(matrix.nbytes),
    }

    fts_path = common.DATA_DIR / f"fts5-{n}.sqlite"
    if n <= args.fts5_max:
        if not fts_path.exists():
            say(f"[{n:,}] building FTS5 ...")
            b = baselines.build_fts5(fts_path, corpus.iter_scaled(n))
            out["fts5_build"] = b.as_dict()
        fts = baselines.Fts5Index(fts_path)
        # the very queries the core answers: the ratio compares like with like
        out["fts5"] = {
            "latency": latency(lambda q: fts.search(q, 10), texts, families),
            "bytes": common.dir_size(fts_path),
        }

    results: dict[str, Any] = {}
    for connectivity in args.connectivity:
        path = workdir / f"scale-{n}-c{connectivity}"
        say(f"[{n:,}] building the core index (connectivity {connectivity}) ...")
        build = build_core(
            path,
            core_docs(corpus.iter_scaled(n), iter(matrix), varied=False),
            quantization=args.quantization,
            connectivity=connectivity,
            expansion_add=args.expansion_add,
        )
        say(f"[{n:,}]   {build['docs_per_s']:,.0f} docs/s, {common.human_bytes(build['bytes'])}")
        entry = measure_core(path, texts, families, qvecs, exact, ids, embedder, args.expansion)
        results[f"c{connectivity}"] = {"build": build, **entry}
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)
    out["core"] = results
    return out


