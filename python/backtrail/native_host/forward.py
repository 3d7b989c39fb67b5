"""The host in forwarding mode: with ``server_url`` set it opens no ledger and passes the
browser's messages to a Backtrail server (``POST {server_url}/host``), answering the
extension with the server's responses (native-host/PROTOCOL.md section 9).

Nothing changes on the wire for the extension. Queued writes (:data:`OUTBOX_TYPES`) are
kept in the device's outbox first and acknowledged only with the server's answer, which
it gives after its commit; while the server cannot take them the extension gets error 13
(busy, retryable, ``retry_after_ms``) and both its queue and the outbox keep them, the
outbox being delivered in the background (``backtrail.service.outbox``). Reads go to the
server as they come; ``status`` adds a ``server`` member saying how the link is, and
still answers when the server does not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from backtrail import __version__
from backtrail.errors import BacktrailError
from backtrail.native_host.codes import Code, HostError, error_for
from backtrail.native_host.dispatch import (
    BATCHED_TYPES,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    read_hello,
    response,
)
from backtrail.native_host.framing import MAX_RESPONSE_BYTES, Inbound
from backtrail.native_host.schema import Fields
from backtrail.service.server_link import ServerUnavailable

__all__ = ["FORWARDED_CAPABILITIES", "OUTBOX_TYPES", "ForwardingDispatcher"]

logger = logging.getLogger(__name__)

OUTBOX_TYPES = BATCHED_TYPES | {"action_result"}
"""The writes a device keeps in its outbox until the server committed them."""
FORWARDED_CAPABILITIES = ["search"]
"""What a forwarding host offers: no export and no browser actions (a device token
reads only the popup's search, recent and status)."""

_RETRY_MS = {"token_refused": 60_000, "unreachable": 5_000}
_RETRY_MS_OTHERWISE = 2_000


class ForwardingDispatcher:
    """Answers one browser connection by forwarding to the server through ``device``
    (a :class:`backtrail.service.outbox.DeviceLink`; ``None`` when it could not be set
    up: every request then gets error 14 with ``failure``)."""

    def __init__(self, device: Any, *, max_request_bytes: int, failure: str | None = None
                 ) -> None:  # fmt: skip
        self.device = device
        self.failure = failure
        self.max_request_bytes = max_request_bytes
        self.hello: dict[str, Any] | None = None
        self.profile: str | None = None
        self.paused = False

    # The session loop's other questions: a forwarding host pushes no actions.
    def push_wait(self) -> float | None:
        return None

    def pushes(self) -> list[dict[str, Any]]:
        return []

    def undelivered(self, push: dict[str, Any]) -> None:  # pragma: no cover - never pushed
        pass

    # ------------------------------------------------------------ sessions

    def handle_all(self, items: Sequence[Inbound]) -> list[dict[str, Any]]:
        """Responses to ``items`` in order: the writes of the run between two hellos
        are delivered together, then the reads, each after the server answered."""
        answers: list[dict[str, Any] | None] = [None] * len(items)
        waiting: list[tuple[int, dict[str, Any]]] = []
        for index, item in enumerate(items):
            request = item.request
            if item.error is not None or request is None:
                answers[index] = response(item.id, error=item.error)
            elif self.device is None:
                error = HostError(Code.INTERNAL_ERROR, self.failure or "no server is set up")
                answers[index] = response(request["id"], error=error)
            elif request.get("type") == "hello":
                self._forward(waiting, answers)
                waiting = []
                answers[index] = self._hello(request)
            elif request.get("type") not in MESSAGE_TYPES:
                given = request.get("type")
                shown = "missing" if given is None else repr(given)[:40]
                error = HostError(Code.UNKNOWN_TYPE,
                                  f"message type {shown} is not part of protocol version 1")
                answers[index] = response(request["id"], error=error)  # fmt: skip
            elif self.hello is None:
                answers[index] = response(request["id"],
                                          error=HostError(Code.HELLO_REQUIRED, "send hello first"))
            else:
                waiting.append((index, request))
        self._forward(waiting, answers)
        assert all(a is not None for a in answers)
        return answers  # type: ignore[return-value]

    def _forward(self, waiting: list[tuple[int, dict[str, Any]]],
                 answers: list[dict[str, Any] | None]) -> None:  # fmt: skip
        if not waiting:
            return
        assert self.hello is not None
        kept = [(i, r) for i, r in waiting if r.get("type") in OUTBOX_TYPES]
        live = [(i, r) for i, r in waiting if r.get("type") not in OUTBOX_TYPES]
        if kept:
            try:
                got = self.device.deliver(self.hello, [r for _, r in kept])
            except Exception as exc:  # the outbox itself failed: nothing may count as kept
                logger.error("the outbox could not keep %d message(s)", len(kept), exc_info=exc)
                reason = exc.message if isinstance(exc, BacktrailError) else type(exc).__name__
                error = HostError(Code.BUSY, f"the host could not keep the message on this "
                                  f"computer ({reason}); it is not stored yet",
                                  retry_after_ms=_RETRY_MS["unreachable"])  # fmt: skip
                for index, request in kept:
                    answers[index] = response(request["id"], error=error)
            else:
                for index, request in kept:
                    answers[index] = got.get(request["id"]) or self._busy(request["id"], kept=True)
        if live:
            try:
                responses = self.device.request(self.hello, [r for _, r in live])
            except ServerUnavailable:
                for index, request in live:
                    answers[index] = (self._local_status(request["id"])
                                      if request.get("type") == "status"
                                      else self._busy(request["id"], kept=False))  # fmt: skip
                return
            except Exception as exc:  # a bug: say so, keep serving
                for index, request in live:
                    answers[index] = response(request["id"], error=error_for(exc, "forwarding"))
                return
            for (index, request), answer in zip(live, responses, strict=True):
                if request.get("type") == "status" and answer.get("ok"):
                    answer["result"]["server"] = self.device.state()
                answers[index] = answer

    def _busy(self, ident: str, *, kept: bool) -> dict[str, Any]:
        """Error 13 saying why the server has not answered (a kept message: that it
        will be delivered)."""
        state = self.device.state()
        reason = state["message"]
        if kept:
            reason = (f"{reason}; the message is kept on this computer and will be delivered "
                      "when it can be" if reason else
                      "earlier messages are still being delivered to the Backtrail server; "
                      "this one is kept and follows them")  # fmt: skip
        elif not reason:
            reason = f"the Backtrail server at {state['url']} did not answer"
        retry = _RETRY_MS.get(state["state"], _RETRY_MS_OTHERWISE)
        return response(ident, error=HostError(Code.BUSY, reason, retry_after_ms=retry))

    # -------------------------------------------------------------- hello

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        """Validate the hello here; ask the server for its pause state when it answers
        (it keeps its own: a forwarded capture is refused while the memory is paused),
        else answer with the extension's own."""
        ident = request["id"]
        try:
            hello = read_hello(Fields(request))
        except HostError as error:
            return response(ident, error=error)
        self.hello = request
        self.profile = hello.profile
        self.paused = hello.paused
        try:
            answer = self.device.greet(request)
        except BacktrailError as error:
            logger.info("hello from %s extension %s answered here: %s", hello.browser,
                        hello.extension_version, error)  # fmt: skip
        else:
            if not answer.get("ok"):
                self.hello = None
                return {**answer, "id": ident}
            self.paused = bool((answer.get("result") or {}).get("paused", hello.paused))
            logger.info("hello from %s extension %s, forwarded to %s", hello.browser,
                        hello.extension_version, self.device.url)  # fmt: skip
        return response(ident, {
            "protocol": PROTOCOL_VERSION, "host_version": __version__,
            "capabilities": list(FORWARDED_CAPABILITIES),
            "limits": {"max_request_bytes": self.max_request_bytes,
                       "max_response_bytes": MAX_RESPONSE_BYTES},
            "paused": self.paused,
        })  # fmt: skip

    def _local_status(self, ident: str) -> dict[str, Any]:
        """``status`` while the server does not answer: what this host knows, and why."""
        return response(ident, {
            "host_version": __version__, "paused": self.paused, "counts": None,
            "last_capture_time": None, "index_lag": None, "vector_lag": None,
            "db_bytes": None, "model": None, "profile_id": self.profile,
            "server": self.device.state(),
        })  # fmt: skip
