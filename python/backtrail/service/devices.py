"""A device's browser, arriving at a server: :class:`DeviceSync`.

A computer whose native host forwards to a server (``POST /host``) sends the same
records a local host would apply; the server applies them with :class:`DeviceSync`, a
:class:`~backtrail.service.browser_sync.BrowserSync` that also

- attributes every write to the device's client (the client id of its token), and
- delivers each queued message exactly once: :meth:`delivered` finds the stored response
  of a message already applied, and :meth:`record_delivery` stores one inside the
  transaction of the message's writes (:mod:`backtrail.store.access`), so a resend after
  a lost answer, through this node or another, writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from backtrail.service.browser_sync import BrowserSync
from backtrail.store import Ledger

if TYPE_CHECKING:
    from backtrail.service.memory import Memory

__all__ = ["DeviceSync", "DELIVERY_RETENTION_DAYS"]

DELIVERY_RETENTION_DAYS = 30
"""Deliveries older than this are pruned: a device's outbox resends within days."""


class DeviceSync(BrowserSync):
    """The records of the device whose token names ``client``."""

    def __init__(self, memory: Memory, ledger: Ledger, client: str, profile: str) -> None:
        super().__init__(memory, ledger, profile)
        self.client = client

    @contextmanager
    def attributed(self) -> Iterator[None]:
        """Writes inside the block are the device's (``client`` in the audit log)."""
        with self.memory.acting_as(self.client):
            yield

    def delivered(self, message_id: str) -> dict[str, Any] | None:
        """The response stored for this device's message ``message_id``, if applied."""
        return self._ledger.delivery(self.client, message_id)

    def record_delivery(self, message_id: str, kind: str, response: dict[str, Any]) -> bool:
        """Store ``response`` as the answer to message ``message_id`` (inside the
        transaction that applied it); False if it was already recorded."""
        return self._ledger.record_delivery(self.client, message_id, kind, response)
