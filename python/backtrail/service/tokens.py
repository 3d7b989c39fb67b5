"""Bearer tokens kept in the ledger, for the HTTP server's clients and for devices.

A token is a random secret shown once when it is made (:meth:`TokenOps.add_token`); the
ledger keeps only its SHA-256 digest, the client its requests are attributed to and its
scope (``read``, ``write``, ``device``). A server checks a presented token on every
request with a :class:`TokenVerifier` (a ledger connection of its own, so the check never
waits behind the memory's writes), so a token revoked on any machine is refused at once
by every node.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass

from backtrail.config import Config
from backtrail.errors import TokenNotFound
from backtrail.service.base import MemoryBase
from backtrail.store import TOKEN_SCOPES, Ledger, TokenRecord

__all__ = ["TOKEN_SCOPES", "NewToken", "TokenOps", "TokenRecord", "TokenVerifier", "token_digest"]

_TOKEN_BYTES = 32
_MAX_PRESENTED_CHARS = 512


def token_digest(token: str) -> str:
    """The hex SHA-256 of ``token`` (what the ledger and token files keep)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class NewToken:
    """A token just made: the ``token`` itself (shown once, never stored) and its record."""

    token: str
    record: TokenRecord


class TokenOps(MemoryBase):
    """Making, listing and revoking tokens (``backtrail token``)."""

    def add_token(self, client_id: str, *, scope: str) -> NewToken:
        """A new random token for ``client_id`` with ``scope`` (``read``, ``write`` or
        ``device``); the ledger keeps its digest."""
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        return NewToken(token, self._ledger.add_token(token_digest(token), client_id, scope))

    def list_tokens(self, *, include_revoked: bool = True) -> list[TokenRecord]:
        return self._ledger.list_tokens(include_revoked=include_revoked)

    def revoke_tokens(self, which: str) -> list[TokenRecord]:
        """Revoke every active token of the client ``which``, or the one token whose
        digest starts with ``which``; returns what was revoked (``TokenNotFound`` when
        nothing matched)."""
        revoked = self._ledger.revoke_tokens(which)
        if not revoked:
            raise TokenNotFound(which)
        return revoked


class TokenVerifier:
    """Checks presented tokens against the ledger, on a connection of its own."""

    def __init__(self, config: Config) -> None:
        self._ledger = Ledger(
            config.ledger_target, client="backtrail-auth", busy_timeout_ms=config.busy_timeout_ms,
            limits=config.limits(), synchronous=config.synchronous,
        )  # fmt: skip
        self._lock = threading.Lock()

    def verify(self, presented: str) -> TokenRecord | None:
        """The active token ``presented`` is, or ``None`` (unknown or revoked)."""
        if not presented or len(presented) > _MAX_PRESENTED_CHARS:
            return None
        with self._lock:
            record = self._ledger.token(token_digest(presented))
        return record if record is not None and record.active else None

    def active_count(self) -> int:
        with self._lock:
            return self._ledger.active_token_count()

    def close(self) -> None:
        with self._lock:
            self._ledger.close()
