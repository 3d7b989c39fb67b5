"""The MCP server factory, ``build_server(memory_factory, ...) -> MCPServer``, and the
one decorator every tool is declared with.

A tool is a typed module-level function (``browsing``, ``insight_tools``,
``action_tools``, ``facts``, ``demo_tools``)::

    @tool("Read a page", READ_ONLY)
    async def get_page(call: Call, *, url: Url = None, ...) -> Reply[PageOutput]:
        \"\"\"What the model reads about the tool.\"\"\"

Its name and parameters come from the signature (the SDK builds the input schema and
validates the arguments, strictly: a boolean is not an integer), its output model from
the return annotation. The body calls the service (:class:`~backtrail.service.Memory`)
on a worker thread and returns a :class:`Reply`: text for the model (web content inside
labelled blocks) and structured content (ids, URLs, times, counts; never text from a web
page). A :class:`~backtrail.errors.BacktrailError` becomes a ``ToolError``: an
``isError`` result whose message says what to change.

Identity: over stdio the caller is ``client_id`` (``--client-id``/``MCP_CLIENT_ID``) or
else named after the ``clientInfo`` of its handshake; over HTTP the token decides (see
:mod:`backtrail.mcp_server.http`). Writes and logged reads are recorded in the ledger as
made by the caller. A read-only token is neither shown nor allowed the tools that
change anything.
"""

from __future__ import annotations

import inspect
import logging
import time
import typing
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CallToolResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel

from backtrail.errors import BacktrailError, InvalidInput, StoreBusy
from backtrail.mcp_server import identity
from backtrail.mcp_server.calllog import CallLog
from backtrail.mcp_server.holder import MemoryHolder
from backtrail.mcp_server.schemas import compact_schema
from backtrail.mcp_server.settings import McpSettings
from backtrail.service import Memory
from backtrail.service.summaries import Sampler, SummaryChain

__all__ = ["build_server", "tool", "Call", "Caller", "Reply", "Runtime", "MemoryHolder",
           "READ_ONLY", "WRITES", "DESTRUCTIVE", "OVERWRITES", "SUMMARY", "BROWSER", "CLOSES",
           "DEMO", "TOOL_MODULES"]  # fmt: skip

logger = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

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
"""Removes data."""
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
"""Asks the user's browser to do something that adds (a bookmark, a capture), if the
user allowed that action in the extension's options."""
CLOSES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)
"""Asks the user's browser to group or close tabs (closing is off unless allowed)."""
DEMO = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Operator demo: holds a lock, changes no data (records one audit event)."""

TOOL_MODULES = ("browsing", "insight_tools", "action_tools", "facts")
"""The modules whose tools every server has, in the order ``tools/list`` shows them."""


@dataclass(frozen=True)
class Caller:
    """Who is calling. ``assigned``: the identity comes from the caller's token, so
    ``client_id`` arguments cannot change it."""

    client: str
    scope: str
    assigned: bool
    transport: str


@dataclass(frozen=True)
class Reply(Generic[M]):
    """A tool's answer: readable ``text`` and the structured ``data``."""

    text: str
    data: M


@dataclass(frozen=True)
class ToolSpec:
    name: str
    fn: Callable[..., Awaitable[Reply[Any]]]
    title: str
    annotations: ToolAnnotations
    output: type[BaseModel]
    writes: bool
    demo: bool


_TOOLS: dict[str, ToolSpec] = {}


def tool(
    title: str, annotations: ToolAnnotations, *, demo: bool = False
) -> Callable[[Callable[..., Awaitable[Reply[M]]]], Callable[..., Awaitable[Reply[M]]]]:
    """Declare a tool: its name is the function's, its parameters the function's
    keyword-only parameters after ``call``, its output model the ``M`` of its
    ``Reply[M]`` return annotation. Tools that are not read-only are refused (and not
    listed) for read-only tokens."""

    def declare(fn: Callable[..., Awaitable[Reply[M]]]) -> Callable[..., Awaitable[Reply[M]]]:
        hints = typing.get_type_hints(fn, include_extras=True)
        (output,) = typing.get_args(hints["return"])
        _TOOLS[fn.__name__] = ToolSpec(
            fn.__name__, fn, title, annotations, output,
            writes=not annotations.read_only_hint, demo=demo,
        )  # fmt: skip
        return fn

    return declare


class ReadOnlyToken(BacktrailError):
    code = "read_only_token"

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"{tool} changes the memory, but this connection's token only allows reading; "
            "use a token with the write scope"
        )


def _message(error: BacktrailError) -> str:
    """What the model reads about a failure."""
    if isinstance(error, StoreBusy):
        return (
            f"the store is locked: another process holds the write lock (busy timeout "
            f"{error.timeout_ms} ms); nothing was written, retry with backoff"
        )
    return error.message


class Runtime:
    """What every tool shares: the memory, the settings, the summary chain and the
    call log, and the one wrapper that turns a tool call into a tool result."""

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

    def caller(self, ctx: Context[Any, Any] | None) -> Caller:
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
            params = ctx.session.client_params if ctx is not None else None
            if params is not None and params.client_info is not None:
                name = params.client_info.name
        except (AttributeError, ValueError):
            name = None
        return Caller(identity.client_label(name), scope, False, transport)

    async def run(self, spec: ToolSpec, ctx: Context[Any, Any], arguments: dict[str, Any]) -> Any:
        """One tool call: check the caller may, run the tool, turn a failure into a
        ``ToolError``, and record the call in the call log."""
        caller = self.caller(ctx)
        started = time.perf_counter()
        ok, outcome, chars = False, "cancelled", 0
        try:
            if spec.writes and caller.scope != "write":
                raise ReadOnlyToken(spec.name)
            reply = await spec.fn(Call(self, caller, ctx), **arguments)
            chars = len(reply.text)
            ok, outcome = True, "ok"
            return CallToolResult(
                content=[TextContent(type="text", text=reply.text)],
                structured_content=reply.data.model_dump(mode="json", exclude_none=True),
            )
        except BacktrailError as error:
            outcome = f"{error.code}: {error.message}"
            raise ToolError(_message(error)) from None
        except Exception as error:
            outcome = f"crash: {type(error).__name__}: {error}"
            raise
        finally:
            if self.call_log is not None:
                self.call_log.record(
                    client=caller.client, tool=spec.name, arguments=arguments, ok=ok,
                    outcome=outcome, seconds=time.perf_counter() - started,
                    result_chars=chars, transport=caller.transport,
                )  # fmt: skip


@dataclass(frozen=True)
class Call:
    """What a tool function gets: the runtime, the caller and the request context."""

    rt: Runtime
    caller: Caller
    ctx: Context[Any, Any]

    @property
    def memory(self) -> Memory:
        return self.rt.memory

    @property
    def settings(self) -> McpSettings:
        return self.rt.settings

    async def blocking(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a blocking service call on a worker thread as the caller: the ledger
        records the caller as the one who wrote (or, with read logging on, read) what
        the call touches, and its searches see the caller's own earlier writes."""
        return await self.acting(self.caller.client, fn, *args, **kwargs)

    async def acting(
        self, client: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> T:
        """:meth:`blocking` as ``client`` (a fact's writer named by ``client_id``)."""
        def run() -> T:
            memory = self.memory
            with memory.acting_as(client, caller=self.caller.client):
                return fn(*args, **kwargs)

        return await anyio.to_thread.run_sync(run)

    def writer(self, client_id: str | None) -> str:
        """The client a write is attributed to: the ``client_id`` argument (as in
        mcp-memory-bridge) unless the caller's identity is assigned by its token."""
        if client_id is None or self.caller.assigned:
            return self.caller.client
        if not client_id.strip():
            raise InvalidInput("client_id", "must be a non-empty name of at most 256 characters")
        if identity.LABEL_CHARS.search(client_id):
            return identity.clean_label(client_id)
        return client_id

    def sampler(self) -> Sampler | None:
        """A sampler using the client's own model, when the client offers sampling on
        a connection that can carry server requests (not 2026-07-28 stateless calls)."""
        ctx = self.ctx
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


# ------------------------------------------------------------------- factory


def _handler(rt: Runtime, spec: ToolSpec) -> Callable[..., Awaitable[Any]]:
    """The function the SDK registers: the tool's own parameters plus the request
    context, returning ``Annotated[CallToolResult, <output model>]``."""
    signature = inspect.signature(spec.fn)
    hints = typing.get_type_hints(spec.fn, include_extras=True)
    params = [p.replace(annotation=hints[p.name]) for p in list(signature.parameters.values())[1:]]
    ctx = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    returns = Annotated[CallToolResult, spec.output]

    async def handler(ctx: Context[Any, Any], **arguments: Any) -> Any:
        return await rt.run(spec, ctx, arguments)

    handler.__name__ = spec.name
    handler.__doc__ = inspect.cleandoc(spec.fn.__doc__ or "")
    handler.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*params, ctx], return_annotation=returns
    )
    handler.__annotations__ = {**{p.name: p.annotation for p in params}, "ctx": Context,
                               "return": returns}  # fmt: skip
    return handler


def _tool_specs(demo: bool) -> list[ToolSpec]:
    import importlib

    order = (*TOOL_MODULES, "demo_tools")
    for module in order:
        importlib.import_module(f"backtrail.mcp_server.{module}")
    specs = [spec for spec in _TOOLS.values() if demo or not spec.demo]
    position = {name: n for n, name in enumerate(_TOOLS)}
    return sorted(specs, key=lambda s: (order.index(s.fn.__module__.rsplit(".", 1)[1]),
                                        position[s.name]))  # fmt: skip


class ScopeFilter:
    """Server middleware: a read-only token's ``tools/list`` shows only the tools it
    may call."""

    def __init__(self, rt: Runtime, writing: set[str]) -> None:
        self.rt = rt
        self.writing = writing

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or self.rt.caller(None).scope == "write":
            return result
        if isinstance(result, Mapping) and isinstance(result.get("tools"), list):
            return {**result, "tools": [t for t in result["tools"]
                                        if t.get("name") not in self.writing]}  # fmt: skip
        return result


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
    from backtrail.mcp_server import prompts, resources

    rt = Runtime(
        holder if holder is not None else MemoryHolder(memory_factory),
        settings if settings is not None else McpSettings(),
        chain if chain is not None else SummaryChain(),
        call_log,
    )
    server: MCPServer = MCPServer(
        identity.SERVER_NAME, title=identity.SERVER_TITLE, version=identity.SERVER_VERSION,
        instructions=identity.INSTRUCTIONS, log_level="WARNING",
    )  # fmt: skip
    specs = _tool_specs(rt.settings.demo_tools)
    for spec in specs:
        server.add_tool(_handler(rt, spec), name=spec.name, title=spec.title,
                        annotations=spec.annotations, structured_output=True)  # fmt: skip
    for registered in server._tool_manager.list_tools():
        registered.parameters = compact_schema(registered.parameters)
        registered.fn_metadata.output_schema = compact_schema(registered.output_schema or {})
        registered.__dict__["output_schema"] = registered.fn_metadata.output_schema
    server.middleware.append(ScopeFilter(rt, {s.name for s in specs if s.writes}))
    resources.register(server, rt)
    prompts.register(server, rt)
    return server
