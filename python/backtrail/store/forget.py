"""Forgetting: removing browsing data for good.

What each selector removes (facts and settings are never browsing data and are kept,
except facts with ``everything=True, include_facts=True``):

- ``url``: the page with that canonical URL (all its versions and visits), highlights,
  notes and bookmarks on it, open-tab rows showing it, and the referrer of any other
  visit that came from it (set to NULL).
- ``domain``: the same for every URL on that host or any of its subdomains. A public
  suffix (``org``, ``co.uk``, ``github.io``) is refused: it names every site under it.
- ``since``/``until`` (either may be omitted): visits in [since, until); page versions
  captured or updated in that range; highlights and notes created in it. A page left
  with neither visits nor versions is removed; one that keeps some has its visit count,
  first/last seen, dwell, title and current version recomputed from what remains.
  Bookmarks and open tabs mirror the browser's current state and are left alone.
- ``everything``: every page, version, visit, highlight, note, bookmark and tab.

Browser actions go too: with ``url``/``domain`` those about a matching page (bookmarks
and captures an assistant asked for), with a time range those proposed in it, with
``everything`` all of them.

Raw HTML of captures still waiting for extraction goes with its page; a time range also
removes the queued captures taken in it.

The deletion is recorded as one ``forget`` event whose details hold only counts (and,
for a time range, the range) — never the URL, domain, titles or text. Removed indexable
records get ``delete`` entries in the change feed. SQLite runs with ``secure_delete`` so
freed space is zeroed; afterwards the free pages are released (incremental vacuum, or a
full VACUUM) and the WAL is checkpointed and truncated so no copy remains in ``-wal``.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from backtrail.errors import BacktrailError, InvalidInput
from backtrail.store import checks
from backtrail.store.core import LedgerCore
from backtrail.store.models import ForgetResult, VacuumMode
from backtrail.urls import site_domain

__all__ = ["ForgetMixin"]

logger = logging.getLogger(__name__)

_END_OF_TIME = checks.MAX_TIMESTAMP + 1
_VACUUM_MODES = ("none", "incremental", "full")
# Tables with canonical_url/domain columns, and their change-feed entity type.
_URL_TABLES = (("highlights", "highlight"), ("notes", "note"), ("bookmarks", "bookmark"))


class ForgetMixin(LedgerCore):
    def forget(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        everything: bool = False,
        include_facts: bool = False,
        vacuum: VacuumMode = "incremental",
    ) -> ForgetResult:
        """Remove browsing data chosen by exactly one selector (see the module doc)."""
        everything = checks.boolean(everything, "everything")
        include_facts = checks.boolean(include_facts, "include_facts")
        mode = checks.one_of(vacuum, "vacuum", _VACUUM_MODES)
        chosen = [
            name
            for name, given in (
                ("url", url is not None),
                ("domain", domain is not None),
                ("time_range", since is not None or until is not None),
                ("everything", everything),
            )
            if given
        ]
        if len(chosen) != 1:
            raise InvalidInput(
                "selector", "give exactly one of url, domain, since/until, or everything=True"
            )
        if include_facts and not everything:
            raise InvalidInput("include_facts", "only applies together with everything=True")
        kind = chosen[0]
        details: dict[str, Any] = {}
        if kind in ("url", "domain"):
            where, params, referrer_where, referrer_params = _place(url, domain)
        elif kind == "time_range":
            start = 0 if since is None else checks.timestamp(since, "since")
            end = _END_OF_TIME if until is None else checks.timestamp(until, "until")
            if start >= end:
                raise InvalidInput("until", f"must be later than since ({start}), got {end}")
            details = {"since": since, "until": until}
        else:
            where, params, referrer_where, referrer_params = "1", [], "0", []
        with self._write() as conn:
            if kind == "time_range":
                counts = self._forget_range(conn, start, end)
            else:
                counts = self._forget_where(conn, where, params, referrer_where, referrer_params)
            if include_facts:
                counts["facts"] = self._forget_facts(conn)
            self._event(conn, "forget", "selector", kind, {**details, "counts": counts})
        purged = self._purge(mode)
        return ForgetResult(selector=kind, counts=counts, purged=purged)

    def forget_preview(
        self, *, url: str | None = None, domain: str | None = None
    ) -> dict[str, int]:
        """What :meth:`forget` with this ``url`` or ``domain`` would remove, counted per
        table (nothing is changed): pages, page_versions, visits, highlights, notes,
        bookmarks."""
        if (url is None) == (domain is None):
            raise InvalidInput("selector", "give exactly one of url or domain")
        where, params, _, _ = _place(url, domain)
        pages = f"page_id IN (SELECT id FROM pages WHERE {where})"
        queries = {
            "pages": f"SELECT COUNT(*) FROM pages WHERE {where}",
            "page_versions": f"SELECT COUNT(*) FROM page_versions WHERE {pages}",
            "visits": f"SELECT COUNT(*) FROM visits WHERE {pages}",
            **{table: f"SELECT COUNT(*) FROM {table} WHERE {where}" for table, _ in _URL_TABLES},
        }
        with self._read() as conn:
            return {name: int(conn.execute(sql, params).fetchone()[0])
                    for name, sql in queries.items()}  # fmt: skip

    # ---------------------------------------------------------------- selectors

    def _delete_ids(
        self, conn: sqlite3.Connection, table: str, entity_type: str | None, ids: list[int]
    ) -> int:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            conn.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            if entity_type is not None:
                for entity_id in chunk:
                    self._change(conn, entity_type, entity_id, "delete")
        return len(ids)

    def _ids(self, conn: sqlite3.Connection, sql: str, params: list[Any]) -> list[int]:
        return [int(row[0]) for row in conn.execute(sql, params)]

    def _forget_where(
        self,
        conn: sqlite3.Connection,
        where: str,
        params: list[Any],
        referrer_where: str,
        referrer_params: list[Any],
    ) -> dict[str, int]:
        page_ids = self._ids(conn, f"SELECT id FROM pages WHERE {where} ORDER BY id", params)
        counts: dict[str, int] = {}
        counts["visits"] = conn.execute(
            f"SELECT COUNT(*) FROM visits WHERE page_id IN (SELECT id FROM pages WHERE {where})",
            params,
        ).fetchone()[0]
        counts["page_versions"] = conn.execute(
            "SELECT COUNT(*) FROM page_versions "
            f"WHERE page_id IN (SELECT id FROM pages WHERE {where})",
            params,
        ).fetchone()[0]
        counts["pages"] = self._delete_ids(conn, "pages", "page", page_ids)  # cascades
        for table, entity_type in _URL_TABLES:
            ids = self._ids(conn, f"SELECT id FROM {table} WHERE {where} ORDER BY id", params)
            counts[table] = self._delete_ids(conn, table, entity_type, ids)
        counts["tabs"] = conn.execute(f"DELETE FROM tabs WHERE {where}", params).rowcount
        counts["actions"] = conn.execute(f"DELETE FROM actions WHERE {where}", params).rowcount
        counts["referrers_cleared"] = conn.execute(
            f"UPDATE visits SET referrer = NULL WHERE {referrer_where}", referrer_params
        ).rowcount
        return counts

    def _forget_range(self, conn: sqlite3.Connection, start: int, end: int) -> dict[str, int]:
        affected = set(
            self._ids(
                conn,
                "SELECT DISTINCT page_id FROM visits WHERE visited_at >= ? AND visited_at < ?",
                [start, end],
            )
        )
        affected.update(
            self._ids(
                conn,
                "SELECT DISTINCT page_id FROM page_versions WHERE captured_at < ? "
                "AND updated_at >= ?",
                [end, start],
            )
        )
        counts: dict[str, int] = {}
        counts["visits"] = conn.execute(
            "DELETE FROM visits WHERE visited_at >= ? AND visited_at < ?", (start, end)
        ).rowcount
        counts["page_versions"] = conn.execute(
            "DELETE FROM page_versions WHERE captured_at < ? AND updated_at >= ?", (end, start)
        ).rowcount
        affected.update(
            self._ids(
                conn,
                "SELECT DISTINCT page_id FROM raw_captures WHERE captured_at >= ? "
                "AND captured_at < ?",
                [start, end],
            )
        )
        counts["raw_captures"] = conn.execute(
            "DELETE FROM raw_captures WHERE captured_at >= ? AND captured_at < ?", (start, end)
        ).rowcount
        emptied: list[int] = []
        updated = 0
        for page_id in sorted(affected):
            if self._recompute_page(conn, page_id):
                updated += 1
            else:
                emptied.append(page_id)
        counts["pages"] = self._delete_ids(conn, "pages", "page", emptied)
        counts["pages_updated"] = updated
        for table, entity_type in _URL_TABLES[:2]:
            ids = self._ids(
                conn,
                f"SELECT id FROM {table} WHERE created_at >= ? AND created_at < ? ORDER BY id",
                [start, end],
            )
            counts[table] = self._delete_ids(conn, table, entity_type, ids)
        counts["actions"] = conn.execute(
            "DELETE FROM actions WHERE created_at >= ? AND created_at < ?", (start, end)
        ).rowcount
        return counts

    def _recompute_page(self, conn: sqlite3.Connection, page_id: int) -> bool:
        """Rebuild a page's stats from its remaining visits and versions; False if it
        has none left (the caller deletes it)."""
        visits = conn.execute(
            "SELECT COUNT(*) AS n, MIN(visited_at) AS first, MAX(visited_at) AS last, "
            "COALESCE(SUM(dwell_ms), 0) AS dwell FROM visits WHERE page_id = ?",
            (page_id,),
        ).fetchone()
        versions = conn.execute(
            "SELECT COUNT(*) AS n, MAX(version) AS current, MIN(captured_at) AS first, "
            "MAX(updated_at) AS last FROM page_versions WHERE page_id = ?",
            (page_id,),
        ).fetchone()
        queued = conn.execute(
            "SELECT COUNT(*) FROM raw_captures WHERE page_id = ?", (page_id,)
        ).fetchone()[0]
        if visits["n"] == 0 and versions["n"] == 0 and queued == 0:
            return False
        current = conn.execute(
            "SELECT title, language FROM page_versions WHERE page_id = ? AND version = ?",
            (page_id, versions["current"]),
        ).fetchone()
        firsts = [value for value in (visits["first"], versions["first"]) if value is not None]
        lasts = [value for value in (visits["last"], versions["last"]) if value is not None]
        if not firsts:  # only a queued capture is left
            row = conn.execute(
                "SELECT MIN(captured_at), MAX(captured_at) FROM raw_captures WHERE page_id = ?",
                (page_id,),
            ).fetchone()
            firsts, lasts = [row[0]], [row[1]]
        conn.execute(
            "UPDATE pages SET visit_count = ?, first_seen = ?, last_seen = ?, dwell_ms = ?, "
            "current_version = ?, last_captured_at = ?, title = ?, language = ? WHERE id = ?",
            (
                visits["n"],
                min(firsts),
                max(lasts),
                visits["dwell"],
                versions["current"],
                versions["last"],
                current["title"] if current else None,
                current["language"] if current else None,
                page_id,
            ),
        )
        self._change(conn, "page", page_id, "upsert", "content")
        return True

    def _forget_facts(self, conn: sqlite3.Connection) -> int:
        live = self._ids(conn, "SELECT id FROM facts WHERE deleted_at IS NULL ORDER BY id", [])
        for fact_id in live:
            self._change(conn, "fact", fact_id, "delete")
        conn.execute("DELETE FROM facts")
        conn.execute(
            "UPDATE events SET details = json_remove(details, '$.value', '$.expected_value', "
            "'$.query') WHERE target_type = 'fact'"
        )
        return len(live)

    # ----------------------------------------------------------------- on disk

    def _purge(self, mode: str) -> bool:
        """Release freed pages and truncate the WAL; True if no old copy is left."""
        with self._lock:
            try:
                with self._errors():
                    if mode == "incremental":
                        self._conn.execute("PRAGMA incremental_vacuum").fetchall()
                    elif mode == "full":
                        self._conn.execute("VACUUM")
                return self.checkpoint()
            except BacktrailError as error:
                logger.warning("forget succeeded but the file could not be compacted: %s", error)
                return False

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it. Returns False when
        another process's open read kept it from finishing (within the busy timeout)."""
        with self._lock, self._errors():
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            logger.info("WAL checkpoint incomplete: another process is still reading")
        return not busy


def _place(url: str | None, domain: str | None) -> tuple[str, list[Any], str, list[Any]]:
    """The WHERE clauses (and parameters) of a ``url`` or ``domain`` selector: rows on
    that page or site, then visits whose referrer was there."""
    if url is not None:
        canonical = checks.web_url(url)[1]
        return "canonical_url = ?", [canonical], "referrer = ?", [canonical]
    name = site_domain(domain)
    where = "(domain = ? OR domain LIKE ? ESCAPE '\\')"
    referrer = "referrer IS NOT NULL AND bt_domain_match(bt_host(referrer), ?)"
    return where, [name, "%." + name.replace("_", "\\_")], referrer, [name]
