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
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backtrail.indexer import embedding
from bench import baselines, common, corpus, real_corpus
from bench.common import say
from bench.run_core_measure import core_corpus_vectors
from bench.run_core_real import EVAL_DIR, real_engine_worker, real_section
from bench.run_core_report import real_summary, synthetic_summary
from bench.run_core_synthetic import quality_section, scale_section


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
    ap.add_argument(
        "--expansion-add",
        type=int,
        default=None,
        help="HNSW build expansion (default: the product's)",
    )
    ap.add_argument(
        "--quantization", default="f16", choices=("i8", "f16", "f32"), help="default: the product's"
    )
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
        embedder = embedding.load_embedder(sessions=2, threads=1, batch_size=1)
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
