"""Small helpers shared by the benchmark modules: timing, memory, JSONL, tables.

Every benchmark reports the same way (p50/p95 after warm-up, peak RSS, a Markdown table and
a JSON file), so that numbers from different engines and different runs can be compared
with the anchor figures in ``shared/notes/anchor-figures.md``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Where generated corpora, indexes, vector caches and query sets live: $BACKTRAIL_BENCH_DATA,
#: else bench/data/ (git-ignored). The real corpus's caches take ~1 GB: keep them out of the tree.
DATA_DIR = Path(os.environ.get("BACKTRAIL_BENCH_DATA") or Path(__file__).resolve().parent / "data")
#: Where benchmark runs write their JSON results (git-ignored).
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def say(*parts: object) -> None:
    """Print a progress or report line to stdout (the bench is a command-line tool)."""
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]; no numpy needed."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize_ms(latencies_s: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean/max in milliseconds: the figures every latency table reports."""
    ms = [x * 1000.0 for x in latencies_s]
    return {
        "n": float(len(ms)),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "mean_ms": statistics.fmean(ms) if ms else float("nan"),
        "max_ms": max(ms) if ms else float("nan"),
    }


def time_calls(
    fn: Callable[[T], object], inputs: Sequence[T], *, warmup: int = 20, repeats: int = 1
) -> list[float]:
    """Per-call wall times (seconds) of fn over inputs, after warm-up calls.

    Warm-up runs the first `warmup` inputs (cycling if fewer) and discards their times, so
    that page cache, lazy loading and allocator growth are not charged to the measured calls.
    """
    for i in range(warmup if inputs else 0):
        fn(inputs[i % len(inputs)])
    times: list[float] = []
    for _ in range(repeats):
        for x in inputs:
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
    return times


class Stopwatch:
    """Context manager measuring wall time in seconds (``with Stopwatch() as sw: ...``)."""

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def _status_kb(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` style field of /proc/self/status, in KiB (0 when unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_mb() -> float:
    """Current resident set size of this process in MiB."""
    return _status_kb("VmRSS") / 1024.0


def peak_rss_mb() -> float:
    """Peak resident set size (high-water mark) of this process in MiB."""
    return _status_kb("VmHWM") / 1024.0


def dir_size(path: str | os.PathLike[str]) -> int:
    """Bytes used by a file or every file under a directory (index size on disk)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Stream records from a JSON-lines file (never loads the whole file)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> int:
    """Write records atomically (temp file + rename) so a crash never leaves a half cache."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(p)
    return n


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write one JSON document (results file), creating the parent directory."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown_table(rows: Sequence[dict[str, object]], columns: Sequence[str] | None = None) -> str:
    """Render rows as a Markdown table, the format of the anchor figures."""
    if not rows:
        return ""
    cols = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB' (decimal units, as the anchor figures use)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000.0
    return f"{n:.1f} TB"


class Progress:
    """Rate and ETA lines on stderr, at most one per ``every`` seconds."""

    def __init__(self, what: str, total: int, done: int = 0, every: float = 10.0):
        self.what, self.total, self.start_done, self.done = what, total, done, done
        self.t0 = self.last = time.monotonic()
        self.every = every

    def add(self, n: int = 1, *, force: bool = False) -> None:
        self.done += n
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
        left = self.total - self.done
        eta = left / rate if rate > 0 else float("inf")
        sys.stderr.write(
            f"{time.strftime('%H:%M:%S')} {self.what}: {self.done:,}/{self.total:,} "
            f"({self.done / max(self.total, 1):.1%}), {rate:.1f}/s, ETA {_duration(eta)}\n"
        )
        sys.stderr.flush()


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    h, rest = divmod(int(seconds), 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"
