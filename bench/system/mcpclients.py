"""MCP clients for the system benchmark: the official ``mcp`` SDK client (``stdio_client``
+ ``ClientSession``) spawning ``backtrail mcp`` exactly as an assistant app does.

Each client owns one server process (stdio transport: one server per assistant). Every
tool call is timed from the request to the parsed ``CallToolResult`` in this process.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from bench.system.hosts import children

BACKTRAIL = str(Path(os.path.abspath(sys.executable)).with_name("backtrail"))
SEARCH = "search_browsing"
VAGUE = "search_browsing vague"
"""How the calls of ``search_browsing(vague=true)`` are labelled in the results."""


def server_params(home: Path, **env: str) -> StdioServerParameters:
    """``backtrail mcp`` on ``home`` with default settings (embeddings on, lazy model);
    no LLM provider reachable for summaries (Ollama pointed at a closed port)."""
    settings = {"BACKTRAIL_HOME": str(home), "OLLAMA_HOST": "127.0.0.1:9", **env}
    return StdioServerParameters(command=BACKTRAIL, args=["mcp"], env=settings)


@dataclass
class Call:
    tool: str
    seconds: float
    ok: bool
    data: dict[str, Any] | None
    error: str | None = None
    at: float = 0.0  # perf_counter when the call was sent
    client: str = ""


@dataclass
class Client:
    """One connected client + server. Use :func:`connect`; close with :meth:`close`."""

    home: Path
    name: str
    spawn_to_initialized: float = float("nan")
    pid: int | None = None
    calls: list[Call] = field(default_factory=list)
    _stack: AsyncExitStack | None = None
    session: ClientSession | None = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> Call:
        assert self.session is not None
        t0 = time.perf_counter()
        try:
            result = await self.session.call_tool(tool, arguments)
            seconds = time.perf_counter() - t0
            if result.is_error:
                text = "\n".join(getattr(b, "text", "") for b in result.content)
                call = Call(tool, seconds, False, None, text[:300], t0)
            else:
                call = Call(tool, seconds, True, result.structured_content, at=t0)
        except Exception as error:  # noqa: BLE001 - counted as an error, reported
            call = Call(tool, time.perf_counter() - t0, False, None, repr(error)[:300], t0)
        call.client = self.name
        self.calls.append(call)
        return call

    async def search(self, query: str, limit: int = 10) -> Call:
        return await self.call("search_browsing", {"query": query, "limit": limit})

    async def forgotten(self, description: str, limit: int = 10) -> Call:
        call = await self.call("search_browsing", {"query": description, "limit": limit,
                                                   "vague": True})  # fmt: skip
        call.tool = VAGUE
        return call

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None


async def connect(home: Path, name: str, errlog_dir: Path, **env: str) -> Client:
    """Spawn ``backtrail mcp`` and complete the ``initialize`` handshake (timed)."""
    client = Client(home, name)
    stack = AsyncExitStack()
    errlog = stack.enter_context(open(errlog_dir / f"mcp-{name}.stderr", "a"))  # noqa: SIM115
    # Callers spawn one at a time, so the one new child process is this server.
    before = children()
    t0 = time.perf_counter()
    try:
        read, write = await stack.enter_async_context(
            stdio_client(server_params(home, **env), errlog=errlog)
        )
        session = await stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=120)
        )
        await session.initialize()
    except BaseException:
        await stack.aclose()
        raise
    client.spawn_to_initialized = time.perf_counter() - t0
    new = children() - before
    client.pid = min(new) if new else None
    client._stack, client.session = stack, session
    return client


async def connect_many(
    home: Path, count: int, errlog_dir: Path, prefix: str = "c", **env: str
) -> list[Client]:
    return [await connect(home, f"{prefix}{i}", errlog_dir, **env) for i in range(count)]


async def close_all(clients: Sequence[Client]) -> None:
    for c in reversed(clients):
        await c.close()


def result_urls(call: Call) -> list[str]:
    if not call.ok or call.data is None:
        return []
    return [r.get("url") or "" for r in call.data.get("results", [])]


async def closed_loop(
    clients: Sequence[Client], tool: str, queries: Sequence[str], per_client: int
) -> list[Call]:
    """Every client issues ``per_client`` calls back to back (its own slice of the
    queries, cycling), all clients at once; returns every call."""

    async def run(i: int, c: Client) -> list[Call]:
        out = []
        for n in range(per_client):
            q = queries[(i * per_client + n) % len(queries)]
            out.append(await (c.search(q) if tool == SEARCH else c.forgotten(q)))
        return out

    results = await asyncio.gather(*(run(i, c) for i, c in enumerate(clients)))
    return [call for part in results for call in part]


async def open_loop(
    clients: Sequence[Client], queries: Sequence[str], rate: float, seconds: float
) -> list[Call]:
    """Every client sends a search every ``1 / rate`` seconds (on a fixed schedule, not
    after the previous answer) for ``seconds``; returns every call."""

    async def run(i: int, c: Client) -> list[Call]:
        out: list[Call] = []
        start = time.perf_counter() + i / (rate * len(clients))
        n = 0
        while (due := start + n / rate) < start + seconds:
            if (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            out.append(await c.search(queries[(i * 997 + n) % len(queries)]))
            n += 1
        return out

    results = await asyncio.gather(*(run(i, c) for i, c in enumerate(clients)))
    return [call for part in results for call in part]
