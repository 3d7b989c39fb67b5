"""A message nested deeper than the server's limit (64 levels) is refused with a parse
error that carries the message's own id whenever its top level is valid JSON, so the
client that sent it is answered at once instead of waiting for its own timeout; on stdio
and over HTTP, against a real ``backtrail mcp`` subprocess, which keeps serving."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from mcp_support import INITIALIZE, http_server
from test_mcp_bridge import raw

DEPTHS = (65, 1_000, 100_000)
TOKEN = "test-token-0123456789"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "Authorization": f"Bearer {TOKEN}",
}
TOO_DEEP = "Parse error: nested deeper than 64 levels"


def _deep_call(ident: object, depth: int, *, arrays: bool = True) -> bytes:
    """A ``tools/call`` whose arguments hold ``depth`` levels of nesting (the message
    itself is ``depth + 3`` deep)."""
    if arrays:
        nested = b"[" * depth + b"]" * depth
    else:
        nested = b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
    return (
        b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"memory_get",'
        b'"arguments":{"key":"k","x":%s}}}' % (ident, nested)
    )


def _deep_message(ident: bytes, depth: int) -> bytes:
    """A message exactly ``depth`` levels deep: its top level and ``depth - 1`` below."""
    below = depth - 2
    params = b'{"a":' * below + b"{}" + b"}" * below
    return b'{"jsonrpc":"2.0","id":%s,"method":"ping","params":%s}' % (ident, params)


# (line, the id its refusal must carry)
CASES: list[tuple[bytes, object]] = [
    *((_deep_message(b"%d" % (10 + i), depth), 10 + i) for i, depth in enumerate(DEPTHS)),
    *((_deep_call(b'"req-%d"' % depth, depth), f"req-{depth}") for depth in DEPTHS),
    *(
        (_deep_call(b"%d" % (20 + i), depth, arrays=False), 20 + i)
        for i, depth in enumerate(DEPTHS)
    ),
    # The top level is not valid JSON (a missing comma, a cut line, an array): no id to give.
    (b'{"jsonrpc":"2.0" "id":30,"params":' + b"[" * 1_000 + b"]" * 1_000 + b"}", None),
    (b'{"jsonrpc":"2.0","id":31,"params":' + b"[" * 1_000, None),
    (b"[" * 1_000 + b"]" * 1_000, None),
    # Brackets inside strings do not count, and an id of the wrong type is not echoed.
    (b'{"id":{"no":1},"p":' + b"[" * 100 + b"]" * 100 + b"}", None),
]


def test_the_messages_are_as_deep_as_named() -> None:
    assert _deep_message(b"1", 65).count(b"{") == 65
    assert _deep_message(b"1", 64).count(b"{") == 64


def test_stdio_answers_a_too_deep_message_with_its_own_id(tmp_path: Path) -> None:
    with raw(tmp_path) as server:
        server.start()
        for line, ident in CASES:
            server.send(line)
            answer = server.answer()
            assert answer["error"] == {"code": -32700, "message": TOO_DEEP}, line[:80]
            assert answer["id"] == ident, line[:80]
            assert server.request(99, "ping") == {"jsonrpc": "2.0", "id": 99, "result": {}}
        # One level less is within the limit and served as usual.
        server.send(_deep_message(b"40", 64))
        assert server.answer() == {"jsonrpc": "2.0", "id": 40, "result": {}}
        # A string full of brackets is not nesting.
        server.send(b'{"jsonrpc":"2.0","id":41,"method":"ping","params":{"s":"%s"}}' % (b"[" * 500))
        assert server.answer() == {"jsonrpc": "2.0", "id": 41, "result": {}}


@pytest.mark.parametrize("accept", ["application/json, text/event-stream", "application/json"])
def test_http_answers_a_too_deep_message_with_its_own_id(tmp_path: Path, accept: str) -> None:
    headers = {**HEADERS, "Accept": accept}
    with http_server(tmp_path, MCP_AUTH_TOKEN=TOKEN) as server, httpx2.Client(timeout=60) as http:
        assert server.url is not None
        started = http.post(server.url, json=INITIALIZE, headers=headers)
        assert started.status_code == 200
        session = {**headers, "mcp-session-id": started.headers["mcp-session-id"]}
        for line, ident in CASES:
            refused = http.post(server.url, content=line, headers=session)
            assert refused.status_code == 400, line[:80]
            assert refused.json() == {
                "jsonrpc": "2.0",
                "id": ident,
                "error": {"code": -32700, "message": TOO_DEEP},
            }, line[:80]
        served = http.post(server.url, content=_deep_message(b"40", 64), headers=session)
        assert served.status_code == 200
        assert '"id":40' in served.text and '"result":{}' in served.text
