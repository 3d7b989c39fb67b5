"""Phase 2 of the system benchmark: building the store tiers and measuring each one
(baseline, MCP spawn and first search, capture-to-searchable, load while ingesting)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from backtrail.config import Config
from backtrail.indexer import Indexer
from bench import baselines, common
from bench.common import say
from bench.system import mcpclients as mc
from bench.system.hosts import (
    BUILD_ENV,
    MEASURE_ENV,
    Host,
    Ingest,
    capture_message,
    cpu_seconds,
    fd_count,
    rss_mb,
)  # fmt: skip
from bench.system.pages import Page, scale_pages, typical_pages
from bench.system.state import BenchState, calls_ms, disk_breakdown, rrf


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")



class TierPhases(BenchState):
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
        # RSS once the server has listed its tools and answered a ping (the RSS above is
        # sampled 0.5 s after initialize, before any tool has run).
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
                    row = calls_ms(calls)
                    row["calls_per_s"] = len(calls) / wall
                    server_cpu = sum(cpu_seconds(p) for p in pids) - sum(cpu0[0])
                    row["server_cpu_ms_per_call"] = server_cpu / len(calls) * 1e3
                    row["client_cpu_ms_per_call"] = (cpu_seconds() - cpu0[1]) / len(calls) * 1e3
                    row["host_cpu_share"] = (cpu_seconds(host.pid) - cpu0[2]) / wall
                    if n_clients > 1:  # client 0 started before the ingest, the rest during it
                        row["by_client"] = [calls_ms([c for c in calls if c.client == g.name])
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
        row = calls_ms(calls)
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

