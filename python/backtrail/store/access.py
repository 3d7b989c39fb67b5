"""Who may use a server, and what devices already delivered.

**Tokens.** A server (``backtrail mcp --http``) accepts a bearer token when the ledger
holds its SHA-256 digest, not revoked. Each token names the client its requests are
attributed to and a scope: ``read`` and ``write`` for MCP clients, ``device`` for a
computer's native host forwarding the browser's records to ``POST /host``. The secret
itself is never stored. Every node looks a presented token up here on every request
(by primary key), so revoking one refuses it at once on all of them.

**Deliveries.** A device resends a queued message until it has the server's answer,
with the same id. The server records ``(client_id, message_id)`` with the response in
the same transaction as the message's writes; a resend finds it and gets the stored
response, and nothing is written twice. A delivery writes no audit event of its own: the
write it accompanies has one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from backtrail.errors import InvalidInput
from backtrail.store import checks
from backtrail.store.core import LedgerCore

__all__ = ["AccessMixin", "TOKEN_SCOPES", "TokenRecord", "CLIENT_ID_PATTERN"]

TOKEN_SCOPES = ("read", "write", "device")
"""``read``: MCP tools that change nothing; ``write``: every MCP tool; ``device``: only
``POST /host`` (the browser's records and the popup's reads)."""
CLIENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:@/+-]{1,64}$")
"""A client id: 1-64 letters, digits or ``._:@/+-`` (as in token files)."""
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_PREFIX = re.compile(r"^[0-9a-f]{8,64}$")
_MESSAGE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_COLUMNS = "digest, client_id, scope, created_at, revoked_at"


@dataclass(frozen=True)
class TokenRecord:
    """A token the ledger knows, by the hex SHA-256 ``digest`` of its secret."""

    digest: str
    client_id: str
    scope: str
    created_at: int
    revoked_at: int | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _record(row: Any) -> TokenRecord:
    return TokenRecord(
        digest=row["digest"], client_id=row["client_id"], scope=row["scope"],
        created_at=int(row["created_at"]),
        revoked_at=None if row["revoked_at"] is None else int(row["revoked_at"]),
    )  # fmt: skip


def client_id(value: object, field: str = "client_id") -> str:
    """``value`` as a client id, or ``InvalidInput``."""
    if not isinstance(value, str) or not CLIENT_ID_PATTERN.match(value):
        raise InvalidInput(field, "must be 1-64 letters, digits or ._:@/+-")
    return value


def _digest(value: object) -> str:
    if not isinstance(value, str) or not _DIGEST.match(value):
        raise InvalidInput("digest", "must be 64 lowercase hexadecimal digits")
    return value


class AccessMixin(LedgerCore):
    # ---------------------------------------------------------------- tokens

    def add_token(self, digest: str, client: str, scope: str) -> TokenRecord:
        """Accept the token whose SHA-256 is ``digest`` (hex) for ``client`` with
        ``scope``; ``InvalidInput`` if that digest is already known."""
        found = _digest(digest)
        name = client_id(client)
        chosen = checks.one_of(scope, "scope", TOKEN_SCOPES)
        now = self._now()
        with self._write() as conn:
            added = conn.execute(
                "INSERT INTO tokens (digest, client_id, scope, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (digest) DO NOTHING",
                (found, name, chosen, now),
            ).rowcount
            if not added:
                raise InvalidInput("digest", "this token is already known")
            self._event(conn, "token.add", "token", name, {"scope": chosen, "digest": found[:12]})
        return TokenRecord(found, name, chosen, now, None)

    def token(self, digest: str) -> TokenRecord | None:
        """The token with this digest (revoked ones too), or ``None``."""
        found = _digest(digest)
        with self._read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE digest = ?", (found,))
            row = row.fetchone()
        return None if row is None else _record(row)

    def list_tokens(self, *, include_revoked: bool = True) -> list[TokenRecord]:
        """Every token, oldest first."""
        where = "" if checks.boolean(include_revoked, "include_revoked") else (
            "WHERE revoked_at IS NULL"
        )  # fmt: skip
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM tokens {where} ORDER BY created_at, client_id, digest"
            ).fetchall()
        return [_record(row) for row in rows]

    def active_token_count(self) -> int:
        with self._read() as conn:
            row = conn.execute("SELECT COUNT(*) FROM tokens WHERE revoked_at IS NULL").fetchone()
        return int(row[0])

    def revoke_tokens(self, which: str) -> list[TokenRecord]:
        """Revoke the active tokens of the client named ``which``, or else the one token
        whose digest starts with ``which`` (at least 8 hex digits); returns them as
        revoked (empty when none matched). A prefix matching several tokens is refused."""
        if not isinstance(which, str) or not which:
            raise InvalidInput("which", "give a client id or the start of a token's digest")
        now = self._now()
        with self._write() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM tokens WHERE client_id = ? AND revoked_at IS NULL "
                "ORDER BY digest",
                (which,),
            ).fetchall()
            if not rows and _PREFIX.match(which):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM tokens WHERE substr(digest, 1, ?) = ? "
                    "AND revoked_at IS NULL ORDER BY digest",
                    (len(which), which),
                ).fetchall()
                if len(rows) > 1:
                    raise InvalidInput("which", f"the prefix {which} matches {len(rows)} tokens; "
                                       "give more digits")  # fmt: skip
            found = [_record(row) for row in rows]
            for record in found:
                conn.execute(
                    "UPDATE tokens SET revoked_at = ? WHERE digest = ?", (now, record.digest)
                )
            if found:
                self._event(conn, "token.revoke", "token", found[0].client_id,
                            {"digests": [r.digest[:12] for r in found]})  # fmt: skip
        return [
            TokenRecord(r.digest, r.client_id, r.scope, r.created_at, now) for r in found
        ]

    # ------------------------------------------------------------ deliveries

    def delivery(self, client: str, message_id: str) -> dict[str, Any] | None:
        """The stored response to ``client``'s message ``message_id``, or ``None`` when
        it was not delivered yet. Inside a write transaction it sees that transaction's
        own deliveries."""
        name, ident = client_id(client), _message_id(message_id)
        with self._read() as conn:
            row = conn.execute(
                "SELECT response FROM deliveries WHERE client_id = ? AND message_id = ?",
                (name, ident),
            ).fetchone()
        return None if row is None else dict(json.loads(row["response"]))

    def record_delivery(
        self, client: str, message_id: str, kind: str, response: dict[str, Any]
    ) -> bool:
        """Record that ``client``'s message ``message_id`` of type ``kind`` was applied,
        with its ``response``; False when it already was. Call it inside the
        transaction that made the message's writes."""
        name, ident = client_id(client), _message_id(message_id)
        label = checks.label(kind, "type", 64)
        encoded = json.dumps(response, separators=(",", ":"))
        with self._write() as conn:
            return bool(
                conn.execute(
                    "INSERT INTO deliveries (client_id, message_id, type, response, "
                    "delivered_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (client_id, message_id) DO NOTHING",
                    (name, ident, label, encoded, self._now()),
                ).rowcount
            )

    def prune_deliveries(self, before: int) -> int:
        """Forget deliveries recorded before ``before`` (unix seconds): a device resends
        within hours or days, never after that. Returns how many were removed."""
        cutoff = checks.timestamp(before, "before")
        with self._write() as conn:
            removed = conn.execute(
                "DELETE FROM deliveries WHERE delivered_at < ?", (cutoff,)
            ).rowcount
            if removed:
                self._event(conn, "deliveries.prune", "deliveries", None, {"removed": removed})
        return int(removed)


def _message_id(value: object) -> str:
    if not isinstance(value, str) or not _MESSAGE_ID.match(value):
        raise InvalidInput("id", "must be 1-64 characters from A-Z a-z 0-9 . _ : -")
    return value
