""":class:`Memory`, the one API every front end calls.

A ``Memory`` owns a :class:`~backtrail.store.Ledger` (the truth), an
:class:`~backtrail.indexer.Indexer` with the core search index, and, lazily, the
embedding model (:mod:`.base`). Its methods come from its parts: capture
(:mod:`.capture`), search (:mod:`.search`), reading and the user's records
(:mod:`.items`) and facts (:mod:`.facts`); here are forgetting, indexing, statistics,
the audit log, and the browser's and the assistants' entry points (:meth:`Memory.browser`,
:attr:`Memory.actions`). Front ends (MCP server, native host, CLI) translate their
protocol to these calls and back.

Guarantees:

- Writes return as soon as the ledger transaction is durable; indexing follows in the
  background (or on :meth:`Memory.catch_up`), and a search first makes its client's
  own earlier writes searchable (waiting at most ``search_fresh_wait`` seconds; a server's
  clients are told apart by :meth:`Memory.acting_as`).
- Bad input raises a :class:`~backtrail.errors.BacktrailError` subclass with a clear
  message before anything is written; nothing stored changes.
- Search results are checked against the ledger, so nothing forgotten or deleted is ever
  returned even while the index lags, and each result says where its text came from
  (``origin``: ``web`` text is untrusted) with its URL, kind and capture/visit times.
- :meth:`Memory.forget` removes data from the ledger, the index and the vectors, and
  compacts both files so the words are gone from disk.

Threading: a ``Memory`` may be shared between threads. Ledger calls are serialised by
the ledger; searches run in parallel (the core releases the GIL); indexing runs on the
indexer's own thread and ledger connection (see :mod:`backtrail.indexer`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from backtrail import _core
from backtrail.config import Config
from backtrail.errors import IndexFailure, InvalidInput
from backtrail.indexer import IndexLag, Progress
from backtrail.service.capture import CaptureOps
from backtrail.service.facts import FactOps
from backtrail.service.items import ItemOps
from backtrail.service.search import SearchOps
from backtrail.service.tokens import TokenOps
from backtrail.service.types import Event, ForgetReport, MemoryStats
from backtrail.store import Ledger, checks

if TYPE_CHECKING:
    from backtrail.service.actions import ActionQueue
    from backtrail.service.browser_sync import BrowserSync
    from backtrail.service.devices import DeviceSync

__all__ = ["Memory"]

logger = logging.getLogger(__name__)


class Memory(CaptureOps, SearchOps, ItemOps, FactOps, TokenOps):
    """Backtrail's service API. ``Memory(config, client="mcp:claude")``; use as a
    context manager or call :meth:`close`. With ``background_indexing`` (the default)
    a daemon thread indexes after writes; otherwise call :meth:`catch_up`."""

    @classmethod
    def open(
        cls, data_dir: str | None = None, *, client: str = "backtrail", **overrides: Any
    ) -> Memory:
        """``Memory(Config.load(data_dir, overrides=overrides), client=client)``."""
        return cls(Config.load(data_dir, overrides=overrides), client=client)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------- the browser

    def browser(self, profile: str = "default") -> BrowserSync:
        """What a browser profile's extension sends, applied under this memory's policy
        (one :class:`~backtrail.service.browser_sync.BrowserSync` per connection)."""
        from backtrail.service.browser_sync import BrowserSync

        return BrowserSync(self, self._ledger, profile)

    def device(self, client: str, profile: str = "default") -> DeviceSync:
        """What a device's browser profile sends to a server, attributed to ``client``
        (its token's) and delivered exactly once (see :mod:`.devices`)."""
        from backtrail.service.devices import DeviceSync

        return DeviceSync(self, self._ledger, client, profile)

    def prune_deliveries(self, *, older_than_days: int | None = None) -> int:
        """Forget devices' deliveries older than ``older_than_days`` (default
        :data:`~backtrail.service.devices.DELIVERY_RETENTION_DAYS`); returns how many."""
        from backtrail.service.devices import DELIVERY_RETENTION_DAYS

        days = DELIVERY_RETENTION_DAYS if older_than_days is None else older_than_days
        days = checks.integer(days, "older_than_days", minimum=0)
        return self._ledger.prune_deliveries(max(0, self._now() - days * 86_400))

    @property
    def actions(self) -> ActionQueue:
        """Browser actions assistants propose and the browser carries out."""
        from backtrail.service.actions import ActionQueue

        with self._parts_lock:
            if self._actions is None:
                self._actions = ActionQueue(self, self._ledger)
            return self._actions

    # ------------------------------------------------------------------ audit

    def events(
        self,
        *,
        action: str | None = None,
        target_type: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
    ) -> list[Event]:
        """Audit events, oldest first, with ids greater than ``after_id``."""
        return self._ledger.list_events(
            action=action, target_type=target_type, after_id=after_id, limit=limit
        )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One durable ledger commit around many writes; indexing follows it."""
        try:
            with self._ledger.transaction():
                yield
        finally:
            self._indexer.schedule()

    # ----------------------------------------------------------------- forget

    def forget(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        everything: bool = False,
        include_facts: bool = False,
    ) -> ForgetReport:
        """Remove browsing data chosen by exactly one selector from the ledger, the
        index and the vectors, then compact both so no copy is left on disk. The audit
        log records that a deletion happened (with counts), never what was deleted."""
        result = self._ledger.forget(
            url=url, domain=domain, since=since, until=until, everything=everything,
            include_facts=include_facts,
        )  # fmt: skip
        self._wrote()
        index_purged = self._indexer.purge()
        ledger_purged = self._ledger.checkpoint() or result.purged
        return ForgetReport(result.selector, result.counts, ledger_purged, index_purged)

    # ------------------------------------------------------------------ index

    def catch_up(self, *, vectors: bool = True, progress: Progress | None = None) -> IndexLag:
        """Index everything written so far (text, then vectors unless ``vectors`` is
        false); for commands that do not keep a background thread."""
        vectors = checks.boolean(vectors, "vectors")
        return self._indexer.catch_up(
            vectors=vectors and self.config.embeddings, progress=_progress(progress)
        )

    def follow_changes(self) -> bool:
        """On a PostgreSQL ledger, keep this memory's own index following what other
        processes commit (notified by PostgreSQL, polled every ``follow_poll`` seconds
        as a fallback) until :meth:`close`: for server nodes, each with an index of its
        own. False on SQLite, where every process shares the data directory's index."""
        return self._indexer.follow()

    def reindex(self, *, progress: Progress | None = None) -> IndexLag:
        """Rebuild the whole index from the ledger."""
        return self._indexer.reindex(progress=_progress(progress), vectors=self.config.embeddings)

    def hold_write_lock(self, seconds: float, *, client: str | None = None) -> float:
        """Hold the ledger's write lock for ``seconds`` on a connection of its own (so
        this process's reads go on), recording a ``demo.lock_hold`` event as ``client``
        (default: this memory's); returns how long it was held. Writers everywhere
        meanwhile wait up to their ``busy_timeout_ms``, then fail with ``StoreBusy``:
        the contention demo of mcp-memory-bridge's ``lock_hold``."""
        cfg = self.config
        holder = Ledger(
            cfg.ledger_target, client=client or self._ledger.client,
            busy_timeout_ms=cfg.busy_timeout_ms,
            limits=cfg.limits(), clock=self._clock, synchronous=cfg.synchronous,
        )  # fmt: skip
        try:
            return holder.hold_write_lock(seconds)
        finally:
            holder.close()

    def index_lag(self, *, passages: bool = True) -> IndexLag:
        """How far the index is behind the ledger: changes not yet searchable, captures
        waiting for text extraction and (unless ``passages`` is false: counting them
        reads every document of the index) passages waiting for vectors, and whether a
        pass works on them now (``indexing``)."""
        seq = self._ledger.max_change_seq()
        if not passages:
            return self._indexer.lag(seq, passages=False)
        lag = self._indexer.lag(seq, index_stats=self._index_stats())
        return dataclasses.replace(lag, indexing=self._indexer.busy())

    def stats(self) -> MemoryStats:
        """Ledger counts and sizes, index counts, index lag and model status."""
        index = self._index_stats()
        lag = self._indexer.lag(self._ledger.max_change_seq(), index_stats=index)
        lag = dataclasses.replace(lag, indexing=self._indexer.busy())
        return MemoryStats(self._ledger.stats(), index, lag, self.model_status(),
                           self.skipped_counts())  # fmt: skip

    def _index_stats(self) -> dict[str, Any]:
        try:
            return dict(self._indexer.index.stats())
        except _core.CoreError as error:
            raise IndexFailure(f"cannot read index statistics: {error}") from error


def _progress(progress: object) -> Progress | None:
    if progress is not None and not callable(progress):
        raise InvalidInput("progress", "must be a function (done, total, phase) or None")
    return progress  # type: ignore[return-value]
