"""Startup and tool latencies of ``backtrail mcp`` over stdio (not a test: run it).

    cd tests && ../.venv/bin/python mcp_timing.py [rounds]
    cd tests && ../.venv/bin/python mcp_timing.py spawn [rounds]

``spawn`` measures only spawn-to-initialized: the server process's own CPU time (user +
system, from ``/proc/<pid>/stat``) until it has answered ``initialize``, and the wall
time, with the load average at the start (the CPU time hardly depends on the load).

Speaks raw JSON-RPC over pipes, so the numbers are the server's, not a client library's.
Reports spawn-to-initialized (``backtrail mcp`` and ``python -m``), the time until
``tools/list`` is answered, the median latency of common tools on a small seeded memory,
and the first search with the embedding model loaded on first use and preloaded.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp_support import BACKTRAIL, INITIALIZE, seed, server_env


class Session:
    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env,
        )  # fmt: skip
        self.next_id = 100

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert self.process.stdout is not None
        while True:
            answer = json.loads(self.process.stdout.readline())
            if answer.get("id") == self.next_id:
                return answer

    def initialize(self) -> float:
        self.send(INITIALIZE)
        assert self.process.stdout is not None
        json.loads(self.process.stdout.readline())
        elapsed = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return elapsed

    def call(self, name: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        return time.perf_counter() - started, answer

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def _line(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{label:44s} median {statistics.median(ms):7.1f} ms   min {min(ms):7.1f} ms"


def main(rounds: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="backtrail-timing-"))
    seeded = seed(home)
    out = sys.stdout.write
    variants = [
        ("spawn-to-initialized: backtrail mcp", [BACKTRAIL, "mcp"], {}),
        ("spawn-to-initialized: python -m", [sys.executable, "-m", "backtrail.mcp_server"], {}),
    ]
    for label, command, extra in variants:
        init, ready = [], []
        for _ in range(rounds):
            session = Session(command, server_env(home, **extra))
            init.append(session.initialize())
            session.request("tools/list")
            ready.append(time.perf_counter() - session.started)
            session.close()
        out(_line(label, init) + "\n")
        out(_line("  ... until tools/list is answered", ready) + "\n")

    session = Session([BACKTRAIL, "mcp"], server_env(home))
    session.initialize()
    session.request("tools/list")
    calls = {
        "search_browsing": {"query": "checkpoints log"},
        "search_browsing vague": {"query": "bread with wild yeast", "vague": True},
        "get_page": {"id": seeded.wal_page},
        "get_timeline": {},
        "memory_set": {"key": "timing/k", "value": "v"},
        "memory_get": {"key": "timing/k"},
        "memory_search": {"query": "timing"},
        "get_timeline sessions": {"sessions": True},
        "summarize_reading": {"topic": "write-ahead logging"},
        "get_open_tabs advise": {"advise": True},
        "get_status": {},
    }
    for label, arguments in calls.items():
        name = label.split(" ")[0]
        out(
            _line(
                f"tool {label} (lean)",
                [session.call(name, **arguments)[0] for _ in range(rounds * 3)],
            )
            + "\n"
        )
    session.close()

    # The first load in a data directory also writes the model's optimised graph, which
    # later servers load from.
    runs = [("lazy model, new dir", [])] + [("lazy model", [])] * rounds
    firsts: list[float] = []
    for label, extra in [*runs, ("--preload-model", ["--preload-model"])]:
        session = Session([BACKTRAIL, "mcp", *extra], server_env(home, MCP_EMBEDDINGS="on"))
        session.initialize()
        session.request("tools/list")
        if extra:
            deadline = time.monotonic() + 120
            while "ready" not in json.dumps(session.call("get_status")[1]):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        first, answer = session.call("search_browsing", query="fermented dough leavening")
        mode = answer["result"]["structuredContent"]["mode"]
        if label == "lazy model":
            firsts.append(first)
            if len(firsts) == rounds:
                out(_line("first search, embeddings on, lazy model", firsts) + f" ({mode})\n")
            session.close()
            continue
        out(f"first search, embeddings on, {label:19s} {first * 1000:7.1f} ms ({mode})\n")
        out(
            _line(
                "  later searches",
                [session.call("search_browsing", query="wal")[0] for _ in range(rounds * 3)],
            )
            + "\n"
        )
        session.close()

def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spawn(rounds: int) -> None:
    """Spawn-to-initialized of ``backtrail mcp``: CPU of the server and wall time."""
    home = Path(tempfile.mkdtemp(prefix="backtrail-spawn-"))
    seed(home)
    load = os.getloadavg()
    cpu, wall = [], []
    for _ in range(rounds):
        session = Session([BACKTRAIL, "mcp"], server_env(home))
        wall.append(session.initialize())
        cpu.append(cpu_seconds(session.process.pid))
        session.close()
    ms = lambda v: statistics.median(v) * 1000  # noqa: E731
    sys.stdout.write(
        f"spawn-to-initialized over {rounds} spawns: server CPU median {ms(cpu):.0f} ms "
        f"(min {min(cpu) * 1000:.0f}, max {max(cpu) * 1000:.0f}), wall median {ms(wall):.0f} ms "
        f"(min {min(wall) * 1000:.0f}, max {max(wall) * 1000:.0f}); load average at start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores\n"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "spawn":
        spawn(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
