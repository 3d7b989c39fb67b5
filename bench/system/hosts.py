"""Driving the real native host (``python -m backtrail.native_host``) with real frames, and
reading the size of processes from /proc.

Frames and the subprocess come from ``tests/host_client.py`` (the stand-in for the browser
that the host tests and ``bench/host_bench.py`` use). :class:`Host` adds a lock so that an
ingest thread and status polls can share one host (one request in flight at a time, the
extension's queue discipline), pipelined bursts, and paced ingest.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bench.system.pages import Page

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from host_client import HostProcess, capture_fields, frame, visit  # noqa: E402

#: Settings of a host as a user runs it (defaults), and of the bulk-build host (text only:
#: the bench's cached-vector indexer fills in the vectors).
MEASURE_ENV = {"BACKTRAIL_EMBEDDINGS": "1", "BACKTRAIL_INDEXER_DEBOUNCE": "0.5"}
BUILD_ENV = {"BACKTRAIL_EMBEDDINGS": "0", "BACKTRAIL_BACKGROUND_VECTORS": "0",
             "BACKTRAIL_INDEXER_DEBOUNCE": "0.5"}  # fmt: skip

_visit_ids = itertools.count(1)


def capture_message(page: Page, ident: str) -> dict[str, Any]:
    fields = capture_fields(page.url, page.body, visit_id=f"v{next(_visit_ids)}-{ident}",
                            html=page.html, title=page.title, time=page.time_ms)  # fmt: skip
    return {"id": ident, "type": "capture_page", **fields}


def visit_message(page: Page, ident: str, time_ms: int, dwell_ms: int = 30_000) -> dict[str, Any]:
    return {"id": ident, "type": "visit", "url": page.url, "title": page.title,
            "visit": visit(f"v{next(_visit_ids)}-{ident}", time=time_ms, dwell_ms=dwell_ms)}


# ----------------------------------------------------------------- process sizes


def rss_mb(pid: int) -> float:
    """Resident set size of a process (MiB); NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a process so far (default: this one)."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return float("nan")
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def children(pid: int | None = None) -> set[int]:
    """Pids of the direct children of a process (default: this one)."""
    parent = os.getpid() if pid is None else pid
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == parent:
            found.add(int(name))
    return found


# ------------------------------------------------------------------------- host


class Host:
    """A real host subprocess on ``home``; thread-safe request/response calls."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.proc = HostProcess(home, env=env)
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self.started = time.perf_counter()
        self.hello = self.ok("hello", **_hello())

    @property
    def pid(self) -> int:
        return self.proc.process.pid

    def call(self, kind: str, timeout: float = 600.0, **fields: Any) -> dict[str, Any]:
        with self.lock:
            message = {"id": f"b{next(self._ids)}", "type": kind, **fields}
            self.proc.send_raw(frame(message))
            answer = self.proc.recv(timeout)
        if answer.get("id") != message["id"]:
            raise RuntimeError(f"host answered {answer.get('id')} to {message['id']}")
        return answer

    def ok(self, kind: str, **fields: Any) -> dict[str, Any]:
        answer = self.call(kind, **fields)
        if not answer.get("ok"):
            raise RuntimeError(f"host {kind} failed: {answer}")
        return answer["result"]

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request built by the caller (capture, visit); returns the answer."""
        with self.lock:
            message = {**message, "id": f"{message['id']}.{next(self._ids)}"}
            self.proc.send_raw(frame(message))
            return self.proc.recv(600)

    def status(self) -> dict[str, Any]:
        return self.ok("status")

    def burst(self, messages: Iterable[dict[str, Any]], chunk: int = 1_000) -> dict[str, Any]:
        """Pipelined: frames written as fast as the pipe takes them, answers read as they
        come. Returns counts, seconds and failures."""
        sent = failed = 0
        first_error: dict[str, Any] | None = None
        started = time.perf_counter()
        batch_iter = iter(messages)
        with self.lock:
            while batch := list(itertools.islice(batch_iter, chunk)):
                data = b"".join(frame(m) for m in batch)
                writer = threading.Thread(target=self.proc.send_raw, args=(data,))
                writer.start()
                for _ in batch:
                    answer = self.proc.recv(900)
                    if not answer.get("ok"):
                        failed += 1
                        first_error = first_error or answer
                writer.join()
                sent += len(batch)
        seconds = time.perf_counter() - started
        return {"frames": sent, "failed": failed, "seconds": seconds,
                "per_second": sent / seconds if seconds else float("nan"),
                "first_error": first_error}  # fmt: skip

    def wait_indexed(
        self, *, vectors: bool, limit: float = 3_600.0, poll: float = 0.25,
        samples: list[tuple[float, int, int]] | None = None,
    ) -> float:  # fmt: skip
        """Seconds until the index lag (and with ``vectors`` the vector lag) is 0; NaN
        after ``limit``. ``samples`` collects (time, index_lag, vector_lag)."""
        started = time.perf_counter()
        while time.perf_counter() - started < limit:
            status = self.status()
            if samples is not None:
                samples.append((time.perf_counter(), status["index_lag"], status["vector_lag"]))
            if status["index_lag"] == 0 and (not vectors or status["vector_lag"] == 0):
                return time.perf_counter() - started
            time.sleep(poll)
        return float("nan")

    def close(self) -> int:
        try:
            return self.proc.wait(600)
        finally:
            self.proc.kill()


def _hello() -> dict[str, Any]:
    from host_client import hello_fields

    return hello_fields("bench-profile")


class Ingest(threading.Thread):
    """Paced ingest: one capture every 1/rate seconds (lockstep), until stopped."""

    def __init__(self, host: Host, pages: Iterator[Page], rate: float,
                 on_page: Any = None) -> None:  # fmt: skip
        super().__init__(name="bench-ingest", daemon=True)
        self.host, self.pages, self.rate, self.on_page = host, pages, rate, on_page
        self.stop_event = threading.Event()
        self.sent = 0
        self.errors: list[str] = []
        self.ack_seconds: list[float] = []
        self.seconds = 0.0

    def run(self) -> None:
        started = time.perf_counter()
        n = 0
        while not self.stop_event.is_set():
            due = started + n / self.rate
            delay = due - time.perf_counter()
            if delay > 0 and self.stop_event.wait(delay):
                break
            page = next(self.pages)
            if self.on_page is not None:
                self.on_page(page)
            t0 = time.perf_counter()
            try:
                answer = self.host.send(capture_message(page, f"i{n}"))
                if not answer.get("ok"):
                    self.errors.append(str(answer)[:300])
            except Exception as error:  # noqa: BLE001 - counted, reported
                self.errors.append(repr(error)[:300])
            self.ack_seconds.append(time.perf_counter() - t0)
            n += 1
            self.sent = n
        self.seconds = time.perf_counter() - started

    def stop(self) -> None:
        self.stop_event.set()
        self.join(120)


class CpuMonitor(threading.Thread):
    """How much CPU other processes use while the bench runs (the machine is shared):
    every ``every`` seconds, busy cores of the whole machine minus those of this process
    and its children, attributed to the phase set with :meth:`phase`."""

    def __init__(self, every: float = 2.0) -> None:
        super().__init__(name="bench-cpu", daemon=True)
        self.every = every
        self.current = "start"
        self.others: dict[str, list[float]] = {}
        self.ours: dict[str, list[float]] = {}
        self.stop_event = threading.Event()
        self.roots: set[int] = set()
        """Other processes counted as ours, with their children (a database server the
        bench started, which is not its child)."""

    def phase(self, name: str) -> None:
        self.current = name

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def _ours(self, last: dict[int, float]) -> float:
        """CPU seconds this process and its children used since ``last`` (updated)."""
        used = 0.0
        pids = {os.getpid(), *children()}
        for root in list(self.roots):
            pids |= {root, *children(root)}
        for pid in pids:
            now = cpu_seconds(pid)
            if now == now:  # not NaN: still there
                used += now - last.get(pid, 0.0)
                last[pid] = now
        return used

    def run(self) -> None:
        last: dict[int, float] = {}
        self._ours(last)
        busy, t = self._busy(), time.monotonic()
        while not self.stop_event.wait(self.every):
            mine = self._ours(last)
            busy2, t2 = self._busy(), time.monotonic()
            self.ours.setdefault(self.current, []).append(mine / (t2 - t))
            self.others.setdefault(self.current, []).append(
                max(0.0, (busy2 - busy) - mine) / (t2 - t)
            )
            busy, t = busy2, t2

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            phase: {"others_cores_mean": sum(v) / len(v), "others_cores_max": max(v),
                    "ours_cores_mean": sum(self.ours[phase]) / len(self.ours[phase])}
            for phase, v in self.others.items() if v
        }  # fmt: skip
