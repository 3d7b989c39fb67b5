"""Measurement building blocks of ``bench.run_core`` shared by its real-corpus and synthetic
sections: embedder throughput, corpus vectors, index builds, query latency and cold start."""

from __future__ import annotations

import json
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
from bench import baselines, common, corpus
from bench.common import say

NOW = 1_750_000_000
DAY = 86_400
#: Sessions x threads of the core embedder measured against ORT-Python; the best is used.
EMBED_CONFIGS = ((1, 2, 1), (2, 1, 1), (1, 2, 16))


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
    # The same baseline running the model file the core runs (the packaged model's integer
    # derivation): how much of the ratio is the model file and how much the core.
    runnable = embedding.runnable_model(embedding.model_files())[0]
    ort_same = baselines.OrtEmbedder(threads=2, batch_size=16, model_path=runnable)
    baseline_runs = {
        "ort-python 1x2 batch 16": ort,
        "ort-python 1x2 batch 16, core's model": ort_same,
    }
    cores = {
        f"core {s}x{t} batch {b}": embedding.load_embedder(sessions=s, threads=t, batch_size=b)
        for s, t, b in EMBED_CONFIGS
    }
    runs: dict[str, list[float]] = {name: [] for name in baseline_runs}
    runs.update({name: [] for name in cores})
    for _ in range(2):  # alternate, so background load hits every engine alike
        for name, b in baseline_runs.items():
            runs[name].append(throughput(b.embed, texts))
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
        "ratio_same_threads_core_1x2_vs_ort": best["core 1x2 batch 1"] / base,
        "ratio_best_core_vs_ort_same_model": best[fastest]
        / best["ort-python 1x2 batch 16, core's model"],
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
    expansion_add: int | None = None,
    chunk: int = 20_000,
) -> dict[str, Any]:
    """A fresh core index from docs, committed once; build time and size. ``expansion_add``
    None: the product's."""
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
        "expansion_add": json.loads((path / "backtrail-index.json").read_text())["expansion_add"],
    }


# --------------------------------------------------------------------- hits and timing


def ranked_ids(hits: Sequence[dict[str, Any]]) -> list[int]:
    """Document ids of ungrouped hits, best first."""
    return [h["id"] for h in hits]


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
