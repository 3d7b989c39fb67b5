"""The stdio transport, started fast.

MCP hosts (Claude Desktop, Cursor) spawn one server per conversation window and wait
for the answer to ``initialize`` before anything else. Importing the MCP SDK alone
takes about a second, so this runner:

1. takes over the standard streams first: the protocol gets private duplicates of
   file descriptors 0 and 1, fd 1 is pointed at stderr and fd 0 at the null device, so
   no stray ``print`` from any library can corrupt the protocol stream;
2. starts building the real server (SDK import, tools, opening the memory) on a
   background thread;
3. reads the first message and, when it is a well-formed ``initialize`` (or
   ``server/discover``), answers it at once from :mod:`identity` with exactly the
   result the SDK would give;
4. hands the stream to the SDK once it is ready, replaying that first message: the
   SDK takes the same handshake into its own state, and its duplicate answer is
   dropped on the way out.

After the opening answer, one thread reads the rest of the stream and queues each
message for the SDK. While the SDK is still loading:

- a ``tools/list``, or a call of a tool in :data:`early.EARLY_TOOLS`, goes to
  :mod:`early` first, on a thread of its own, and reaches the SDK only if it is not
  answered there (it never reaches the SDK when it is);
- a ``tools/call`` of another tool that embeds a query (:data:`identity.QUERY_TOOLS`)
  starts ``warm`` (loading the embedding model) at once, so the model loads beside the
  SDK rather than after it. A server nobody searches never loads the model.

The SDK's answers to plain ``tools/list`` requests are handed to
:meth:`early.EarlyAnswers.keep_tools` on their way out, for the next server's early
answer.

Anything unusual in the first message (malformed, another method, an unknown
protocol version) is left entirely to the SDK. ``BACKTRAIL_MCP_FAST_START=0`` turns the
early answer off.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from backtrail.mcp_server import identity
from backtrail.mcp_server.early import Opening, early_method

if TYPE_CHECKING:
    from backtrail.mcp_server.early import EarlyAnswers

__all__ = ["serve_stdio", "StdioRunner"]

logger = logging.getLogger(__name__)

_LOADING_SWITCH_INTERVAL = 0.0005
"""The interpreter's thread switch interval (seconds) while the SDK loads."""

StdioRunner = Callable[[Any, Any], Awaitable[None]]
"""``await runner(stdin, stdout)``: serve MCP on two anyio text files."""


class _Wire:
    """The protocol's private copies of stdin and stdout."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.input: BinaryIO = os.fdopen(os.dup(0), "rb")
        self.output: BinaryIO = os.fdopen(os.dup(1), "wb", buffering=0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # anything printed now lands on stderr, never on the protocol

    def write_message(self, message: dict[str, Any]) -> None:
        self.output.write((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"))


class _Replay:
    """stdin for the SDK: the first line, already read by the runner, then the rest."""

    def __init__(self, first: bytes, reader: _Reader) -> None:
        self._first: bytes | None = first
        self._reader = reader

    def readline(self, size: int = -1) -> str:
        if self._first is not None:
            line, self._first = self._first, None
            return line.decode("utf-8", errors="replace")
        return self._reader.next_line().decode("utf-8", errors="replace")


def _key(ident: object) -> tuple[str, object]:
    return (type(ident).__name__, ident)


class _Reader:
    """Reads the protocol stream on its own thread into a queue for the SDK. Until
    :meth:`sdk_ready`, requests :mod:`early` may answer go to the early thread instead,
    and a ``tools/call`` of a query tool starts ``warm`` once."""

    def __init__(
        self,
        raw: BinaryIO,
        warm: Callable[[], None] | None,
        writer: _DroppingWriter,
        early: Callable[[], EarlyAnswers | None] | None = None,
        opening: Opening | None = None,
    ) -> None:
        self._raw = raw
        self._warm = warm
        self._writer = writer
        self._early = early if opening is not None else None
        self._opening = opening
        self._early_queue: queue.SimpleQueue[tuple[bytes, dict[str, Any] | None]] | None = None
        self._lines: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._ready = threading.Event()
        threading.Thread(target=self._run, name="backtrail-mcp-read", daemon=True).start()

    def _run(self) -> None:
        while True:
            line = self._raw.readline()
            message = _tools_request(line) if self._early is not None else None
            if message is not None and not self._ready.is_set():
                self._answer_early(line, message)
                continue
            if self._warm is not None and not self._ready.is_set() and _calls_query_tool(line):
                warm, self._warm = self._warm, None
                threading.Thread(target=warm, name="backtrail-mcp-warm", daemon=True).start()
            if not line and self._early_queue is not None:
                self._early_queue.put((line, None))  # the end, after what the SDK may get back
                return
            self._forward(line, message)
            if not line:
                return

    def _forward(self, line: bytes, message: dict[str, Any] | None) -> None:
        """Queue ``line`` for the SDK (``message``: its request when it is a tools one)."""
        if message is not None and message.get("method") == "tools/list":
            assert self._opening is not None
            self._writer.expect_tools_list(message["id"], self._opening.protocol)
        self._lines.put(line)

    def _answer_early(self, line: bytes, message: dict[str, Any]) -> None:
        if self._early_queue is None:
            self._early_queue = queue.SimpleQueue()
            threading.Thread(target=self._early_loop, name="backtrail-mcp-early",
                             daemon=True).start()  # fmt: skip
        self._early_queue.put((line, message))

    def _early_loop(self) -> None:
        assert self._early is not None and self._early_queue is not None
        while True:
            line, message = self._early_queue.get()
            if message is None:
                self._lines.put(line)
                return
            started = time.perf_counter()
            answer = None
            try:
                answers = self._early()
                if answers is not None:
                    answer = answers.answer(message, self._opening)
            except Exception:
                logger.exception("an early answer failed; the SDK answers instead")
            if answer is None:
                self._forward(line, message)
                continue
            self._writer.write_message(answer)
            what = (message.get("params") or {}).get("name") or message["method"]
            logger.info("answered %s while the MCP SDK loads (%.2f s)", what,
                        time.perf_counter() - started)  # fmt: skip

    def sdk_ready(self) -> None:
        self._ready.set()

    def next_line(self) -> bytes:
        """The next line; ``b""`` at the end of the stream (and at every call after)."""
        line = self._lines.get()
        if not line:
            self._lines.put(line)
        return line


def _parsed(line: bytes, marker: bytes) -> Any:
    """The JSON on ``line`` if it holds ``marker`` (a cheap test before parsing)."""
    if marker not in line:
        return None
    try:
        return json.loads(line)
    except ValueError:
        return None


def _tools_request(line: bytes) -> dict[str, Any] | None:
    """The request on ``line`` when :mod:`early` might answer it."""
    message = _parsed(line, b"tools/")
    return message if early_method(message) is not None else None


def _calls_query_tool(line: bytes) -> bool:
    message = _parsed(line, b"tools/call")
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") in identity.QUERY_TOOLS


class _DroppingWriter:
    """stdout for the SDK: drops its answers to requests already answered here, and
    hands its answers to plain ``tools/list`` requests to ``keep_tools``."""

    def __init__(
        self,
        raw: BinaryIO,
        answered: set[tuple[str, object]],
        keep_tools: Callable[[str, object], None] | None = None,
    ) -> None:
        self._raw = raw
        self._answered = answered
        self._keep_tools = keep_tools
        self._tools_lists: dict[tuple[str, object], str] = {}
        self._lock = threading.Lock()

    def expect_tools_list(self, ident: object, protocol: str) -> None:
        """The SDK will answer the plain ``tools/list`` request ``ident``."""
        if self._keep_tools is not None:
            with self._lock:
                self._tools_lists[_key(ident)] = protocol

    def write_message(self, message: dict[str, Any]) -> None:
        """Write an answer given here (not by the SDK)."""
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            self._raw.write(data)

    def write(self, text: str) -> int:
        with self._lock:
            if (self._answered or self._tools_lists) and self._is_duplicate(text):
                return len(text)
            self._raw.write(text.encode("utf-8"))
            return len(text)

    def _is_duplicate(self, text: str) -> bool:
        try:
            message = json.loads(text)
        except ValueError:
            return False
        if not isinstance(message, dict) or "id" not in message or "method" in message:
            return False
        key = _key(message["id"])
        protocol = self._tools_lists.pop(key, None)
        if protocol is not None and "result" in message and self._keep_tools is not None:
            self._keep_tools(protocol, message["result"])
        if key not in self._answered:
            return False
        self._answered.discard(key)
        if "error" in message:
            logger.warning(
                "the SDK refused an opening request answered early: %s", message["error"]
            )
        return True

    def flush(self) -> None:
        self._raw.flush()


def serve_stdio(
    prepare: Callable[[], StdioRunner],
    *,
    fast_start: bool = True,
    warm: Callable[[], None] | None = None,
    early: Callable[[], EarlyAnswers | None] | None = None,
) -> None:
    """Serve MCP on this process's stdin/stdout until stdin closes. ``prepare`` runs on
    a background thread while the first message is read and answered; it builds the
    server (importing the SDK) and returns the runner that serves the streams. ``warm``
    runs on its own thread when a query tool is called before the SDK is ready.
    ``early()`` gives the :class:`~early.EarlyAnswers` (waiting until ``prepare`` has
    made them, ``None`` if it could not); only a fast start uses them."""
    wire = _Wire()
    built: dict[str, Any] = {}
    # While the SDK imports (pure Python, holding the GIL), an early answer's thread
    # waits up to a whole switch interval each time it takes the GIL back after a
    # system call. A 0.5 ms interval took opening the memory during the import from
    # 120-190 ms to 35 ms; the default comes back once the SDK is ready.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, _LOADING_SWITCH_INTERVAL))

    def build() -> None:
        try:
            built["runner"] = prepare()
        except BaseException as error:  # reported on the main thread
            built["error"] = error

    builder = threading.Thread(target=build, name="backtrail-mcp-start", daemon=True)
    builder.start()
    first = wire.input.readline()
    answered: set[tuple[str, object]] = set()
    opening = None
    if fast_start and first:
        try:
            message = json.loads(first)
        except ValueError:
            message = None
        answer = identity.opening_answer(message)
        if answer is not None:
            wire.write_message(answer)
            answered.add(_key(answer["id"]))
            opening = Opening.of(message, answer)
    # the rest of the stream, read on from here on its own thread (the opening answer
    # above is on the critical path and has not waited for a thread hand-over)
    keep_tools = None
    if early is not None and opening is not None:
        made = early

        def keep_tools(protocol: str, result: object) -> None:
            answers = made()
            if answers is not None:
                answers.keep_tools(protocol, result)

    writer = _DroppingWriter(wire.output, answered, keep_tools)
    reader = _Reader(wire.input, warm, writer, early, opening)
    builder.join()
    reader.sdk_ready()
    sys.setswitchinterval(interval)
    if "error" in built:
        raise built["error"]
    if not first:
        return
    import anyio

    replay = _Replay(first, reader)
    stdin = anyio.wrap_file(replay)  # type: ignore[arg-type]
    stdout = anyio.wrap_file(writer)  # type: ignore[arg-type]
    anyio.run(built["runner"], stdin, stdout)
