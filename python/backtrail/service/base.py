"""What every part of :class:`~backtrail.service.Memory` shares: the ledger, the
indexer, the settings, the embedding model, and the bookkeeping after each write.

:class:`MemoryBase` opens them; the parts (:mod:`.capture`, :mod:`.search`,
:mod:`.items`, :mod:`.facts`) build on it, and :class:`~backtrail.service.memory.Memory`
puts them together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from backtrail import _core
from backtrail.config import Config
from backtrail.errors import (
    InvalidInput,
)
from backtrail.indexer import (
    EntityReader,
    Indexer,
    Model,
)
from backtrail.indexer.embedding import load_model
from backtrail.store import (
    Ledger,
)

if TYPE_CHECKING:
    from backtrail.service.actions import ActionQueue

logger = logging.getLogger(__name__)

_OWN_SEQ_CLIENTS = 1_000
"""Clients whose last write a memory remembers for read-your-writes."""


class MemoryBase:
    """The ledger, the indexer and the model of one :class:`~backtrail.service.Memory`."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        client: str = "backtrail",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config if config is not None else Config.load()
        if not isinstance(self.config, Config):
            raise InvalidInput("config", f"must be a Config, not {type(config).__name__}")
        self._clock = clock if clock is not None else time.time
        cfg = self.config
        self._ledger = Ledger(
            cfg.ledger_target, client=client, busy_timeout_ms=cfg.busy_timeout_ms,
            limits=cfg.limits(), clock=clock, log_reads=cfg.log_reads,
            synchronous=cfg.synchronous,
        )  # fmt: skip
        self._reader = EntityReader(self._ledger)
        self._model_lock = threading.Lock()
        self._model_obj: Model | None = None
        self._model_error: str | None = None
        self._seq_lock = threading.Lock()
        self._parts_lock = threading.Lock()
        self._actions: ActionQueue | None = None
        # Read-your-writes, per client (a server serves many): the change sequence of
        # each client's last write. Writes made before this process opened the memory
        # count as every client's: the first search makes them searchable unless the
        # background indexer already did.
        self._opened_seq = self._ledger.max_change_seq()
        self._own_seqs: dict[str, int] = {}
        self._caller = threading.local()  # whose writes the thread's searches must see
        try:
            self._indexer = Indexer(cfg, model=self._model)
        except BaseException:
            self._ledger.close()
            raise
        self._indexer.schedule()  # catch up with whatever others wrote meanwhile

    def close(self, timeout: float = 30.0) -> bool:
        """Stop background indexing and close the files. A pass gives up at its next
        checkpoint (the next process resumes it); False when the indexing thread was
        still inside a step after ``timeout`` seconds: its files then stay open until
        the process ends (see :meth:`~backtrail.indexer.Indexer.close`)."""
        settled = self._indexer.close(timeout)
        self._ledger.close()
        return settled

    @contextmanager
    def acting_as(self, client: str, *, caller: str | None = None) -> Iterator[None]:
        """Record writes inside the calling thread's block as made by ``client``; its
        searches see ``caller``'s earlier writes (read-your-writes; default: ``client``'s,
        a caller may write as another client, e.g. a fact's ``client_id``)."""
        previous = getattr(self._caller, "name", None)
        with self._ledger.acting_as(client):
            self._caller.name = caller if caller is not None else self._ledger.client
            try:
                yield
            finally:
                self._caller.name = previous

    @property
    def indexer(self) -> Indexer:
        """The indexer of this memory's data directory (the service's own parts and
        tests use it; front ends call :meth:`announce_host` and the search methods)."""
        return self._indexer

    def announce_host(self) -> None:
        """Tell other processes that the browser's native host serves this data
        directory, so their background indexing leaves the browser's backlog to it."""
        self._indexer.announce_host()

    # ------------------------------------------------------------- internals

    def _now(self) -> int:
        return int(self._clock())

    def _wrote(self) -> None:
        """After a write: remember it as the writing client's (read-your-writes) and
        schedule indexing."""
        seq = self._ledger.max_change_seq()
        client = self._caller_name()
        with self._seq_lock:
            self._own_seqs[client] = max(self._own_seqs.get(client, 0), seq)
            if len(self._own_seqs) > _OWN_SEQ_CLIENTS:  # forget the longest-ago writer
                del self._own_seqs[min(self._own_seqs, key=self._own_seqs.__getitem__)]
        self._indexer.note_own_write(seq)
        self._indexer.schedule()

    def _own_seq(self) -> int:
        """The change sequence a search by the calling client must see indexed."""
        client = self._caller_name()
        with self._seq_lock:
            return max(self._opened_seq, self._own_seqs.get(client, 0))

    def _caller_name(self) -> str:
        name: str | None = getattr(self._caller, "name", None)
        return self._ledger.client if name is None else name

    def _model(self) -> Model | None:
        """The embedding model, loaded on first use; ``None`` when off or unavailable."""
        if not self.config.embeddings:
            return None
        with self._model_lock:
            if self._model_obj is None and self._model_error is None:
                try:
                    self._model_obj = load_model(
                        self.config.model_dir, threads=self.config.embed_threads,
                        sessions=self.config.embed_sessions,
                        batch_size=self.config.embed_batch_size,
                        cache_dir=self.config.model_cache_dir,
                    )  # fmt: skip
                except _core.ModelError as error:
                    self._model_error = str(error)
                    logger.warning("embeddings unavailable, searching with BM25 only: %s", error)
            return self._model_obj

    def _embedder(self) -> _core.Embedder | None:
        """The model's embedder (see :meth:`_model`)."""
        model = self._model()
        return None if model is None else cast("_core.Embedder", model.embedder)

    def _vectors_unusable(self, model: Model) -> str | None:
        """Why this process's query vectors cannot be scored against the index's
        vectors (``None``: they can): see :func:`~backtrail.indexer.vectors.verdict`."""
        return self._indexer.vectors_unusable(model)

    def load_model(self) -> str:
        """Load the embedding model now rather than at the first search that needs it;
        returns :meth:`model_status`."""
        self._model()
        return self.model_status()

    def model_status(self) -> str:
        """``disabled``, ``not loaded``, ``ready``, ``unavailable: <reason>``, or
        ``not used: <reason>`` when the index's vectors are another model's (this process
        then searches by words only; see :func:`~backtrail.indexer.vectors.verdict`). A
        fallback model says so: ``ready (...)``."""
        if not self.config.embeddings:
            return "disabled"
        if self._model_error is not None:
            return f"unavailable: {self._model_error}"
        model = self._model_obj
        if model is None:
            return "not loaded"
        unusable = self._vectors_unusable(model)
        if unusable is not None:
            return f"not used: {unusable}"
        if model.fallback is not None:
            return f"ready (the packaged model as it is: deriving the integer model failed: " \
                   f"{model.fallback})"  # fmt: skip
        return "ready"


def when(ts: int | None) -> str:
    if ts is None:
        return "unknown time"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def label(kind: str, url: str | None, captured_at: int | None, last_seen: int | None) -> str:
    where = f" from {url}" if url else ""
    return (
        f"{kind}{where}, captured {when(captured_at)}, last seen {when(last_seen)}; "
        "untrusted web content"
    )
