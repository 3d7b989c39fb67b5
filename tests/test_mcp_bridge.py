"""mcp-memory-bridge's clients against the real ``backtrail mcp`` processes: its raw HTTP
client (JSON only, no SSE), two processes and a held write lock with a busy timeout of
0, and raw stdio lines no well-behaved client sends (deep nesting, lone surrogates, not
JSON, not JSON-RPC, Ctrl-C)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from helpers import wait_for
from mcp_support import BACKTRAIL, INITIALIZE, http_server, seed, server_env
from test_mcp_operations import write_locked

TOKEN = "test-token-0123456789"
JSON_ONLY = {"Content-Type": "application/json", "Accept": "application/json"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Raw:
    """A ``backtrail mcp`` over stdio, spoken to line by line (as the peer's raw client)."""

    def __init__(self, home: Path, **env: str) -> None:
        self.process = subprocess.Popen(
            [BACKTRAIL, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=server_env(home, **env),
        )  # fmt: skip
        self.stderr: list[bytes] = []
        threading.Thread(target=self._drain, daemon=True).start()
        self.watchdog = threading.Timer(300, self.process.kill)
        self.watchdog.start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.process.stdin is not None
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the server stopped answering:\n" + b"".join(self.stderr).decode()
        return json.loads(line)

    def request(self, ident: int, method: str, **params: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            found = self.answer()
            if found.get("id") == ident:
                return found

    def start(self) -> dict[str, Any]:
        self.send(INITIALIZE)
        found = self.answer()
        self.send(INITIALIZED)
        return found

    def tool(self, ident: int, name: str, **arguments: Any) -> dict[str, Any]:
        return self.request(ident, "tools/call", name=name, arguments=arguments)["result"]

    def close(self) -> int:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(60)
        finally:
            self.watchdog.cancel()
            if self.process.poll() is None:
                self.process.kill()


@contextmanager
def raw(home: Path, **env: str) -> Iterator[Raw]:
    server = Raw(home, **env)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
        server.watchdog.cancel()


def _text(result: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in result.get("content", []))


# ---------------------------------------------------------------- stdio lines


def test_malformed_lines_get_json_rpc_errors_and_the_server_keeps_serving(tmp_path: Path) -> None:
    with raw(tmp_path) as server:
        assert server.start()["result"]["serverInfo"]["name"] == "backtrail"
        cases: list[tuple[bytes, int, Any]] = [
            (b"[" * 1_000 + b"]" * 1_000, -32700, None),
            (b'{"a":' * 900 + b"1" + b"}" * 900, -32700, None),
            (b"this is not json", -32700, None),
            (b"\xff\xfe not utf-8", -32700, None),
            (b"[1, 2, 3]", -32600, None),
            (b"42", -32600, None),
            (b'{"jsonrpc": "2.0", "id": 3}', -32600, 3),
            (b'{"jsonrpc": "1.0", "id": 4, "method": "ping"}', -32600, 4),
            (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"memory_set",'
             b'"arguments":{"key":"k","value":"cut \\ud83d"}}}', -32602, 5),
        ]  # fmt: skip
        for line, code, ident in cases:
            server.send(line)
            found = server.answer()
            assert (found["error"]["code"], found["id"]) == (code, ident), (line[:40], found)
        assert server.request(9, "ping") == {"jsonrpc": "2.0", "id": 9, "result": {}}
        unknown = server.request(10, "no/such/method")
        assert unknown["error"]["code"] == -32601
        prompt = server.request(11, "prompts/get", name="weekly_review",
                                arguments={"week": "someday"})  # fmt: skip
        assert prompt["error"]["code"] == -32602
        assert "'someday' is not a week" in prompt["error"]["message"]
        assert server.close() == 0  # stdin closed: the server ends


def test_ctrl_c_ends_a_serving_stdio_server_with_status_130(tmp_path: Path) -> None:
    with raw(tmp_path) as server:
        server.start()
        assert server.request(1, "ping")["result"] == {}
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(60) == 130
    with raw(tmp_path) as server:  # twice in a row: the second ends it at once
        server.start()
        # Serving first: a signal before the interpreter has set its handlers would be
        # Python's default (killed by SIGINT), which is not what is checked here.
        assert server.request(1, "ping")["result"] == {}
        server.process.send_signal(signal.SIGINT)
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(60) == 130


# ------------------------------------------------------- locks and two processes


def test_with_a_held_lock_and_no_busy_timeout_a_new_server_starts_reads_and_refuses_writes(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    with raw(tmp_path, MCP_CLIENT_ID="A", MCP_ENABLE_DEMO_TOOLS="1") as holder:
        holder.start()
        assert not holder.tool(1, "memory_set", key="shared", value="before").get("isError")
        held: list[dict[str, Any]] = []
        thread = threading.Thread(
            target=lambda: held.append(holder.tool(2, "lock_hold", seconds=20.0)), daemon=True
        )
        thread.start()
        wait_for(lambda: write_locked(tmp_path), 60, "the held write lock")
        env = {"MCP_CLIENT_ID": "B", "MCP_SQLITE_BUSY_TIMEOUT": "0", "MCP_LOG_READS": "off"}
        with raw(tmp_path, **env) as late:
            assert late.start()["result"]["serverInfo"]["name"] == "backtrail"
            got = late.tool(1, "memory_get", key="shared")
            assert not got.get("isError") and "shared = before" in _text(got)
            assert not late.tool(2, "search_browsing", query="checkpoints").get("isError")
            started = time.monotonic()
            refused = late.tool(3, "memory_set", key="shared", value="B")
            assert time.monotonic() - started < 5  # fails fast instead of waiting
            assert refused["isError"] is True
            assert "locked" in _text(refused) and "retry with backoff" in _text(refused)
            assert write_locked(tmp_path)  # all of it happened while A held the lock
        thread.join(60)
        assert not held[0].get("isError")
        history = holder.tool(3, "memory_history", key="shared")
        assert "B" not in [line.split(" ")[1] for line in _text(history).splitlines()]


# ------------------------------------------------------------------------ HTTP


def _post(http: httpx2.Client, url: str, body: dict[str, Any], **headers: str) -> Any:
    return http.post(url, json=body, headers={**JSON_ONLY, "Authorization": f"Bearer {TOKEN}",
                                               **headers})  # fmt: skip


def test_a_json_only_http_client_gets_plain_json_answers(tmp_path: Path) -> None:
    seed(tmp_path)
    with http_server(tmp_path, MCP_AUTH_TOKEN=TOKEN) as server:
        assert server.url is not None
        with httpx2.Client(timeout=60) as http:
            opened = _post(http, server.url, INITIALIZE)
            assert opened.status_code == 200, opened.text
            assert opened.headers["content-type"].startswith("application/json")
            assert opened.json()["result"]["serverInfo"]["name"] == "backtrail"
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"],
                       "Mcp-Protocol-Version": "2025-11-25"}  # fmt: skip
            assert _post(http, server.url, INITIALIZED, **session).status_code == 202
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "memory_set",
                               "arguments": {"key": "http/k", "value": "v", "client_id": "raw"}}}
            done = _post(http, server.url, call, **session)
            assert done.status_code == 200 and done.headers["content-type"].startswith(
                "application/json"
            )
            assert _text(done.json()["result"]) == "set 'http/k' (from raw, version 1)"
            listing = _post(http, server.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                            **session)  # fmt: skip
            assert len(listing.json()["result"]["tools"]) == 18


def test_slow_and_idle_http_connections_are_closed_and_host_names_ignore_case(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    with http_server(tmp_path, "--allowed-host", "mybox.lan", MCP_AUTH_TOKEN=TOKEN) as server:
        assert server.url is not None
        parts = urlsplit(server.url)
        address = (parts.hostname or "127.0.0.1", parts.port or 80)
        idle = [socket.create_connection(address, timeout=60) for _ in range(10)]
        half = [socket.create_connection(address, timeout=60) for _ in range(5)]
        for conn in half:
            conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        for conn in idle + half:  # each is closed by the server: recv sees the end
            assert _closed(conn), "a slow connection stayed open"
            conn.close()
        with httpx2.Client(timeout=60) as http:
            upper = _post(http, server.url, INITIALIZE, Host=f"MYBOX.LAN:{address[1]}")
            assert upper.status_code == 200, upper.text
            other = _post(http, server.url, INITIALIZE, Host="OTHER.LAN")
            assert other.status_code == 421


def _closed(conn: socket.socket) -> bool:
    """Whether the server closes ``conn`` within its 60 s socket timeout."""
    try:
        return conn.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
