"""``backtrail mcp --http``: a live server on 127.0.0.1 driven by the official MCP client
and by raw HTTP requests: fail-closed bearer tokens, 401s before any body parsing, the
Host allow-list, server-assigned identities and read-only tokens."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import httpx2
import pytest

from mcp_support import BACKTRAIL, INITIALIZE, http_server, seed, server_env, text

pytestmark = pytest.mark.anyio

TOKEN = "test-token-0123456789"
WRITER = "writer-token-abcdefghijkl"
READER = "reader-token-mnopqrstuvwx"
REQUIRED = "authentication required: send 'Authorization: Bearer <token>'"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _start(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKTRAIL, "mcp", "--http", "--port", "0", *args],
        env=server_env(home, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_http_refuses_to_start_without_authentication(tmp_path: Path) -> None:
    none = _start(tmp_path)
    assert none.returncode == 2
    assert "MCP_AUTH_TOKEN" in none.stderr and "refusing to serve" in none.stderr
    short = _start(tmp_path, MCP_AUTH_TOKEN="short")
    assert short.returncode == 2 and "at least 16 characters" in short.stderr
    broken = tmp_path / "tokens.json"
    broken.write_text("{not json")
    bad_file = _start(tmp_path, "--token-file", str(broken))
    assert bad_file.returncode == 2 and "cannot read the token file" in bad_file.stderr
    broken.write_text(
        json.dumps({"tokens": [{"token": WRITER, "client_id": "x", "scope": "admin"}]})
    )
    bad_scope = _start(tmp_path, "--token-file", str(broken))
    assert bad_scope.returncode == 2 and "scope must be 'read' or 'write'" in bad_scope.stderr


async def test_requests_without_a_valid_token_are_refused_before_any_work(tmp_path: Path) -> None:
    seed(tmp_path)
    with http_server(tmp_path, MCP_AUTH_TOKEN=TOKEN) as server:
        assert server.url is not None and server.url.startswith("http://127.0.0.1:")
        with httpx2.Client(timeout=30) as http:
            garbage = http.post(server.url, content=b"\x00 not json at all", headers=JSON_HEADERS)
            assert garbage.status_code == 401  # refused before the body was read
            assert garbage.headers["www-authenticate"] == "Bearer"
            assert garbage.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32001, "message": REQUIRED},
            }
            wrong = http.post(
                server.url,
                json=INITIALIZE,
                headers={**JSON_HEADERS, "Authorization": "Bearer definitely-wrong-token"},
            )
            assert wrong.status_code == 401
            assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            rebound = http.post(
                server.url,
                json=INITIALIZE,
                headers={
                    **JSON_HEADERS,
                    "Authorization": f"Bearer {TOKEN}",
                    "Host": "evil.example",
                },
            )
            assert rebound.status_code == 421
            ok = http.post(
                server.url,
                json=INITIALIZE,
                headers={**JSON_HEADERS, "Authorization": f"Bearer {TOKEN}"},
            )
            assert ok.status_code == 200
        assert TOKEN not in "".join(server.stderr)

        async with server.client(TOKEN, mode="legacy") as client:
            done = await client.call_tool(
                "memory_set", {"key": "http/rt", "value": "wire value", "client_id": "http-test"}
            )
            assert text(done) == "set 'http/rt' (from http-test, version 1)"
            got = await client.call_tool("memory_get", {"key": "http/rt"})
            assert text(got).startswith("http/rt = wire value  (source: http-test,")
            found = await client.call_tool("search_browsing", {"query": "checkpoints"})
            assert found.structured_content["results"][0]["url"] == "https://sqlite.org/wal.html"
            unknown = await client.call_tool("does_not_exist", {})
            assert unknown.is_error and "Unknown tool" in text(unknown)


async def test_a_token_file_assigns_identities_and_read_tokens_cannot_write(tmp_path: Path) -> None:
    seed(tmp_path)
    tokens = tmp_path / "tokens.json"
    reader_digest = hashlib.sha256(READER.encode()).hexdigest()
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"token": WRITER, "client_id": "claude-desktop", "scope": "write"},
                    {"sha256": reader_digest, "client_id": "dashboard", "scope": "read"},
                ]
            }
        )
    )
    tokens.chmod(0o600)
    with http_server(tmp_path, "--token-file", str(tokens), MCP_LOG_READS="on") as server:
        async with server.client(WRITER, mode="legacy") as writer, server.client(READER) as reader:
            spoof = await writer.call_tool(
                "memory_set", {"key": "plan", "value": "ship", "client_id": "spoofed"}
            )
            assert text(spoof) == "set 'plan' (from claude-desktop, version 1)"
            for name, arguments in [
                ("memory_set", {"key": "plan", "value": "sabotage"}),
                ("memory_delete", {"key": "plan"}),
                ("save_note", {"content": "hello"}),
                ("forget", {"domain": "sqlite.org", "confirm": True}),
            ]:
                refused = await reader.call_tool(name, arguments)
                assert refused.is_error, name
                assert "this connection's token only allows reading" in text(refused)
            got = await reader.call_tool("memory_get", {"key": "plan"})
            assert text(got).startswith("plan = ship  (source: claude-desktop,")
            assert not (await reader.call_tool("search_browsing", {"query": "vacuum"})).is_error
            listed = {t.name for t in (await reader.list_tools()).tools}
            assert listed == {"search_browsing", "get_page", "get_timeline", "get_saved",
                              "get_status", "get_open_tabs", "summarize_reading", "memory_get",
                              "memory_list", "memory_search", "memory_history"}  # fmt: skip
            everything = {t.name for t in (await writer.list_tools()).tools}
            assert len(everything) == 18 and listed < everything
            history = await writer.call_tool(
                "memory_history", {"key": "plan", "include_reads": True}
            )
            assert [line.split(" ")[1:3] for line in text(history).splitlines()] == [
                ["claude-desktop", "set:"],
                ["dashboard", "get:"],
            ]

        assert server.url is not None
        with httpx2.Client(timeout=30) as http:  # a session belongs to the token that opened it
            opened = http.post(
                server.url,
                json=INITIALIZE,
                headers={**JSON_HEADERS, "Authorization": f"Bearer {WRITER}"},
            )
            session = opened.headers["mcp-session-id"]
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            hijack = http.post(
                server.url,
                json=listing,
                headers={
                    **JSON_HEADERS,
                    "Authorization": f"Bearer {READER}",
                    "Mcp-Session-Id": session,
                    "Mcp-Protocol-Version": "2025-11-25",
                },
            )
            assert hijack.status_code == 404


async def test_http_clients_of_both_protocol_eras_share_one_memory(tmp_path: Path) -> None:
    seed(tmp_path)
    with http_server(tmp_path, MCP_AUTH_TOKEN=TOKEN, MCP_CLIENT_ID="home-server") as server:
        async with server.client(TOKEN, mode="legacy") as legacy, server.client(TOKEN) as modern:
            await legacy.call_tool("memory_set", {"key": "shared/via-http", "value": "from legacy"})
            got = await modern.call_tool("memory_get", {"key": "shared/via-http"})
            assert text(got).startswith("shared/via-http = from legacy  (source: home-server,")
            note = await modern.call_tool("save_note", {"content": "Capybaras enjoy hot springs"})
            assert not note.is_error
            found = await legacy.call_tool(
                "search_browsing", {"query": "capybaras", "kinds": ["note"]}
            )
            assert (
                found.structured_content["results"][0]["id"]
                == note.structured_content["id"]
            )
            tabs = await modern.call_tool("get_open_tabs", {})
            assert tabs.structured_content["total"] == 5
