"""The session loop: frames in, responses out, until the browser closes the port.

A reader thread parses frames as they arrive and queues them (bounded by bytes); the
main thread takes every frame already waiting, lets the dispatcher answer them (writes
of consecutive captures share one durable commit) and writes the responses. Reading
ahead is what lets a burst of captures be acknowledged faster than one commit each.

Between frames (and at least every quarter second once the extension said it takes
actions) the loop asks the dispatcher for pushes: browser actions assistants proposed,
which it writes to the extension as ``action`` messages. Only the main thread writes.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from backtrail.native_host.codes import Code, HostError
from backtrail.native_host.dispatch import response
from backtrail.native_host.framing import FrameReader, FrameWriter, Inbound, ResponseTooLarge

__all__ = ["Answerer", "serve", "EXIT_OK", "EXIT_PROTOCOL"]

logger = logging.getLogger(__name__)

EXIT_OK = 0
"""End of stream (the browser closed the port), also inside a frame."""
EXIT_PROTOCOL = 1
"""A malformed length prefix: the stream cannot be resynchronised."""

_QUEUE_BYTES = 64 * 1024 * 1024
_MAX_TAKE = 512


class Answerer(Protocol):
    """What the loop asks of a dispatcher (the local one, or the forwarding one)."""

    def handle_all(self, items: Sequence[Inbound]) -> list[dict[str, Any]]: ...

    def push_wait(self) -> float | None: ...

    def pushes(self) -> list[dict[str, Any]]: ...

    def undelivered(self, push: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class _End:
    status: int


class _Inbox:
    """Frames read ahead, bounded by their total size (one frame always fits)."""

    def __init__(self, limit: int = _QUEUE_BYTES) -> None:
        self._items: deque[Inbound | _End] = deque()
        self._bytes = 0
        self._limit = limit
        self._ready = threading.Condition()

    def put(self, item: Inbound | _End) -> None:
        size = item.size if isinstance(item, Inbound) else 0
        with self._ready:
            while self._items and self._bytes + size > self._limit:
                self._ready.wait()
            self._items.append(item)
            self._bytes += size
            self._ready.notify_all()

    def take(self, most: int, timeout: float | None = None) -> list[Inbound | _End]:
        """Wait for at least one item (at most ``timeout`` seconds; then ``[]``);
        return every waiting one (up to ``most``)."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._items), timeout):
                return []
            taken: list[Inbound | _End] = []
            while self._items and len(taken) < most:
                item = self._items.popleft()
                taken.append(item)
                if isinstance(item, _End):
                    break
                self._bytes -= item.size
            self._ready.notify_all()
            return taken


def _read_all(reader: FrameReader, inbox: _Inbox) -> None:
    try:
        while True:
            item = reader.read()
            if item is None:
                inbox.put(_End(EXIT_OK))
                return
            inbox.put(item)
            if item.fatal:
                inbox.put(_End(EXIT_OK if item.ended else EXIT_PROTOCOL))
                return
    except BaseException as exc:  # stdin broke: end the session
        logger.warning("reading stdin failed: %s", exc)
        inbox.put(_End(EXIT_OK))


def serve(reader: FrameReader, writer: FrameWriter, dispatcher: Answerer) -> int:
    """Answer frames until the end of the stream; returns the exit status."""
    inbox = _Inbox()
    thread = threading.Thread(target=_read_all, args=(reader, inbox), name="frames", daemon=True)
    thread.start()
    served = 0
    while True:
        taken = inbox.take(_MAX_TAKE, dispatcher.push_wait())
        end = taken[-1] if taken and isinstance(taken[-1], _End) else None
        frames = [item for item in taken if isinstance(item, Inbound)]
        for answer in dispatcher.handle_all(frames):
            if not _send(writer, answer):
                logger.info("the browser stopped reading after %d message(s)", served)
                return EXIT_OK
            served += 1
        if end is not None:
            logger.info("session ended after %d message(s), status %d", served, end.status)
            return end.status
        for push in dispatcher.pushes():
            sent = _push(writer, push)
            if sent is not True:
                dispatcher.undelivered(push)
            if sent is None:
                logger.info("the browser stopped reading before an action could be pushed")
                return EXIT_OK


def _push(writer: FrameWriter, message: dict) -> bool | None:
    """Write one push; False if it is too large to send (never an error frame: a push
    has no id to answer), None if the browser is gone."""
    try:
        writer.write(message)
    except ResponseTooLarge as exc:
        logger.error("action %s was %d bytes; not sent", message.get("action_id"), exc.size)
        return False
    except (BrokenPipeError, ValueError, OSError):
        return None
    return True


def _send(writer: FrameWriter, answer: dict) -> bool:
    """Write one response (error 14 in place of one too large); False if the browser
    is gone."""
    try:
        try:
            writer.write(answer)
        except ResponseTooLarge as exc:
            logger.error("response to %s was %d bytes; sent error 14", answer.get("id"), exc.size)
            error = HostError(Code.INTERNAL_ERROR, "the result is too large for one message")
            writer.write(response(answer.get("id"), error=error))
    except (BrokenPipeError, ValueError, OSError):
        return False
    return True
