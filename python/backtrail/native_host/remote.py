"""``POST /host``: a device's native host forwarding the browser's messages to a server.

A computer whose host forwards to a server (``backtrail install --server``) sends the
messages it takes from the extension, in a batch, as one JSON array; the server answers
each with the response frame the host protocol defines (PROTOCOL.md sections 3 and 6),
in the same order. The messages are checked and applied by the same
:class:`~backtrail.native_host.dispatch.Dispatcher` as on a local host (so the same
validation and error codes), through a :class:`~backtrail.service.devices.DeviceSync`:

- **Identity.** The HTTP server's gate admits only tokens of scope ``device`` here and
  puts the token's client id in the request scope; every write is attributed to it.
- **What a device may send.** The browser's records (captures, visits, tabs, history,
  bookmarks, highlights, notes, skipped counts, action results), ``hello`` and the
  popup's reads (search, recent, status, settings_get). Anything else gets error 18
  (``action_not_allowed``) for that message; the rest of the batch is served.
- **Exactly once.** Each queued message's response is stored with ``(client, id)`` in
  the transaction of its writes; a resend (the device's outbox, after a lost answer)
  gets the stored response and writes nothing. Consecutive captures share ledger
  commits, as in the host's session loop.
- **Profile.** ``hello`` names the browser profile (tabs, bookmarks and history visit
  ids are scoped by it) for the messages after it in the batch; a batch without one
  names it in the ``X-Backtrail-Profile`` header. With neither, messages that need a
  session get error 17 (``hello_required``, retryable).
- **Bad input.** A body that is not a JSON array of 1 to :data:`MAX_MESSAGES` values,
  invalid UTF-8 or JSON, nested deeper than :data:`MAX_NESTING`, or a bad profile
  header is ``400``; a body over :data:`MAX_BODY_BYTES` is ``413`` (refused from its
  ``Content-Length`` before reading when it says so; a chunked one is read and dropped
  up to twice that, so the client reads the answer, then the connection is closed).
  Either way nothing is applied. A value in the array that is not a valid message gets
  the host's own error for it (3 without a valid id, 7 above ``max_request_bytes``), in
  its place.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from backtrail.native_host.codes import RETRYABLE, Code, HostError, error_for
from backtrail.native_host.dispatch import QUEUED_TYPES, Dispatcher, response
from backtrail.native_host.framing import (
    Inbound,
    decode_request,
    encode_json,
    recover_id,
)

if TYPE_CHECKING:
    from backtrail.config import Config
    from backtrail.service import DeviceSync, Memory

__all__ = [
    "HOST_PATH", "MAX_BODY_BYTES", "MAX_MESSAGES", "MAX_NESTING", "DEVICE_TYPES",
    "PROFILE_HEADER", "DeviceDispatcher", "HostEndpoint", "endpoint", "parse_batch",
]  # fmt: skip

logger = logging.getLogger(__name__)

HOST_PATH = "/host"
MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest body ``POST /host`` reads."""
MAX_MESSAGES = 500
"""The most messages one request may carry."""
MAX_NESTING = 66
"""The deepest a body may nest: the array, a message, and the 64 levels a message may
have below it (PROTOCOL.md section 2)."""
PROFILE_HEADER = "X-Backtrail-Profile"
DEVICE_TYPES = frozenset({
    "hello", "capture_page", "visit", "tab_snapshot", "tab_event", "history_import",
    "bookmark_upsert", "bookmark_remove", "bookmark_import", "highlight", "note", "skipped",
    "action_result", "search", "recent", "status", "settings_get", "settings_set",
})  # fmt: skip
"""The message types a device token may send. ``settings_set`` stores the extension's own
settings for its browser profile (sent after every ``hello``; the server applies that
profile's exclusions to its captures as a second line of defence, PROTOCOL.md §3.14)."""
DEVICE_CAPABILITIES = ("search",)
_PROFILE = re.compile(r"^[\x21-\x7e]{1,64}$")


class BadBatch(Exception):
    """The request as a whole cannot be served (status and one sentence)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ------------------------------------------------------------------- parsing


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_batch(body: bytes, max_request_bytes: int) -> list[Inbound]:
    """The messages of a request body, each parsed as the host parses a frame (so a bad
    one is answered in its place); :class:`BadBatch` for a body that is not a batch."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadBatch(400, f"the body is not valid UTF-8 (byte {error.start})") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise BadBatch(400, f"the body is nested deeper than {MAX_NESTING} levels") from None
    except ValueError as error:
        reason = str(error).split(":")[0][:120]
        raise BadBatch(400, f"the body is not valid JSON ({reason})") from None
    if not isinstance(value, list):
        raise BadBatch(400, f"the body must be a JSON array of messages, not a JSON "
                            f"{type(value).__name__}")  # fmt: skip
    if not 1 <= len(value) <= MAX_MESSAGES:
        raise BadBatch(400, f"the body must hold 1 to {MAX_MESSAGES} messages, not {len(value)}")
    if _too_deep(value, MAX_NESTING):
        raise BadBatch(400, f"the body is nested deeper than {MAX_NESTING} levels")
    return [_message(item, max_request_bytes) for item in value]


def _message(item: Any, max_request_bytes: int) -> Inbound:
    frame = encode_json(item) if isinstance(item, dict) else json.dumps(item).encode()
    if len(frame) > max_request_bytes:
        error = HostError(
            Code.MESSAGE_TOO_LARGE,
            f"the message is {len(frame)} bytes; this server accepts at most "
            f"{max_request_bytes} bytes per message",
            {"limit": max_request_bytes, "actual": len(frame)},
        )
        return Inbound(len(frame), error=error, id=recover_id(frame))
    return decode_request(frame)


# ---------------------------------------------------------------- dispatching


class DeviceDispatcher(Dispatcher):
    """The host's dispatcher for one request of a device: only :data:`DEVICE_TYPES`,
    each queued message applied at most once (its response stored in the ledger)."""

    sync: DeviceSync

    def __init__(self, sync: DeviceSync, *, max_request_bytes: int, profile: str | None) -> None:
        super().__init__(sync, max_request_bytes=max_request_bytes)
        if profile is not None:
            if sync.profile != profile:
                sync.use_profile(profile)
            self.profile = profile
            self.greeted = True

    def _execute(self, request: dict[str, Any]) -> dict[str, Any]:
        ident, kind = request["id"], request.get("type")
        if isinstance(kind, str) and kind in self._handlers and kind not in DEVICE_TYPES:
            return response(ident, error=HostError(
                Code.ACTION_NOT_ALLOWED,
                f"device tokens cannot send {kind}: a device may capture and search, "
                "nothing else; do it on the server (the backtrail command) or with a "
                "read or write token over MCP",
            ))  # fmt: skip
        if kind not in QUEUED_TYPES:
            answer = super()._execute(request)
            if kind == "hello" and answer["ok"]:
                answer["result"]["capabilities"] = list(DEVICE_CAPABILITIES)
            return answer
        try:
            with self.sync.atomic():
                stored = self.sync.delivered(ident)
                if stored is not None:
                    return stored
                answer = super()._execute(request)
                if answer["ok"] or answer["error"]["code"] not in RETRYABLE:
                    self.sync.record_delivery(ident, str(kind), answer)
                return answer
        except Exception as exc:  # the delivery could not be read or stored: the message's
            return response(ident, error=error_for(exc, str(kind)))  # writes were undone


# ---------------------------------------------------------------------- ASGI


def _encode(payload: Any) -> bytes:
    """Compact UTF-8 JSON; text holding unpaired surrogates falls back to escapes."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode("ascii")


async def _respond(send: Any, status: int, payload: Any, extra: Sequence[tuple[bytes, bytes]] = ()
                   ) -> None:  # fmt: skip
    body = _encode(payload)
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *extra],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def problem(status: int, message: str) -> dict[str, Any]:
    """The JSON body of a refused request: ``{"error": {"status", "message"}}``."""
    return {"error": {"status": status, "message": message}}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


async def _read_body(scope: dict[str, Any], receive: Any) -> bytes | None:
    """The body, or ``None`` past :data:`MAX_BODY_BYTES` (the rest of a body that did
    not say its length is read and dropped, up to as much again); :class:`BadBatch` if
    the client left before sending it all."""
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise BadBatch(400, "the client went away before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        more = message.get("more_body", False)
        if size > MAX_BODY_BYTES:
            chunks.clear()
            if not more or size > 2 * MAX_BODY_BYTES:
                return None
            continue
        chunks.append(chunk)
        if not more:
            return b"".join(chunks)


class HostEndpoint:
    """The ASGI app of ``POST /host``, behind the HTTP server's gate (which checks the
    Host header and the device token, and puts the token's client id in
    ``scope["backtrail.client"]``). ``memory`` returns the server's open memory."""

    def __init__(self, memory: Callable[[], Memory], *, max_request_bytes: int) -> None:
        self.memory = memory
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import anyio

        if scope.get("method") != "POST":
            await _respond(send, 405, problem(405, "use POST"), [(b"allow", b"POST")])
            return
        client = scope.get("backtrail.client")
        if not isinstance(client, str):  # only ever reached behind the gate
            await _respond(send, 401, problem(401, "a device token is required"))
            return
        try:
            profile = _profile(_header(scope, PROFILE_HEADER.lower().encode()))
            body = await _read_body(scope, receive)
            if body is None:
                await _respond(send, 413, problem(
                    413, f"the body is larger than {MAX_BODY_BYTES} bytes; send fewer messages"
                ))  # fmt: skip
                return
            answers = await anyio.to_thread.run_sync(self._serve, client, profile, body)
        except BadBatch as refused:
            logger.info("refused a /host request from %s: %s", client, refused.message)
            await _respond(send, refused.status, problem(refused.status, refused.message))
            return
        await _respond(send, 200, answers)

    def _serve(self, client: str, profile: str | None, body: bytes) -> list[dict[str, Any]]:
        from backtrail.errors import BacktrailError

        items = parse_batch(body, self.max_request_bytes)
        try:
            sync = self.memory().device(client, profile or "default")
        except BacktrailError as error:
            raise BadBatch(503, f"the memory cannot be opened: {error.message}") from None
        dispatcher = DeviceDispatcher(
            sync, max_request_bytes=self.max_request_bytes, profile=profile
        )
        with sync.attributed():
            return dispatcher.handle_all(items)


def _profile(value: str | None) -> str | None:
    if value is None:
        return None
    if not _PROFILE.match(value):
        raise BadBatch(400, f"the {PROFILE_HEADER} header must be 1-64 visible characters")
    return value


def endpoint(memory: Callable[[], Memory], config: Config) -> HostEndpoint:
    """``POST /host`` for ``backtrail mcp --http``: messages up to the host's own
    per-message cap (``max_request_bytes``). Deliveries older than
    :data:`~backtrail.service.devices.DELIVERY_RETENTION_DAYS` are pruned first."""
    from backtrail.errors import BacktrailError
    from backtrail.native_host import max_request_bytes

    try:
        pruned = memory().prune_deliveries()
        if pruned:
            logger.info("pruned %d old device deliveries", pruned)
    except BacktrailError as error:
        logger.warning("could not prune old device deliveries: %s", error.message)
    return HostEndpoint(memory, max_request_bytes=max_request_bytes(config))
