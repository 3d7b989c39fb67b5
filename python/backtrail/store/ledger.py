"""The :class:`Ledger`: Backtrail's single source of truth, in a SQLite file or on a
PostgreSQL server."""

from __future__ import annotations

import json
import os
from typing import Any

from backtrail.store import checks
from backtrail.store.access import AccessMixin
from backtrail.store.actions import ActionsMixin
from backtrail.store.facts import FactsMixin
from backtrail.store.forget import ForgetMixin
from backtrail.store.items import ItemsMixin
from backtrail.store.models import Change, Stats
from backtrail.store.pages import PagesMixin
from backtrail.store.paths import ledger_path
from backtrail.store.tabs import TabsMixin

__all__ = ["Ledger"]

_COUNTED_TABLES = (
    "pages", "page_versions", "visits", "bookmarks", "highlights", "notes", "tabs", "events",
    "changes", "settings",
)  # fmt: skip
_MISSING = object()


class Ledger(
    PagesMixin, ItemsMixin, TabsMixin, FactsMixin, ActionsMixin, ForgetMixin, AccessMixin
):
    """The ledger: pages and versions, visits, bookmarks, highlights, notes, open
    tabs, facts, browser actions, settings, tokens and deliveries, the audit log and the
    change feed.

    ``Ledger(path, client=..., busy_timeout_ms=10_000, limits=Limits(), clock=time.time,
    log_reads=False, synchronous="full")`` opens (creating and migrating as needed) the
    SQLite file at ``path``, or, when ``path`` is a ``postgresql://`` URL, that database
    (:mod:`backtrail.store.postgres`; ``synchronous`` is then the server's business);
    :meth:`open` finds the file in the data directory. One connection per
    ledger; calls are serialised, so share a ledger between threads only if one call at
    a time is enough. Any number of processes may open the same file.

    Conventions: times are integer unix seconds, durations integer milliseconds; ids are
    integers that are never reused. Every mutation writes exactly one audit event
    (calls that change nothing write none) and its change-feed rows in the same
    transaction. ``synchronous="full"`` makes every commit durable before it returns,
    so an acknowledged capture survives a power cut.
    """

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str] | None = None, **options: Any) -> Ledger:
        """Open the ledger in :func:`~backtrail.store.paths.data_dir` ``(data_dir)``."""
        return cls(ledger_path(data_dir), **options)

    def __enter__(self) -> Ledger:
        return self

    # ------------------------------------------------------------------ settings

    def get_setting(self, key: str, default: Any = None) -> Any:
        """The JSON value stored under ``key``, or ``default``."""
        name = checks.label(key, "key", self._limits.max_label_chars)
        with self._read() as conn:
            row = conn.execute("SELECT value FROM settings WHERE key = ?", (name,)).fetchone()
        return default if row is None else json.loads(row["value"])

    def set_setting(self, key: str, value: Any) -> None:
        """Store any JSON-serialisable ``value`` under ``key``."""
        name = checks.label(key, "key", self._limits.max_label_chars)
        encoded = checks.json_value(value, "value", self._limits.max_setting_bytes)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                (name, encoded, self._now()),
            )
            self._event(conn, "setting.set", "setting", name)

    def delete_setting(self, key: str) -> bool:
        """Remove ``key``; False if it was not set."""
        name = checks.label(key, "key", self._limits.max_label_chars)
        with self._write() as conn:
            removed = conn.execute("DELETE FROM settings WHERE key = ?", (name,)).rowcount > 0
            if removed:
                self._event(conn, "setting.delete", "setting", name)
        return removed

    def list_settings(self) -> dict[str, Any]:
        with self._read() as conn:
            rows = conn.execute("SELECT key, value FROM settings ORDER BY key").fetchall()
        return {row["key"]: json.loads(row["value"]) for row in rows}

    # --------------------------------------------------------------- change feed

    def changes_since(self, seq: int, limit: int = 1000) -> list[Change]:
        """Up to ``limit`` changes with ``seq`` greater than the given one, in order.

        Sequence numbers are assigned inside serialised write transactions, so they
        commit in order: a reader that has seen ``seq`` N will never later find a
        committed change below N. An indexer stores the last ``seq`` it applied as its
        watermark and resumes from it. Several entries may name the same entity;
        the latest one wins (read the entity's current state when applying).
        """
        after = checks.integer(seq, "seq", minimum=0)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, entity_type, entity_id, op, aspect, at FROM changes "
                "WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, checks.limit(limit)),
            ).fetchall()
        return [Change(**{key: row[key] for key in row.keys()}) for row in rows]

    def max_change_seq(self) -> int:
        """The newest change's sequence number, 0 when there is none."""
        with self._read() as conn:
            row = conn.execute("SELECT MAX(seq) FROM changes").fetchone()
        return int(row[0] or 0)

    def last_event_id(self, action: str) -> int:
        """The id of the newest audit event with this ``action``, 0 when there is none
        (indexes compare it with the last ``forget`` they compacted away)."""
        name = checks.label(action, "action", self._limits.max_label_chars)
        with self._read() as conn:
            row = conn.execute("SELECT MAX(id) FROM events WHERE action = ?", (name,)).fetchone()
        return int(row[0] or 0)

    def prune_changes(self, upto_seq: int) -> int:
        """Delete change-feed entries with ``seq <= upto_seq`` (once every index has
        applied them); returns how many were removed. Sequence numbers never restart."""
        upto = checks.integer(upto_seq, "upto_seq", minimum=0)
        with self._write() as conn:
            removed = conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,)).rowcount
            if removed:
                self._event(conn, "changes.prune", "changes", None, {"removed": removed})
        return removed

    # ------------------------------------------------------------------- stats

    def stats(self) -> Stats:
        """Row counts per table (``facts`` counts live facts), last capture (queued
        captures included) and visit times, and the file sizes."""
        with self._read() as conn:
            counts = {
                table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in _COUNTED_TABLES
            }
            counts["facts"] = conn.execute(
                "SELECT COUNT(*) FROM facts WHERE deleted_at IS NULL"
            ).fetchone()[0]
            # Queued captures count too: acknowledged, but not yet extracted into a version.
            last_capture = conn.execute(
                "SELECT MAX(at) FROM (SELECT MAX(last_captured_at) AS at FROM pages "
                "UNION ALL SELECT MAX(captured_at) FROM raw_captures) AS captures"
            ).fetchone()[0]
            last_visit = conn.execute("SELECT MAX(visited_at) FROM visits").fetchone()[0]
            if self._pg:  # the database's size; the server keeps its own write-ahead log
                db_bytes = conn.execute("SELECT pg_database_size(current_database())")
                db_bytes, wal_bytes = int(db_bytes.fetchone()[0]), 0
            else:
                page_count = conn.execute("PRAGMA page_count").fetchone()[0]
                page_size = conn.execute("PRAGMA page_size").fetchone()[0]
                db_bytes = int(page_count) * int(page_size)
                wal = self.path.with_name(self.path.name + "-wal")
                wal_bytes = wal.stat().st_size if wal.exists() else 0
            max_seq = conn.execute("SELECT MAX(seq) FROM changes").fetchone()[0] or 0
            version = self._schema_version(conn)
        return Stats(
            path=self.location,
            schema_version=version,
            counts=counts,
            last_capture_at=last_capture,
            last_visit_at=last_visit,
            db_bytes=db_bytes,
            wal_bytes=wal_bytes,
            max_change_seq=int(max_seq),
        )

    def vacuum(self) -> bool:
        """Rebuild the file to its smallest size (VACUUM), then truncate the WAL."""
        return self._purge("full")
