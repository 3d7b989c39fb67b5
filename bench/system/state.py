"""What every phase of the system benchmark shares: ``BenchState`` (work directory, corpus,
queries, results) and the small helpers the phases and the runner use."""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from backtrail.indexer import embedding
from bench import common, queries
from bench.system import mcpclients as mc
from bench.system.hosts import CpuMonitor, Host
from bench.system.pages import CachedEmbedder, Corpus, Page, stream_pages

ROOT = Path(__file__).resolve().parents[2]


def calls_ms(calls: Sequence[mc.Call]) -> dict[str, float]:
    """Latency summary (ms) of the calls that succeeded, with the count of those that failed."""
    ok = [c.seconds for c in calls if c.ok]
    out = common.summarize_ms(ok)
    out["errors"] = float(sum(not c.ok for c in calls))
    return out


class BenchState:
    """The run's state; the phase classes add the measurements, ``SystemBench`` the order."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.mcp_env = dict(kv.split("=", 1) for kv in args.mcp_env)
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="bt-sys-", dir="/tmp"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs = self.work / "logs"
        self.logs.mkdir(exist_ok=True)
        self.home = self.work / "store" / "home"
        self.now_ms = int(time.time() * 1000)
        self.cpu = CpuMonitor()
        self.corpus = Corpus(synthetic=args.vectors == "synthetic")
        self.cached = CachedEmbedder(self.corpus)
        self.url_ids: dict[str, int] = {}
        self.built = 0
        self.embedder = embedding.load_embedder()  # query vectors of the baseline
        self.stream: Iterator[Page] = stream_pages(self.corpus, self.now_ms)
        qs = queries.load_queries()
        rng = random.Random(5)
        self.queries = qs
        self.latency_queries = [q["query"] for q in rng.sample(qs, len(qs))]
        vague = [q for q in qs if q["family"] in ("paraphrase", "title")]
        self.forgotten_queries = [q["query"] for q in rng.sample(vague, len(vague))]
        self.results: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_at_start": os.getloadavg()},
            "args": {k: str(v) for k, v in vars(args).items()},
            "workdir": str(self.work),
            "provenance": {
                "real embedder": "ingest phase (sustained, drain), capture-to-searchable "
                "pages, pages ingested while queries run, temporal-check pages, every "
                "query vector (MCP servers and service API)",
                "cached vectors": "the bulk-built tier pages (vectors-core-title.npy: the "
                "core embedder's real vectors of title+body per corpus passage; replicas: "
                "those + N(0, 0.009^2) noise); a tier page split into two index passages "
                "gets its passage's vector for both",
                "tier page": "one corpus passage per page (mean ~1,000 chars); real "
                "pages (ingest phase) are whole corpus pages as HTML (mean 9.3k chars)",
            },
            "tiers": {},
            "product_at_start": product_version(),
        }

    # ------------------------------------------------------------------ helpers

    def phase(self, name: str) -> None:
        self.cpu.phase(name)

    def skip(self, phase: str) -> bool:
        return phase in self.args.skip

    def register(self, page: Page) -> None:
        self.cached.register(page)
        self.url_ids[page.url] = page.bench_id

    def host(self, home: Path, env: dict[str, str]) -> Host:
        return Host(home, env)

    def bench_id_of(self, url: str) -> int | None:
        found = self.url_ids.get(url)
        if found is not None:
            return found
        parts = urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        replica = int(parse_qs(parts.query).get("replica", ["0"])[0] or 0)
        return self.url_ids.get(base if not replica else f"{base}?replica={replica}")

    def _ids(self, urls: Any) -> list[int]:
        out = []
        for u in urls:
            found = self.bench_id_of(u)
            out.append(found if found is not None else -1)
        return out


def rrf(*rankings: Sequence[int], k: int = 60) -> list[int]:
    """Reciprocal rank fusion of rankings of ids, best first (the baselines' hybrid)."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, 1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda d: -score[d])


def product_version() -> dict[str, Any]:
    """Which build ran: the installed core library's hash and time, and the git commit
    (the wheel may be reinstalled by others while a long run goes on)."""
    import hashlib

    import backtrail

    lib = next(Path(backtrail.__file__).parent.glob("_core*.so"), None)
    out: dict[str, Any] = {"package": str(Path(backtrail.__file__).parent)}
    if lib is not None:
        out["core_sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()[:16]
        out["core_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(lib.stat().st_mtime))
    try:
        out["git_head"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                         capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return out


def disk_breakdown(home: Path) -> dict[str, int]:
    """Bytes per top-level entry of a data directory (ledger, its WAL, the index...)."""
    return {entry.name: common.dir_size(entry) for entry in sorted(home.iterdir())}


