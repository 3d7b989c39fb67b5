"""Firefox history: ``places.sqlite``.

``moz_places`` holds one row per URL (``url``, ``title``, ``visit_count``...) and
``moz_historyvisits`` one row per visit: ``visit_date`` in microseconds since
1970-01-01 UTC, ``visit_type`` and ``from_visit`` (the referring visit).

Firefox's ``visit_count`` leaves out the visit types it calls ``EXCLUDED_VISIT_TYPES``
(0 invalid, 4 embed, 7 download, 8 framed link, 9 reload); an import keeps the same
visits, each with its original time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backtrail.importers._sqlite import columns, require

__all__ = ["VISIT_TYPES", "count_visits", "read_visits"]

VISIT_TYPES = {
    1: "link",
    2: "typed",
    3: "bookmark",
    4: "embed",
    5: "redirect_permanent",
    6: "redirect_temporary",
    7: "download",
    8: "framed_link",
    9: "reload",
}
_EXCLUDED = (0, 4, 7, 8, 9)


def _query(conn: sqlite3.Connection, path: Path, select: str) -> str:
    needed = {
        "moz_places": {"id", "url", "title"},
        "moz_historyvisits": {"id", "place_id", "visit_date", "visit_type"},
    }
    require(conn, path, needed)
    where = f"v.visit_type NOT IN {_EXCLUDED} AND v.visit_date >= ?"
    return (
        f"{select} FROM moz_historyvisits v JOIN moz_places p ON p.id = v.place_id "
        f"{{joins}} WHERE {where}"
    )


def count_visits(conn: sqlite3.Connection, path: Path, since: int | None = None) -> int:
    sql = _query(conn, path, "SELECT count(*)").format(joins="")
    return int(conn.execute(sql, (_bound(since),)).fetchone()[0])


def read_visits(
    conn: sqlite3.Connection, path: Path, since: int | None = None
) -> Iterator[dict[str, Any]]:
    """The visits to import, oldest first, as ``VisitInput`` fields (without ``source``;
    ``external_id`` is the browser's visit id)."""
    joins, referrer = "", "NULL"
    if "from_visit" in columns(conn, "moz_historyvisits"):
        joins = (
            "LEFT JOIN moz_historyvisits f ON f.id = v.from_visit "
            "LEFT JOIN moz_places r ON r.id = f.place_id"
        )
        referrer = "r.url"
    select = f"SELECT v.id, p.url, p.title, v.visit_date, v.visit_type, {referrer} AS referrer"
    sql = _query(conn, path, select).format(joins=joins) + " ORDER BY v.visit_date, v.id"
    for row in conn.execute(sql, (_bound(since),)):
        date = row["visit_date"]
        if not isinstance(date, int) or date <= 0:
            continue
        yield {
            "url": row["url"] or "",
            "visited_at": date // 1_000_000,
            "title": row["title"] or None,
            "transition": VISIT_TYPES.get(row["visit_type"]),
            "referrer": row["referrer"],
            "dwell_ms": None,
            "external_id": str(row["id"]),
        }


def _bound(since: int | None) -> int:
    return 1 if since is None else since * 1_000_000
