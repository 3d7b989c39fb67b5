"""BraveMCP's database (``storage/brave-mcp.db``): the pages it saw, their text and
summaries, highlights, notes and bookmarks.

``pages`` has one row per URL (``id``, ``url``, ``title``, ``content``: the captured
text, ``summary``, ``created_at``: the first visit, ``last_visited``, ``visit_count``);
``highlights`` (``page_id``, ``text``, ``note``), ``notes`` (``content``,
``source_url``) and ``bookmarks`` (``url``, ``title``, ``folder``) each carry their
``created_at``. Ids are UUIDs and times milliseconds since 1970. Its ``sessions`` and
its search index (``search_index``, derived from the rest) are not read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backtrail.importers._sqlite import read_only

__all__ = ["TABLES", "SOURCE", "open_database", "from_millis", "pages", "highlights", "notes",
           "bookmarks", "count"]  # fmt: skip

SOURCE = "bravemcp"
TABLES = {
    "pages": {"id", "url", "title", "content", "summary", "created_at", "last_visited",
              "visit_count"},
    "bookmarks": {"id", "url", "title", "folder", "created_at"},
    "highlights": {"id", "page_id", "text", "note", "created_at"},
    "notes": {"id", "content", "source_url", "created_at"},
}  # fmt: skip


def from_millis(value: object) -> int | None:
    """Unix seconds from milliseconds (``None`` for nothing or nonsense)."""
    if isinstance(value, float):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value // 1000


@contextmanager
def open_database(path: Path) -> Iterator[sqlite3.Connection]:
    """BraveMCP's database at ``path``, read-only, once it is known to be one."""
    with read_only(path, "a BraveMCP", TABLES) as conn:
        yield conn


def count(conn: sqlite3.Connection, table: str) -> int:
    assert table in TABLES
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if text.strip() else None


def pages(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Each page: ``id``, ``url``, ``title``, ``text``, ``summary``, ``first``/``last``
    visit (unix seconds, either filled from the other) and ``visits`` (at least 1)."""
    for row in conn.execute(
        "SELECT id, url, title, content, summary, created_at, last_visited, visit_count "
        "FROM pages ORDER BY created_at, id"
    ):
        first, last = from_millis(row["created_at"]), from_millis(row["last_visited"])
        first, last = first or last, last or first
        if first is not None and last is not None and last < first:
            first, last = last, first
        visits = row["visit_count"]
        yield {
            "id": str(row["id"]),
            "url": str(row["url"]),
            "title": _text(row["title"]),
            "text": _text(row["content"]),
            "summary": _text(row["summary"]),
            "first": first,
            "last": last,
            "visits": visits if isinstance(visits, int) and visits > 0 else 1,
        }


def highlights(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Each highlight with its page's URL (``None`` when its page is gone)."""
    for row in conn.execute(
        "SELECT h.id, h.text, h.note, h.created_at, p.url FROM highlights h "
        "LEFT JOIN pages p ON p.id = h.page_id ORDER BY h.created_at, h.id"
    ):
        at = from_millis(row["created_at"])
        yield {"id": str(row["id"]), "url": row["url"], "text": _text(row["text"]),
               "note": _text(row["note"]), "created_at": at}  # fmt: skip


def notes(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for row in conn.execute(
        "SELECT id, content, source_url, created_at FROM notes ORDER BY created_at, id"
    ):
        yield {"id": str(row["id"]), "content": _text(row["content"]), "url": row["source_url"],
               "created_at": from_millis(row["created_at"])}  # fmt: skip


def bookmarks(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Bookmarks as ``BookmarkInput`` fields (``browser_id`` is BraveMCP's id)."""
    return [
        {"browser_id": str(row["id"]), "url": str(row["url"]), "title": _text(row["title"]),
         "folder": _text(row["folder"]), "created_at": from_millis(row["created_at"])}
        for row in conn.execute("SELECT id, url, title, folder, created_at FROM bookmarks")
    ]  # fmt: skip
