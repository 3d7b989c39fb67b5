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
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from backtrail.config import Config
from backtrail.indexer import Indexer, embedding
from backtrail.service import Memory
from bench import baselines, common, corpus, metrics, queries
from bench.common import say
from bench.system import mcpclients as mc
from bench.system.hosts import (
    BUILD_ENV,
    MEASURE_ENV,
    CpuMonitor,
    Host,
    Ingest,
    capture_message,
    cpu_seconds,
    fd_count,
    rss_mb,
    visit_message,
)  # fmt: skip
from bench.system.pages import (
    TEMPORAL_ROUND,
    CachedEmbedder,
    Corpus,
    Page,
    real_pages,
    scale_pages,
    stream_pages,
    text_chars,
    typical_pages,
)  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]
DAY_MS = 86_400_000
QUALITY_SIZE = 15_925  # the whole real corpus: one page per real passage

TARGETS = {
    "capture_to_searchable_p95_s": 2.0,
    "search_p95_ms_100k_4clients_ingest": 25.0,
    "spawn_to_initialized_s": 0.25,
    "first_search_s": 0.6,
    "mcp_rss_idle_mb": 150.0,
    "soak_rss_growth": 0.10,
}


def _ms(calls: Sequence[mc.Call]) -> dict[str, float]:
    ok = [c.seconds for c in calls if c.ok]
    out = common.summarize_ms(ok)
    out["errors"] = float(sum(not c.ok for c in calls))
    return out


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


class SystemBench:
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

    # ------------------------------------------------------------- 1. ingest

    def phase_ingest(self) -> None:
        a = self.args
        home = self.work / "ingest" / "home"
        say(f"\n== ingest: {a.ingest_pages} real HTML pages offered at {a.ingest_offer}/s, "
            "real embedder, fresh store")  # fmt: skip
        host = self.host(home, MEASURE_ENV)
        time.sleep(2)
        out: dict[str, Any] = {"host_rss_idle_mb": rss_mb(host.pid),
                               "host_fds_idle": fd_count(host.pid)}  # fmt: skip
        pages = real_pages(a.ingest_pages, seed=1, now_ms=self.now_ms)
        chars, passages = text_chars([p.bench_id for p in pages])
        ledger = home / "ledger.sqlite3"
        seq0 = _ledger_seq(ledger)
        samples: list[tuple[float, int, int, int]] = []
        t0 = time.perf_counter()
        acks = []
        for n, page in enumerate(pages):
            due = t0 + n / a.ingest_offer
            if (delay := due - time.perf_counter()) > 0:
                time.sleep(delay)
            s = time.perf_counter()
            answer = host.send(capture_message(page, f"real{n}"))
            acks.append(time.perf_counter() - s)
            if not answer.get("ok"):
                raise SystemExit(f"capture failed: {answer}")
            if n % 5 == 0:
                st = host.status()
                samples.append((time.perf_counter() - t0, _ledger_seq(ledger),
                                st["index_lag"], st["vector_lag"]))  # fmt: skip
        t_fed = time.perf_counter() - t0
        while True:
            st = host.status()
            samples.append((time.perf_counter() - t0, _ledger_seq(ledger),
                            st["index_lag"], st["vector_lag"]))  # fmt: skip
            if st["index_lag"] == 0 and st["vector_lag"] == 0:
                break
            if time.perf_counter() - t0 > a.ingest_timeout:
                say("  ingest did not drain within the timeout")
                break
            time.sleep(0.5)
        t_done = samples[-1][0]
        seq_end = samples[-1][1]

        def done_fraction(sample: tuple[float, int, int, int]) -> float:
            _, seq, text_lag, vec_lag = sample
            return max(0.0, (seq - text_lag - vec_lag - seq0) / max(1, seq_end - seq0))

        def text_fraction(sample: tuple[float, int, int, int]) -> float:
            _, seq, text_lag, _ = sample
            return max(0.0, (seq - text_lag - seq0) / max(1, seq_end - seq0))

        at_fed = min(samples, key=lambda s: abs(s[0] - t_fed))
        embedded_at_fed = done_fraction(at_fed) * len(pages)
        backlog = len(pages) - embedded_at_fed
        out.update({
            "pages": len(pages), "text_chars": chars, "index_passages": passages,
            "offered_per_s": a.ingest_offer, "feed_seconds": t_fed,
            "ack_ms": common.summarize_ms(acks),
            "sustained_pages_per_s": len(pages) / t_done,
            "sustained_passages_per_s": passages / t_done,
            "embedded_pages_per_s_during_feed": embedded_at_fed / t_fed,
            "text_searchable_pages_per_s_during_feed": text_fraction(at_fed) * len(pages) / t_fed,
            "backlog_pages_at_feed_end": backlog,
            "drain_seconds": t_done - t_fed,
            "drain_pages_per_s": backlog / (t_done - t_fed) if t_done > t_fed else float("nan"),
            "drain_passages_per_s": (backlog / (t_done - t_fed) * passages / len(pages)
                                     if t_done > t_fed else float("nan")),  # fmt: skip
            "all_pages_per_s": len(pages) / t_done,
            "host_rss_after_mb": rss_mb(host.pid),
            "disk_bytes": common.dir_size(home),
            "disk_breakdown": disk_breakdown(home),
        })  # fmt: skip
        out["samples"] = [list(s) for s in samples[:: max(1, len(samples) // 200)]]
        assert host.close() == 0
        # after the host's exit: the WAL is checkpointed, only per-page data is left
        out["disk_bytes_while_running"] = out["disk_bytes"]
        out["disk_bytes"] = common.dir_size(home)
        out["disk_breakdown_closed"] = disk_breakdown(home)
        out["disk_per_1000_pages_mb"] = out["disk_bytes"] / len(pages) * 1000 / 1e6
        self.results["ingest"] = out
        say(f"  sustained {out['sustained_pages_per_s']:.2f} pages/s "
            f"({out['sustained_passages_per_s']:.1f} passages/s) while fed at "
            f"{a.ingest_offer}/s; drain {out['drain_pages_per_s']:.2f} pages/s; disk "
            f"{out['disk_per_1000_pages_mb']:.1f} MB per 1,000 pages")  # fmt: skip

    # --------------------------------------------------------------- 2. build

    def build_to(self, size: int) -> dict[str, Any]:
        """Adds scale pages until the store holds ``size`` of them: captures through a
        text-only host (real frames, pipelined), then the cached-vector indexer."""
        start = self.built
        say(f"\n== build: pages {start:,} .. {size:,} (host frames, cached vectors)")

        def messages() -> Iterator[dict[str, Any]]:
            for n, page in enumerate(scale_pages(self.corpus, start, size, self.now_ms)):
                self.register(page)
                yield capture_message(page, f"s{start + n}")

        host = self.host(self.home, BUILD_ENV)
        burst = host.burst(messages())
        if burst["failed"]:
            raise SystemExit(f"{burst['failed']} captures failed, e.g. {burst['first_error']}")
        text_s = host.wait_indexed(vectors=False)
        pages = host.status()["counts"]["pages"]
        assert host.close() == 0
        overrides = {"background_indexing": False, "vector_batch_passages": 512}
        cfg = Config.load(self.home, overrides=overrides, environ={})
        hits, misses = self.cached.hits, self.cached.misses
        t0 = time.perf_counter()
        indexer = Indexer(cfg, embedder=lambda: self.cached)
        try:
            lag = indexer.catch_up()
        finally:
            indexer.close()
        vec_s = time.perf_counter() - t0
        self.built = size
        out = {
            "captures": burst["frames"], "captures_per_s": burst["per_second"],
            "capture_seconds": burst["seconds"], "text_indexed_after_s": text_s,
            "vector_fill_seconds": vec_s, "cached_hits": self.cached.hits - hits,
            "cached_misses_real_embedder": self.cached.misses - misses,
            "pages_in_store": pages, "lag_after": [lag.text, lag.vectors],
        }  # fmt: skip
        say(f"  {burst['frames']:,} captures at {burst['per_second']:.0f}/s, text indexed "
            f"{text_s:.1f} s later; vectors {vec_s:.1f} s ({out['cached_hits']:,} cached, "
            f"{out['cached_misses_real_embedder']:,} real); {pages:,} pages in store")  # fmt: skip
        return out

    def fill_vectors(self) -> None:
        """Vectors for pages the last host left unembedded (stream pages are cached)."""
        cfg = Config.load(self.home, overrides={"background_indexing": False}, environ={})
        indexer = Indexer(cfg, embedder=lambda: self.cached)
        try:
            indexer.catch_up()
        finally:
            indexer.close()

    # ------------------------------------------------------------ baseline

    def baseline(self, size: int, tier: dict[str, Any]) -> tuple[Any, Any]:
        """FTS5 bm25() + numpy cosine over the tier's pages; same queries; in-process."""
        pages = list(scale_pages(self.corpus, 0, size, self.now_ms))
        path = self.work / f"fts5-{size}.sqlite"
        build = baselines.build_fts5(path, ({"id": p.bench_id, "title": p.title,
                                             "body": p.body} for p in pages))  # fmt: skip
        fts = baselines.Fts5Index(path)
        ids = np.array([p.bench_id for p in pages], dtype=np.int64)
        matrix = np.stack([self.corpus.vector_of(int(i)) for i in ids]).astype(np.float32)
        brute = baselines.BruteForce(matrix, ids)
        n = self.args.queries_1
        qs = self.latency_queries[:n]
        parts: dict[str, list[float]] = {"embed": [], "fts5": [], "numpy": [], "total": []}
        for i, q in enumerate(qs[:10] + qs):
            t0 = time.perf_counter()
            v = self.embedder.embed([q])[0]
            t1 = time.perf_counter()
            f = fts.search(q, 50)
            t2 = time.perf_counter()
            b = brute.search(np.asarray(v, dtype=np.float32), 50)
            t3 = time.perf_counter()
            rrf([i for i, _ in f], [i for i, _ in b])
            t4 = time.perf_counter()
            if i >= 10:
                for key, value in (("embed", t1 - t0), ("fts5", t2 - t1), ("numpy", t3 - t2),
                                   ("total", t4 - t0)):  # fmt: skip
                    parts[key].append(value)
        tier["baseline"] = {
            "what": "core embedder query vector + FTS5 bm25() top-50 + numpy cosine top-50 "
            "+ RRF(k=60), in the bench process, one client, no ingest",
            "fts5_build": build.as_dict(),
            **{k: common.summarize_ms(v) for k, v in parts.items()},
        }
        say(f"  baseline p50 {tier['baseline']['total']['p50_ms']:.1f} ms "
            f"(embed {tier['baseline']['embed']['p50_ms']:.1f}, fts5 "
            f"{tier['baseline']['fts5']['p50_ms']:.1f}, numpy "
            f"{tier['baseline']['numpy']['p50_ms']:.1f})")  # fmt: skip
        return fts, brute

    # -------------------------------------------------------------- tier

    async def measure_tier(self, size: int, tier: dict[str, Any]) -> None:
        a = self.args
        tier["disk_bytes"] = common.dir_size(self.home)  # no process open: WAL checkpointed
        tier["disk_breakdown"] = disk_breakdown(self.home)
        host = self.host(self.home, MEASURE_ENV)
        try:
            await asyncio.sleep(2)
            status = host.status()
            tier["pages_in_store"] = status["counts"]["pages"]
            tier["disk_per_1000_pages_mb"] = tier["disk_bytes"] / tier["pages_in_store"] * 1e3 / 1e6
            tier["host_rss_idle_mb"] = rss_mb(host.pid)
            if not self.skip("startup"):
                tier["startup"] = await self.startup(a.spawns)
            client = await mc.connect(self.home, f"t{size}-main", self.logs, **self.mcp_env)
            clients = [client]
            try:
                await client.search(self.latency_queries[0])
                if not self.skip("capture"):
                    tier["capture_to_searchable"] = await self.capture_latency(
                        host, client, a.capture_samples
                    )
                if not self.skip("load"):
                    clients += await mc.connect_many(
                        self.home, 3, self.logs, prefix=f"t{size}-x", **self.mcp_env
                    )
                    tier["load"] = await self.load(host, clients)
                    tier["mcp_rss_after_load_mb"] = [rss_mb(c.pid) for c in clients if c.pid]
                    tier["host_rss_after_load_mb"] = rss_mb(host.pid)
            finally:
                await mc.close_all(clients)
        finally:
            assert host.close() == 0

    async def startup(self, reps: int) -> dict[str, Any]:
        rows = []
        for r in range(reps):
            client = await mc.connect(self.home, f"spawn{r}", self.logs, **self.mcp_env)
            try:
                await asyncio.sleep(0.5)
                rss_idle = rss_mb(client.pid) if client.pid else float("nan")
                first = await client.search(self.latency_queries[r + 1])
                second = await client.search(self.latency_queries[r + 2])
                rows.append({"spawn_to_initialized_s": client.spawn_to_initialized,
                             "first_search_s": first.seconds, "first_ok": first.ok,
                             "second_search_s": second.seconds, "rss_idle_mb": rss_idle,
                             "rss_after_search_mb": rss_mb(client.pid) if client.pid else None,
                             "fds": fd_count(client.pid) if client.pid else None})  # fmt: skip
            finally:
                await client.close()
        out: dict[str, Any] = {"runs": rows}
        # diagnostic: the same with the model preloaded (BACKTRAIL_MCP_PRELOAD_MODEL=1),
        # first search 5 s after initialize: what is left of the first search without
        # the model load
        env = {**self.mcp_env, "BACKTRAIL_MCP_PRELOAD_MODEL": "1"}
        preload = []
        for r in range(2):
            client = await mc.connect(self.home, f"preload{r}", self.logs, **env)
            try:
                await asyncio.sleep(5)
                first = await client.search(self.latency_queries[r + 20])
                preload.append({"spawn_to_initialized_s": client.spawn_to_initialized,
                                "first_search_s": first.seconds,
                                "rss_mb": rss_mb(client.pid) if client.pid else None})
            finally:
                await client.close()
        out["preloaded_model_runs"] = preload
        # RSS once the server is whole: the RSS above is sampled 0.5 s after initialize,
        # while the SDK is still being imported. tools/list may be answered before the
        # SDK is ready (from an earlier server's list); a ping is answered by the SDK only.
        ready = []
        for r in range(2):
            client = await mc.connect(self.home, f"ready{r}", self.logs, **self.mcp_env)
            try:
                assert client.session is not None
                t0 = time.perf_counter()
                await client.session.list_tools()
                listed = time.perf_counter() - t0
                await client.session.send_ping()
                whole = time.perf_counter() - t0
                await asyncio.sleep(1)
                ready.append({"spawn_to_tools_listed_s": client.spawn_to_initialized + listed,
                              "spawn_to_whole_s": client.spawn_to_initialized + whole,
                              "rss_ready_mb": rss_mb(client.pid) if client.pid else None})
            finally:
                await client.close()
        out["ready_runs"] = ready
        say("  MCP tools listed after "
            + ", ".join(f"{row['spawn_to_tools_listed_s']:.2f} s" for row in ready)
            + ", whole (SDK answers a ping) after "
            + ", ".join(f"{row['spawn_to_whole_s']:.2f} s" for row in ready)
            + "; RSS 1 s later " + ", ".join(f"{row['rss_ready_mb'] or 0:.0f} MB" for row in ready))
        for key in ("spawn_to_initialized_s", "first_search_s", "second_search_s",
                    "rss_idle_mb", "rss_after_search_mb"):  # fmt: skip
            values = [row[key] for row in rows if row[key] is not None]
            out[key] = {"median": _median(values), "max": max(values),
                        "p95": common.percentile(values, 95)}  # fmt: skip
        say(f"  MCP spawn-to-initialized median {out['spawn_to_initialized_s']['median']:.3f} s, "
            f"first search {out['first_search_s']['median']:.3f} s, RSS idle "
            f"{out['rss_idle_mb']['median']:.0f} MB, after a search "
            f"{out['rss_after_search_mb']['median']:.0f} MB")  # fmt: skip
        return out

    async def capture_latency(self, host: Host, client: mc.Client, count: int) -> dict[str, Any]:
        """Frame sent until search_browsing returns the page, one typical page at a time on
        an otherwise idle system (each sample waits for the previous page's vectors)."""
        samples, acks, timeouts = [], [], 0
        chosen = typical_pages(count, self.now_ms)
        for n, (page, marker) in enumerate(chosen):
            page = Page(page.bench_id, page.url.replace("typical=", f"typical{self.built}="),
                        page.title, page.body, page.html, page.time_ms)  # fmt: skip
            host.wait_indexed(vectors=True, limit=300)
            await asyncio.sleep(0.5)
            t0 = time.perf_counter()
            answer = host.send(capture_message(page, f"typ{n}"))
            acks.append(time.perf_counter() - t0)
            if not answer.get("ok"):
                raise SystemExit(f"capture failed: {answer}")
            key = urlsplit(page.url).query
            while True:
                call = await client.search(marker)
                if any(key in u for u in mc.result_urls(call)):
                    samples.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 60:
                    timeouts += 1
                    break
                await asyncio.sleep(0.02)
        host.wait_indexed(vectors=True, limit=300)
        out = {"samples_s": samples, "timeouts": timeouts, "ack_ms": common.summarize_ms(acks),
               "p50_s": common.percentile(samples, 50), "p95_s": common.percentile(samples, 95),
               "page_chars_median": _median([float(len(p.body)) for p, _ in chosen])}  # fmt: skip
        say(f"  capture-to-searchable p50 {out['p50_s']:.2f} s, p95 {out['p95_s']:.2f} s "
            f"({len(samples)} pages, {timeouts} timeouts)")  # fmt: skip
        return out

    async def load(self, host: Host, clients: list[mc.Client]) -> dict[str, Any]:
        """search_browsing (plain and vague) with 1 and 4 closed-loop clients, then 4
        clients at a fixed rate (open loop), ingest running."""
        a = self.args
        ingest = Ingest(host, self.stream, a.ingest_rate, on_page=self.register)
        ingest.start()
        out: dict[str, Any] = {"ingest_rate": a.ingest_rate}
        try:
            await asyncio.sleep(2)
            for c in clients:  # warm-up: model loaded, caches warm
                for q in self.latency_queries[-5:]:
                    await c.search(q)
                    await c.forgotten(q)
            for n_clients, per in ((1, a.queries_1), (4, a.queries_4)):
                group = clients[:n_clients]
                for tool, qs in ((mc.SEARCH, self.latency_queries),
                                 (mc.VAGUE, self.forgotten_queries)):  # fmt: skip
                    pids = [c.pid for c in group if c.pid]
                    cpu0 = [cpu_seconds(p) for p in pids], cpu_seconds(), cpu_seconds(host.pid)
                    t0 = time.perf_counter()
                    calls = await mc.closed_loop(group, tool, qs, per)
                    wall = time.perf_counter() - t0
                    row = _ms(calls)
                    row["calls_per_s"] = len(calls) / wall
                    server_cpu = sum(cpu_seconds(p) for p in pids) - sum(cpu0[0])
                    row["server_cpu_ms_per_call"] = server_cpu / len(calls) * 1e3
                    row["client_cpu_ms_per_call"] = (cpu_seconds() - cpu0[1]) / len(calls) * 1e3
                    row["host_cpu_share"] = (cpu_seconds(host.pid) - cpu0[2]) / wall
                    if n_clients > 1:  # client 0 started before the ingest, the rest during it
                        row["by_client"] = [_ms([c for c in calls if c.client == g.name])
                                            for g in group]  # fmt: skip
                    out[f"{tool}/{n_clients}"] = row
                    say(f"  {tool:22} {n_clients} client(s): p50 {row['p50_ms']:.1f} ms, "
                        f"p95 {row['p95_ms']:.1f} ms, {row['calls_per_s']:.1f} calls/s, "
                        f"{int(row['errors'])} errors; CPU per call: server "
                        f"{row['server_cpu_ms_per_call']:.1f} ms, client "
                        f"{row['client_cpu_ms_per_call']:.1f} ms; host busy "
                        f"{row['host_cpu_share']:.2f} core")  # fmt: skip
            out[f"{mc.SEARCH}/4 open loop"] = await self.open_loop(host, clients)
        finally:
            ingest.stop()
        status = host.status()
        out["ingest"] = {"sent": ingest.sent, "errors": len(ingest.errors),
                         "achieved_per_s": ingest.sent / max(ingest.seconds, 1e-9),
                         "ack_ms": common.summarize_ms(ingest.ack_seconds),
                         "index_lag_at_end": status["index_lag"],
                         "vector_lag_at_end": status["vector_lag"]}  # fmt: skip
        return out

    async def open_loop(self, host: Host, clients: list[mc.Client]) -> dict[str, Any]:
        """4 clients, each calling search_browsing at ``--open-loop-rate`` calls/s on a
        fixed schedule, while the host ingests: the latency a user of each sees."""
        a = self.args
        pids = [c.pid for c in clients if c.pid]
        cpu0 = [cpu_seconds(p) for p in pids], cpu_seconds(host.pid)
        t0 = time.perf_counter()
        calls = await mc.open_loop(clients, self.latency_queries, a.open_loop_rate,
                                   a.open_loop_seconds)  # fmt: skip
        wall = time.perf_counter() - t0
        row = _ms(calls)
        row["calls_per_s"] = len(calls) / wall
        row["server_cpu_ms_per_call"] = (
            (sum(cpu_seconds(p) for p in pids) - sum(cpu0[0])) / len(calls) * 1e3
        )
        row["host_cpu_share"] = (cpu_seconds(host.pid) - cpu0[1]) / wall
        row["rate_per_client"] = a.open_loop_rate
        say(f"  {mc.SEARCH} 4 clients at {a.open_loop_rate:g}/s each: p50 {row['p50_ms']:.1f} "
            f"ms, p95 {row['p95_ms']:.1f} ms, {int(row['errors'])} errors; server CPU per call "
            f"{row['server_cpu_ms_per_call']:.1f} ms; host busy {row['host_cpu_share']:.2f}")
        return row

    # ------------------------------------------------------------- 3. quality

    async def quality(self, size: int, fts: Any, brute: Any) -> None:
        in_store = {p["id"] for p in self.corpus.passages[: min(size, len(self.corpus.passages))]}
        qs = [q for q in self.queries if q["passage_id"] in in_store]
        say(f"\n== quality: {len(qs)} known-item queries on {size:,} pages")
        runs: dict[str, dict[str, list[int]]] = {}
        service_ms: dict[str, dict[str, float]] = {}
        nodecay = {"search_decay_half_life_days": 0.0, "search_visit_weight": 0.0}
        for label, overrides, mode in (("bm25", nodecay, "bm25"), ("vector", nodecay, "vector"),
                                       ("hybrid", nodecay, "hybrid"),
                                       ("hybrid + decay", {}, None)):  # fmt: skip
            cfg = Config.load(self.home, overrides={"background_indexing": False, **overrides},
                              environ={})  # fmt: skip
            with Memory(cfg, client="bench-quality") as memory:
                memory.search(qs[0]["query"], limit=10, mode=mode)  # model load
                run, times = {}, []
                for q in qs:
                    t0 = time.perf_counter()
                    page = memory.search(q["query"], limit=10, mode=mode)
                    times.append(time.perf_counter() - t0)
                    run[q["qid"]] = self._ids(r.url for r in page.results)
                runs[f"{label} (service)"] = run
                service_ms[label] = common.summarize_ms(times)
        client = await mc.connect(self.home, "quality", self.logs, **self.mcp_env)
        try:
            mcp_run = {}
            await client.search(qs[0]["query"], limit=10)
            for q in qs:
                call = await client.search(q["query"], limit=10)
                mcp_run[q["qid"]] = self._ids(mc.result_urls(call))
            service_ms["hybrid + decay via MCP search_browsing"] = _ms(client.calls[1:])
            runs["hybrid + decay (MCP search_browsing)"] = mcp_run
        finally:
            await client.close()
        base: dict[str, dict[str, list[int]]] = {"FTS5 bm25()": {}, "numpy cosine": {},
                                                 "FTS5 + numpy RRF": {}}  # fmt: skip
        for q in qs:
            v = np.asarray(self.embedder.embed([q["query"]])[0], dtype=np.float32)
            f = [i for i, _ in fts.search(q["query"], 50)]
            b = [i for i, _ in brute.search(v, 50)]
            base["FTS5 bm25()"][q["qid"]] = f[:10]
            base["numpy cosine"][q["qid"]] = b[:10]
            base["FTS5 + numpy RRF"][q["qid"]] = rrf(f, b)[:10]
        runs.update({f"{k} (baseline)": v for k, v in base.items()})
        table = {}
        for label, run in runs.items():
            scores = metrics.score_run(run, qs, k=10)
            table[label] = scores
            s = scores["all"]
            say(f"  {label:36} MRR@10 {s['passage_mrr@10']:.3f} recall@10 "
                f"{s['passage_recall@10']:.3f} (corpus page level: {s['page_mrr@10']:.3f})")
        for label, row in service_ms.items():
            say(f"  latency {label:38} p50 {row['p50_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms"
                " (one caller, idle, no ingest)")
        self.results["quality"] = {"pages": size, "queries": len(qs), "scores": table,
                                   "latency_ms_idle_one_caller": service_ms,
                                   "restricted": len(qs) < len(self.queries)}  # fmt: skip

    def _ids(self, urls: Any) -> list[int]:
        out = []
        for u in urls:
            found = self.bench_id_of(u)
            out.append(found if found is not None else -1)
        return out

    async def temporal(self, groups: int) -> None:
        """Near-duplicate groups: 4 perturbed copies of one passage each, one of them
        visited often and recently; search_browsing(vague=true) must rank that one first."""
        say(f"\n== temporal: {groups} groups of 4 near-duplicates")
        in_store = {p["id"] for p in self.corpus.passages[: min(self.built, QUALITY_SIZE)]}
        pool = [q for q in self.queries
                if q["family"] == "deep" and q["passage_id"] in in_store]
        chosen = random.Random(11).sample(pool, min(groups, len(pool)))
        patterns = [[1, 3, 5, 8, 12, 20], [200], [120, 150], [60]]  # visit ages in days
        host = self.host(self.home, MEASURE_ENV)
        plan = []
        try:
            for g, q in enumerate(chosen):
                p = self.corpus.passages[self.corpus.index_of[q["passage_id"]]]
                favourite = g % 4
                others = [j for j in range(4) if j != favourite]
                urls = []
                for j in range(4):
                    ages = patterns[0] if j == favourite else patterns[1 + others.index(j)]
                    page = self.corpus.passage_page(p, TEMPORAL_ROUND + j,
                                                    self.now_ms - max(ages) * DAY_MS)
                    self.url_ids[page.url] = page.bench_id  # real vectors: not cached
                    answer = host.send(capture_message(page, f"tc{g}-{j}"))
                    assert answer.get("ok"), answer
                    for age in sorted(ages, reverse=True)[1:]:
                        answer = host.send(visit_message(page, f"tv{g}-{j}",
                                                         self.now_ms - age * DAY_MS))
                        assert answer.get("ok"), answer
                    urls.append(page.url)
                plan.append((q, urls, urls[favourite]))
            waited = host.wait_indexed(vectors=True, limit=900)
        finally:
            assert host.close() == 0
        client = await mc.connect(self.home, "temporal", self.logs, **self.mcp_env)
        firsts = among = 0
        rows = []
        try:
            for q, urls, fav in plan:
                call = await client.forgotten(q["query"], limit=10)
                got = mc.result_urls(call)
                ids = self._ids(got)
                # near-duplicates: every page made from the target passage (the original
                # page, its tier replicas and the four copies of this group)
                dups = [u for u, i in zip(got, ids, strict=True)
                        if i >= 0 and corpus.source_id(i) == q["passage_id"]]  # fmt: skip
                first = bool(got) and got[0] == fav
                top_dup = bool(dups) and dups[0] == fav
                firsts += first
                among += top_dup
                rows.append({"query": q["query"], "duplicates_in_top10": len(dups),
                             "variant_ranks": [got.index(u) + 1 if u in got else None
                                               for u in urls], "favourite": urls.index(fav),
                             "first_overall": first,
                             "first_among_duplicates": top_dup})  # fmt: skip
        finally:
            await client.close()
        n = max(1, len(plan))
        found = sum(1 for row in rows if row["duplicates_in_top10"]) or 1
        self.results["temporal"] = {"groups": len(plan), "first_rate": among / found,
                                    "first_rate_all_groups": among / n,
                                    "groups_without_any_copy_in_top10": len(plan) - found,
                                    "first_overall_rate": firsts / n,
                                    "vectors_waited_s": waited, "rows": rows}  # fmt: skip
        say(f"  favourite first among its near-duplicates in {among}/{found} groups with a "
            f"copy in the top 10 ({len(plan)} groups), first overall in {firsts}/{len(plan)}")

    # ---------------------------------------------------------------- 4. soak

    async def soak(self, seconds: float) -> None:
        a = self.args
        say(f"\n== soak: {seconds:.0f} s, 4 MCP clients at {a.soak_qps} calls/s each, host "
            f"ingesting {a.ingest_rate} pages/s, {self.built:,}+ pages")  # fmt: skip
        host = self.host(self.home, MEASURE_ENV)
        clients: list[mc.Client] = []
        samples: list[dict[str, Any]] = []
        stop = asyncio.Event()
        errors: list[str] = []
        calls = 0
        try:
            clients = await mc.connect_many(self.home, 4, self.logs, prefix="soak", **self.mcp_env)
            for c in clients:  # the model is loaded by every server before the clock starts
                for q in self.latency_queries[:3]:
                    await c.search(q)
                    await c.forgotten(q)
                c.calls.clear()
            ingest = Ingest(host, self.stream, a.ingest_rate, on_page=self.register)
            ingest.start()
            t0 = time.perf_counter()

            async def querying(i: int, c: mc.Client) -> None:
                nonlocal calls
                n = 0
                while not stop.is_set():
                    q = self.latency_queries[(i * 997 + n) % len(self.latency_queries)]
                    started = time.perf_counter()
                    call = await (c.search(q) if n % 2 == 0 else c.forgotten(q))
                    calls += 1
                    if not call.ok:
                        errors.append(f"{call.tool}: {call.error}")
                    n += 1
                    spent = time.perf_counter() - started
                    await asyncio.sleep(max(0.0, 1.0 / a.soak_qps - spent))

            async def sampling() -> None:
                while not stop.is_set():
                    status = await asyncio.to_thread(host.status)
                    samples.append({
                        "t": time.perf_counter() - t0, "host_rss_mb": rss_mb(host.pid),
                        "host_fds": fd_count(host.pid),
                        "mcp_rss_mb": [rss_mb(c.pid) for c in clients if c.pid],
                        "mcp_fds": [fd_count(c.pid) for c in clients if c.pid],
                        "index_lag": status["index_lag"], "vector_lag": status["vector_lag"],
                        "pages": status["counts"]["pages"], "errors": len(errors),
                        "ingest_errors": len(ingest.errors), "calls": calls,
                    })  # fmt: skip
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=a.soak_sample)
                    except TimeoutError:
                        pass

            tasks = [asyncio.create_task(querying(i, c)) for i, c in enumerate(clients)]
            tasks.append(asyncio.create_task(sampling()))
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.gather(*tasks)
            ingest.stop()
            soak_calls = [call for c in clients for call in c.calls]
        finally:
            await mc.close_all(clients)
            assert host.close() == 0
        warm = min(120.0, max(30.0, seconds / 5), seconds / 2)
        after = [s for s in samples if s["t"] >= warm]
        first, last_part = after[: max(1, len(after) // 10)], after[-max(1, len(after) // 10):]

        def avg(rows: list[dict[str, Any]], key: str, i: int | None = None) -> float:
            vals = [r[key][i] if i is not None else r[key] for r in rows]
            return statistics.fmean(vals)

        out: dict[str, Any] = {
            "seconds": seconds, "warmup_s": warm, "clients": 4, "calls": calls,
            "calls_per_s": calls / seconds, "errors": len(errors) + len(ingest.errors),
            "error_examples": (errors + ingest.errors)[:5],
            "ingest_sent": ingest.sent, "ingest_per_s": ingest.sent / max(ingest.seconds, 1e-9),
            "latency": {
                mc.SEARCH: _ms([c for c in soak_calls if c.tool == mc.SEARCH]),
                mc.VAGUE: _ms([c for c in soak_calls if c.tool == mc.VAGUE]),
            },
            "samples": samples,
        }  # fmt: skip
        growth = {"host": avg(last_part, "host_rss_mb") / avg(first, "host_rss_mb") - 1}
        for i in range(len(clients)):
            growth[f"mcp{i}"] = avg(last_part, "mcp_rss_mb", i) / avg(first, "mcp_rss_mb", i) - 1
        out["rss_growth_after_warmup"] = growth
        out["rss_mb_end"] = {"host": last_part[-1]["host_rss_mb"],
                             "mcp": last_part[-1]["mcp_rss_mb"]}  # fmt: skip
        half = [s for s in after if s["t"] >= warm + (seconds - warm) / 2]
        early = [s for s in after if s["t"] < warm + (seconds - warm) / 2]

        def fds(rows: list[dict[str, Any]], i: int | None) -> float:
            return statistics.median(r["host_fds"] if i is None else r["mcp_fds"][i]
                                     for r in rows)  # fmt: skip

        def peak(rows: list[dict[str, Any]], i: int | None) -> int:
            return max(r["host_fds"] if i is None else r["mcp_fds"][i] for r in rows)

        def floor(rows: list[dict[str, Any]], i: int | None) -> int:
            return min(r["host_fds"] if i is None else r["mcp_fds"][i] for r in rows)

        # fds go up and down while commits and merges open segment files for a moment, so
        # a sample's count depends on when it lands. A leaked descriptor is never closed:
        # it raises the floor (the fewest open at any sample) of the second half after
        # warm-up above the first half's. The peaks are kept for the record.
        halves = (early or after, half or after)
        out["fd_growth_after_warmup"] = {
            "host": floor(halves[1], None) - floor(halves[0], None),
            "mcp": [floor(halves[1], i) - floor(halves[0], i) for i in range(len(clients))],
        }
        out["fd_peak_change_after_warmup"] = {
            "host": peak(halves[1], None) - peak(halves[0], None),
            "mcp": [peak(halves[1], i) - peak(halves[0], i) for i in range(len(clients))],
        }
        out["fd_median_change"] = {
            "host": fds(last_part, None) - fds(first, None),
            "mcp": [fds(last_part, i) - fds(first, i) for i in range(len(clients))],
        }
        out["fd_range_after_warmup"] = {
            "host": [min(r["host_fds"] for r in after), max(r["host_fds"] for r in after)],
            "mcp": [[min(r["mcp_fds"][i] for r in after), max(r["mcp_fds"][i] for r in after)]
                    for i in range(len(clients))],
        }  # fmt: skip
        slow = sorted(soak_calls, key=lambda c: -c.seconds)[:10]
        out["slowest_calls"] = [{"tool": c.tool, "seconds": c.seconds, "at": c.at - t0}
                                for c in slow]  # fmt: skip
        out["index_lag"] = {
            "max_after_warmup": max(s["index_lag"] for s in after),
            "max_first_half": max((s["index_lag"] for s in early), default=0),
            "max_second_half": max((s["index_lag"] for s in half), default=0),
            "end": after[-1]["index_lag"],
        }
        out["vector_lag"] = {"start": after[0]["vector_lag"], "end": after[-1]["vector_lag"],
                             "max": max(s["vector_lag"] for s in after)}  # fmt: skip
        lag = out["index_lag"]
        out["index_lag_bounded"] = lag["max_second_half"] <= max(1.5 * lag["max_first_half"], 50)
        self.results["soak"] = out
        say(f"  {calls} calls, {out['errors']} errors, RSS growth "
            f"{max(growth.values()) * 100:.1f}% (worst process), fd growth "
            f"{out['fd_growth_after_warmup']}, text lag max {lag['max_after_warmup']} "
            f"(end {lag['end']}), vector lag {out['vector_lag']}")  # fmt: skip

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


# ----------------------------------------------------------------------- helpers


def rrf(*rankings: Sequence[int], k: int = 60) -> list[int]:
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


def _unseen(pages: Iterator[Page], ledger: Path) -> Iterator[Page]:
    """``pages`` without those an earlier run already captured (a reused store), so what
    is ingested while queries run is new to the host."""
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        known = {row[0] for row in conn.execute("SELECT url FROM pages")}
    finally:
        conn.close()
    return (page for page in pages if page.url not in known)


def _ledger_seq(path: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            row = con.execute("SELECT MAX(seq) FROM changes").fetchone()
        finally:
            con.close()
        return int(row[0] or 0)
    except sqlite3.Error:
        return 0


def _get(d: Any, *keys: Any) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue: measured value, target, PASS / MISS (or n/a)."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: Any, target: str, ok: bool | None, where: str = "") -> None:
        verdict = "n/a" if value is None or ok is None else ("PASS" if ok else "MISS")
        rows.append({"target": name, "measured": value if value is not None else "not run",
                     "goal": target, "result": verdict, "where": where})  # fmt: skip

    tiers = r.get("tiers", {})
    measured = [s for s in sorted(tiers, key=int) if "startup" in tiers[s] or "load" in tiers[s]]
    largest = measured[-1] if measured else None
    c2s_by_tier = {s: _get(tiers, s, "capture_to_searchable", "p95_s") for s in measured}
    c2s_by_tier = {s: v for s, v in c2s_by_tier.items() if v is not None}
    worst = max(c2s_by_tier, key=c2s_by_tier.__getitem__) if c2s_by_tier else None
    c2s = c2s_by_tier[worst] if worst else None
    add("capture-to-searchable p95 (typical page, idle; worst tier)", c2s, "<= 2 s",
        None if c2s is None else c2s <= 2.0, f"{int(worst):,} pages" if worst else "")
    if largest is not None:
        p95 = _get(tiers, largest, "load", f"{mc.SEARCH}/4 open loop", "p95_ms")
        big = int(largest) >= 100_000
        add(f"search_browsing p95, 4 clients at 2/s + ingest, {int(largest):,} pages", p95,
            "<= 25 ms at 100k", None if p95 is None or not big else p95 <= 25.0,
            "" if big else "tier below 100k: no verdict")
        spawn = _get(tiers, largest, "startup", "spawn_to_initialized_s", "median")
        add("MCP spawn-to-initialized (median)", spawn, "<= 0.25 s",
            None if spawn is None else spawn <= 0.25, f"{int(largest):,} pages")
        first = _get(tiers, largest, "startup", "first_search_s", "median")
        add("MCP first search incl. model load (median)", first, "<= 0.6 s",
            None if first is None else first <= 0.6, f"{int(largest):,} pages")
        # idle = the server whole (tools listed), no search yet; earlier runs sampled it
        # while the SDK was still loading
        idle = [row.get("rss_ready_mb") for s in measured
                for row in _get(tiers, s, "startup", "ready_runs") or []]  # fmt: skip
        idle = [v for v in idle if v is not None]
        add("MCP server RSS idle, ready (max over tiers)", max(idle) if idle else None,
            "<= 150 MB", None if not idle else max(idle) <= 150.0, "")
    q = _get(r, "quality", "scores")
    if q:
        h = q["hybrid (service)"]["all"]["passage_mrr@10"]
        b = q["bm25 (service)"]["all"]["passage_mrr@10"]
        v = q["vector (service)"]["all"]["passage_mrr@10"]
        add("hybrid MRR@10 > BM25-only and > vector-only", f"{h:.3f} vs {b:.3f} / {v:.3f}",
            "above both", h > b and h > v, f"{r['quality']['pages']:,} pages")
    t = r.get("temporal")
    if t:
        add("temporal: recent+frequent copy ranked first", t["first_rate"], "all groups",
            t["first_rate"] >= 1.0, f"{t['groups']} groups")
    s = r.get("soak")
    if s:
        add("soak errors", s["errors"], "0", s["errors"] == 0, f"{s['seconds']:.0f} s")
        g = max(s["rss_growth_after_warmup"].values())
        add("soak RSS growth after warm-up (worst process)", g, "< 10%", g < 0.10)
        fds = [s["fd_growth_after_warmup"]["host"], *s["fd_growth_after_warmup"]["mcp"]]
        add("soak fd growth (2nd-half floor - 1st-half floor, worst)", max(fds), "none (<= 0)",
            max(fds) <= 0)
        add("soak index (text) lag bounded", s["index_lag"]["max_after_warmup"],
            "not growing", s["index_lag_bounded"])
    return rows


def report(r: dict[str, Any]) -> str:
    out = ["## Targets", common.markdown_table(r.get("targets", []))]
    ing = r.get("ingest")
    if ing:
        title = "## Ingest (real HTML pages, real embedder, fresh store)"
        out += ["", title, common.markdown_table([
            {"pages": ing["pages"], "passages": ing["index_passages"],
             "offered/s": ing["offered_per_s"], "ack p95 ms": ing["ack_ms"]["p95_ms"],
             "sustained pages/s": ing["sustained_pages_per_s"],
             "sustained passages/s": ing["sustained_passages_per_s"],
             "drain pages/s": ing["drain_pages_per_s"],
             "drain passages/s": ing["drain_passages_per_s"],
             "MB / 1,000 pages": ing["disk_per_1000_pages_mb"],
             "host RSS idle MB": ing["host_rss_idle_mb"],
             "host RSS after MB": ing["host_rss_after_mb"]}])]  # fmt: skip
    rows, lat, start = [], [], []
    for size, t in sorted(r.get("tiers", {}).items(), key=lambda kv: int(kv[0])):
        b = t.get("build", {})
        rows.append({"pages": t.get("pages_in_store", b.get("pages_in_store")),
                     "captures/s (build)": b.get("captures_per_s"),
                     "MB / 1,000 pages": t.get("disk_per_1000_pages_mb", ""),
                     "capture→searchable p50 s": _get(t, "capture_to_searchable", "p50_s") or "",
                     "p95 s": _get(t, "capture_to_searchable", "p95_s") or "",
                     "host RSS idle MB": t.get("host_rss_idle_mb", ""),
                     "host RSS loaded MB": t.get("host_rss_after_load_mb", ""),
                     "MCP RSS loaded MB": max(t.get("mcp_rss_after_load_mb") or [0]) or ""})
        base = _get(t, "baseline", "total")
        for key, row in (t.get("load") or {}).items():
            if "/" not in key:
                continue
            tool, n = key.split("/")
            clients, _, how = n.partition(" ")
            lat.append({"pages": int(size), "tool": f"{tool} ({how})" if how else tool,
                        "clients": int(clients),
                        "p50 ms": row["p50_ms"], "p95 ms": row["p95_ms"],
                        "calls/s": row["calls_per_s"], "errors": int(row["errors"]),
                        "baseline p50 ms": base["p50_ms"] if base else "",
                        "baseline p95 ms": base["p95_ms"] if base else "",
                        "p50 ratio": row["p50_ms"] / base["p50_ms"] if base else "",
                        "p95 ratio": row["p95_ms"] / base["p95_ms"] if base else ""})
        st = t.get("startup")
        if st:
            start.append({"pages": int(size),
                          "spawn→initialized s": st["spawn_to_initialized_s"]["median"],
                          "first search s": st["first_search_s"]["median"],
                          "second search s": st["second_search_s"]["median"],
                          "RSS idle MB": st["rss_idle_mb"]["median"],
                          "RSS after search MB": st["rss_after_search_mb"]["median"]})
    if rows:
        out += ["", "## Tiers", common.markdown_table(rows)]
    if lat:
        out += ["", "## Query latency through MCP while the host ingests (baseline: in-process, "
                "idle, 1 client)", common.markdown_table(lat)]
    if start:
        out += ["", "## MCP server start (medians)", common.markdown_table(start)]
    q = r.get("quality")
    if q:
        qrows = []
        for label, scores in q["scores"].items():
            row: dict[str, Any] = {"engine": label}
            for fam in ("title", "deep", "lexical", "paraphrase", "all"):
                if fam in scores:
                    row[f"{fam} MRR@10"] = scores[fam]["passage_mrr@10"]
            row["all recall@10"] = scores["all"]["passage_recall@10"]
            row["all MRR@10 (corpus page)"] = scores["all"]["page_mrr@10"]
            qrows.append(row)
        out += ["", f"## Known-item quality ({q['queries']} queries, {q['pages']:,} pages"
                f"{', restricted to targets in the store' if q['restricted'] else ''})",
                common.markdown_table(qrows)]
    t = r.get("temporal")
    if t:
        out += ["", f"Temporal check (search_browsing vague): the often and recently visited "
                f"copy ranked first among the near-duplicates in {t['first_rate']:.0%} of the "
                f"groups with a copy in the top 10 ({t['groups']} groups, "
                f"{t['groups_without_any_copy_in_top10']} without; first of all results: "
                f"{t['first_overall_rate']:.0%})."]
    cpu = r.get("cpu_by_phase")
    if cpu:
        out += ["", "## CPU of other processes on the machine during each phase (cores of 2)",
                common.markdown_table([{"phase": k, **v} for k, v in cpu.items()])]
    s = r.get("soak")
    if s:
        out += ["", "## Soak", common.markdown_table([{
            "seconds": s["seconds"], "calls": s["calls"], "calls/s": s["calls_per_s"],
            "errors": s["errors"], "ingested": s["ingest_sent"],
            "search p50 ms": s["latency"][mc.SEARCH]["p50_ms"],
            "search p95 ms": s["latency"][mc.SEARCH]["p95_ms"],
            "vague p95 ms": s["latency"][mc.VAGUE]["p95_ms"],
            "RSS growth worst": max(s["rss_growth_after_warmup"].values()),
            "text lag max": s["index_lag"]["max_after_warmup"],
            "vector lag start→end": f"{s['vector_lag']['start']}→{s['vector_lag']['end']}",
        }])]  # fmt: skip
    return "\n".join(out)


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
