"""Reading back what an end-to-end run stored: ``backtrail mcp`` through the official MCP
client, and read-only queries on the ledger itself."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from e2e_support import Profile, wait_for
from mcp_support import BACKTRAIL, server_env

__all__ = ["McpSession", "store_mentions", "ledger_rows"]


class McpSession:
    """``backtrail mcp`` (stdio, lean) on the profile's data directory, driven by the
    official MCP client on a background event loop; every method blocks."""

    def __init__(self, data_dir: Profile | Path, **env: str) -> None:
        self.data_dir = data_dir.data_dir if isinstance(data_dir, Profile) else Path(data_dir)
        self.env = env
        self._stack = ExitStack()
        self.client: Any = None

    def __enter__(self) -> McpSession:
        from anyio.from_thread import start_blocking_portal
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=BACKTRAIL, args=["mcp"],
                                       env=server_env(self.data_dir, **self.env))  # fmt: skip
        try:
            self.portal = self._stack.enter_context(start_blocking_portal("asyncio"))
            self.client = self._stack.enter_context(
                self.portal.wrap_async_context_manager(Client(params, mode="legacy"))
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def call(self, tool: str, **arguments: Any) -> Any:
        """The raw ``CallToolResult`` of one tool call."""
        return self.portal.call(self.client.call_tool, tool, arguments)

    def data(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A tool's structured content; fails on a tool error."""
        result = self.call(tool, **arguments)
        if result.is_error:
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            raise AssertionError(f"{tool}({arguments}) failed: {text}")
        return result.structured_content

    def text(self, tool: str, **arguments: Any) -> str:
        """A tool's text (where web text and titles are); fails on a tool error."""
        result = self.call(tool, **arguments)
        joined = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise AssertionError(f"{tool}({arguments}) failed: {joined}")
        return joined

    def search(self, query: str, **arguments: Any) -> list[dict[str, Any]]:
        """``search_browsing`` results."""
        return self.data("search_browsing", query=query, **arguments)["results"]

    def wait_search(
        self, query: str, predicate: Callable[[list[dict[str, Any]]], Any] = bool,
        timeout: float = 10.0, **arguments: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Search until ``predicate(results)`` holds; returns those results."""
        found: list[list[dict[str, Any]]] = []

        def check() -> bool:
            results = self.search(query, **arguments)
            found[:] = [results]
            return bool(predicate(results))

        wait_for(check, timeout, f"search_browsing({query!r}) to match", interval=0.1)
        return found[0]


# ------------------------------------------------------------------------ ledger


def store_mentions(data_dir: Path, needle: str) -> dict[str, int]:
    """``{table.column: rows}`` for every text column of the ledger containing
    ``needle`` (read-only; an empty dict means the store never heard of it)."""
    path = Path(data_dir) / "ledger.sqlite3"
    if not path.exists():
        return {}
    found: dict[str, int] = {}
    with _readonly(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for column in db.execute(f'PRAGMA table_info("{table}")').fetchall():
                name, kind = column[1], (column[2] or "").upper()
                if kind not in ("TEXT", "BLOB", ""):
                    continue
                (count,) = db.execute(
                    f'SELECT count(*) FROM "{table}" WHERE instr(CAST("{name}" AS TEXT), ?) > 0',
                    (needle,),
                ).fetchone()
                if count:
                    found[f"{table}.{name}"] = count
    return found


def ledger_rows(data_dir: Path, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows of a read-only query on the ledger (the source of truth), as dicts."""
    with _readonly(Path(data_dir) / "ledger.sqlite3") as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(sql, tuple(params))]


@contextmanager
def _readonly(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        yield db
    finally:
        db.close()
