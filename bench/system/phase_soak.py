"""Phase 4 of the system benchmark: the soak (4 MCP clients querying while the host ingests)."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from bench.common import say
from bench.system import mcpclients as mc
from bench.system.hosts import MEASURE_ENV, Ingest, fd_count, rss_mb
from bench.system.state import BenchState, calls_ms


class SoakPhase(BenchState):
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
                mc.SEARCH: calls_ms([c for c in soak_calls if c.tool == mc.SEARCH]),
                mc.VAGUE: calls_ms([c for c in soak_calls if c.tool == mc.VAGUE]),
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

