"""Backtrail's MCP front end: browsing-memory tools, shared facts compatible with
mcp-memory-bridge, resources and prompts, over stdio or streamable HTTP.

``serve(config, transport="stdio" | "http", ...)`` runs a server (blocking);
``build_server(memory_factory, ...)`` (in :mod:`backtrail.mcp_server.server`) builds one.
Importing this package is cheap: the MCP SDK and the memory are imported only when a
server is built, after a stdio client's ``initialize`` has been answered.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backtrail.mcp_server.settings import DEFAULT_PORT, McpSettings

if TYPE_CHECKING:
    from backtrail.config import Config
    from backtrail.mcp_server.calllog import CallLog
    from backtrail.mcp_server.holder import MemoryHolder
    from backtrail.mcp_server.stdio import StdioRunner

__all__ = ["serve", "serve_settings", "build_server", "McpSettings"]

logger = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from backtrail.mcp_server.server import build_server

        return build_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve(
    config: Config,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    auth_token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    allowed_hosts: Sequence[str] = (),
    client_id: str | None = None,
    preload_model: bool = False,
    log_calls: str | os.PathLike[str] | None = None,
    fast_start: bool = True,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve the memory of ``config`` over MCP until the client leaves (stdio) or the
    process is interrupted (HTTP). HTTP refuses to start without ``auth_token`` or
    ``token_file`` (:class:`~backtrail.mcp_server.http.AuthSetupError`); once it listens
    it calls ``on_listening(url)`` (port 0 picks a free port)."""
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', not {transport!r}")
    settings = McpSettings(
        transport=transport, client_id=client_id, host=host, port=port, auth_token=auth_token,
        token_file=Path(token_file) if token_file is not None else None,
        allowed_hosts=tuple(allowed_hosts), preload_model=preload_model,
        call_log=Path(log_calls) if log_calls is not None else None, fast_start=fast_start,
    )  # fmt: skip
    serve_settings(config, settings, on_listening=on_listening)


def serve_settings(
    config: Config | Callable[[], Config],
    settings: McpSettings,
    *,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """:func:`serve` with the settings already gathered. ``config`` may be a function
    that loads it: over stdio it is then loaded after ``initialize`` is answered."""
    load = config if callable(config) else (lambda: config)
    if settings.transport == "http":
        _serve_http(load(), settings, on_listening)
    else:
        _serve_stdio(load, settings)


def _holder(config: Config, settings: McpSettings) -> MemoryHolder:
    from backtrail.mcp_server.holder import MemoryHolder
    from backtrail.memory import Memory

    default = settings.client_id or ("mcp-http" if settings.transport == "http" else "mcp")
    if settings.transport != "http" and config.embed_threads == 0:
        # A stdio server embeds one query at a time (and its client's few writes), and a
        # hybrid search embeds beside the BM25 pool: a second intra-op thread cost 40%
        # more CPU per query embedding for 20-25% less wall time (bench/system/README.md).
        config = config.replace(embed_threads=1)
    return MemoryHolder(lambda: Memory(config, client=default))


def _build(holder: MemoryHolder, settings: McpSettings, call_log: CallLog | None = None) -> Any:
    from backtrail.mcp_server.server import build_server

    return build_server(lambda: holder.get(), settings=settings, call_log=call_log, holder=holder)


def _call_log(settings: McpSettings) -> CallLog | None:
    from backtrail.mcp_server.calllog import CallLog

    return CallLog(settings.call_log) if settings.call_log is not None else None


def _warm(holder: MemoryHolder) -> None:
    """Open the memory and load the embedding model (a first search would)."""
    try:
        holder.get().load_model()
    except Exception:
        logger.exception("preloading the embedding model failed")


def _preload(holder: MemoryHolder) -> None:
    """:func:`_warm` on a background thread."""
    threading.Thread(target=_warm, args=(holder,), name="backtrail-model", daemon=True).start()


def _serve_stdio(load_config: Callable[[], Config], settings: McpSettings) -> None:
    from backtrail.mcp_server.early import EarlyAnswers
    from backtrail.mcp_server.stdio import serve_stdio

    made: list[MemoryHolder] = []
    answers: list[EarlyAnswers] = []
    holder_made = threading.Event()

    def prepare() -> StdioRunner:
        try:
            config = load_config()
            holder = _holder(config, settings)  # before the SDK: warm() and early() need it
            made.append(holder)
            call_log = _call_log(settings)
            answers.append(EarlyAnswers(holder.get, settings, config.mcp_cache_dir, call_log))
        finally:
            holder_made.set()
        # before the SDK: an early search would otherwise wait for the SDK's imports to
        # release pydantic's module lock, and build its output model under contention
        importlib.import_module("backtrail.mcp_server.searching")
        import anyio
        from mcp.server.stdio import stdio_server

        server = _build(holder, settings, call_log)
        holder.get()  # open the memory now, not on the first tool call
        if settings.preload_model:
            _preload(holder)
        # MCPServer serves stdio only on the process's own streams; the low-level server
        # it wraps takes explicit ones (the replaying reader of the fast start).
        lowlevel = server._lowlevel_server

        async def runner(stdin: Any, stdout: Any) -> None:
            try:
                async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
                    await lowlevel.run(read, write, lowlevel.create_initialization_options())
            finally:
                await anyio.to_thread.run_sync(holder.close)

        return runner

    def warm() -> None:
        logger.info("a search arrived while the MCP SDK loads: loading the embedding model now")
        holder_made.wait()
        if made:
            _warm(made[0])

    def early() -> EarlyAnswers | None:
        holder_made.wait()
        return answers[0] if answers else None

    serve_stdio(prepare, fast_start=settings.fast_start, warm=warm, early=early)


def _serve_http(
    config: Config, settings: McpSettings, on_listening: Callable[[str], None] | None
) -> None:
    from backtrail.mcp_server.http import build_http_app, load_tokens, serve_http

    load_tokens(settings, "check")  # fail closed before opening anything
    holder = _holder(config, settings)
    server = _build(holder, settings, _call_log(settings))
    app = build_http_app(server, settings, settings.client_id or "mcp-http")
    holder.get()
    if settings.preload_model:
        _preload(holder)
    try:
        serve_http(app, settings, on_listening)
    finally:
        holder.close()
