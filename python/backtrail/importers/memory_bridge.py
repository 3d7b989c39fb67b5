"""mcp-memory-bridge's ``memory.db``: its shared facts and their audit trail.

``facts`` holds the current value of each key (``key``, ``value``, ``source_client``:
who wrote it, ``updated_at``) and ``events`` every call in order (``id``, ``timestamp``,
``client_id``, ``action``, ``key``, ``value``): ``set`` with the value written,
``delete`` (logged even when there was nothing to delete), ``get``, ``search`` (the key
its best match, the value what was searched) and ``cas_fail`` (a refused conditional
write, with the value tried). Times are ISO 8601 UTC with milliseconds
(``2026-05-01T12:00:00.123Z``).

The peer keeps no version: a key's version here is counted as Backtrail counts it,
one per write and per delete of a live value. Events about no key (its lock demo) and
actions not listed are left out and counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from backtrail.importers._sqlite import read_only

__all__ = ["TABLES", "PeerFact", "FactHistory", "read_facts", "parse_time"]

TABLES = {
    "facts": {"key", "value", "source_client", "updated_at"},
    "events": {"id", "timestamp", "client_id", "action", "key", "value"},
}
_ACTIONS = {
    "set": "fact.set",
    "delete": "fact.delete",
    "get": "fact.read",
    "search": "fact.search",
    "cas_fail": "fact.cas_fail",
}
SOURCE = "mcp-memory-bridge"


def parse_time(value: object) -> int | None:
    """Unix seconds of the peer's ISO 8601 time (``None`` if it is not one)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    seconds = int(parsed.timestamp())
    return seconds if seconds >= 0 else None


@dataclass
class PeerFact:
    """One key as the peer knows it: its current value (``None`` once deleted), who
    wrote it and when, its version, and its events as Backtrail records them
    (``at``, ``client``, ``action``, ``details``; ``details["imported"]`` names the
    peer's event, so a second import can tell it is there)."""

    key: str
    value: str | None = None
    client: str | None = None
    created_at: int | None = None
    updated_at: int | None = None
    version: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FactHistory:
    facts: list[PeerFact]
    events_read: int
    events_left_out: int


@contextmanager
def read_facts(path: Path) -> Iterator[FactHistory]:
    """Every key of the peer's database at ``path`` with its history, in key order."""
    with read_only(path, f"an {SOURCE}", TABLES) as conn:
        yield _read(conn)


def _read(conn: sqlite3.Connection) -> FactHistory:
    found: dict[str, PeerFact] = {}
    live: dict[str, bool] = {}
    read = left_out = 0
    for row in conn.execute(
        "SELECT id, timestamp, client_id, action, key, value FROM events ORDER BY id"
    ):
        read += 1
        action = _ACTIONS.get(row["action"])
        key, at = row["key"], parse_time(row["timestamp"])
        if action is None or not isinstance(key, str) or not key or at is None:
            left_out += 1
            continue
        fact = found.setdefault(key, PeerFact(key))
        value = row["value"]
        details: dict[str, Any] = {"imported": f"{SOURCE}:{row['id']}@{row['timestamp']}"}
        if action == "fact.set":
            fact.version += 1
            text = "" if value is None else str(value)
            details |= {"version": fact.version, "created": not live.get(key, False),
                        "chars": len(text), "value": text}  # fmt: skip
            if not live.get(key, False):
                fact.created_at = at
            live[key] = True
        elif action == "fact.delete":
            if live.get(key, False):
                fact.version += 1
                details["version"] = fact.version
            else:
                details["found"] = False
            live[key] = False
        elif action == "fact.cas_fail":
            details["value"] = value
        elif action == "fact.search":
            details["query"] = value
        fact.events.append(
            {"at": at, "client": _client(row["client_id"]), "action": action, "details": details}
        )
    for row in conn.execute("SELECT key, value, source_client, updated_at FROM facts"):
        key = row["key"]
        if not isinstance(key, str) or not key:
            continue
        fact = found.setdefault(key, PeerFact(key))
        fact.value = "" if row["value"] is None else str(row["value"])
        fact.client = _client(row["source_client"])
        fact.updated_at = parse_time(row["updated_at"])
        if fact.updated_at is None:  # not a time: the last write's
            writes = [e["at"] for e in fact.events if e["action"] == "fact.set"]
            fact.updated_at = writes[-1] if writes else None
        if not live.get(key, False):  # its writes are not in the log (or were pruned)
            fact.version += 1
            fact.created_at = fact.updated_at
        if fact.created_at is None:
            fact.created_at = fact.updated_at
    return FactHistory(sorted(found.values(), key=lambda f: f.key), read, left_out)


def _client(value: object) -> str:
    return str(value) if value not in (None, "") else "anonymous"
