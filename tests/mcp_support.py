"""Helpers for the MCP tests: a seeded memory, spawning ``backtrail mcp`` over stdio and
HTTP, and reading tool results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backtrail.config import Config
from backtrail.service import Memory, VisitInfo

BACKTRAIL = str(Path(os.path.abspath(sys.executable)).with_name("backtrail"))
DAY = 86_400

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    },
}


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a spawned server: this data directory, lean mode, no
    LLM provider reachable (Ollama pointed at a closed port), plus ``extra``."""
    prefixes = ("MCP_", "BACKTRAIL_", "ANTHROPIC_", "OLLAMA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update({"BACKTRAIL_HOME": str(home), "MCP_EMBEDDINGS": "off", "OLLAMA_HOST": "127.0.0.1:9"})
    env.update(extra)
    return env


def stdio_params(home: Path, *args: str, **env: str) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=BACKTRAIL, args=["mcp", *args], env=server_env(home, **env)
    )


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def lean_config(home: Path, **overrides: Any) -> Config:
    settings: dict[str, Any] = {"embeddings": False, "background_indexing": False}
    settings.update(overrides)
    return Config.load(home, overrides=settings, environ={})


# ------------------------------------------------------------------- seeding


WAL_TEXT = (
    "Write-ahead logging keeps the database consistent after a crash. Each transaction "
    "appends its changes to the log before the data pages change. Checkpoints copy the "
    "log back into the main database file. Readers keep reading while a writer appends "
    "to the log."
)
VACUUM_TEXT = (
    "Autovacuum in Postgres removes dead tuples left behind by updates and deletes. A "
    "vacuum that cannot keep up lets tables bloat. Tuning the cost limit lets vacuum run "
    "faster on busy tables."
)
BREAD_TEXT = (
    "A sourdough starter is a culture of wild yeast and lactic acid bacteria. Feed the "
    "starter with flour and water every day. Bake the bread in a hot covered pot."
)


@dataclass
class Seeded:
    now: int
    wal_page: int
    vacuum_page: int
    bread_page: int
    highlight: int
    note: int


def seed(home: Path) -> Seeded:
    """A small memory: three pages read at known times (two in one research session,
    one a day earlier), a highlight, a note, bookmarks and open tabs."""
    now = int(time.time())
    memory = Memory(lean_config(home), client="seed")
    try:
        wal = memory.capture_page(
            "https://sqlite.org/wal.html",
            text=WAL_TEXT,
            title="Write-Ahead Logging",
            captured_at=now - 3_600,
            visit=VisitInfo(visited_at=now - 3_600),
        )
        for minutes in (55, 50):
            memory.record_visit("https://sqlite.org/wal.html", visited_at=now - minutes * 60)
        vacuum = memory.capture_page(
            "https://www.postgresql.org/docs/current/routine-vacuuming.html",
            text=VACUUM_TEXT,
            title="Routine Vacuuming",
            captured_at=now - 3_000,
            visit=VisitInfo(visited_at=now - 3_000),
        )
        bread = memory.capture_page(
            "https://bread.example/sourdough",
            text=BREAD_TEXT,
            title="Sourdough starter",
            captured_at=now - DAY - 7_200,
            visit=VisitInfo(visited_at=now - DAY - 7_200),
        )
        highlight = memory.add_highlight(
            "https://sqlite.org/wal.html",
            "Checkpoints copy the log back into the main database file.",
            note="remember for the storage talk",
            created_at=now - 3_500,
        )
        note = memory.add_note(
            "Compare WAL checkpointing with Postgres vacuum.",
            url="https://sqlite.org/wal.html",
            created_at=now - 2_900,
        )
        memory.upsert_bookmark(
            "b1",
            "https://sqlite.org/wal.html",
            title="WAL docs",
            folder="Bookmarks bar/Research/Databases",
            created_at=now - 5_000,
        )
        memory.upsert_bookmark(
            "b2",
            "https://bread.example/sourdough",
            title="Sourdough",
            folder="Bookmarks bar/Kitchen",
            created_at=now - 4_000,
        )
        memory.snapshot_tabs(
            [
                {
                    "tab_id": 1,
                    "window_id": 1,
                    "url": "https://sqlite.org/wal.html",
                    "title": "Write-Ahead Logging",
                    "active": True,
                    "last_accessed": now - 60,
                },
                {
                    "tab_id": 2,
                    "window_id": 1,
                    "url": "https://bread.example/sourdough",
                    "title": "Sourdough starter",
                    "last_accessed": now - 5 * DAY,
                },
                {"tab_id": 3, "window_id": 1, "url": "chrome://newtab/", "title": "New Tab"},
                {
                    "tab_id": 4,
                    "window_id": 1,
                    "url": "https://sqlite.org/wal.html",
                    "title": "Write-Ahead Logging",
                    "last_accessed": now - 7_200,
                },
                {
                    "tab_id": 5,
                    "window_id": 2,
                    "url": "https://news.example/long-read",
                    "title": "A long read",
                    "last_accessed": now - 4 * DAY,
                },
            ]
        )
        memory.catch_up(vectors=False)
    finally:
        memory.close()
    return Seeded(now, wal.page_id, vacuum.page_id, bread.page_id, highlight.id, note.id)


# ---------------------------------------------------------------------- HTTP


_LISTENING = re.compile(r"listening on (http://[^\s]+/mcp)")


class HttpServer:
    """A live ``backtrail mcp --http`` on a free port of 127.0.0.1."""

    def __init__(self, home: Path, *args: str, **env: str) -> None:
        self.process = subprocess.Popen(
            [BACKTRAIL, "mcp", "--http", "--port", "0", *args],
            env=server_env(home, **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stderr: list[str] = []
        self.url: str | None = None
        self._found = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._found.wait(60) or self.url is None:
            self.stop()
            raise AssertionError("the HTTP server did not start:\n" + "".join(self.stderr))

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            match = _LISTENING.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                self._found.set()
        self._found.set()

    def client(self, token: str, **kwargs: Any) -> Any:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert self.url is not None
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return Client(streamable_http_client(self.url, http_client=http), **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@contextmanager
def http_server(home: Path, *args: str, **env: str) -> Iterator[HttpServer]:
    server = HttpServer(home, *args, **env)
    try:
        yield server
    finally:
        server.stop()


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
