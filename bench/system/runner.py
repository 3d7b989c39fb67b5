"""The whole-system benchmark and soak (issue 8). See bench/system/README.md.

``python -m bench.system`` drives the product through its real interfaces: native-host
frames (a real ``python -m backtrail.native_host`` subprocess) for every capture, and the
official ``mcp`` client spawning ``backtrail mcp`` over stdio for every query. Phases:

1. ``ingest``: a fresh data directory, real HTML pages, the real embedder: sustained
   ingest (pages/s fully indexed while captures keep arriving), backlog drain after the
   feed stops, disk per 1,000 typical pages, host RSS idle and after ingest.
2. ``tiers``: stores of 1k / 10k / 100k pages (one corpus passage per page), bulk-built
   through the host with vectors from the cached real corpus vectors; at each tier:
   disk, baseline (FTS5 bm25() + numpy cosine over the same pages, same queries), MCP
   spawn-to-initialized / first search / RSS, capture-to-searchable while idle (real
   HTML page, real embedder), and ``search_browsing`` (plain and ``vague``) p50/p95
   with 1 and 4 MCP clients while the host ingests 10 pages/s.
3. ``quality`` (when the store holds the whole real corpus, 15,925 pages; else on the
   queries whose target is in the store): known-item MRR@10 / recall@10 of BM25, vector,
   hybrid and hybrid + decay through the service API, hybrid + decay through MCP, and the
   baselines; ``temporal``: near-duplicate groups, search_browsing(vague=true) must rank the
   recently-and-often visited copy first.
4. ``soak``: 4 MCP clients querying while the host ingests 10 pages/s on the largest store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench import common
from bench.common import say
from bench.system.pages import Page
from bench.system.phase_ingest import IngestPhase
from bench.system.phase_quality import QUALITY_SIZE, QualityPhases
from bench.system.phase_soak import SoakPhase
from bench.system.phase_tiers import TierPhases
from bench.system.report import report, targets
from bench.system.state import product_version


class SystemBench(IngestPhase, TierPhases, QualityPhases, SoakPhase):
    """The whole run: the phases in order, results saved after each tier."""

    # ------------------------------------------------------------------ run

    async def run_async(self) -> None:
        a = self.args
        self.cpu.start()
        if not self.skip("ingest"):
            self.phase("ingest")
            self.phase_ingest()
        sizes = sorted(set(a.sizes))
        judged = not (self.skip("quality") and self.skip("temporal"))
        checkpoints = sorted(set(sizes) | ({min(QUALITY_SIZE, max(sizes))}
                                           if judged else set()))  # fmt: skip
        for size in checkpoints:
            self.phase(f"build {size}")
            if a.reuse_store and (self.home / "ledger.sqlite3").exists():
                build, self.built = {"reused": True}, size
                self.stream = _unseen(self.stream, self.home / "ledger.sqlite3")
            else:
                build = self.build_to(size)
            tier: dict[str, Any] = {"build": build}
            fts = brute = None
            if not self.skip("baseline") or size == min(QUALITY_SIZE, max(sizes)):
                fts, brute = self.baseline(size, tier)
            if size in sizes:
                self.phase(f"measure {size}")
                await self.measure_tier(size, tier)
                self.fill_vectors()
            self.results["tiers"][str(size)] = tier
            if size == min(QUALITY_SIZE, max(sizes)):
                if not self.skip("quality"):
                    self.phase("quality")
                    await self.quality(size, fts, brute)
                if not self.skip("temporal"):
                    self.phase("temporal")
                    await self.temporal(a.temporal_groups)
                    self.fill_vectors()
            if fts is not None:
                fts.close()
            self.save()
        if not self.skip("soak") and a.soak_seconds > 0:
            self.phase("soak")
            await self.soak(a.soak_seconds)

    def save(self) -> Path:
        path = common.RESULTS_DIR / f"system-{self.stamp}.json"
        common.write_json(path, self.results)
        return path

    def run(self) -> Path:
        self.stamp = time.strftime("%Y%m%d-%H%M%S")
        t0 = time.perf_counter()
        try:
            asyncio.run(self.run_async())
        finally:
            self.results["seconds"] = time.perf_counter() - t0
            self.cpu.stop_event.set()
            self.results["cpu_by_phase"] = self.cpu.summary()
            self.results["targets"] = targets(self.results)
            self.results["load_at_end"] = os.getloadavg()
            self.results["product_at_end"] = product_version()
            path = self.save()
            say("\n" + report(self.results))
            say(f"\nwrote {path}")
            if not self.args.keep:
                shutil.rmtree(self.work, ignore_errors=True)
        return path


def _unseen(pages: Iterator[Page], ledger: Path) -> Iterator[Page]:
    """``pages`` without those an earlier run already captured (a reused store), so what
    is ingested while queries run is new to the host."""
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        known = {row[0] for row in conn.execute("SELECT url FROM pages")}
    finally:
        conn.close()
    return (page for page in pages if page.url not in known)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.system", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000",
                   help="store sizes in pages (comma separated)")
    p.add_argument("--soak-seconds", type=float, default=None, help="default 600 (quick: 60)")
    p.add_argument("--quick", action="store_true",
                   help="1k pages only, 60 s soak, fewer samples (a few minutes)")
    p.add_argument("--skip", default="",
                   help="phases to skip: ingest, baseline, startup, capture, load, quality, "
                   "temporal, soak (comma separated)")
    p.add_argument("--ingest-pages", type=int, default=150)
    p.add_argument("--ingest-offer", type=float, default=5.0,
                   help="pages/s offered in the ingest phase (above capacity on purpose)")
    p.add_argument("--ingest-timeout", type=float, default=1800.0)
    p.add_argument("--ingest-rate", type=float, default=10.0,
                   help="pages/s the host ingests while queries run and in the soak")
    p.add_argument("--queries-1", type=int, default=200, help="calls per tool, 1 client")
    p.add_argument("--queries-4", type=int, default=60, help="calls per tool per client, 4 clients")
    p.add_argument("--spawns", type=int, default=5)
    p.add_argument("--capture-samples", type=int, default=15)
    p.add_argument("--temporal-groups", type=int, default=40)
    p.add_argument("--soak-qps", type=float, default=2.0, help="calls/s per soak client")
    p.add_argument("--soak-sample", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--mcp-env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment of the MCP servers (diagnostics, e.g. "
                   "BACKTRAIL_BACKGROUND_VECTORS=0)")
    p.add_argument("--open-loop-rate", type=float, default=2.0,
                   help="calls/s per client in the 4-client open-loop load run")
    p.add_argument("--open-loop-seconds", type=float, default=60.0)
    p.add_argument("--vectors", choices=("cached", "synthetic"), default="cached",
                   help="synthetic: random vectors for the tier pages (CPU and latency only)")
    p.add_argument("--reuse-store", action="store_true",
                   help="the --workdir already holds a store of the largest size: measure it")
    p.add_argument("--workdir", default=None, help="default: a new /tmp/bt-sys-* directory")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes = "1000"
        args.soak_seconds = 60.0 if args.soak_seconds is None else args.soak_seconds
        args.ingest_pages, args.queries_1, args.queries_4 = 30, 60, 15
        args.spawns, args.capture_samples, args.temporal_groups = 3, 5, 12
    args.soak_seconds = 600.0 if args.soak_seconds is None else args.soak_seconds
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    return args


def main(argv: Sequence[str] | None = None) -> None:
    for name in list(os.environ):  # children get the defaults, not this shell's settings
        if name.startswith(("BACKTRAIL_", "MCP_")):
            del os.environ[name]
    args = parse_args(argv)
    SystemBench(args).run()


if __name__ == "__main__":
    main()
