"""Following the change feed as other processes commit: :class:`Follower`.

On SQLite every process of a data directory shares one index, and each indexes its own
writes. On PostgreSQL each server node keeps an index of its own, so a node must learn
of what other nodes commit: its follower ``LISTEN``s on the change feed's channel (a
trigger on ``changes`` notifies when a write transaction commits;
:class:`~backtrail.store.postgres.ChangeListener`) and wakes the background indexer,
which brings text, then vectors, up to the ledger. Every ``follow_poll`` seconds without
a notification it also compares the index with the ledger, so a lost connection or a
proxy that drops notifications only slows it down. After a ``forget`` anywhere, the
text pass compacts this index too (see :meth:`Indexer._text_pass`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from backtrail.errors import BacktrailError
from backtrail.store.postgres import ChangeListener

if TYPE_CHECKING:
    from backtrail.indexer.passes import Indexer

__all__ = ["Follower"]

logger = logging.getLogger(__name__)


class Follower:
    """Wakes ``indexer`` when the ledger at ``url`` commits changes (see the module doc)."""

    def __init__(self, indexer: Indexer, url: str, *, poll_seconds: float) -> None:
        self._indexer = indexer
        self._listener = ChangeListener(url)
        self._poll = max(0.05, poll_seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.notifications = 0
        """Notifications received (for diagnostics and tests)."""
        self.wakeups = 0
        """Times it woke the indexer."""

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="backtrail-follower",
                                            daemon=True)  # fmt: skip
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop following (within ``poll`` seconds: a wait is not interrupted); True
        when the thread ended within ``timeout``."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run(self) -> None:
        failing = False
        try:
            while not self._stop.is_set():
                try:
                    notified = self._listener.wait(self._poll)
                    if failing:
                        logger.info("listening for ledger changes again")
                    failing = False
                except BacktrailError as error:
                    if not failing:
                        logger.warning("%s; polling every %.1f s meanwhile", error.message,
                                       self._poll)  # fmt: skip
                    failing = True
                    notified = False
                    if self._stop.wait(self._poll):
                        return
                if self._stop.is_set():
                    return
                self.notifications += notified
                if notified or self._behind():
                    self.wakeups += 1
                    self._indexer.schedule()
        finally:
            self._listener.close()

    def _behind(self) -> bool:
        """Polling: is there anything in the ledger this index has not taken in?"""
        try:
            lag = self._indexer.lag(passages=False)
        except BacktrailError as error:
            logger.debug("could not compare the index with the ledger: %s", error.message)
            return False
        config = self._indexer.config
        vectors = config.embeddings and config.background_vectors
        return bool(lag.captures) or not (lag.vectors_caught_up if vectors else
                                          lag.text_caught_up)  # fmt: skip
