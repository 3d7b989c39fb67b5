"""The summary table of ``bench.run_core``: the issue's targets as ratios measured in the
same run, per engine, and the labelled rows of the synthetic stress test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench import common


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
                    f"{base:.1f} (core 1x2: {emb['passages_per_s']['core 1x2 batch 1']:.1f})",
                    "target": ">= 1.5x",
                    "ratio": f"{emb['ratio_best_core_vs_ort']:.2f}x",
                }
            )
            same = emb["passages_per_s"].get("ort-python 1x2 batch 16, core's model")
            if same:
                rows.append(
                    {
                        "what": f"{pre}: the same, ORT-Python running the core's model file",
                        "value": f"{same:.1f} passages/s; cosine core vs ORT-Python "
                        f">= {emb['min_cosine_vs_ort']:.4f}",
                        "target": "",
                        "ratio": f"{emb['ratio_best_core_vs_ort_same_model']:.2f}x",
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


