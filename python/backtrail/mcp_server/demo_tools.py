"""Operator demos, registered only with ``MCP_ENABLE_DEMO_TOOLS=1`` (or
``BACKTRAIL_MCP_DEMO_TOOLS=1``), so the normal tool list never shows them.

``lock_hold`` is mcp-memory-bridge's contention demo under the same name and
parameter: it takes the ledger's write lock, holds it for ``seconds`` and commits.
Another client writing meanwhile (``memory_set``, ``save_note``...) shows what its
``MCP_SQLITE_BUSY_TIMEOUT`` means: ``0`` fails fast with a "store is busy" tool error,
a timeout longer than the hold makes the write wait and then succeed (queuing).
"""

# No `from __future__ import annotations`: the SDK reads these signatures at run time.

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from backtrail.errors import InvalidInput
from backtrail.mcp_server.server import DEMO, Caller, Reply, Runtime

__all__ = ["register", "MAX_HOLD_SECONDS"]

MAX_HOLD_SECONDS = 60.0


class LockHoldOutput(BaseModel):
    seconds: float = Field(description="How long the write lock was held.")
    client: str


def register(server: MCPServer, rt: Runtime) -> None:
    @server.tool(annotations=DEMO, title="[demo] Hold the write lock")
    async def lock_hold(
        ctx: Context,
        seconds: Annotated[
            float, Field(description=f"How long to hold it (more than 0, at most "
                         f"{MAX_HOLD_SECONDS:g}).")  # fmt: skip
        ] = 2.0,
    ) -> Annotated[CallToolResult, LockHoldOutput]:
        """[demo] Hold the memory's write lock for `seconds`, then commit, so operators
        can watch what another client's write does meanwhile (fail fast or queue,
        depending on its busy timeout). Returns when the lock is released."""
        args = {"seconds": seconds}

        async def work(caller: Caller) -> Reply:
            if not 0 < seconds <= MAX_HOLD_SECONDS:
                raise InvalidInput(
                    "seconds", f"must be more than 0 and at most {MAX_HOLD_SECONDS:g}"
                )
            held = await rt.blocking(rt.memory.hold_write_lock, seconds, client=caller.client)
            return Reply(
                f"held the write lock for {seconds:g}s (client {caller.client!r})",
                LockHoldOutput(seconds=round(held, 3), client=caller.client),
            )

        return await rt.run(ctx, "lock_hold", args, work, writes=True)
