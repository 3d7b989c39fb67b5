"""The stdio transport: newline-delimited JSON-RPC between the wire and the SDK's
low-level server, with a reader of Backtrail's own that answers what the SDK's reader
would drop.

The SDK's ``stdio_server`` hands every line it cannot validate to the session, which
logs it and answers nothing; a line nested a thousand levels deep even kills its reader.
Here each line is read (at most ``max_line_bytes``) on a daemon thread, decoded and
parsed with bounded depth, and only a well-formed JSON-RPC message reaches the SDK.
Everything else is answered on the spot, with the request's id when it has one:

- not UTF-8, not JSON, too deep or too long: ``-32700`` (parse error); a message nested
  too deep still gets its own id whenever its top level is valid JSON (see
  :func:`too_deep`), so the client that sent it is not left waiting;
- JSON that is not one JSON-RPC message (an array, a number, a request without a
  method...): ``-32600`` (invalid request);
- a lone surrogate escape (``"\\ud83d"``, a string cut inside an emoji): ``-32602``
  (invalid params), since such text cannot be stored or answered as UTF-8.

The server keeps serving after each, and ends when stdin closes. Answers are written by
one task in the order they are sent, so a reply is never torn.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from mcp_types import jsonrpc_message_adapter as adapter

__all__ = ["stdio_transport", "MAX_DEPTH", "MAX_LINE_BYTES", "check_line", "too_deep"]

logger = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a message may have."""
MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest message (bytes of one line)."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_OPEN = re.compile(rb'[\[{]|"(?:[^"\\]|\\.)*"|[\]}]')


class Refusal(Exception):
    """A line that gets a JSON-RPC error instead of reaching the SDK."""

    def __init__(self, code: int, message: str, ident: Any = None) -> None:
        super().__init__(message)
        error = ErrorData(code=code, message=message)
        self.error = JSONRPCError(jsonrpc="2.0", id=ident, error=error)


def _depth(raw: bytes) -> int:
    """The deepest nesting of ``raw`` JSON (strings skipped), without recursion."""
    depth = deepest = 0
    for match in _OPEN.finditer(raw):
        token = match.group(0)
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def _top_level(raw: bytes) -> Any:
    """``raw`` parsed with every array or object below its top level replaced by ``null``
    (strings skipped while counting, without recursion); ``None`` when that is not JSON."""
    kept = bytearray()
    depth, start = 0, 0
    for match in _OPEN.finditer(raw):
        token = match.group(0)
        if token in (b"[", b"{"):
            depth += 1
            if depth == 2:
                kept += raw[start : match.start()] + b"null"
        elif token in (b"]", b"}"):
            if depth == 2:
                start = match.end()
            depth -= 1
            if depth < 0:
                return None
    if depth != 0:
        return None
    kept += raw[start:]
    try:
        return json.loads(kept)
    except ValueError:
        return None


def too_deep(raw: bytes) -> Refusal | None:
    """The refusal for a message nested deeper than :data:`MAX_DEPTH`, carrying the
    message's own id whenever its top level is valid JSON; ``None`` if it is not so deep."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH or _depth(raw) <= MAX_DEPTH:
        return None
    message = f"Parse error: nested deeper than {MAX_DEPTH} levels"
    return Refusal(PARSE_ERROR, message, _ident(_top_level(raw)))


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _ident(value: Any) -> Any:
    """The id to answer with: the message's, if it is a usable JSON-RPC id."""
    if isinstance(value, dict):
        found = value.get("id")
        if isinstance(found, str) and not _SURROGATE.search(found) and len(found) <= 1_000:
            return found
        if isinstance(found, int) and not isinstance(found, bool):
            return found
    return None


def check_line(raw: bytes) -> SessionMessage:
    """The message on one line, or :class:`Refusal` with the error to answer."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Refusal(PARSE_ERROR, f"Parse error: the line is not UTF-8 ({error.reason})") from None
    deep = too_deep(raw)
    if deep is not None:
        raise deep
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise Refusal(PARSE_ERROR, f"Parse error: {error}"[:200]) from None
    ident = _ident(value)
    if not isinstance(value, dict):
        raise Refusal(INVALID_REQUEST, "Invalid Request: a message is one JSON object")
    if "id" in value and ident is None and value["id"] is not None:
        raise Refusal(INVALID_REQUEST, "Invalid Request: an id is a string or an integer")
    if _has_surrogate(value):
        raise Refusal(
            INVALID_PARAMS,
            "Invalid params: the message holds a lone surrogate escape (a string cut inside "
            "a character), which is not valid Unicode",
            ident,
        )
    try:
        message = adapter.validate_python(value, by_name=False)
    except ValueError:
        raise Refusal(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, "
                      "notification or response", ident) from None  # fmt: skip
    return SessionMessage(message)


class _Lines:
    """Lines of a binary stream, each cut off at ``limit`` bytes (the rest of an
    overlong line is skipped and reported as ``None``)."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.fd = stream.fileno()
        self.limit = limit
        self.buffer = bytearray()
        self.eof = False

    def next(self) -> bytes | None:
        """One line without its newline; ``None`` for an overlong line; raises
        ``EOFError`` at the end."""
        skipping = False
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                if skipping or len(line) > self.limit:
                    return None
                return line
            if len(self.buffer) > self.limit:
                self.buffer.clear()
                skipping = True
            if self.eof:
                if skipping:
                    self.eof = True
                    return None
                if self.buffer:
                    line = bytes(self.buffer)
                    self.buffer.clear()
                    return line
                raise EOFError
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof = True
            self.buffer += chunk


@asynccontextmanager
async def stdio_transport(
    wire_in: BinaryIO, wire_out: BinaryIO, *, max_line_bytes: int = MAX_LINE_BYTES
) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for the SDK's low-level server over the two
    binary streams, as ``mcp.server.stdio.stdio_server`` gives, with the reader above."""
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    refusals, refusal_reader = anyio.create_memory_object_stream[JSONRPCError](100)
    token = anyio.lowlevel.current_token()
    lines = _Lines(wire_in, max_line_bytes)
    done = anyio.Event()

    def read() -> None:
        try:
            while True:
                try:
                    raw = lines.next()
                except EOFError:
                    return
                except OSError as error:
                    logger.warning("stdin failed: %s", error)
                    return
                if raw is not None and not raw.strip():
                    continue
                try:
                    if raw is None:
                        raise Refusal(
                            PARSE_ERROR, f"Parse error: a message is at most {max_line_bytes} bytes"
                        )
                    message = check_line(raw)
                except Refusal as refusal:
                    logger.info("refused a message: %s", refusal)
                    anyio.from_thread.run(refusals.send, refusal.error, token=token)
                    continue
                anyio.from_thread.run(read_writer.send, message, token=token)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.RunFinishedError):
            return
        finally:
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except anyio.RunFinishedError:
                pass

    def emit(data: bytes) -> None:
        wire_out.write(data)
        wire_out.flush()

    async def close_on_eof() -> None:
        await done.wait()
        await read_writer.aclose()

    async def write() -> None:
        async with write_reader, refusal_reader:
            async with anyio.create_task_group() as group:

                async def refused() -> None:
                    async for error in refusal_reader:
                        await emit_line(error.model_dump_json(by_alias=True, exclude_unset=True))

                group.start_soon(refused)
                async for item in write_reader:
                    line = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await emit_line(line)
                group.cancel_scope.cancel()

    lock = anyio.Lock()

    async def emit_line(line: str) -> None:
        async with lock:
            try:
                await anyio.to_thread.run_sync(emit, line.encode("utf-8", "replace") + b"\n")
            except (BrokenPipeError, OSError) as error:
                logger.warning("stdout failed: %s", error)

    threading.Thread(target=read, name="backtrail-stdin", daemon=True).start()
    async with anyio.create_task_group() as tg:
        tg.start_soon(close_on_eof)
        tg.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            await refusals.aclose()
            tg.cancel_scope.cancel()
