"""Browser actions: what an assistant asked the browser to do, and what came of it.

An action is a row that moves through these states (each move is one transaction with
its audit event, ``action.<state>``):

- ``pending``: proposed (:meth:`ActionsMixin.create_action`), waiting for a native host
  whose browser profile it targets (``profile`` ``NULL``: any browser);
- ``sent``: claimed by one host (:meth:`ActionsMixin.claim_actions`, an ``UPDATE ...
  WHERE status = 'pending'`` inside ``BEGIN IMMEDIATE``, so two hosts can never both
  claim it) and pushed to the extension;
- ``done`` / ``failed`` / ``refused``: the extension's answer
  (:meth:`ActionsMixin.finish_action`); ``refused`` when the user's settings or the
  capture policy did not allow it, ``failed`` when it was tried and did not work;
- ``expired``: no host claimed it before ``expires_at``, or a sent action got no answer
  within ``sent_timeout`` (:meth:`ActionsMixin.expire_actions`). A late answer to a sent
  action still records its real outcome.

Audit events name the action by id and carry its type, the claimer and error codes,
never URLs or titles; ``canonical_url``/``domain`` (for bookmarks and captures) let
``forget`` remove an action together with the page it was about.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from backtrail.errors import InvalidInput, NotFound
from backtrail.store import checks
from backtrail.store.core import LedgerCore

__all__ = [
    "ACTION_TYPES", "ACTION_STATUSES", "OUTCOMES", "FINISHED", "Action", "ActionNotFound",
    "ActionsMixin", "SENT_TIMEOUT",
]  # fmt: skip

ACTION_TYPES = ("group_tabs", "close_tabs", "capture_tab", "create_bookmark")
"""The browser actions of PROTOCOL.md section 5."""
ACTION_STATUSES = ("pending", "sent", "done", "failed", "refused", "expired")
OUTCOMES = ("done", "failed", "refused")
"""States an extension's answer can put an action in."""
FINISHED = ("done", "failed", "refused", "expired")
SENT_TIMEOUT = 600
"""Seconds a sent action waits for the extension's answer before it expires."""
_MAX_JSON_BYTES = 256 * 1024
_MAX_TTL = 7 * 86_400


@dataclass(frozen=True)
class Action:
    """One browser action. ``payload`` holds the action's fields as the extension gets
    them; ``result`` the extension's result (``done``), ``error`` its error or the
    reason the action expired (``{"code", "name", "message"}``)."""

    id: int
    type: str
    payload: dict[str, Any]
    status: str
    client: str
    profile: str | None
    claimed_by: str | None
    created_at: int
    updated_at: int
    expires_at: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        """True once the action reached a final state (it may still change from
        ``expired`` if a late answer arrives)."""
        return self.status in FINISHED


class ActionNotFound(NotFound):
    """No action has this id."""

    code = "action_not_found"
    kind = "action"


def _action(row: sqlite3.Row) -> Action:
    outcome = json.loads(row["result"]) if row["result"] else {}
    return Action(
        id=row["id"], type=row["type"], payload=json.loads(row["payload"]),
        status=row["status"], client=row["client"], profile=row["profile"],
        claimed_by=row["claimed_by"], created_at=row["created_at"],
        updated_at=row["updated_at"], expires_at=row["expires_at"],
        result=outcome.get("result"), error=outcome.get("error"),
    )  # fmt: skip


class ActionsMixin(LedgerCore):
    def create_action(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        profile: str | None = None,
        ttl: int = 120,
        url: str | None = None,
    ) -> Action:
        """Propose an action for the browser of ``profile`` (any browser when
        ``None``); unclaimed after ``ttl`` seconds it expires. ``url`` names the page the
        action is about (for ``forget``)."""
        kind = checks.one_of(type, "type", ACTION_TYPES)
        if not isinstance(payload, dict):
            raise InvalidInput("payload", f"must be an object, not {payload.__class__.__name__}")
        encoded = checks.json_value(payload, "payload", _MAX_JSON_BYTES)
        owner = checks.label(profile, "profile", self._limits.max_label_chars, optional=True)
        seconds = checks.integer(ttl, "ttl", minimum=1)
        if seconds > _MAX_TTL:
            raise InvalidInput("ttl", f"must be at most {_MAX_TTL} seconds, got {seconds}")
        canonical = domain = None
        if url is not None:
            _, canonical, domain = checks.web_url(url)
        now = self._now()
        with self._write() as conn:
            action_id = self._insert(
                conn,
                "INSERT INTO actions (type, payload, status, client, profile, canonical_url, "
                "domain, created_at, updated_at, expires_at) "
                "VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)",
                (kind, encoded, self.client, owner, canonical, domain, now, now, now + seconds),
            )
            self._event(conn, "action.create", "action", action_id, {"type": kind})
            row = conn.execute("SELECT * FROM actions WHERE id = ?", (action_id,)).fetchone()
        return _action(row)

    def get_action(self, action_id: int) -> Action:
        """The action with this id; ``ActionNotFound`` if there is none."""
        ident = checks.identifier(action_id, "action_id")
        with self._read() as conn:
            row = conn.execute("SELECT * FROM actions WHERE id = ?", (ident,)).fetchone()
        if row is None:
            raise ActionNotFound(ident)
        return _action(row)

    def list_actions(
        self, *, status: str | None = None, after_id: int = 0, limit: int = 100
    ) -> list[Action]:
        """Actions with ids greater than ``after_id``, oldest first, optionally in one
        ``status``."""
        clauses = ["id > ?"]
        params: list[Any] = [checks.integer(after_id, "after_id", minimum=0)]
        if status is not None:
            clauses.append("status = ?")
            params.append(checks.one_of(status, "status", ACTION_STATUSES))
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM actions WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",
                (*params, checks.limit(limit)),
            ).fetchall()
        return [_action(row) for row in rows]

    def expire_actions(self, *, sent_timeout: int = SENT_TIMEOUT) -> list[int]:
        """Mark pending actions past ``expires_at``, and sent actions without an answer
        for ``sent_timeout`` seconds, ``expired``; returns their ids. Cheap when there
        is nothing to expire (one indexed read, no write lock)."""
        timeout = checks.integer(sent_timeout, "sent_timeout", minimum=1)
        now = self._now()
        query = (
            "SELECT id, status FROM actions WHERE (status = 'pending' AND expires_at <= ?) "
            "OR (status = 'sent' AND updated_at + ? <= ?) ORDER BY id"
        )
        with self._read() as conn:
            if not conn.execute(query, (now, timeout, now)).fetchone():
                return []
        expired: list[int] = []
        with self._write() as conn:
            for row in conn.execute(query, (now, timeout, now)).fetchall():
                pending = row["status"] == "pending"
                message = (
                    "no browser picked the action up in time (is the browser open, with "
                    "the Backtrail extension connected?)"
                    if pending
                    else f"the browser did not report an outcome within {timeout} s"
                )
                outcome = {"error": {"code": "expired", "name": "expired", "message": message}}
                conn.execute(
                    "UPDATE actions SET status = 'expired', updated_at = ?, result = ? "
                    "WHERE id = ?",
                    (now, json.dumps(outcome), row["id"]),
                )
                self._event(
                    conn, "action.expired", "action", row["id"],
                    {"was": row["status"]},
                )  # fmt: skip
                expired.append(int(row["id"]))
        return expired

    def claim_actions(
        self, claimer: str, *, profile: str | None, limit: int = 10
    ) -> list[Action]:
        """Claim up to ``limit`` pending actions for the browser of ``profile`` (those
        for that profile or for any browser), oldest first, and mark them ``sent`` by
        ``claimer``. Expired actions are expired first; without pending actions this is
        one indexed read."""
        who = checks.label(claimer, "claimer", self._limits.max_label_chars)
        owner = checks.label(profile, "profile", self._limits.max_label_chars, optional=True)
        count = checks.limit(limit)
        self.expire_actions()
        query = (
            "SELECT * FROM actions WHERE status = 'pending' AND expires_at > ? "
            "AND (profile IS NULL OR profile = ?) ORDER BY id LIMIT ?"
        )
        now = self._now()
        with self._read() as conn:
            if not conn.execute(query, (now, owner, 1)).fetchone():
                return []
        claimed: list[Action] = []
        with self._write() as conn:
            for row in conn.execute(query, (now, owner, count)).fetchall():
                changed = conn.execute(
                    "UPDATE actions SET status = 'sent', claimed_by = ?, updated_at = ? "
                    "WHERE id = ? AND status = 'pending'",
                    (who, now, row["id"]),
                ).rowcount
                if not changed:
                    continue
                self._event(conn, "action.sent", "action", row["id"],
                            {"type": row["type"], "by": who})  # fmt: skip
                fresh = conn.execute("SELECT * FROM actions WHERE id = ?", (row["id"],))
                claimed.append(_action(fresh.fetchone()))
        return claimed

    def finish_action(
        self,
        action_id: int,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> Action | None:
        """Record the outcome of a sent action (or of one that expired while sent).
        ``None`` when the action is unknown, was never sent, or already has an
        outcome (a repeated answer changes nothing)."""
        ident = checks.identifier(action_id, "action_id")
        state = checks.one_of(status, "status", OUTCOMES)
        outcome = {"result": result, "error": error}
        encoded = checks.json_value(outcome, "result", _MAX_JSON_BYTES)
        with self._write() as conn:
            row = conn.execute("SELECT * FROM actions WHERE id = ?", (ident,)).fetchone()
            late = row is not None and row["status"] == "expired" and row["claimed_by"]
            if row is None or (row["status"] != "sent" and not late):
                return None
            conn.execute(
                "UPDATE actions SET status = ?, updated_at = ?, result = ? WHERE id = ?",
                (state, self._now(), encoded, ident),
            )
            details: dict[str, Any] = {"type": row["type"]}
            if error is not None and isinstance(error.get("code"), (int, str)):
                details["code"] = error["code"]
            self._event(conn, f"action.{state}", "action", ident, details)
            fresh = conn.execute("SELECT * FROM actions WHERE id = ?", (ident,)).fetchone()
        return _action(fresh)
