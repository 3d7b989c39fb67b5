"""Shared facts: key/value memory that several AI clients read and write safely.

Every write is a new version attributed to its client; compare-and-swap and create-only
writes fail with :class:`~backtrail.errors.VersionConflict` /
:class:`~backtrail.errors.KeyExists` when another client got there first.
"""

from __future__ import annotations

import logging

from backtrail.service.base import MemoryBase
from backtrail.store import (
    Event,
    Fact,
)

logger = logging.getLogger(__name__)


class FactOps(MemoryBase):
    """Key/value facts with compare-and-swap, attributed to the client that wrote them."""

    # ------------------------------------------------------------------ facts

    def set_fact(
        self,
        key: str,
        value: str,
        *,
        expected_value: str | None = None,
        expected_version: int | None = None,
        require_absent: bool = False,
    ) -> Fact:
        """Set a fact; compare-and-swap with ``expected_version`` / ``expected_value``
        (``VersionConflict``), create-only with ``require_absent`` (``KeyExists``)."""
        fact = self._ledger.set_fact(
            key, value, expected_value=expected_value, expected_version=expected_version,
            require_absent=require_absent,
        )  # fmt: skip
        self._wrote()
        return fact

    def get_fact(self, key: str) -> Fact:
        return self._ledger.get_fact(key)

    def list_facts(
        self, prefix: str = "", *, case_insensitive: bool = False, limit: int = 1000,
        offset: int = 0,
    ) -> list[Fact]:  # fmt: skip
        return self._ledger.list_facts(
            prefix, case_insensitive=case_insensitive, limit=limit, offset=offset
        )

    def delete_fact(self, key: str, *, expected_version: int | None = None) -> Fact:
        fact = self._ledger.delete_fact(key, expected_version=expected_version)
        self._wrote()
        return fact

    def fact_history(self, key: str, *, limit: int = 100) -> list[Event]:
        return self._ledger.fact_history(key, limit=limit)
