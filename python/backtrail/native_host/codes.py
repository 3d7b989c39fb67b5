"""The protocol's frozen error codes (native-host/PROTOCOL.md section 6) and the mapping
from Backtrail's exceptions to them.

Codes are never renumbered, renamed or given a new meaning; new ones are only appended
(the extension's ``src/protocol.js`` holds the same table, and a test compares both with
PROTOCOL.md).
"""

from __future__ import annotations

import logging
from enum import IntEnum
from typing import Any

from backtrail.errors import (
    BacktrailError,
    Conflict,
    Excluded,
    InvalidInput,
    InvalidUrl,
    NotFound,
    Paused,
    StoreBusy,
)

__all__ = ["Code", "HostError", "RETRYABLE", "error_for", "scheme_refused"]

logger = logging.getLogger(__name__)


class Code(IntEnum):
    """Error codes, in the order of PROTOCOL.md section 6."""

    MALFORMED_FRAME = 1
    INVALID_UTF8 = 2
    INVALID_JSON = 3
    UNKNOWN_TYPE = 4
    MISSING_FIELD = 5
    WRONG_FIELD_TYPE = 6
    MESSAGE_TOO_LARGE = 7
    FORBIDDEN_SCHEME = 8
    EXCLUDED = 9
    PAUSED = 10
    NOT_FOUND = 11
    CONFLICT = 12
    BUSY = 13
    INTERNAL_ERROR = 14
    UNSUPPORTED_PROTOCOL = 15
    INVALID_VALUE = 16
    HELLO_REQUIRED = 17
    ACTION_NOT_ALLOWED = 18
    UNSUPPORTED_ACTION = 19

    @property
    def wire_name(self) -> str:
        """The ``name`` member of an error object: ``"malformed_frame"``..."""
        return self.name.lower()


RETRYABLE = frozenset({Code.BUSY, Code.INTERNAL_ERROR, Code.HELLO_REQUIRED})
"""Codes the extension retries; their responses are never replayed from the id cache."""

_BUSY_RETRY_MS = 1_000


class HostError(Exception):
    """A request the host refuses, with the protocol's code and one human sentence."""

    def __init__(
        self,
        code: Code,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.retry_after_ms = retry_after_ms

    def to_error(self) -> dict[str, Any]:
        """The ``error`` member of a response frame."""
        error: dict[str, Any] = {
            "code": int(self.code), "name": self.code.wire_name, "message": self.message,
        }  # fmt: skip
        if self.details:
            error["details"] = self.details
        if self.retry_after_ms is not None:
            error["retry_after_ms"] = self.retry_after_ms
        return error


def scheme_refused(error: InvalidUrl) -> bool:
    """True when a URL was refused for its scheme (``javascript:``, ``file:``...)."""
    return error.reason.startswith("has scheme")


def error_for(exc: BaseException, what: str = "the request") -> HostError:
    """The protocol error for an exception raised while handling ``what`` (a message
    type). Unexpected exceptions become error 14 with a message that says only what
    failed; the detail goes to the log."""
    if isinstance(exc, HostError):
        return exc
    if isinstance(exc, InvalidUrl):
        code = Code.FORBIDDEN_SCHEME if scheme_refused(exc) else Code.INVALID_VALUE
        return HostError(code, exc.message, {"field": exc.field})
    if isinstance(exc, InvalidInput):
        return HostError(Code.INVALID_VALUE, exc.message, exc.details())
    if isinstance(exc, Paused):
        return HostError(Code.PAUSED, exc.message)
    if isinstance(exc, Excluded):
        return HostError(Code.EXCLUDED, exc.message, {"rule": exc.rule})
    if isinstance(exc, NotFound):
        return HostError(Code.NOT_FOUND, exc.message, exc.details())
    if isinstance(exc, Conflict):
        return HostError(Code.CONFLICT, exc.message, exc.details())
    if isinstance(exc, StoreBusy) or (isinstance(exc, BacktrailError) and "busy" in exc.code):
        return HostError(Code.BUSY, exc.message, retry_after_ms=_BUSY_RETRY_MS)
    logger.error("%s failed", what, exc_info=exc)
    return HostError(Code.INTERNAL_ERROR, f"{what} failed inside the Backtrail host; see its log")
