"""Operator demos, listed only with ``MCP_ENABLE_DEMO_TOOLS=1`` (or
``BACKTRAIL_MCP_DEMO_TOOLS=1``), so the normal tool list never shows them.

``lock_hold`` is mcp-memory-bridge's contention demo under the same name and
parameter: it takes the ledger's write lock, holds it for ``seconds`` and commits.
Another client writing meanwhile (``memory_set``, ``save_note``...) shows what its
``MCP_SQLITE_BUSY_TIMEOUT`` means: ``0`` fails fast with a "store is locked" tool error,
a timeout longer than the hold makes the write wait and then succeed (queuing).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from pydantic import BaseModel, Field

from backtrail.errors import InvalidInput
from backtrail.mcp_server.server import DEMO, Call, Reply, tool

__all__ = ["MAX_HOLD_SECONDS"]

MAX_HOLD_SECONDS = 60.0


class LockHoldOutput(BaseModel):
    seconds: float
    client: str


@tool("[demo] Hold the write lock", DEMO, demo=True)
async def lock_hold(
    call: Call,
    *,
    seconds: Annotated[float, Field(description=f"How long (at most {MAX_HOLD_SECONDS:g}).",
                                    strict=True)] = 2.0,  # fmt: skip
) -> Reply[LockHoldOutput]:
    """[demo] Hold the memory's write lock for `seconds`, then commit, so operators can
    watch what another client's write does meanwhile (fail fast or queue, depending on
    its busy timeout). Returns when the lock is released."""
    if not 0 < seconds <= MAX_HOLD_SECONDS:
        raise InvalidInput("seconds", f"must be more than 0 and at most {MAX_HOLD_SECONDS:g}")
    client = call.caller.client
    held = await call.blocking(call.memory.hold_write_lock, seconds, client=client)
    return Reply(f"held the write lock for {seconds:g}s (client {client!r})",
                 LockHoldOutput(seconds=round(held, 3), client=client))
