"""The one :class:`~backtrail.service.memory.Memory` a server opens, on first use.

Apart from :mod:`backtrail.mcp_server.server`, which imports the MCP SDK, so the runner
can start opening the memory on a thread of its own while the server is built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backtrail.service import Memory

__all__ = ["MemoryHolder"]


class MemoryHolder:
    """Opens the :class:`Memory` on first use (once, whichever thread asks first)."""

    def __init__(self, factory: Callable[[], Memory]) -> None:
        self._factory = factory
        self._memory: Memory | None = None
        self._lock = threading.Lock()

    def get(self) -> Memory:
        with self._lock:
            if self._memory is None:
                self._memory = self._factory()
            return self._memory

    def close(self) -> None:
        with self._lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None
