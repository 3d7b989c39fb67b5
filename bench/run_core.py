"""The core benchmark: Backtrail's Rust core against SQLite FTS5, numpy and ORT-Python, in one run.

``python -m bench.run_core`` (or ``make bench``) measures, on this machine and in one run:

1. Embedding throughput on the same passages: ORT's Python API used the plain way (batches of
   16 in input order, 2 intra-op threads) against the core's embedder (length-sorted batches,
   onnxruntime's optimised graph, sessions/threads as configured), plus the query-embedding latency.
2. Retrieval quality on the real corpus (15,925 passages with their real vectors): MRR@10 and
   recall@10 per query family for BM25, vector, hybrid fusions, FTS5 and a BraveMCP-style
   ranking (10 + 10 candidates, then max(0.5, exp(-0.01 days)) * (1 + 0.2 ln visits)), with
   synthetic visit times and counts (seeded) so that re-ranking has something to act on; a
   temporal check on near-duplicates; and sweeps that chose the core's defaults.
3. Scale (100k, 1M passages by replicas, see bench/README.md): build throughput and size,
   BM25 / FTS5 / vector / numpy / hybrid top-10 p50 and p95, vector recall@10 against exact
   search (a hit on any replica of the right source passage counts) for a sweep of HNSW
   parameters, and a cold process's open + first BM25 query. Every engine answers the same
   queries (all 800 known-item queries by default), and BM25, FTS5 and hybrid also report
   the p50 of each query family: a short title query and a 15-word sentence differ tenfold.

Results: a Markdown table on stdout and JSON in bench/results/. Targets are ratios against
baselines measured in the same run; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from backtrail import _core
from backtrail.indexer import embedding
from bench import baselines, common, corpus, metrics, queries, real_corpus, vector_cache
from bench.common import say

NOW = 1_750_000_000
#: Fusion weights fixed at one half (no coverage weighting): the naive baselines.
FIXED_HALF: dict[str, Any] = {"coverage_weighting": False, "bm25_weight": 0.5}
DAY = 86_400
#: Sessions x threads of the core embedder measured against ORT-Python; the best is used.
EMBED_CONFIGS = ((1, 2, 16), (2, 1, 8), (2, 1, 4))


# --------------------------------------------------------------------------- embedding


def sample_passages(n: int) -> list[str]:
    """n passage bodies of the synthetic (Python + PostgreSQL) corpus, spread evenly."""
    everything = corpus.load_passages()
    step = max(1, len(everything) // n)
    return [p["body"] for p in everything[::step][:n]]


def throughput(embed: Callable[[list[str]], Any], texts: list[str]) -> float:
    """Passages per second of one call over all texts, after a warm-up call."""
    embed(texts[:8])
    t0 = time.perf_counter()
    embed(texts)
    return len(texts) / (time.perf_counter() - t0)


def embedding_section(texts: list[str], query_texts: list[str]) -> dict[str, Any]:
    """ORT-Python against the core's embedder on the same passages, alternating runs."""
    ort = baselines.OrtEmbedder(threads=2, batch_size=16)
    cores = {
        f"core {s}x{t} batch {b}": embedding.load_embedder(sessions=s, threads=t, batch_size=b)
        for s, t, b in EMBED_CONFIGS
    }
    runs: dict[str, list[float]] = {"ort-python 1x2 batch 16": []}
    runs.update({name: [] for name in cores})
    for _ in range(2):  # alternate, so background load hits every engine alike
        runs["ort-python 1x2 batch 16"].append(throughput(ort.embed, texts))
        for name, e in cores.items():
            runs[name].append(throughput(e.embed, texts))
    best = {name: max(v) for name, v in runs.items()}
    base = best["ort-python 1x2 batch 16"]
    fastest = max((k for k in best if k.startswith("core")), key=best.__getitem__)
    qs = query_texts[:200]
    core_q = cores[fastest]
    q_lat = common.summarize_ms(common.time_calls(lambda q: core_q.embed([q]), qs, warmup=10))
    ort_q = common.summarize_ms(common.time_calls(lambda q: ort.embed([q]), qs, warmup=10))
    t0 = time.perf_counter()
    embedding.load_embedder()
    load_s = time.perf_counter() - t0
    ours = np.array(core_q.embed(texts[:64]))
    ref = ort.embed(texts[:64])
    return {
        "passages": len(texts),
        "passages_per_s": best,
        "runs_passages_per_s": runs,
        "ratio_best_core_vs_ort": best[fastest] / base,
        "ratio_same_threads_core_1x2_vs_ort": best["core 1x2 batch 16"] / base,
        "best_core_config": fastest,
        "min_cosine_vs_ort": float((ours * ref).sum(axis=1).min()),
        "query_latency_core": q_lat,
        "query_latency_ort": ort_q,
        "load_s": load_s,
    }


def embedding_text(p: dict[str, Any]) -> str:
    """What the product embeds for a passage (backtrail.indexer.embedding_text): title, body."""
    return f"{p['title']}\n{p['body']}" if p["title"] else p["body"]


def core_corpus_vectors(embedder: _core.Embedder) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every real passage by the core's embedder, cached in bench/data."""
    vec_path = common.DATA_DIR / "vectors-core-title.npy"
    ids_path = common.DATA_DIR / "vector_ids-core-title.npy"
    passages = corpus.load_passages()
    ids = np.array([p["id"] for p in passages], dtype=np.int64)
    if vec_path.exists() and ids_path.exists() and np.array_equal(np.load(ids_path), ids):
        return ids, np.load(vec_path)
    say(f"embedding all {len(passages):,} passages with the core (cached afterwards) ...")
    out = np.zeros((len(passages), _core.DIM), dtype=np.float32)
    t0 = time.perf_counter()
    step = 512
    for start in range(0, len(passages), step):
        chunk = [embedding_text(p) for p in passages[start : start + step]]
        out[start : start + len(chunk)] = embedder.embed(chunk)
        done = start + len(chunk)
        rate = done / (time.perf_counter() - t0)
        eta = (len(passages) - done) / rate
        say(f"  {done:,}/{len(passages):,} ({rate:.1f}/s, ETA {eta:.0f} s)")
    np.save(ids_path, ids)
    np.save(vec_path, out)
    return ids, out


# --------------------------------------------------------------------------- building


def synthetic_visits(page_id: int) -> tuple[int, int]:
    """(last_seen, visits) for a page, seeded: ages up to a year, Zipf-like visit counts."""
    rng = random.Random(page_id)
    age_days = rng.random() * 365
    visits = max(1, int(rng.paretovariate(1.2)))
    return NOW - int(age_days * DAY), min(visits, 500)


def core_docs(
    passages: Iterator[dict[str, Any]], vectors: Iterator[np.ndarray], *, varied: bool
) -> Iterator[dict[str, Any]]:
    """Core documents with vectors; `varied` gives each page synthetic recency and visits."""
    for p, v in zip(passages, vectors, strict=True):
        d = corpus.core_document(p, seen=NOW - 30 * DAY)
        if varied:
            d["last_seen"], d["visits"] = synthetic_visits(p["page_id"])
        d["vector"] = v.tolist()
        yield d


def build_core(
    path: Path,
    docs: Iterator[dict[str, Any]],
    *,
    quantization: str = "i8",
    connectivity: int = 16,
    expansion_add: int = 128,
    chunk: int = 20_000,
) -> dict[str, Any]:
    """A fresh core index from docs, committed once; build time and size."""
    shutil.rmtree(path, ignore_errors=True)
    index = _core.Index(
        str(path),
        quantization=quantization,
        connectivity=connectivity,
        expansion_add=expansion_add,
    )
    n = 0
    t0 = time.perf_counter()
    batch: list[dict[str, Any]] = []
    for d in docs:
        batch.append(d)
        if len(batch) == chunk:
            index.upsert(batch)
            n += len(batch)
            batch = []
    if batch:
        index.upsert(batch)
        n += len(batch)
    staged = time.perf_counter() - t0
    index.commit("bench")
    seconds = time.perf_counter() - t0
    stats = index.stats()
    return {
        "docs": n,
        "seconds": seconds,
        "stage_seconds": staged,
        "docs_per_s": n / seconds,
        "bytes": common.dir_size(path),
        "vector_segments": stats["vector_segments"],
        "quantization": quantization,
        "connectivity": connectivity,
        "expansion_add": expansion_add,
    }


# --------------------------------------------------------------------------- quality


def ranked_ids(hits: Sequence[dict[str, Any]]) -> list[int]:
    """Document ids of ungrouped hits, best first."""
    return [h["id"] for h in hits]


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


def latency(
    fn: Callable[[Any], object],
    inputs: Sequence[Any],
    families: Sequence[str] | None = None,
    warmup: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """p50/p95 of fn over inputs after warm-up (on the first inputs, or on ``warmup``),
    with the p50 of each query family when ``families`` (one per input) is given."""
    if warmup is not None:
        for x in warmup:
            fn(x)
    times = common.time_calls(fn, inputs, warmup=0 if warmup is not None else min(30, len(inputs)))
    out: dict[str, Any] = dict(common.summarize_ms(times))
    if families is not None:
        out["p50_ms_by_family"] = {
            f: common.summarize_ms([t for t, g in zip(times, families, strict=True) if g == f])[
                "p50_ms"
            ]
            for f in dict.fromkeys(families)
        }
    return out


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


COLD_START_SCRIPT = """
import json, time
t0 = time.perf_counter()
from backtrail import _core
t1 = time.perf_counter()
index = _core.Index(INDEX)
t2 = time.perf_counter()
hits = index.search(QUERY, 10, mode=MODE, query_vector=VECTOR)
t3 = time.perf_counter()
ms = lambda a, b: (b - a) * 1e3
print(json.dumps({"import_ms": ms(t0, t1), "open_ms": ms(t1, t2),
                  "first_query_ms": ms(t2, t3), "hits": len(hits)}))
"""


def cold_start(path: Path, query: str, vector: Sequence[float] | None = None) -> dict[str, float]:
    """A fresh Python process: import, open the index, answer one query (best of 3).

    BM25 without ``vector``; with it, a hybrid search given that query vector (the model's
    load, ~0.25 s, is not part of it: a long-lived server loads it once)."""
    script = (
        COLD_START_SCRIPT.replace("INDEX", repr(str(path)))
        .replace("QUERY", repr(query))
        .replace("MODE", repr("bm25" if vector is None else "hybrid"))
        .replace("VECTOR", repr(None if vector is None else [float(x) for x in vector]))
    )
    best: dict[str, float] = {}
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        wall = (time.perf_counter() - t0) * 1e3
        r = json.loads(out.stdout)
        r["process_wall_ms"] = wall
        r["open_plus_first_query_ms"] = r["open_ms"] + r["first_query_ms"]
        if not best or r["open_plus_first_query_ms"] < best["open_plus_first_query_ms"]:
            best = r
    return best


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
        )
        say(f"[{n:,}]   {build['docs_per_s']:,.0f} docs/s, {common.human_bytes(build['bytes'])}")
        entry = measure_core(path, texts, families, qvecs, exact, ids, embedder, args.expansion)
        results[f"c{connectivity}"] = {"build": build, **entry}
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)
    out["core"] = results
    return out


# --------------------------------------------------------------------------- real corpus

#: The human-written query sets (read from shared/eval at bench time, never copied here).
EVAL_DIR = Path(
    os.environ.get("BACKTRAIL_EVAL_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "eval"
)
HUMAN_SETS = ("dev-pypg.jsonl", "dev-big.jsonl")


def human_queries(eval_dir: Path) -> list[dict[str, Any]]:
    """The dev query sets: qid, query, family (``human <kind>``), targets (page URL ids)."""
    out = []
    for name in HUMAN_SETS:
        path = eval_dir / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing (set BACKTRAIL_EVAL_DIR)")
        for q in common.read_jsonl(path):
            out.append(
                {
                    "qid": q["id"],
                    "query": q["query"],
                    "family": f"human {q['kind']}",
                    "set": name.removesuffix(".jsonl"),
                    "targets": q["targets"],
                }
            )
    return out


def sampled_queries(passages: Sequence[dict[str, Any]], n: int, seed: int = 0) -> list[dict]:
    """n speed probes drawn from the real passages: word runs (3-7 words) and sentences."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < n:
        p = passages[rng.randrange(len(passages))]
        words = p["body"].split()
        if len(out) % 2 == 0:
            if len(words) < 8:
                continue
            k = rng.randint(3, 7)
            i = rng.randrange(len(words) - k)
            text, family = " ".join(words[i : i + k]), "sampled word run"
        else:
            sentences = [
                x for x in p["body"].replace("\n", " ").split(". ") if 8 <= len(x.split()) <= 30
            ]
            if not sentences:
                continue
            text, family = rng.choice(sentences), "sampled sentence"
        out.append({"qid": f"s{len(out):04d}", "query": text, "family": family, "targets": []})
    return out


def page_scores(
    ranked_urls: dict[str, list[str]], qs: Sequence[dict[str, Any]], k: int = 10
) -> dict[str, dict[str, float]]:
    """Page MRR@k and recall@k (a target among the first k pages) per query set and kind."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for q in qs:
        if not q["targets"]:
            continue
        pages = metrics.unique_in_order(ranked_urls[q["qid"]])[:k]  # type: ignore[arg-type]
        rank = next((i for i, u in enumerate(pages, 1) if u in q["targets"]), None)
        pair = (1.0 / rank if rank else 0.0, 1.0 if rank else 0.0)
        for g in (q["set"], f"{q['set']} {q['family'].removeprefix('human ')}", "all"):
            groups.setdefault(g, []).append(pair)
    return {
        g: {
            "n": len(v),
            "mrr@10": sum(a for a, _ in v) / len(v),
            "recall@10": sum(b for _, b in v) / len(v),
        }
        for g, v in groups.items()
    }


def real_engine_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything measured on one engine (the backtrail this interpreter imports).

    Runs in a subprocess per engine (``--engine NAME=PYTHON``), so that two builds of the
    core are measured in one run on the same passages, vectors, queries and baselines.
    """
    work = Path(spec["workdir"])
    texts, families = spec["texts"], spec["families"]
    qvecs = np.load(work / "qvecs.npy")
    exact_ids = np.load(work / "exact_ids.npy")
    mask = np.load(work / "mask.npy")
    vecs = np.load(work / "vectors.npy", mmap_mode="r")
    out: dict[str, Any] = {
        "core_version": getattr(_core, "__version__", "?"),
        "backtrail": str(Path(_core.__file__).parent),
    }
    if spec["embedding"]:
        say(f"[{spec['engine']}] embedding: ORT-Python vs the core on the same passages ...")
        out["embedding"] = embedding_section(spec["embed_texts"], texts)

    def docs() -> Iterator[dict[str, Any]]:
        j = 0
        chosen = (
            p
            for p in common.read_jsonl(spec["passages"])
            if p["set"] in (spec["sets"] or [p["set"]])
        )
        for p, has in zip(chosen, mask, strict=True):
            d = corpus.core_document(p)
            if has:
                d["vector"] = np.asarray(vecs[j], dtype=np.float32).tolist()
                j += 1
            yield d

    path = work / f"index-{spec['engine']}"
    say(f"[{spec['engine']}] building the core index over {len(mask):,} passages ...")
    out["build"] = build_core(
        path, docs(), quantization=spec["quantization"], connectivity=spec["connectivity"]
    )
    say(
        f"[{spec['engine']}]   {out['build']['docs_per_s']:,.0f} docs/s, "
        f"{common.human_bytes(out['build']['bytes'])}"
    )
    out["cold_start"] = cold_start(path, texts[0])
    out["cold_start_hybrid_given_vector"] = cold_start(path, texts[1], qvecs[1])
    index = _core.Index(str(path))
    vlist = [v.tolist() for v in qvecs]
    sweep = []
    for ef in spec["expansions"]:
        opts = {"group": False, "expansion": ef}

        def vector(v: list[float], o: dict[str, Any] = opts) -> list[dict[str, Any]]:
            return index.search("", 10, mode="vector", query_vector=v, options=o)

        found = [ranked_ids(vector(v)) for v in vlist]
        lat = latency(vector, vlist)
        sweep.append(
            {
                "expansion": ef,
                "recall@10": baselines.recall_at_k(found, exact_ids),
                **{f"vector_{k}": x for k, x in lat.items()},
            }
        )
        say(
            f"[{spec['engine']}]   vector ef={ef}: recall@10 {sweep[-1]['recall@10']:.3f}, "
            f"p50 {lat['p50_ms']:.3f} ms"
        )
    out["vector_sweep"] = sweep
    out["bm25"] = latency(lambda q: index.search(q, 10, mode="bm25"), texts, families)
    out["bm25_ungrouped"] = latency(
        lambda q: index.search(q, 10, mode="bm25", options={"group": False}), texts, families
    )
    out["hybrid_given_vector"] = latency(
        lambda i: index.search(texts[i], 10, mode="hybrid", query_vector=vlist[i]),
        list(range(len(texts))),
        families,
    )
    embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=8)
    with_model = _core.Index(str(path), embedder=embedder)
    # warmed up on other wordings: the core keeps recent query vectors, and a timed query
    # must pay for its embedding
    out["hybrid_with_embedding"] = latency(
        lambda q: with_model.search(q, 10),
        texts,
        families,
        warmup=[f"{t} warm-up" for t in texts[:30]],
    )
    say(
        f"[{spec['engine']}]   bm25 p50 {out['bm25']['p50_ms']:.2f} ms, hybrid incl. embedding "
        f"p50 {out['hybrid_with_embedding']['p50_ms']:.2f} ms"
    )
    human = [i for i, f in enumerate(families) if f.startswith("human")]
    ranked: dict[str, dict[int, list[str]]] = {}
    for mode in ("bm25", "vector", "hybrid"):
        ranked[mode] = {
            i: [
                h["url"]
                for h in index.search(
                    texts[i], 10, mode=mode, query_vector=None if mode == "bm25" else vlist[i]
                )
            ]
            for i in human
        }
    out["ranked_urls"] = ranked
    if not spec["keep"]:
        shutil.rmtree(path, ignore_errors=True)
    return out


def run_engine(name: str, python: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The worker of one engine in its own interpreter; its JSON result."""
    work = Path(spec["workdir"])
    spec_path, out_path = work / f"spec-{name}.json", work / f"result-{name}.json"
    common.write_json(spec_path, {**spec, "engine": name})
    out_path.unlink(missing_ok=True)
    env = dict(os.environ)
    # the bench package from this tree; backtrail from the engine's own site-packages
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    subprocess.run(
        [python, "-m", "bench.run_core", "--worker", str(spec_path), str(out_path)],
        check=True,
        env=env,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    return json.loads(out_path.read_text(encoding="utf-8"))


def real_section(args: argparse.Namespace) -> dict[str, Any]:
    """The real corpus at full size: baselines here, the core once per engine.

    ``--sets`` restricts the corpus to some of the seven packages (and the human queries to
    those with a target among them): a smaller run, not the targets' full size.
    """
    passages = real_corpus.load_passages()
    if args.sets:
        passages = [p for p in passages if p["set"] in args.sets]
    ids = np.array([p["id"] for p in passages], dtype=np.int64)
    mask, vecs = vector_cache.corpus_vectors(passages)
    pages = len({p["page_id"] for p in passages})
    say(
        f"real corpus: {len(passages):,} passages of {pages:,} pages; "
        f"{int(mask.sum()):,} with cached vectors"
    )
    if not mask.any():
        raise SystemExit("no cached vectors yet: run python -m bench.vector_cache first")
    if not mask.all():
        say(
            "  WARNING: the vector cache is incomplete (python -m bench.vector_cache resumes "
            "it); vector figures cover only the passages that have vectors"
        )
    urls = {p["url"] for p in passages}
    human_all = human_queries(args.eval_dir)
    qs = [q for q in human_all if set(q["targets"]) & urls]
    if len(qs) < len(human_all):
        say(f"  {len(human_all) - len(qs)} human queries left out: no target in these sets")
    qs += sampled_queries(passages, args.sampled)
    texts, families = [q["query"] for q in qs], [q["family"] for q in qs]
    work = args.workdir / "real"
    work.mkdir(parents=True, exist_ok=True)
    embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=8)
    qvecs = np.array(embedder.embed(texts), dtype=np.float32)
    del embedder
    vec_ids = ids[mask]
    say(f"exact top-10 of {len(qs)} queries over {len(vec_ids):,} vectors (numpy) ...")
    exact, _ = baselines.exact_topk(vecs, qvecs, 10)
    exact_ids = vec_ids[exact]
    np.save(work / "qvecs.npy", qvecs)
    np.save(work / "exact_ids.npy", exact_ids)
    np.save(work / "mask.npy", mask)
    np.save(work / "vectors.npy", vecs)
    out: dict[str, Any] = {
        "passages": len(passages),
        "pages": pages,
        "with_vectors": int(mask.sum()),
        "sets": args.sets,
        "queries": len(qs),
        "queries_by_family": {f: families.count(f) for f in dict.fromkeys(families)},
    }
    bf = baselines.BruteForce(vecs, vec_ids)
    out["numpy"] = {
        "latency": latency(lambda v: bf.search(v, 10), list(qvecs)),
        "bytes": int(vecs.nbytes),
    }
    say(f"numpy exact p50 {out['numpy']['latency']['p50_ms']:.2f} ms")
    fts_path = real_corpus.real_dir() / f"fts5-{len(passages)}.sqlite"
    if not fts_path.exists():  # built under another name, so a killed build is never used
        say(f"building FTS5 over {len(passages):,} passages ...")
        tmp = fts_path.with_name(fts_path.name + ".tmp")
        out["fts5_build"] = baselines.build_fts5(tmp, iter(passages)).as_dict()
        tmp.replace(fts_path)
    fts = baselines.Fts5Index(fts_path)
    out["fts5"] = {
        "latency": latency(lambda q: fts.search(q, 10), texts, families),
        "bytes": common.dir_size(fts_path),
    }
    say(f"FTS5 bm25() p50 {out['fts5']['latency']['p50_ms']:.1f} ms")
    url_of = {p["id"]: p["url"] for p in passages}
    human = [q for q in qs if q["targets"]]
    fts_urls = {q["qid"]: [url_of[i] for i, _ in fts.search(q["query"], 50)] for q in human}
    out["quality"] = {"SQLite FTS5 bm25 (OR)": page_scores(fts_urls, human)}
    fts.close()
    step = max(1, len(passages) // args.embed_sample)
    embed_texts = [real_corpus.embedding_text(p) for p in passages[::step][: args.embed_sample]]
    del passages, url_of
    spec = {
        "workdir": str(work),
        "passages": str(real_corpus.build()[1]),
        "texts": texts,
        "families": families,
        "expansions": args.expansion,
        "quantization": args.quantization,
        "connectivity": args.connectivity[0],
        "embedding": "embedding" not in args.skip,
        "embed_texts": embed_texts,
        "keep": args.keep,
        "sets": args.sets,
    }
    out["engines"] = {}
    for name, python in args.engine:
        say(f"== engine {name} ({python})")
        res = run_engine(name, python, spec)
        ranked = res.pop("ranked_urls")
        by_qid = {
            mode: {
                human_q["qid"]: ranked[mode][str(i)]
                for i, human_q in enumerate(qs)
                if human_q["targets"]
            }
            for mode in ranked
        }
        res["quality"] = {mode: page_scores(by_qid[mode], human) for mode in by_qid}
        out["engines"][name] = res
    return out


# --------------------------------------------------------------------------- report


def _best_ef(sweep: Sequence[dict[str, Any]], floor: float) -> dict[str, Any]:
    """The fastest expansion reaching the recall floor (else the one with the best recall)."""
    ok = [s for s in sweep if s["recall@10"] >= floor]
    return (
        min(ok, key=lambda s: s["vector_p50_ms"])
        if ok
        else max(sweep, key=lambda s: s["recall@10"])
    )


def _ratio(x: float) -> str:
    return f"{x:.0f}x" if x >= 10 else f"{x:.2f}x"


def _mrr(scores: dict[str, dict[str, float]], group: str) -> str:
    return f"{scores[group]['mrr@10']:.3f}" if group in scores else "-"


def real_summary(real: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets on the real corpus, as ratios within this run, per engine."""
    rows: list[dict[str, Any]] = []
    fts = real["fts5"]["latency"]
    numpy_p50 = real["numpy"]["latency"]["p50_ms"]
    size = f"real {real['passages']:,} passages"
    if real.get("sets"):
        size += f" ({'+'.join(real['sets'])} only)"
    for name, e in real["engines"].items():
        pre = f"{size} [{name}]"
        rows.append(
            {
                "what": f"{pre}: BM25 top-10 p50 (p95) vs FTS5 bm25()",
                "value": f"{e['bm25']['p50_ms']:.2f} ms ({e['bm25']['p95_ms']:.1f}) vs "
                f"{fts['p50_ms']:.1f} ms ({fts['p95_ms']:.0f})",
                "target": ">= 50x",
                "ratio": _ratio(fts["p50_ms"] / e["bm25"]["p50_ms"]),
            }
        )
        best = _best_ef(e["vector_sweep"], 0.97)
        partial = (
            f", over the {real['with_vectors']:,} cached vectors only"
            if real["with_vectors"] < real["passages"]
            else ""
        )
        rows.append(
            {
                "what": f"{pre}: vector top-10 p50 vs numpy exact "
                f"(ef={best['expansion']}{partial})",
                "value": f"{best['vector_p50_ms']:.3f} ms vs {numpy_p50:.2f} ms, "
                f"recall@10 {best['recall@10']:.3f}",
                "target": ">= 20x, recall >= 0.97",
                "ratio": _ratio(numpy_p50 / best["vector_p50_ms"]),
            }
        )
        h = e["hybrid_with_embedding"]
        rows.append(
            {
                "what": f"{pre}: hybrid top-10 p50 (p95), query embedding included",
                "value": f"{h['p50_ms']:.2f} ms ({h['p95_ms']:.1f})",
                "target": "<= 8 ms",
                "ratio": "",
            }
        )
        cs = e["cold_start"]
        ch = e["cold_start_hybrid_given_vector"]
        rows.append(
            {
                "what": f"{pre}: new process opens the index + first hybrid query (vector given)",
                "value": f"{ch['open_plus_first_query_ms']:.0f} ms",
                "target": "",
                "ratio": "",
            }
        )
        rows.append(
            {
                "what": f"{pre}: new process opens the index + first BM25 query",
                "value": f"{cs['open_plus_first_query_ms']:.0f} ms (+ import "
                f"{cs['import_ms']:.0f} ms; process wall {cs['process_wall_ms']:.0f} ms)",
                "target": "<= 50 ms",
                "ratio": "",
            }
        )
        emb = e.get("embedding")
        if emb:
            base = emb["passages_per_s"]["ort-python 1x2 batch 16"]
            rows.append(
                {
                    "what": f"{pre}: bulk embedding passages/s, best core "
                    f"({emb['best_core_config']}) vs ORT-Python 1x2",
                    "value": f"{emb['passages_per_s'][emb['best_core_config']]:.1f} vs "
                    f"{base:.1f} (core 1x2: {emb['passages_per_s']['core 1x2 batch 16']:.1f})",
                    "target": ">= 1.5x",
                    "ratio": f"{emb['ratio_best_core_vs_ort']:.2f}x",
                }
            )
        b = e["build"]
        rows.append(
            {
                "what": f"{pre}: index build, size",
                "value": f"{b['docs_per_s']:,.0f} docs/s, {common.human_bytes(b['bytes'])}",
                "target": "",
                "ratio": "",
            }
        )
        q = e["quality"]
        rows.append(
            {
                "what": f"{pre}: page MRR@10 on dev-pypg / dev-big (hybrid, bm25, vector)",
                "value": ", ".join(
                    f"{m} {_mrr(q[m], 'dev-pypg')} / {_mrr(q[m], 'dev-big')}" for m in q
                ),
                "target": "",
                "ratio": "",
            }
        )
    fq = real["quality"]["SQLite FTS5 bm25 (OR)"]
    rows.append(
        {
            "what": f"{size}: FTS5 page MRR@10 on dev-pypg / dev-big",
            "value": f"{_mrr(fq, 'dev-pypg')} / {_mrr(fq, 'dev-big')}",
            "target": "",
            "ratio": "",
        }
    )
    return rows


def synthetic_summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The replica corpus: a labelled stress test, no targets."""
    rows: list[dict[str, Any]] = []
    for scale in result.get("synthetic", []):
        n = scale["n"]
        for cname, c in scale["core"].items():
            best = _best_ef(c["sweep"], 0.97)
            h = c["hybrid_with_embedding"]
            rows.append(
                {
                    "what": f"SYNTHETIC {n:,} replicas {cname}: hybrid p50 (p95) incl. "
                    f"embedding; vector recall@10 (ef={best['expansion']})",
                    "value": f"{h['p50_ms']:.2f} ms ({h['p95_ms']:.1f}); {best['recall@10']:.3f}",
                    "target": "none (stress test)",
                    "ratio": "",
                }
            )
    return rows


def parse_engine(value: str) -> tuple[str, str]:
    """``NAME=PYTHON`` (an interpreter whose site-packages hold the backtrail to measure)."""
    name, sep, python = value.partition("=")
    if not sep or not name or not python:
        raise argparse.ArgumentTypeError("expected NAME=/path/to/python")
    return name, python


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, type=Path, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--engine",
        type=parse_engine,
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help="measure the core of this interpreter's backtrail (repeat to compare builds in "
        "one run; default: this=$BENCH_PYTHON or this interpreter)",
    )
    ap.add_argument(
        "--sampled",
        type=int,
        default=300,
        help="speed probes drawn from the real passages, besides the 200 human queries",
    )
    ap.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    ap.add_argument(
        "--sets",
        nargs="+",
        choices=[s.name for s in real_corpus.SETS],
        help="only these packages of the real corpus (default: all seven, full size)",
    )
    ap.add_argument(
        "--synthetic",
        type=int,
        nargs="*",
        default=[],
        metavar="N",
        help="also run the synthetic replica stress test at N passages (e.g. --synthetic 1000000)",
    )
    ap.add_argument(
        "--queries",
        type=int,
        default=800,
        help="synthetic: machine-made known-item queries timed at each scale",
    )
    ap.add_argument("--connectivity", type=int, nargs="+", default=[16])
    ap.add_argument("--expansion", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--quantization", default="i8", choices=("i8", "f16", "f32"))
    ap.add_argument(
        "--fts5-max", type=int, default=100_000, help="synthetic: largest scale given FTS5"
    )
    ap.add_argument("--embed-sample", type=int, default=256)
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=("embedding", "real", "quality"),
        help="quality: the machine-made known-item quality section of the "
        "synthetic corpus (only run with --synthetic)",
    )
    ap.add_argument("--workdir", type=Path, default=common.DATA_DIR / "core-bench")
    ap.add_argument("--keep", action="store_true", help="keep the indexes")
    args = ap.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker[0].read_text(encoding="utf-8"))
        common.write_json(args.worker[1], real_engine_worker(spec))
        return
    if not args.engine:
        args.engine = [("this", os.environ.get("BENCH_PYTHON") or sys.executable)]
    args.workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    if "real" not in args.skip:
        what = "+".join(args.sets) + " only" if args.sets else "all seven packages, full size"
        say(f"== real corpus (Debian documentation: {what})")
        result["real"] = real_section(args)
    if args.synthetic:
        say("== SYNTHETIC stress test: replicas of the Python + PostgreSQL corpus (no targets)")
        embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=8)
        _, vectors = core_corpus_vectors(embedder)
        if "quality" not in args.skip:
            fts5_path = common.DATA_DIR / "fts5-corpus.sqlite"
            if not fts5_path.exists():
                baselines.build_fts5(fts5_path, corpus.load_passages())
            result["synthetic_quality"] = quality_section(
                args.workdir, vectors, embedder, fts5_path
            )
        result["synthetic"] = [
            scale_section(n, args.workdir, vectors, embedder, args) for n in args.synthetic
        ]
    say("== summary")
    rows = real_summary(result["real"]) if "real" in result else []
    say(
        common.markdown_table(
            rows + synthetic_summary(result), ["what", "value", "target", "ratio"]
        )
    )
    common.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = common.RESULTS_DIR / f"core-{time.strftime('%Y%m%d-%H%M%S')}.json"
    common.write_json(out, result)
    say(f"results written to {out}")


if __name__ == "__main__":
    main()
