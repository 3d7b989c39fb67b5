"""Streamable HTTP: one long-running server for any number of clients, fail-closed.

- **Bearer tokens.** The server refuses to start without a token: ``MCP_AUTH_TOKEN``, a
  token file, or tokens kept in the ledger (``backtrail token add``); without any it
  raises :class:`AuthSetupError`, which the command turns into a message on stderr and
  exit status 2. Every request must carry ``Authorization: Bearer <token>``; the
  environment's and the file's tokens are compared as SHA-256 digests with
  :func:`hmac.compare_digest` against every known token (no early exit), and any other
  token is looked up in the ledger on each request (by its digest), so a token added or
  revoked with ``backtrail token`` counts at once, on every server of that ledger. A
  request without a valid token gets ``401`` with ``WWW-Authenticate: Bearer`` and a JSON
  error body, before its body is read; when the ledger cannot be asked, ``503``.
- **Token file.** JSON mapping each token to a client id and a scope::

      {"tokens": [
        {"token": "<at least 16 characters>", "client_id": "claude-desktop", "scope": "write"},
        {"sha256": "<hex digest of a token>", "client_id": "dashboard", "scope": "read"}
      ]}

  The server assigns the identity: writes and reads are attributed to the token's
  client id whatever ``client_id`` argument a tool call carries, and ``read`` tokens
  cannot call tools that change anything. With the single ``MCP_AUTH_TOKEN`` the
  ``client_id`` argument is honoured as in mcp-memory-bridge (self-reported).
- **Paths and scopes.** ``/mcp`` takes ``read`` and ``write`` tokens; ``/host`` (when the
  command serves it: a device's native host forwarding the browser's records) takes only
  ``device`` tokens. Any other pairing is ``403``.
- **Host allow-list.** Against DNS rebinding, the ``Host`` header must name
  ``127.0.0.1``, ``localhost`` or ``[::1]`` (any port) or one of the allowed hosts, in
  any case; otherwise ``421``. The SDK's own Origin check runs behind it with the same
  hosts.
- **Both kinds of client.** A client that accepts ``text/event-stream`` gets the SDK's
  SSE answers (and server requests such as sampling); one that accepts only
  ``application/json`` (mcp-memory-bridge's raw client) gets plain JSON answers, from a
  second session manager in the SDK's JSON-response mode.
- **Slow or idle connections.** A connection must send its request's headers within
  ``HEADER_TIMEOUT`` seconds, an idle keep-alive connection is closed after
  ``KEEP_ALIVE`` seconds, and at most ``MAX_CONNECTIONS`` are served at once (503 past
  that), all by uvicorn's own mechanisms.
- **Too deep.** A message nested deeper than the stdio transport's limit gets ``400``
  with a parse error that carries the message's own id whenever its top level is valid
  JSON (the SDK's parser would answer ``id: null``).
- Binds ``127.0.0.1`` unless told otherwise.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backtrail.mcp_server.settings import McpSettings
from backtrail.mcp_server.stdio import too_deep

__all__ = [
    "AuthSetupError", "NoTokens", "TokenEntry", "TokenTable", "HostAllowList", "BearerGate",
    "load_tokens", "build_http_app", "serve_http", "MIN_TOKEN_CHARS", "HTTP_PATH",
    "DEVICE_PATH", "Verifier",
]  # fmt: skip

logger = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
HTTP_PATH = "/mcp"
DEVICE_PATH = "/host"
"""Where devices' native hosts post the browser's messages (device tokens only)."""
HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's headers."""
KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open."""
MAX_CONNECTIONS = 64
"""Connections and requests served at once."""
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:@/+-]{1,64}$")
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")


class AuthSetupError(Exception):
    """The HTTP server cannot start safely; the message says what to do."""


class NoTokens(AuthSetupError):
    """Neither ``MCP_AUTH_TOKEN`` nor a token file is set (the ledger may hold tokens)."""


@dataclass(frozen=True)
class TokenEntry:
    """A known token (by its SHA-256 digest), whose client and scope it grants, and
    whether that identity is assigned (token file) or self-reported (single token)."""

    digest: bytes
    client_id: str
    scope: str
    assigned: bool

    @property
    def fingerprint(self) -> str:
        return self.digest.hex()[:12]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


Verifier = Callable[[str], "TokenEntry | None"]
"""Looks a presented token up elsewhere (the ledger); blocking, called on a worker thread."""


class TokenTable:
    """The tokens this server accepts from its environment and token file (empty when
    it accepts only the ledger's)."""

    def __init__(self, entries: Sequence[TokenEntry], *, allow_empty: bool = False) -> None:
        if not entries and not allow_empty:
            raise AuthSetupError("no tokens: refusing to serve HTTP without authentication")
        digests = [e.digest for e in entries]
        if len(set(digests)) != len(digests):
            raise AuthSetupError("the same token appears twice in the token file")
        self._entries = tuple(entries)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def single(cls, token: str, client_id: str) -> TokenTable:
        _check_token(token, "MCP_AUTH_TOKEN")
        return cls([TokenEntry(_digest(token), client_id, "write", False)])

    @classmethod
    def from_file(cls, path: Path) -> TokenTable:
        try:
            raw = path.read_text(encoding="utf-8")
            data: Any = json.loads(raw)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise AuthSetupError(f"cannot read the token file {path}: {error}") from None
        items = data.get("tokens") if isinstance(data, dict) else data
        if not isinstance(items, list) or not items:
            raise AuthSetupError(
                f'token file {path}: expected {{"tokens": [{{"token": ..., "client_id": ..., '
                '"scope": "read" or "write"}}, ...]}}'
            )
        entries = [_entry(item, f"{path}: tokens[{i}]") for i, item in enumerate(items)]
        if any(isinstance(i, dict) and "token" in i for i in items):
            _warn_if_readable(path)
        return cls(entries)

    def lookup(self, presented: str) -> TokenEntry | None:
        """The entry for ``presented``, comparing against every token in constant time."""
        digest = _digest(presented)
        found = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        return found


def _check_token(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_CHARS:
        raise AuthSetupError(
            f"{where}: tokens must be at least {MIN_TOKEN_CHARS} characters long "
            "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


def _entry(item: object, where: str) -> TokenEntry:
    if not isinstance(item, dict):
        raise AuthSetupError(f"{where}: must be an object with token, client_id and scope")
    unknown = sorted(set(item) - {"token", "sha256", "client_id", "scope"})
    if unknown:
        raise AuthSetupError(f"{where}: unknown field {unknown[0]!r}")
    client = item.get("client_id")
    if not isinstance(client, str) or not _CLIENT_ID.match(client):
        raise AuthSetupError(f"{where}: client_id must be 1-64 letters, digits or ._:@/+-")
    scope = item.get("scope", "write")
    if scope not in ("read", "write"):
        raise AuthSetupError(f"{where}: scope must be 'read' or 'write', not {scope!r}")
    token, hexdigest = item.get("token"), item.get("sha256")
    if (token is None) == (hexdigest is None):
        raise AuthSetupError(f"{where}: give exactly one of token or sha256")
    if token is not None:
        if not isinstance(token, str):
            raise AuthSetupError(f"{where}: token must be a string")
        _check_token(token, where)
        digest = _digest(token)
    else:
        if not isinstance(hexdigest, str) or not _HEX.match(hexdigest):
            raise AuthSetupError(f"{where}: sha256 must be 64 hexadecimal digits")
        digest = bytes.fromhex(hexdigest)
    return TokenEntry(digest, client, scope, True)


def _warn_if_readable(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if os.name == "posix" and mode & (stat.S_IRGRP | stat.S_IROTH):
        logger.warning(
            "the token file %s is readable by other users; run: chmod 600 %s "
            "(or store sha256 digests instead of tokens)", path, path,
        )  # fmt: skip


def load_tokens(
    settings: McpSettings, default_client: str, *, ledger_tokens: bool = False
) -> TokenTable:
    """The tokens from the settings; when there are none, an empty table if the ledger
    holds tokens (``ledger_tokens``), else :class:`NoTokens`."""
    if settings.token_file is not None:
        table = TokenTable.from_file(settings.token_file)
        if settings.auth_token:
            extra = TokenTable.single(settings.auth_token, default_client)
            table = TokenTable([*table._entries, *extra._entries])
        return table
    if settings.auth_token:
        return TokenTable.single(settings.auth_token, default_client)
    if ledger_tokens:
        return TokenTable([], allow_empty=True)
    raise NoTokens(
        "refusing to serve MCP over HTTP without authentication: set MCP_AUTH_TOKEN (or "
        f"BACKTRAIL_MCP_AUTH_TOKEN) to a secret of at least {MIN_TOKEN_CHARS} characters, "
        "give --token-file, or make a token with `backtrail token add CLIENT_ID --scope "
        "write`. Clients then send 'Authorization: Bearer <token>'."
    )


# ---------------------------------------------------------------------- hosts


class HostAllowList:
    """Accepted ``Host`` header values: the loopback names (any port) and ``extra``
    entries, each ``host`` (any port), ``host:*`` or ``host:port``."""

    def __init__(self, extra: Sequence[str] = ()) -> None:
        rules: list[tuple[str, str | None]] = [(h, None) for h in _LOCAL_HOSTS]
        for item in extra:
            rules.append(_host_rule(item))
        self.rules = tuple(rules)

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        host, port = _split_host(header.strip().lower())
        return any(host == h and (p is None or p == port) for h, p in self.rules)

    def sdk_hosts(self) -> list[str]:
        """The same rules in the form the SDK's transport security takes."""
        out: list[str] = []
        for host, port in self.rules:
            out += [host, f"{host}:*"] if port is None else [f"{host}:{port}"]
        return out

    def sdk_origins(self) -> list[str]:
        out: list[str] = []
        for host, port in self.rules:
            for scheme in ("http", "https"):
                out += (
                    [f"{scheme}://{host}", f"{scheme}://{host}:*"]
                    if port is None
                    else [f"{scheme}://{host}:{port}"]
                )
        return out


def _split_host(value: str) -> tuple[str, str | None]:
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    if value.count(":") == 1:
        host, port = value.split(":")
        return host, port
    return value, None


def _host_rule(item: str) -> tuple[str, str | None]:
    host, port = _split_host(item.strip().lower())
    if not host or (port is not None and port != "*" and not port.isdigit()):
        raise AuthSetupError(f"allowed host {item!r} must look like host, host:port or host:*")
    return host, None if port in (None, "*") else port


# ----------------------------------------------------------------------- gate


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-length", str(len(body)).encode()), *headers],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


class BearerGate:
    """ASGI middleware in front of the whole app: Host check, then the bearer token (the
    table's, else ``verify``'s: the ledger's), then the token's scope against the path,
    then the caller's identity into ``scope['user']`` (for the SDK's session binding and
    for the tools, through the SDK's auth context) and ``scope['backtrail.client']``."""

    def __init__(
        self, app: Any, tokens: TokenTable, hosts: HostAllowList, verify: Verifier | None = None
    ) -> None:
        from mcp.server.auth.middleware.auth_context import AuthContextMiddleware

        self.app = app
        self.inner = AuthContextMiddleware(app)
        self.tokens = tokens
        self.hosts = hosts
        self.verify = verify

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        host = _header(scope, b"host")
        if not self.hosts.allows(host):
            logger.warning("refused a request for Host %r (not in the allow-list)", host)
            await _respond(send, 421, b"Invalid Host header", [(b"content-type", b"text/plain")])
            return
        device_path = scope.get("path", "").rstrip("/") == DEVICE_PATH
        authorization = _header(scope, b"authorization") or ""
        scheme, _, presented = authorization.partition(" ")
        try:
            entry = await self._lookup(presented.strip()) if scheme.lower() == "bearer" else None
        except Exception as error:  # the ledger is unreachable: not the token's fault
            logger.warning("could not check a token against the ledger: %s", error)
            await _refuse(send, 503, "the server cannot check tokens right now (its ledger "
                          "does not answer); retry later", device_path)  # fmt: skip
            return
        if entry is None:
            await self._unauthorized(send, bool(authorization), device_path)
            return
        if device_path != (entry.scope == "device"):
            message = (
                f"{DEVICE_PATH} takes only device tokens; this token's scope is {entry.scope}"
                if device_path else
                f"this token's scope is device: it may only POST {DEVICE_PATH} (captures "
                "and the popup's search), not call MCP tools"
            )  # fmt: skip
            logger.warning("refused %s's request for %s: scope %s", entry.client_id,
                           scope.get("path"), entry.scope)  # fmt: skip
            await _refuse(send, 403, message, device_path)
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken
        from starlette.authentication import AuthCredentials

        token = AccessToken(
            token=entry.fingerprint, client_id=entry.client_id, scopes=[entry.scope],
            claims={"backtrail_assigned": entry.assigned},
        )  # fmt: skip
        headers = [
            (key, value.lower() if key.lower() in (b"host", b"origin") else value)
            for key, value in scope.get("headers", ())
        ]  # host names are case-insensitive; the SDK's check behind this one is not
        scope = {**scope, "headers": headers, "user": AuthenticatedUser(token),
                 "auth": AuthCredentials([entry.scope]), "backtrail.client": entry.client_id,
                 "backtrail.scope": entry.scope}  # fmt: skip
        await self.inner(scope, receive, send)

    async def _lookup(self, presented: str) -> TokenEntry | None:
        entry = self.tokens.lookup(presented)
        if entry is not None or self.verify is None or not presented:
            return entry
        import anyio

        return await anyio.to_thread.run_sync(self.verify, presented)

    async def _unauthorized(self, send: Any, presented: bool, device_path: bool) -> None:
        message = (
            "invalid bearer token" if presented
            else "authentication required: send 'Authorization: Bearer <token>'"
        )  # fmt: skip
        logger.warning("refused an HTTP request: %s", message)
        challenge = b'Bearer error="invalid_token"' if presented else b"Bearer"
        await _refuse(send, 401, message, device_path, [(b"www-authenticate", challenge)])


async def _refuse(
    send: Any, status: int, message: str, device_path: bool,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:  # fmt: skip
    """A JSON refusal: a JSON-RPC error for ``/mcp``, ``{"error": {"status",
    "message"}}`` for ``/host``."""
    payload: dict[str, Any] = (
        {"error": {"status": status, "message": message}} if device_path
        else {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    )  # fmt: skip
    await _respond(send, status, json.dumps(payload).encode(),
                   [(b"content-type", b"application/json"), *headers])  # fmt: skip


# --------------------------------------------------------------------- server


def build_http_app(
    server: Any, settings: McpSettings, default_client: str, *, verify: Verifier | None = None,
    device_app: Any = None,
) -> BearerGate:  # fmt: skip
    """The ASGI app: streamable HTTP at ``/mcp`` (SSE or plain JSON, as the client's
    ``Accept`` header asks) and, given ``device_app``, that app at ``/host``, behind
    :class:`BearerGate`, which also asks ``verify`` about tokens it does not know. Raises
    :class:`AuthSetupError` before building anything when auth is missing."""
    tokens = load_tokens(settings, default_client, ledger_tokens=verify is not None)
    hosts = HostAllowList(settings.allowed_hosts)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts.sdk_hosts(),
        allowed_origins=hosts.sdk_origins(),
    )  # fmt: skip
    lowlevel = server._lowlevel_server
    streaming, plain = (
        StreamableHTTPSessionManager(app=lowlevel, json_response=json_only,
                                     security_settings=security)
        for json_only in (False, True)
    )  # fmt: skip
    return BearerGate(_ByAccept(streaming, plain, device_app), tokens, hosts, verify)


class _ByAccept:
    """``/mcp`` served by the SSE session manager, or by the JSON-response one for a
    request that does not accept ``text/event-stream``; both run for the app's lifespan.
    ``/host`` goes to ``device_app`` when there is one."""

    def __init__(self, streaming: Any, plain: Any, device_app: Any = None) -> None:
        self.streaming = streaming
        self.plain = plain
        self.device_app = device_app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope.get("path", "").rstrip("/")
        if path == DEVICE_PATH and self.device_app is not None:
            await self.device_app(scope, receive, send)
            return
        if path != HTTP_PATH:
            await _respond(send, 404, b"Not Found", [(b"content-type", b"text/plain")])
            return
        accept = (_header(scope, b"accept") or "").lower()
        manager = self.streaming if "text/event-stream" in accept else self.plain
        if scope.get("method") == "POST":
            receive = await _checked_body(receive, send)
            if receive is None:
                return
        await manager.asgi_app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        from contextlib import AsyncExitStack

        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.streaming.run())
            await stack.enter_async_context(self.plain.run())
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})


async def _checked_body(receive: Any, send: Any) -> Any:
    """Read a POST's body; answer a message nested deeper than the stdio transport's
    limit here, with its own id when its top level is valid JSON (the SDK's parser would
    answer ``id: null``). Returns a ``receive`` that replays the body, or ``None`` once
    answered."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away before sending its body
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    refusal = too_deep(body)
    if refusal is not None:
        logger.info("refused a message: %s", refusal)
        answer = refusal.error.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await _respond(send, 400, answer, [(b"content-type", b"application/json")])
        return None
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _protocol() -> Any:
    """uvicorn's h11 protocol with a deadline for a request's headers: a connection that
    opens and sends nothing (or half a request) is closed after ``HEADER_TIMEOUT``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        _deadline: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(HEADER_TIMEOUT, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self.timeout_keep_alive_handler()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return Protocol


def serve_http(
    app: BearerGate, settings: McpSettings, on_listening: Callable[[str], None] | None = None
) -> None:
    """Serve ``app`` with uvicorn until interrupted (blocking); ``on_listening(url)``
    is called once the socket is bound."""
    import uvicorn

    class _Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            for listener in getattr(self, "servers", []):
                for sock in listener.sockets:
                    address = sock.getsockname()
                    host = f"[{address[0]}]" if ":" in address[0] else address[0]
                    url = f"http://{host}:{address[1]}{HTTP_PATH}"
                    logger.info("backtrail MCP server listening on %s", url)
                    if on_listening is not None:
                        on_listening(url)

    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", access_log=False,
        server_header=False, lifespan="on", http=_protocol(), timeout_keep_alive=KEEP_ALIVE,
        limit_concurrency=MAX_CONNECTIONS,
    )  # fmt: skip
    _Server(config).run()
