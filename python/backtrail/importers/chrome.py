"""Chrome-family history (Chrome, Chromium, Brave, Edge): the ``History`` database.

``urls`` holds one row per URL (``url``, ``title``, ``visit_count``...) and ``visits``
one row per visit: ``visit_time`` in microseconds since 1601-01-01 UTC, ``transition``
(the low byte is the core type), ``from_visit`` (the referring visit) and
``visit_duration`` (microseconds the page stayed open).

Chrome's ``urls.visit_count`` counts every visit except reloads; subframe navigations
are hidden from the history page. An import keeps the visits Chrome itself shows: not
reloads and not subframe navigations, each with its original time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backtrail.importers._sqlite import columns, require

__all__ = [
    "EPOCH_OFFSET",
    "TRANSITIONS",
    "from_chrome_time",
    "to_chrome_time",
    "count_visits",
    "read_visits",
]

EPOCH_OFFSET = 11_644_473_600
"""Seconds from 1601-01-01 (Chrome's epoch) to 1970-01-01."""

TRANSITIONS = {
    0: "link",
    1: "typed",
    2: "auto_bookmark",
    3: "auto_subframe",
    4: "manual_subframe",
    5: "generated",
    6: "auto_toplevel",
    7: "form_submit",
    8: "reload",
    9: "keyword",
    10: "keyword_generated",
}
_SKIPPED = (3, 4, 8)  # subframe navigations and reloads


def from_chrome_time(value: object) -> int | None:
    """Unix seconds from Chrome microseconds since 1601 (``None`` for 0 or nonsense)."""
    if isinstance(value, str):
        value = int(value) if value.isdigit() else None
    if not isinstance(value, int) or value <= 0:
        return None
    seconds = value // 1_000_000 - EPOCH_OFFSET
    return seconds if seconds >= 0 else None


def to_chrome_time(unix_seconds: int) -> int:
    return (unix_seconds + EPOCH_OFFSET) * 1_000_000


def _query(conn: sqlite3.Connection, path: Path, select: str) -> str:
    require(
        conn,
        path,
        {"urls": {"id", "url", "title"}, "visits": {"id", "url", "visit_time", "transition"}},
    )
    where = f"(v.transition & 255) NOT IN {_SKIPPED} AND v.visit_time >= ?"
    return f"{select} FROM visits v JOIN urls u ON u.id = v.url {{joins}} WHERE {where}"


def count_visits(conn: sqlite3.Connection, path: Path, since: int | None = None) -> int:
    sql = _query(conn, path, "SELECT count(*)").format(joins="")
    return int(conn.execute(sql, (_bound(since),)).fetchone()[0])


def read_visits(
    conn: sqlite3.Connection, path: Path, since: int | None = None
) -> Iterator[dict[str, Any]]:
    """The visits to import, oldest first, as ``VisitInput`` fields (without ``source``;
    ``external_id`` is the browser's visit id)."""
    visit_columns = columns(conn, "visits")
    duration = "v.visit_duration" if "visit_duration" in visit_columns else "0"
    joins, referrer = "", "NULL"
    if "from_visit" in visit_columns:
        joins = "LEFT JOIN visits f ON f.id = v.from_visit LEFT JOIN urls r ON r.id = f.url"
        referrer = "r.url"
    select = (
        f"SELECT v.id, u.url, u.title, v.visit_time, v.transition, {duration} AS duration, "
        f"{referrer} AS referrer"
    )
    sql = _query(conn, path, select).format(joins=joins) + " ORDER BY v.visit_time, v.id"
    for row in conn.execute(sql, (_bound(since),)):
        visited_at = from_chrome_time(row["visit_time"])
        if visited_at is None:
            continue
        duration_us = row["duration"]
        dwell = duration_us // 1000 if isinstance(duration_us, int) and duration_us > 0 else None
        yield {
            "url": row["url"] or "",
            "visited_at": visited_at,
            "title": row["title"] or None,
            "transition": TRANSITIONS.get(row["transition"] & 0xFF),
            "referrer": row["referrer"],
            "dwell_ms": dwell,
            "external_id": str(row["id"]),
        }


def _bound(since: int | None) -> int:
    return 1 if since is None else to_chrome_time(since)
