"""Who may index, and when: the pass lock, the host's presence, thread priority.

Every process may index; only one at a time does. An indexing *pass* (read changes,
stage, commit) holds :class:`PassLock`: a ``flock`` on ``<data_dir>/indexer.lock`` plus
a thread lock, so the watermark can never move back and a slow pass can never resurrect
what a later pass deleted. Background passes try the lock without waiting and skip
quietly when another process holds it.

The native host announces itself with :class:`HostPresence`, a shared ``flock`` on
``<data_dir>/host.lock`` that the kernel drops when the host dies. While a host runs,
the background threads of other processes (MCP servers, one per assistant window)
index and embed only up to their own writes and leave the browser's backlog to the host,
so N assistants do not all spend the machine's cores on the same pages.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)


class PassLock:
    """Mutual exclusion of indexing passes: within the process (a re-entrant thread lock)
    and across processes (``flock`` on a file; released by the kernel if we die)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._mutex = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextmanager
    def hold(self, wait: float) -> Iterator[bool]:
        """Yields True with the lock held, or False if it was not free within ``wait``."""
        deadline = time.monotonic() + wait
        got = self._mutex.acquire(timeout=wait) if wait > 0 else self._mutex.acquire(False)
        if not got:
            yield False
            return
        try:
            if self._depth == 0 and not self._lock_file(deadline):
                yield False
                return
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
                if self._depth == 0:
                    _unlock_fd(self._file_fd())
        finally:
            self._mutex.release()

    def _file_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd

    def _lock_file(self, deadline: float) -> bool:
        fd = self._file_fd()
        while not _try_lock_fd(fd):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def busy(self) -> bool:
        """True while a pass holds the lock, in this process or another. A pass lets
        the lock go for a moment between batches, so a lock free three times over a
        tenth of a second means no pass runs."""
        if self._depth > 0:
            return True
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            for attempt in range(3):
                if attempt:
                    time.sleep(0.04)
                if _try_lock_fd(fd):
                    _unlock_fd(fd)
                else:
                    return True
            return False
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class HostPresence:
    """Whether a native host is serving this data directory: the host holds a shared
    ``flock`` on ``host.lock`` for as long as it runs (the kernel drops it when the
    process dies, however it dies); others test for it with a non-blocking exclusive
    lock, which fails while any host holds its shared one. Several hosts (one per
    browser profile) may hold it at once. Without ``flock`` (Windows) no host is ever
    seen, and every process embeds as if it were alone."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    @property
    def announced(self) -> bool:
        """True in the host process itself."""
        return self._fd is not None

    def announce(self) -> None:
        """Hold the shared lock until :meth:`close` (the host does this)."""
        if self._fd is not None or _lock_shared is None:
            return
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock_shared(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def present(self) -> bool:
        """True if a host (in another process, or announced here) holds the lock."""
        if self._fd is not None:
            return True
        if _lock_shared is None:
            return False
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            # Another process probing at the same moment holds the exclusive lock for
            # a few microseconds: only a lock that stays taken means a host.
            for attempt in range(3):
                if _try_lock_fd(fd):
                    _unlock_fd(fd)
                    return False
                time.sleep(0.005 * (attempt + 1))
            return True
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock_fd(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock_fd(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    _lock_shared: Callable[[int], None] | None = None

else:
    import fcntl

    def _try_lock_fd(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_shared(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_SH)


def lower_thread_priority(steps: int) -> None:
    """Lower the calling thread's CPU priority by ``steps`` nice levels (at most to 19).
    Linux only: there a thread's nice value is its own (threads it starts, e.g.
    onnxruntime's pool when it loads the model, inherit it); elsewhere ``setpriority``
    would lower the whole process, so nothing is done."""
    if steps <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + steps))
    except OSError as error:  # e.g. a sandbox forbids it: indexing works as before
        logger.debug("could not lower the indexing thread's priority: %s", error)
