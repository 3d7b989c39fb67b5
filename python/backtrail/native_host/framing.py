"""Chrome native-messaging frames: a 4-byte little-endian length, then that many bytes
of UTF-8 JSON (PROTOCOL.md section 1).

:class:`FrameReader` turns a byte stream into :class:`Inbound` items, classifying every
way a frame can be bad with the protocol's code; :class:`FrameWriter` writes response
frames, refusing any larger than the browser accepts. Neither knows message types.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from typing import IO, Any

from backtrail.native_host.codes import Code, HostError

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "Inbound",
    "FrameReader",
    "FrameWriter",
    "ResponseTooLarge",
    "decode_request",
    "encode_frame",
    "recover_id",
    "valid_id",
]

MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame Chromium sends (extension -> host); a longer length prefix is
malformed."""
MAX_RESPONSE_BYTES = 1024 * 1024
"""The largest frame Chromium accepts (host -> extension); one byte more drops the port."""
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The host's default cap on one request (``max_request_bytes``)."""

_HEADER = struct.Struct("<I")
_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_ID_PREFIX_RE = re.compile(rb'^\{"id":"([A-Za-z0-9._:-]{1,64})"')
_PEEK_BYTES = 100
_DISCARD_CHUNK = 1024 * 1024
_MAX_NESTING = 64
_SURROGATE_ESCAPE_RE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def valid_id(value: object) -> bool:
    """True for a protocol id: a string of 1-64 characters from ``[A-Za-z0-9._:-]``."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def recover_id(head: bytes) -> str | None:
    """The id of a frame refused unparsed, from its first bytes (the extension always
    serialises ``id`` first), or ``None``."""
    match = _ID_PREFIX_RE.match(head[:_PEEK_BYTES])
    return match.group(1).decode("ascii") if match else None


@dataclass(frozen=True)
class Inbound:
    """One item read from the stream: a parsed ``request``, or an ``error`` to answer
    (with ``id`` when it could be recovered). ``fatal`` errors end the session: the
    stream cannot be resynchronised, or it ``ended`` inside a frame. ``size`` is the
    frame's length."""

    size: int
    request: dict[str, Any] | None = None
    error: HostError | None = None
    id: str | None = None
    fatal: bool = False
    ended: bool = False


class FrameReader:
    """Reads frames from a binary stream. :meth:`read` returns ``None`` at a clean end
    of stream (EOF between frames)."""

    def __init__(self, stream: IO[bytes], max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        if not 1 <= max_request_bytes <= MAX_FRAME_BYTES:
            raise ValueError(f"max_request_bytes must be in [1, {MAX_FRAME_BYTES}]")
        self._stream = stream
        self.max_request_bytes = max_request_bytes

    def _read_exactly(self, count: int) -> bytes:
        chunks = []
        left = count
        while left:
            chunk = self._stream.read(left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def read(self) -> Inbound | None:
        header = self._read_exactly(_HEADER.size)
        if not header:
            return None
        if len(header) < _HEADER.size:
            return _cut_short(0, b"", f"the length prefix ({len(header)} of 4 bytes)")
        (size,) = _HEADER.unpack(header)
        if size == 0 or size > MAX_FRAME_BYTES:
            return Inbound(size, error=HostError(
                Code.MALFORMED_FRAME,
                f"frame length {size} is outside 1..{MAX_FRAME_BYTES}; the host cannot "
                "find the next frame and stops",
                {"limit": MAX_FRAME_BYTES, "actual": size},
            ), fatal=True)  # fmt: skip
        if size > self.max_request_bytes:
            return self._discard(size)
        body = self._read_exactly(size)
        if len(body) < size:
            return _cut_short(size, body, f"the body ({len(body)} of {size} bytes)")
        return decode_request(body)

    def _discard(self, size: int) -> Inbound:
        """Read and drop an oversize body, keeping its head to recover the id."""
        head = self._read_exactly(min(size, _PEEK_BYTES))
        left = size - len(head)
        got = len(head)
        while left and got:
            chunk = self._stream.read(min(left, _DISCARD_CHUNK))
            got = len(chunk)
            left -= got
        if left or len(head) < min(size, _PEEK_BYTES):
            return _cut_short(size, head, f"the body ({size - left} of {size} bytes)")
        limit = self.max_request_bytes
        error = HostError(
            Code.MESSAGE_TOO_LARGE,
            f"the message is {size} bytes; this host accepts at most {limit} bytes per message",
            {"limit": limit, "actual": size},
        )
        return Inbound(size, error=error, id=recover_id(head))


def _cut_short(size: int, head: bytes, what: str) -> Inbound:
    error = HostError(
        Code.MALFORMED_FRAME, f"the stream ended inside a frame: {what} arrived"
    )
    return Inbound(size, error=error, id=recover_id(head), fatal=True, ended=True)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_depth(value: Any, depth: int = 0) -> None:
    if depth > _MAX_NESTING:
        raise ValueError(f"nested deeper than {_MAX_NESTING} levels")
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, (dict, list)):
                _check_depth(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                _check_depth(item, depth + 1)


def _replace_surrogates(value: Any) -> Any:
    """Strings with unpaired surrogates (from ``\\ud800`` escapes) get U+FFFD instead."""
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    return value


def decode_request(body: bytes) -> Inbound:
    """Classify and parse one frame body: invalid UTF-8 is error 2; not JSON, not an
    object, or no valid ``id`` is error 3."""
    size = len(body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return Inbound(size, error=HostError(
            Code.INVALID_UTF8, f"the message is not valid UTF-8 (byte {error.start})",
        ), id=recover_id(body))  # fmt: skip
    try:
        message = json.loads(text, parse_constant=_reject_constant)
        _check_depth(message)
    except (ValueError, RecursionError) as error:
        reason = str(error).split(":")[0] if isinstance(error, ValueError) else "too deep"
        return Inbound(size, error=HostError(
            Code.INVALID_JSON, f"the message is not valid JSON ({reason[:120]})",
        ), id=recover_id(body))  # fmt: skip
    if not isinstance(message, dict):
        return Inbound(size, error=HostError(
            Code.INVALID_JSON, f"the message is a JSON {type(message).__name__}, not an object",
        ))  # fmt: skip
    if not valid_id(message.get("id")):
        return Inbound(size, error=HostError(
            Code.INVALID_JSON,
            "the message has no valid id (a string of 1-64 characters from A-Z a-z 0-9 . _ : -)",
        ))  # fmt: skip
    if _SURROGATE_ESCAPE_RE.search(body):
        message = _replace_surrogates(message)
    return Inbound(size, request=message, id=message["id"])


# ---------------------------------------------------------------------- writing


class ResponseTooLarge(Exception):
    """A frame would exceed :data:`MAX_RESPONSE_BYTES`."""

    def __init__(self, size: int) -> None:
        super().__init__(f"response of {size} bytes exceeds {MAX_RESPONSE_BYTES}")
        self.size = size


def encode_json(message: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; strings holding unpaired surrogates fall back to escapes."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def encode_frame(message: dict[str, Any], limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """Length prefix + body; raises :class:`ResponseTooLarge` above ``limit``."""
    body = encode_json(message)
    if len(body) > limit:
        raise ResponseTooLarge(len(body))
    return _HEADER.pack(len(body)) + body


class FrameWriter:
    """Writes frames to a binary stream, flushing after each one."""

    def __init__(self, stream: IO[bytes], limit: int = MAX_RESPONSE_BYTES) -> None:
        self._stream = stream
        self.limit = limit

    def write(self, message: dict[str, Any]) -> int:
        """Write one frame; returns its body size. Raises :class:`ResponseTooLarge`
        (nothing written) or ``OSError`` (the reader went away)."""
        frame = encode_frame(message, self.limit)
        self._stream.write(frame)
        self._stream.flush()
        return len(frame) - _HEADER.size
