"""The MCP server factory: ``build_server(memory_factory, ...) -> MCPServer``.

The server is a thin adapter: each tool validates nothing itself beyond what its typed
parameters say, calls the service (:class:`~backtrail.service.Memory`, its insights
and its summary chain) on a worker thread, and renders the answer twice: readable
text for the model (web content delimited and labelled) and structured content
matching the tool's output schema. Every failure is a tool result
with ``isError`` — a mistake the model can fix, with a message that says how — never a
protocol error.

Identity: over stdio the caller is ``client_id`` (``--client-id``/``MCP_CLIENT_ID``) or
else named after the ``clientInfo`` of its handshake; over HTTP the token decides (see
:mod:`backtrail.mcp_server.http`). Writes and logged reads are recorded in the ledger as
made by the caller, and read-only tokens cannot call tools that change anything.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CallToolResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel

from backtrail.errors import BacktrailError, InvalidInput
from backtrail.mcp_server import identity
from backtrail.mcp_server.calllog import CallLog
from backtrail.mcp_server.holder import MemoryHolder
from backtrail.mcp_server.settings import McpSettings
from backtrail.service import Memory
from backtrail.service.summaries import Sampler, SummaryChain

__all__ = ["build_server", "Runtime", "Caller", "Reply", "MemoryHolder", "READ_ONLY",
           "WRITES", "DESTRUCTIVE", "OVERWRITES", "SUMMARY", "BROWSER", "CLOSES",
           "DEMO"]  # fmt: skip

logger = logging.getLogger(__name__)

T = TypeVar("T")

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Reads the memory; changes nothing."""
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
"""Adds something new to the memory."""
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
"""Removes or overwrites data."""
OVERWRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
"""Creates or overwrites data (each write is a new version)."""
SUMMARY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
"""Reads the memory, and may send excerpts to the configured language model (the
client's own via sampling, the Anthropic API or Ollama) to write a summary."""
BROWSER = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
"""Asks the user's browser to do something that adds (a tab group, a bookmark, a
capture), if the user allowed that action in the extension's options."""
CLOSES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)
"""Asks the user's browser to close tabs (off unless the user allowed it)."""
DEMO = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Operator demo: holds a lock, changes no data (records one audit event)."""


@dataclass(frozen=True)
class Caller:
    """Who is calling. ``assigned``: the identity comes from the caller's token, so
    ``client_id`` arguments cannot change it."""

    client: str
    scope: str
    assigned: bool
    transport: str


@dataclass(frozen=True)
class Reply:
    """A tool's answer: readable ``text`` and the structured ``data``."""

    text: str
    data: BaseModel


class ReadOnlyToken(BacktrailError):
    code = "read_only_token"

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"{tool} changes the memory, but this connection's token only allows reading; "
            "use a token with the write scope"
        )


class Runtime:
    """What every tool shares: the memory, the caller's identity, the summary chain,
    the call log, and the one wrapper that turns a service call into a tool result."""

    def __init__(
        self,
        holder: MemoryHolder,
        settings: McpSettings,
        chain: SummaryChain,
        call_log: CallLog | None = None,
    ) -> None:
        self.holder = holder
        self.settings = settings
        self.chain = chain
        self.call_log = call_log

    @property
    def memory(self) -> Memory:
        return self.holder.get()

    # ------------------------------------------------------------- identity

    def caller(self, ctx: Context[Any, Any]) -> Caller:
        token = get_access_token()
        scope, transport = "write", self.settings.transport
        if token is not None:
            scope = "write" if "write" in token.scopes else "read"
            if (token.claims or {}).get("backtrail_assigned"):
                return Caller(token.client_id, scope, True, "http")
            transport = "http"
        if self.settings.client_id:
            return Caller(self.settings.client_id, scope, False, transport)
        name = None
        try:
            params = ctx.session.client_params
            if params is not None and params.client_info is not None:
                name = params.client_info.name
        except (AttributeError, ValueError):
            name = None
        return Caller(identity.client_label(name), scope, False, transport)

    def writer_for(self, caller: Caller, client_id: str | None) -> str:
        """The client a write is attributed to: the ``client_id`` argument (as in
        mcp-memory-bridge) unless the caller's identity is assigned by its token."""
        if client_id is None or caller.assigned:
            return caller.client
        if not isinstance(client_id, str) or not client_id.strip() or len(client_id) > 256:
            raise InvalidInput("client_id", "must be a non-empty name of at most 256 characters")
        if identity.LABEL_CHARS.search(client_id):
            return identity.clean_label(client_id)
        return client_id

    # ------------------------------------------------------------- sampling

    def sampler(self, ctx: Context[Any, Any]) -> Sampler | None:
        """A sampler using the client's own model, when the client offers sampling on
        a connection that can carry server requests (not 2026-07-28 stateless calls)."""
        try:
            capabilities = ctx.client_capabilities
            usable = capabilities is not None and capabilities.sampling is not None
            usable = usable and ctx.session.can_send_request
        except (AttributeError, ValueError):
            usable = False
        if not usable:
            return None
        request_id = ctx.request_context.request_id

        async def sample(system: str, prompt: str, max_tokens: int) -> str:
            message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                result = await ctx.session.create_message(
                    [message], max_tokens=max_tokens, system_prompt=system,
                    related_request_id=request_id,
                )  # fmt: skip
            content = result.content
            blocks = content if isinstance(content, list) else [content]
            return "".join(
                getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text"
            )

        return sample

    # --------------------------------------------------------------- calls

    async def blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking service call on a worker thread."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def attributed(self, client: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a service call on a worker thread with the ledger recording ``client`` as
        the one who wrote (or, with read logging on, read) what it touches."""

        def call() -> T:
            with self.memory.acting_as(client):
                return fn(*args, **kwargs)

        return await anyio.to_thread.run_sync(call)

    async def run(
        self,
        ctx: Context[Any, Any],
        tool: str,
        arguments: Mapping[str, Any],
        work: Callable[[Caller], Awaitable[Reply]],
        *,
        writes: bool = False,
    ) -> CallToolResult:
        """Run one tool call: check the caller may, do the ``work``, map failures to
        an ``isError`` result, and record the call in the call log."""
        caller = self.caller(ctx)
        started = time.perf_counter()
        ok, outcome = False, "cancelled"
        result: CallToolResult | None = None
        try:
            if writes and caller.scope != "write":
                raise ReadOnlyToken(tool)
            reply = await work(caller)
            result = CallToolResult(
                content=[TextContent(type="text", text=reply.text)],
                structured_content=reply.data.model_dump(mode="json"),
            )
            ok, outcome = True, "ok"
        except BacktrailError as error:
            result = _error(error.message)
            outcome = f"{error.code}: {error.message}"
        except Exception as error:
            logger.exception("tool %s failed unexpectedly", tool)
            result = _error(
                f"{tool} failed unexpectedly ({type(error).__name__}); the server's log on "
                "stderr has the details"
            )
            outcome = f"crash: {type(error).__name__}: {error}"
        finally:
            if self.call_log is not None:
                blocks = result.content if ok and result is not None else []
                chars = sum(len(getattr(block, "text", "")) for block in blocks)
                self.call_log.record(
                    client=caller.client, tool=tool, arguments=arguments, ok=ok, outcome=outcome,
                    seconds=time.perf_counter() - started, result_chars=chars,
                    transport=caller.transport,
                )  # fmt: skip
        return result


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


# ------------------------------------------------------------------- factory


def build_server(
    memory_factory: Callable[[], Memory],
    *,
    settings: McpSettings | None = None,
    chain: SummaryChain | None = None,
    call_log: CallLog | None = None,
    holder: MemoryHolder | None = None,
) -> MCPServer:
    """The Backtrail MCP server: browsing-memory tools, shared facts compatible with
    mcp-memory-bridge, resources and prompts. ``memory_factory`` is called once, on
    first use (or pass a ``holder`` that is already open)."""
    from backtrail.mcp_server import action_tools, demo_tools, facts, prompts, resources, tools

    runtime = Runtime(
        holder if holder is not None else MemoryHolder(memory_factory),
        settings if settings is not None else McpSettings(),
        chain if chain is not None else SummaryChain(),
        call_log,
    )
    server: MCPServer = MCPServer(
        identity.SERVER_NAME, title=identity.SERVER_TITLE, version=identity.SERVER_VERSION,
        instructions=identity.INSTRUCTIONS, log_level="WARNING",
    )  # fmt: skip
    tools.register(server, runtime)
    action_tools.register(server, runtime)
    facts.register(server, runtime)
    if runtime.settings.demo_tools:
        demo_tools.register(server, runtime)
    resources.register(server, runtime)
    prompts.register(server, runtime)
    return server
