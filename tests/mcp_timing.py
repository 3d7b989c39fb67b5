"""Startup and tool latencies of ``backtrail mcp`` over stdio (not a test: run it).

    cd tests && ../.venv/bin/python mcp_timing.py [rounds]

Speaks raw JSON-RPC over pipes, so the numbers are the server's, not a client library's.
Reports spawn-to-initialized (``backtrail mcp`` and ``python -m``), the time until
``tools/list`` is answered, the median latency of common tools on a small seeded memory,
and the first search with the embedding model loaded on first use and preloaded.
"""

from __future__ import annotations

import json
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
        "search_memory": {"query": "checkpoints log"},
        "find_forgotten_content": {"description": "bread with wild yeast"},
        "get_page": {"id": seeded.wal_page},
        "get_timeline": {},
        "memory_set": {"key": "timing/k", "value": "v"},
        "memory_get": {"key": "timing/k"},
        "memory_search": {"query": "timing"},
        "get_research_sessions": {},
        "summarize_research_topic": {"topic": "write-ahead logging"},
        "suggest_tab_cleanup": {},
        "memory_stats": {},
    }
    for name, arguments in calls.items():
        out(
            _line(
                f"tool {name} (lean)",
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
            while "ready" not in json.dumps(session.call("memory_stats")[1]):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        first, answer = session.call("search_memory", query="fermented dough leavening")
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
                [session.call("search_memory", query="wal")[0] for _ in range(rounds * 3)],
            )
            + "\n"
        )
        session.close()

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
