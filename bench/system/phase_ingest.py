"""Phase 1 of the system benchmark: sustained ingest of real HTML pages into a fresh store."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.common import say
from bench.system.hosts import MEASURE_ENV, capture_message, fd_count, rss_mb
from bench.system.pages import real_pages, text_chars
from bench.system.state import BenchState, disk_breakdown


class IngestPhase(BenchState):
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


