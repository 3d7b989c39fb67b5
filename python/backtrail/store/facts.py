"""Facts: a small key/value memory that AI clients share, with optimistic concurrency.

Every successful write bumps the key's ``version``. Writers coordinate with
compare-and-swap: ``expected_version`` (the version they read) or ``expected_value``
(the value they read), or create-only with ``require_absent``. The check and the write
happen in one ``BEGIN IMMEDIATE`` transaction, so two processes can never both succeed
from the same version. A deleted key leaves a value-less tombstone so that its version
keeps counting when it is created again: a stale ``expected_version`` from before the
deletion can never match the new fact.

The audit log keeps each key's history as mcp-memory-bridge shows it: the value every
write stored (``fact.set``), every refused conditional write with the value it tried
(``fact.cas_fail``), deletes, and, when reads are logged, gets (``fact.read``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from backtrail.errors import FactNotFound, InvalidInput, KeyExists, VersionConflict
from backtrail.store import checks
from backtrail.store.core import LedgerCore, _starts_with_casefold
from backtrail.store.models import Event, Fact

__all__ = ["FactsMixin"]

_COLUMNS = "id, key, value, version, client, created_at, updated_at"


def _fact(row: sqlite3.Row) -> Fact:
    return Fact(**{key: row[key] for key in row.keys() if key != "deleted_at"})


class FactsMixin(LedgerCore):
    def _key(self, key: object, field: str = "key") -> str:
        return checks.label(key, field, self._limits.max_fact_key_chars)

    def set_fact(
        self,
        key: str,
        value: str,
        *,
        expected_value: str | None = None,
        expected_version: int | None = None,
        require_absent: bool = False,
    ) -> Fact:
        """Set ``key`` to ``value`` and return the stored fact (its new version).

        - ``expected_version``: succeed only if the current version is this one.
        - ``expected_value``: succeed only if the current value is this one.
        - ``require_absent``: create only; ``KeyExists`` if the key is present.

        ``expected_value``/``expected_version`` may be combined (both must hold) but
        neither with ``require_absent``. A failed check raises ``VersionConflict``
        (carrying the expected and actual version or value; actual ``None`` when the key
        does not exist) and writes nothing.
        """
        name = self._key(key)
        text = checks.text(value, "value", self._limits.max_fact_value_chars, allow_empty=True)
        if expected_value is not None:
            checks.text(
                expected_value, "expected_value", self._limits.max_fact_value_chars,
                allow_empty=True,
            )  # fmt: skip
        if expected_version is not None:
            checks.identifier(expected_version, "expected_version")
        absent = checks.boolean(require_absent, "require_absent")
        if absent and expected_value is not None:
            raise InvalidInput(
                "require_absent", "cannot be combined with expected_value: choose one"
            )
        if absent and expected_version is not None:
            raise InvalidInput(
                "require_absent", "cannot be combined with expected_version: choose one"
            )
        try:
            return self._set_fact(name, text, expected_value, expected_version, absent)
        except (KeyExists, VersionConflict) as refused:
            tried: dict[str, object] = {"value": text, "chars": len(text)}
            if expected_version is not None:
                tried["expected_version"] = expected_version
            if expected_value is not None:
                tried["expected_value"] = expected_value
            if absent:
                tried["require_absent"] = True
            with self._write() as conn:
                self._event(conn, "fact.cas_fail", "fact", name, tried)
            raise refused from None

    def _set_fact(
        self, name: str, text: str, expected_value: str | None, expected_version: int | None,
        absent: bool,
    ) -> Fact:  # fmt: skip
        with self._write() as conn:
            row = conn.execute("SELECT * FROM facts WHERE key = ?", (name,)).fetchone()
            live = row is not None and row["deleted_at"] is None
            if absent and live:
                raise KeyExists(name, row["version"])
            if expected_version is not None and (not live or row["version"] != expected_version):
                raise VersionConflict(
                    name, expected_version, row["version"] if live else None, "version"
                )
            if expected_value is not None and (not live or row["value"] != expected_value):
                raise VersionConflict(name, expected_value, row["value"] if live else None, "value")
            now = self._now()
            if row is None:
                fact_id = self._insert(
                    conn,
                    "INSERT INTO facts (key, value, version, client, created_at, updated_at) "
                    "VALUES (?, ?, 1, ?, ?, ?)",
                    (name, text, self.client, now, now),
                )
                version = 1
            else:
                fact_id, version = int(row["id"]), int(row["version"]) + 1
                conn.execute(
                    "UPDATE facts SET value = ?, version = ?, client = ?, updated_at = ?, "
                    "created_at = CASE WHEN deleted_at IS NULL THEN created_at ELSE ? END, "
                    "deleted_at = NULL WHERE id = ?",
                    (text, version, self.client, now, now, fact_id),
                )
            self._change(conn, "fact", fact_id)
            self._event(
                conn, "fact.set", "fact", name,
                {"version": version, "created": not live, "chars": len(text), "value": text},
            )  # fmt: skip
            stored = conn.execute(f"SELECT {_COLUMNS} FROM facts WHERE id = ?", (fact_id,))
            result = _fact(stored.fetchone())
        return result

    def get_fact(self, key: str, *, log: bool | None = None) -> Fact:
        """The fact stored under ``key``; ``FactNotFound`` if there is none. ``log``:
        record the read (``None``: as the ledger's ``log_reads`` says)."""
        name = self._key(key)
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM facts WHERE key = ? AND deleted_at IS NULL", (name,)
            ).fetchone()
        self._log_read("fact.read", "fact", name, log=log)
        if row is None:
            raise FactNotFound(name)
        return _fact(row)

    def list_facts(
        self,
        prefix: str = "",
        *,
        case_insensitive: bool = False,
        limit: int = 1000,
        offset: int = 0,
        log: bool | None = None,
    ) -> list[Fact]:
        """Facts whose key starts with ``prefix``, ordered by key. With
        ``case_insensitive`` the prefix is compared case-folded (Unicode-aware)."""
        if not isinstance(prefix, str):
            raise InvalidInput("prefix", f"must be a string, not {type(prefix).__name__}")
        if prefix:
            self._key(prefix, "prefix")
        fold = checks.boolean(case_insensitive, "case_insensitive")
        count = checks.limit(limit)
        skip = checks.integer(offset, "offset", minimum=0)
        with self._read() as conn:
            if fold and self._pg:  # no Unicode case folding in SQL: compare here
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM facts WHERE deleted_at IS NULL ORDER BY key"
                ).fetchall()
                rows = [row for row in rows if _starts_with_casefold(row["key"], prefix)]
                rows = rows[skip : skip + count]
            else:
                condition, params = (
                    ("bt_startswith_ci(key, ?)", (prefix,)) if fold
                    else ("substr(key, 1, length(?)) = ?", (prefix, prefix))
                )  # fmt: skip
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM facts WHERE deleted_at IS NULL AND {condition} "
                    "ORDER BY key LIMIT ? OFFSET ?",
                    (*params, count, skip),
                ).fetchall()
        self._log_read("facts.list", "fact", prefix or None, log=log)
        return [_fact(row) for row in rows]

    def delete_fact(self, key: str, *, expected_version: int | None = None) -> Fact:
        """Delete ``key`` and return what it held. ``FactNotFound`` if absent;
        ``VersionConflict`` if ``expected_version`` is given and does not match."""
        name = self._key(key)
        if expected_version is not None:
            checks.identifier(expected_version, "expected_version")
        with self._write() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM facts WHERE key = ? AND deleted_at IS NULL", (name,)
            ).fetchone()
            if row is None:
                if expected_version is not None:
                    raise VersionConflict(name, expected_version, None, "version")
                raise FactNotFound(name)
            if expected_version is not None and row["version"] != expected_version:
                raise VersionConflict(name, expected_version, row["version"], "version")
            now = self._now()
            conn.execute(
                "UPDATE facts SET value = NULL, version = version + 1, client = ?, "
                "updated_at = ?, deleted_at = ? WHERE id = ?",
                (self.client, now, now, row["id"]),
            )
            self._change(conn, "fact", int(row["id"]), "delete")
            self._event(conn, "fact.delete", "fact", name, {"version": row["version"] + 1})
        return _fact(row)

    def fact_history(self, key: str, *, limit: int = 100) -> list[Event]:
        """The events about ``key`` (sets with their values, refused conditional writes,
        deletes, and reads and searches if logged), oldest first."""
        name = self._key(key)
        return self.list_events(target_type="fact", target=name, limit=limit)

    # -------------------------------------------------------------- importing

    def import_facts(
        self, facts: Sequence[Mapping[str, Any]], *, overwrite: bool = False
    ) -> dict[str, Any]:
        """Bring in facts from another memory with their history, in one transaction.

        Each item has ``key``, ``value`` (``None``: the key was deleted there),
        ``client``, ``created_at``, ``updated_at``, ``version`` and ``events`` (``at``,
        ``client``, ``action``, ``details``, where ``details["imported"]`` names the
        source's event). Events already imported are not added again. A key that holds
        another value here (or a value where the source deleted it) is a conflict and
        left as it is, history too, unless ``overwrite``; then the source's value
        becomes a new version here (a version never goes back, so a compare-and-swap
        against an older version still fails). An item the ledger refuses is left out
        whole. Returns the counts, the conflicting keys and the refused ``(key,
        reason)``."""
        if not isinstance(facts, Sequence) or isinstance(facts, (str, bytes)):
            raise InvalidInput("facts", f"must be a list, not {type(facts).__name__}")
        for item in facts:
            if not isinstance(item, Mapping):
                raise InvalidInput("facts", f"each must be an object, not {type(item).__name__}")
        overwrite = checks.boolean(overwrite, "overwrite")
        counts: dict[str, Any] = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0,
                                  "history_only": 0, "events": 0, "conflicts": [],
                                  "invalid": []}  # fmt: skip
        with self._write() as conn:
            for item in facts:
                try:
                    with self._write():  # a savepoint: a refused item leaves nothing
                        outcome = self._import_fact(conn, item, overwrite)
                except InvalidInput as error:
                    counts["invalid"].append((str(item.get("key")), error.message))
                    continue
                if outcome == "conflict":
                    counts["conflicts"].append(item["key"])
                else:
                    counts[outcome[0]] += 1
                    counts["events"] += outcome[1]
            changed = counts["created"] + counts["updated"] + counts["deleted"] + counts["events"]
            if changed:
                summary = {k: v if isinstance(v, int) else len(v) for k, v in counts.items()}
                self._event(conn, "facts.import", "facts", None, summary)
        return counts

    def _import_fact(
        self, conn: sqlite3.Connection, item: Mapping[str, Any], overwrite: bool
    ) -> tuple[str, int] | str:
        name = self._key(item["key"])
        value = item["value"]
        if value is not None:
            value = checks.text(value, "value", self._limits.max_fact_value_chars,
                                allow_empty=True)  # fmt: skip
        row = conn.execute("SELECT * FROM facts WHERE key = ?", (name,)).fetchone()
        live = row is not None and row["deleted_at"] is None
        differs = live and (value is None or row["value"] != value)
        if differs and not overwrite:
            return "conflict"
        known = {
            found[0]
            for found in conn.execute(
                "SELECT json_extract(details, '$.imported') FROM events WHERE target_type = "
                "'fact' AND target = ? AND json_extract(details, '$.imported') IS NOT NULL",
                (name,),
            )
        }
        added = 0
        for event in item["events"]:
            details = dict(event["details"])
            if details.get("imported") in known:
                continue
            conn.execute(
                "INSERT INTO events (at, client, action, target_type, target, details) "
                "VALUES (?, ?, ?, 'fact', ?, ?)",
                (checks.timestamp(event["at"], "at"),
                 checks.label(event["client"], "client", self._limits.max_label_chars),
                 checks.label(event["action"], "action", self._limits.max_label_chars), name,
                 json.dumps(details, sort_keys=True)),
            )  # fmt: skip
            added += 1
        version = checks.integer(item["version"], "version", minimum=0)
        if value is None:
            if not live:
                return ("history_only", added)
            version = max(version, int(row["version"]) + 1)
            now = checks.timestamp(item["updated_at"] or self._now(), "updated_at")
            conn.execute(
                "UPDATE facts SET value = NULL, version = ?, updated_at = ?, deleted_at = ? "
                "WHERE id = ?",
                (version, now, now, row["id"]),
            )
            self._change(conn, "fact", int(row["id"]), "delete")
            return ("deleted", added)
        if live and not differs:
            return ("unchanged", added)
        client = checks.label(item["client"], "client", self._limits.max_label_chars)
        created = checks.timestamp(item["created_at"], "created_at")
        updated = checks.timestamp(item["updated_at"], "updated_at")
        if row is None:
            cursor = conn.execute(
                "INSERT INTO facts (key, value, version, client, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (name, value, max(version, 1), client, created, updated),
            )
            self._change(conn, "fact", int(cursor.lastrowid or 0))
            return ("created", added)
        conn.execute(
            "UPDATE facts SET value = ?, version = ?, client = ?, created_at = ?, "
            "updated_at = ?, deleted_at = NULL WHERE id = ?",
            (value, max(version, int(row["version"]) + 1), client,
             row["created_at"] if live else created, updated, row["id"]),
        )  # fmt: skip
        self._change(conn, "fact", int(row["id"]))
        return ("updated" if live else "created", added)
