"""Shared facts: key/value memory that several AI clients read and write safely.

Every write is a new version attributed to its client; compare-and-swap and create-only
writes fail with :class:`~backtrail.errors.VersionConflict` /
:class:`~backtrail.errors.KeyExists` when another client got there first (and the
refused attempt stays in the key's history). :meth:`FactOps.find_facts` ranks every
fact by meaning, as mcp-memory-bridge does: the query's embedding against each fact's
``key: value`` embedding, the ``top_k`` nearest first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from backtrail.errors import SearchUnavailable
from backtrail.service.base import MemoryBase
from backtrail.store import (
    Event,
    Fact,
    checks,
)

logger = logging.getLogger(__name__)

_MAX_FACTS_SEARCHED = 100_000


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

    def import_facts(
        self, facts: Sequence[Mapping[str, Any]], *, overwrite: bool = False
    ) -> dict[str, Any]:
        """Facts from another memory with their history (see ``Ledger.import_facts``)."""
        counts = self._ledger.import_facts(facts, overwrite=overwrite)
        self._wrote()
        return counts

    def get_fact(self, key: str, *, log: bool | None = None) -> Fact:
        """The fact under ``key``; ``log`` records the read (``None``: the
        ``log_reads`` setting decides)."""
        return self._ledger.get_fact(key, log=log)

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

    def find_facts(
        self, query: str, *, top_k: int = 3, log: bool | None = None
    ) -> list[tuple[Fact, float]]:
        """The ``top_k`` facts nearest to ``query`` by meaning (cosine similarity of
        embeddings), best first. ``SearchUnavailable`` when embeddings are off or the
        model cannot load. ``log`` records the search with its query and best match."""
        text = checks.text(query, "query", self.config.max_query_chars)
        count = checks.integer(top_k, "top_k", minimum=1)
        embedder = self._embedder()
        if embedder is None:
            reason = self._model_error or "embeddings are disabled (MCP_EMBEDDINGS=off)"
            raise SearchUnavailable("semantic", reason)
        facts = self._ledger.list_facts(limit=_MAX_FACTS_SEARCHED, log=False)
        vectors = self._fact_vectors(embedder, facts)
        (probe,) = embedder.embed([text])
        scored = [
            (fact, sum(a * b for a, b in zip(probe, vectors[fact.id, fact.version], strict=True)))
            for fact in facts
        ]
        scored.sort(key=lambda pair: (-pair[1], pair[0].key))
        best = scored[:count]
        winner = best[0] if best else None
        self._ledger.log_read(
            "fact.search", "fact", winner[0].key if winner else None,
            {"query": text, "score": round(winner[1], 4) if winner else None,
             "results": len(best)},
            log=log,
        )  # fmt: skip
        return best

    def _fact_vectors(
        self, embedder: object, facts: list[Fact]
    ) -> dict[tuple[int, int], list[float]]:
        """Each fact's ``key: value`` embedding, computed once per version."""
        with self._facts_lock:
            cache = self._facts_cache
            missing = [f for f in facts if (f.id, f.version) not in cache]
        if missing:
            found = embedder.embed([f"{f.key}: {f.value}" for f in missing])  # type: ignore[attr-defined]
            with self._facts_lock:
                for fact, vector in zip(missing, found, strict=True):
                    cache[fact.id, fact.version] = list(vector)
                live = {(f.id, f.version) for f in facts}
                for stale in [k for k in cache if k not in live]:
                    del cache[stale]
        with self._facts_lock:
            return dict(self._facts_cache)

    @property
    def _facts_lock(self) -> threading.Lock:
        lock = self.__dict__.get("_facts_lock_obj")
        if lock is None:
            lock = self.__dict__.setdefault("_facts_lock_obj", threading.Lock())
        return lock

    @property
    def _facts_cache(self) -> dict[tuple[int, int], list[float]]:
        return self.__dict__.setdefault("_facts_cache_obj", {})
