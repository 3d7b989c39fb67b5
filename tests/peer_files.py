"""Real databases of the memory tools Backtrail replaces, for the importer tests: built
with each tool's own ``CREATE TABLE`` statements (``data/peers/*.sql``, each naming the
repository, file and commit it was read from) and written row by row with the
statements the tool itself runs for each call."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).with_name("data") / "peers"


def iso_ms(unix_seconds: int, millis: int = 0) -> str:
    """mcp-memory-bridge's time format: ``2026-05-01T12:00:00.123Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_seconds)) + f".{millis:03d}Z"


def seconds_iso(unix_seconds: int) -> str:
    """Backtrail's time format in tool answers (whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_seconds))


class MemoryBridgeDb:
    """``memory.db`` written as mcp-memory-bridge's server writes it (WAL mode; each tool
    call's statements, with the time it gives)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA journal_mode=WAL;")
        self.conn.executescript((SCHEMAS / "mcp-memory-bridge.sql").read_text())

    def _log(self, at: str, client: str, action: str, key: str | None, value: str | None) -> None:
        self.conn.execute(
            "INSERT INTO events (timestamp, client_id, action, key, value) VALUES (?, ?, ?, ?, ?)",
            (at, client, action, key, value),
        )

    def set(self, key: str, value: str, client: str, at: str) -> None:
        with self.conn:
            self.conn.execute(
                "INSERT INTO facts (key, value, source_client, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value, "
                "source_client=excluded.source_client, updated_at=excluded.updated_at",
                (key, value, client, at),
            )
            self._log(at, client, "set", key, value)

    def get(self, key: str, client: str, at: str) -> None:
        with self.conn:
            self._log(at, client, "get", key, None)

    def delete(self, key: str, client: str, at: str) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM facts WHERE key = ?", (key,))
            self._log(at, client, "delete", key, None)

    def event(self, action: str, key: str | None, value: str | None, client: str, at: str) -> None:
        """Another logged call: a search (``key`` its best match), a refused
        compare-and-swap (``cas_fail``, the value tried), the lock demo (no key)."""
        with self.conn:
            self._log(at, client, action, key, value)

    def close(self) -> None:
        self.conn.close()

    # What the peer answers, from its own queries ------------------------------------

    @staticmethod
    def answers(path: Path, key: str) -> dict[str, Any]:
        """The peer's ``memory_get(key, include_events=True)`` (``None`` for a missing key)
        and its history (``writes``: sets, refused CAS attempts, deletes; ``reads``: also
        gets and searches), each event ``(time, client, action, value)``."""
        conn = sqlite3.connect(path)
        try:
            row = conn.execute(
                "SELECT value, source_client, updated_at FROM facts WHERE key = ?", (key,)
            ).fetchone()
            events = conn.execute(
                "SELECT timestamp, client_id, action, value FROM events WHERE key = ? ORDER BY id",
                (key,),
            ).fetchall()
        finally:
            conn.close()
        return {
            "fact": row,
            "get_events": [e for e in events if e[2] in ("set", "delete")],
            "writes": [e for e in events if e[2] in ("set", "cas_fail", "delete")],
            "reads": [e for e in events if e[2] in ("set", "cas_fail", "delete", "get", "search")],
        }


class BraveMcpDb:
    """``brave-mcp.db`` written as BraveMCP's MCP server writes it (its migrations, then
    each save function's statements, with the time given in milliseconds)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript((SCHEMAS / "bravemcp.sql").read_text())
        with self.conn:
            for ident, name in ((1, "initial_schema"), (2, "fts5_setup")):
                self.conn.execute(
                    "INSERT INTO schema_migrations (id, name, executed_at) VALUES (?, ?, ?)",
                    (ident, name, 1_700_000_000_000),
                )

    def visit(self, url: str, title: str, now_ms: int) -> str:
        """``savePageVisit``: a new page, or one more visit of a known one."""
        row = self.conn.execute("SELECT id, visit_count FROM pages WHERE url = ?", (url,))
        existing = row.fetchone()
        domain = url.split("/")[2] if "://" in url else "local"
        with self.conn:
            if existing is not None:
                self.conn.execute(
                    "UPDATE pages SET last_visited = ?, visit_count = visit_count + 1, title = ? "
                    "WHERE id = ?",
                    (now_ms, title, existing[0]),
                )
                self.conn.execute(
                    "UPDATE search_index SET title = ? "
                    "WHERE source_id = ? AND source_type = 'page'",
                    (title, existing[0]),
                )
                return str(existing[0])
            page_id = str(uuid.uuid4())
            self.conn.execute(
                "INSERT INTO pages (id, url, title, domain, created_at, last_visited, visit_count) "
                "VALUES (?, ?, ?, ?, ?, ?, 1)",
                (page_id, url, title, domain, now_ms, now_ms),
            )
            self.conn.execute(
                "INSERT INTO search_index (source_id, source_type, title, summary, content) "
                "VALUES (?, 'page', ?, '', '')",
                (page_id, title),
            )
        return page_id

    def content(self, url: str, title: str, content: str, summary: str, now_ms: int) -> str:
        """``savePageContent``: the page's captured text and summary."""
        row = self.conn.execute("SELECT id FROM pages WHERE url = ?", (url,)).fetchone()
        domain = url.split("/")[2] if "://" in url else "local"
        with self.conn:
            if row is not None:
                page_id = str(row[0])
                self.conn.execute(
                    "UPDATE pages SET title = ?, content = ?, summary = ?, last_visited = ? "
                    "WHERE id = ?",
                    (title, content, summary, now_ms, page_id),
                )
                self.conn.execute(
                    "UPDATE search_index SET title = ?, summary = ?, content = ? "
                    "WHERE source_id = ? AND source_type = 'page'",
                    (title, summary, content, page_id),
                )
            else:
                page_id = str(uuid.uuid4())
                self.conn.execute(
                    "INSERT INTO pages (id, url, title, content, summary, domain, created_at, "
                    "last_visited, visit_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
                    (page_id, url, title, content, summary, domain, now_ms, now_ms),
                )
                self.conn.execute(
                    "INSERT INTO search_index (source_id, source_type, title, summary, content) "
                    "VALUES (?, 'page', ?, ?, ?)",
                    (page_id, title, summary, content),
                )
        return page_id

    def highlight(self, url: str, text: str, note: str | None, now_ms: int) -> str:
        """``saveHighlight`` (a page unknown so far is visited first, titled by its URL)."""
        row = self.conn.execute("SELECT id FROM pages WHERE url = ?", (url,)).fetchone()
        page_id = str(row[0]) if row is not None else self.visit(url, url, now_ms)
        ident = str(uuid.uuid4())
        with self.conn:
            self.conn.execute(
                "INSERT INTO highlights (id, page_id, text, note, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (ident, page_id, text, note, now_ms),
            )
            self.conn.execute(
                "INSERT INTO search_index (source_id, source_type, title, summary, content) "
                "VALUES (?, 'highlight', 'Text Highlight', ?, ?)",
                (ident, note or "Highlight", text),
            )
        return ident

    def note(self, content: str, source_url: str | None, now_ms: int) -> str:
        """``saveNote``."""
        ident = str(uuid.uuid4())
        with self.conn:
            self.conn.execute(
                "INSERT INTO notes (id, content, source_url, created_at) VALUES (?, ?, ?, ?)",
                (ident, content, source_url, now_ms),
            )
            self.conn.execute(
                "INSERT INTO search_index (source_id, source_type, title, summary, content) "
                "VALUES (?, 'note', '', '', ?)",
                (ident, content),
            )
        return ident

    def bookmark(self, url: str, title: str, folder: str | None, now_ms: int) -> str:
        """``saveBookmark``."""
        ident = str(uuid.uuid4())
        with self.conn:
            self.conn.execute(
                "INSERT INTO bookmarks (id, url, title, folder, created_at) VALUES (?, ?, ?, ?, ?)",
                (ident, url, title, folder, now_ms),
            )
        return ident

    def close(self) -> None:
        self.conn.close()
