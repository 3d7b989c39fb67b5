"""Backtrail's MCP front end: browsing-memory tools, shared facts compatible with
mcp-memory-bridge, resources and prompts, over stdio or streamable HTTP.

``serve(config, transport="stdio" | "http", ...)`` runs a server (blocking);
``build_server(memory_factory, ...)`` (in :mod:`backtrail.mcp_server.server`) builds one.
Importing this package is cheap: the MCP SDK and the memory are imported only when a
server is built.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from backtrail.mcp_server.settings import DEFAULT_PORT, McpSettings

if TYPE_CHECKING:
    from backtrail.config import Config
    from backtrail.mcp_server.calllog import CallLog
    from backtrail.mcp_server.holder import MemoryHolder
    from backtrail.service import Memory

DeviceEndpoint = Callable[[Callable[[], "Memory"], "Config"], Any]
"""Builds the ASGI app of ``POST /host`` from the server's memory and settings."""

__all__ = ["main", "serve", "serve_settings", "build_server", "McpSettings"]

logger = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from backtrail.mcp_server.server import build_server

        return build_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LOG_FORMAT = "backtrail %(levelname)s %(name)s: %(message)s"


def main(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    lean: bool = False,
    device_endpoint: DeviceEndpoint | None = None,
    **overrides: Any,
) -> None:
    """``backtrail mcp`` and ``python -m backtrail.mcp_server``: settings from the
    environment and ``overrides`` (those not ``None``), logs on stderr, then serve until
    the client leaves. A setting or token problem is one line on stderr and exit
    status 2; a PostgreSQL ledger that cannot be reached, one line and status 1.
    ``device_endpoint(memory, config)`` builds the ASGI app of ``POST /host`` (devices'
    native hosts) beside ``/mcp``."""
    from backtrail.config import Config
    from backtrail.errors import BacktrailError
    from backtrail.mcp_server.http import AuthSetupError, NoTokens, load_tokens
    from backtrail.mcp_server.settings import config_overrides

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format=_LOG_FORMAT)
    logging.getLogger("backtrail.mcp_server").setLevel(logging.INFO)
    try:
        settings = McpSettings.from_env(**overrides)
        if settings.transport == "http":
            try:
                load_tokens(settings, "check")  # fail closed, before anything is opened
            except NoTokens:
                pass  # unless the ledger holds tokens: checked once it is reachable
        changes = config_overrides()
        if lean:
            changes["embeddings"] = False
        config = Config.load(data_dir, overrides=changes)
        _require_ledger(config)
        serve_settings(config, settings, device_endpoint=device_endpoint)
    except (AuthSetupError, ValueError) as error:
        _fail(str(error))
    except BacktrailError as error:
        _fail(error.message)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


def _fail(message: str, status: int = 2) -> NoReturn:
    sys.stderr.write(f"backtrail mcp: {message}\n")
    raise SystemExit(status)


def _require_ledger(config: Config) -> None:
    """A PostgreSQL ledger that cannot be reached stops the server before it serves
    anyone: exit status 1, so a service manager tries again (the database may still be
    starting); a ledger from a newer Backtrail is a setup problem (2)."""
    from backtrail.errors import SchemaTooNew, StoreError
    from backtrail.service import health

    try:
        health.require_ledger(config)
    except SchemaTooNew:
        raise
    except StoreError as error:
        _fail(error.message, status=1)


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
        call_log=Path(log_calls) if log_calls is not None else None,
    )  # fmt: skip
    serve_settings(config, settings, on_listening=on_listening)


def serve_settings(
    config: Config,
    settings: McpSettings,
    *,
    on_listening: Callable[[str], None] | None = None,
    device_endpoint: DeviceEndpoint | None = None,
) -> None:
    """:func:`serve` with the settings already gathered."""
    if settings.transport == "http":
        _serve_http(config, settings, on_listening, device_endpoint)
    else:
        _serve_stdio(config, settings)


def _holder(config: Config, settings: McpSettings) -> MemoryHolder:
    from backtrail.mcp_server.holder import MemoryHolder
    from backtrail.service import Memory

    default = settings.client_id or ("mcp-http" if settings.transport == "http" else "mcp")
    if settings.transport != "http" and config.embed_threads == 0:
        # A stdio server embeds one query at a time, beside the BM25 side of a hybrid
        # search: a second intra-op thread costs more CPU than it saves time there
        # (bench/system/README.md).
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


def _serve_stdio(config: Config, settings: McpSettings) -> None:
    """The SDK's low-level server over Backtrail's stdio transport
    (:mod:`backtrail.mcp_server.stdio`) on the protocol's own copies of fds 0 and 1.
    Ctrl-C (SIGINT) ends it with exit status 130; a second one ends it at once."""
    import anyio

    wire_in, wire_out = _claim_stdio()
    holder = _holder(config, settings)
    server = _build(holder, settings, _call_log(settings))
    _open_soon(holder, preload_model=settings.preload_model)
    # MCPServer.run_stdio_async serves only the process's own streams; the low-level
    # server it wraps takes the protocol's copies.
    lowlevel = server._lowlevel_server
    interrupted = False

    async def run() -> None:
        nonlocal interrupted
        from backtrail.mcp_server.stdio import stdio_transport

        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal interrupted
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        interrupted = True
                        signal.signal(signal.SIGINT, lambda *_: os._exit(130))
                        group.cancel_scope.cancel()
                        return

            async def serve() -> None:
                async with stdio_transport(wire_in, wire_out) as (read, write):
                    await lowlevel.run(read, write, lowlevel.create_initialization_options())
                group.cancel_scope.cancel()

            group.start_soon(watch)
            group.start_soon(serve)

    try:
        anyio.run(run)
    finally:
        holder.close()
    if interrupted:
        logger.info("interrupted (SIGINT)")
        raise SystemExit(130)


def _claim_stdio() -> tuple[Any, Any]:
    """Private duplicates of fds 0 and 1 for the protocol, as binary files. From here on
    fd 0 reads the null device and fd 1 writes to stderr, so nothing a library prints
    while the server is built or serving can reach the wire."""
    sys.stdout.flush()
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def _open_soon(holder: MemoryHolder, *, preload_model: bool) -> None:
    """Open the memory (and load the model) beside the handshake, so the first tool
    call does not wait for it; a failure is reported again by that call."""

    def run() -> None:
        try:
            memory = holder.get()
            if preload_model:
                memory.load_model()
        except Exception as error:
            logger.warning("could not open the memory yet: %s", error)

    threading.Thread(target=run, name="backtrail-open", daemon=True).start()


def _serve_http(
    config: Config,
    settings: McpSettings,
    on_listening: Callable[[str], None] | None,
    device_endpoint: DeviceEndpoint | None = None,
) -> None:
    """Serve ``/mcp`` (and ``/host``) until interrupted. Tokens: the environment's and
    the token file's, and the ledger's, checked on every request. On a PostgreSQL
    ledger the index follows other nodes' commits as they happen."""
    from backtrail.mcp_server.http import NoTokens, build_http_app, load_tokens, serve_http
    from backtrail.service import TokenVerifier

    try:
        load_tokens(settings, "check")  # fail closed before opening anything
    except NoTokens:
        if not config.ledger_url and not config.ledger_path.exists():
            raise  # no ledger yet, so no tokens in it
        with _verifier(config) as verifier:
            if verifier.active_count() == 0:
                raise
    holder = _holder(config, settings)
    server = _build(holder, settings, _call_log(settings))
    verifier = TokenVerifier(config)
    try:
        device_app = device_endpoint(holder.get, config) if device_endpoint else None
        app = build_http_app(server, settings, settings.client_id or "mcp-http",
                             verify=_entry_of(verifier), device_app=device_app)  # fmt: skip
        memory = holder.get()
        if memory.follow_changes():
            logger.info("following the ledger's changes as other nodes commit them")
        if settings.preload_model:
            _preload(holder)
        serve_http(app, settings, on_listening)
    finally:
        holder.close()
        verifier.close()


@contextmanager
def _verifier(config: Config) -> Iterator[Any]:
    from backtrail.service import TokenVerifier

    verifier = TokenVerifier(config)
    try:
        yield verifier
    finally:
        verifier.close()


def _entry_of(verifier: Any) -> Callable[[str], Any]:
    """The gate's view of a ledger token: assigned identity, the token's scope."""
    from backtrail.mcp_server.http import TokenEntry

    def verify(presented: str) -> TokenEntry | None:
        record = verifier.verify(presented)
        if record is None:
            return None
        return TokenEntry(bytes.fromhex(record.digest), record.client_id, record.scope, True)

    return verify
