"""``backtrail mcp`` over stdio, driven by the official MCP client (a spawned server,
the real protocol): every browsing tool, its error paths, resources, prompts, sampling,
two servers on one data directory, and the fast start."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CreateMessageResult, Implementation, TextContent

from backtrail.mcp_server.early import EARLY_PROTOCOL_VERSIONS
from mcp_support import (
    BACKTRAIL,
    INITIALIZE,
    WAL_TEXT,
    read_json_lines,
    seed,
    server_env,
    stdio_params,
    text,
)

pytestmark = pytest.mark.anyio

DISCOVER = {
    "jsonrpc": "2.0",
    "id": "probe-1",
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _raw_session(home: Path, messages: list[dict[str, Any]], **env: str) -> tuple[list[str], str]:
    """Send ``messages`` to a fresh server, read until every request among them is
    answered, then close stdin; return all stdout lines and stderr."""
    waiting = {m["id"] for m in messages if "id" in m}
    process = subprocess.Popen(
        [BACKTRAIL, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(home, **env),
    )
    watchdog = threading.Timer(90, process.kill)
    watchdog.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        process.stdin.flush()
        lines = []
        while waiting:
            line = process.stdout.readline().decode()
            assert line, f"the server stopped before answering {waiting}"
            lines.append(line)
            waiting.discard(json.loads(line).get("id"))
        stdout, stderr = process.communicate(timeout=60)
    finally:
        watchdog.cancel()
        process.kill()
    return lines + stdout.decode().splitlines(), stderr.decode()


def _answers(lines: list[str], ident: object) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, lines) if m.get("id") == ident and "method" not in m]


def test_the_early_handshake_answer_is_exactly_the_sdks_and_is_sent_once(tmp_path: Path) -> None:
    for opening in (INITIALIZE, DISCOVER):
        fast, _ = _raw_session(tmp_path / "fast", [opening])
        slow, _ = _raw_session(tmp_path / "slow", [opening], BACKTRAIL_MCP_FAST_START="0")
        fast_answers, slow_answers = _answers(fast, opening["id"]), _answers(slow, opening["id"])
        assert len(fast_answers) == 1, fast  # the SDK's duplicate was dropped
        assert len(slow_answers) == 1, slow
        assert fast_answers[0] == slow_answers[0]


def test_an_unusual_first_message_is_left_to_the_sdk(tmp_path: Path) -> None:
    old = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "1999-01-01"}}
    lines, _ = _raw_session(tmp_path, [{"jsonrpc": "2.0", "id": 7, "method": "ping"}, old])
    assert [a.get("result") for a in _answers(lines, 7)] == [{}]
    (answer,) = _answers(lines, 0)
    assert answer["result"]["protocolVersion"] == "2025-11-25"  # the SDK's counter-offer


def test_the_mcp_command_answers_initialize_without_importing_the_heavy_modules() -> None:
    """What `backtrail mcp` imports before its opening answer (the rest loads beside it
    on the builder thread): no console library, store, memory, SDK or pydantic."""
    heavy = ("rich", "backtrail.store", "backtrail.memory", "mcp",
             "mcp_types", "pydantic", "anyio")  # fmt: skip
    probe = (
        "import sys\n"
        "from backtrail import cli, cli_mcp\n"
        "from backtrail.mcp_server import identity, stdio\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r} "
        f"or m in {heavy!r}))"
    )
    python = str(Path(BACKTRAIL).parent / "python")
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_reader_starts_warming_on_the_first_search_before_the_sdk_is_ready() -> None:
    from backtrail.mcp_server import stdio

    def call(ident: int, tool: str) -> bytes:
        message = {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                   "params": {"name": tool, "arguments": {"query": "x"}}}  # fmt: skip
        return (json.dumps(message) + "\n").encode()

    def run(lines: list[bytes], ready_after: int) -> tuple[list[bytes], int]:
        warmed = threading.Semaphore(0)
        calls = []

        def warm() -> None:
            calls.append(1)
            warmed.release()

        read_end, write_end = os.pipe()
        with os.fdopen(read_end, "rb") as raw, os.fdopen(write_end, "wb") as out:
            reader = stdio._Reader(raw, warm, stdio._DroppingWriter(io.BytesIO(), set()))
            got = []
            for i, line in enumerate(lines):
                if i == ready_after:
                    reader.sdk_ready()
                out.write(line)
                out.flush()
                got.append(reader.next_line())  # in order, one at a time
            out.close()
            got += [reader.next_line(), reader.next_line()]  # the end, and again
        warmed.acquire(timeout=0.5)  # the warm-up runs on its own thread
        return got, len(calls)

    opening = (json.dumps(INITIALIZE) + "\n").encode()
    stats, search, forgotten = call(2, "memory_stats"), call(3, "search_memory"), call(
        4, "find_forgotten_content"
    )
    got, warmed = run([opening, stats, b"not json\n", search, forgotten], ready_after=99)
    assert got == [opening, stats, b"not json\n", search, forgotten, b"", b""]
    assert warmed == 1  # once, for the first query tool; not for memory_stats
    assert run([opening, stats], ready_after=99)[1] == 0
    assert run([opening, stats, search], ready_after=2)[1] == 0  # the SDK was ready first


async def test_the_query_tools_that_start_the_model_early_are_tools_of_the_server(
    tmp_path: Path,
) -> None:
    from backtrail.mcp_server import early, identity

    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert identity.QUERY_TOOLS <= names, identity.QUERY_TOOLS - names
    assert set(early.EARLY_TOOLS) <= identity.QUERY_TOOLS


def test_a_search_sent_during_the_sdk_import_loads_the_model_beside_it(tmp_path: Path) -> None:
    seed(tmp_path)
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}  # fmt: skip

    warming = "a search arrived while the MCP SDK loads"
    search = call("memory_search", {"query": "checkpoints"})  # not answered early
    lines, stderr = _raw_session(tmp_path, [INITIALIZE, initialized, search], MCP_EMBEDDINGS="on")
    (answer,) = _answers(lines, 2)
    assert answer["result"]["structuredContent"]["mode"] == "hybrid", answer
    assert warming in stderr
    lines, stderr = _raw_session(
        tmp_path, [INITIALIZE, initialized, call("memory_stats", {})], MCP_EMBEDDINGS="on"
    )
    (answer,) = _answers(lines, 2)
    assert answer["result"]["structuredContent"]["model"] == "not loaded", answer
    assert warming not in stderr


def _close(got: Any, want: Any) -> bool:
    """Equal, floats within 1e-6 (a search's time decay moves between two runs)."""
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_close(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(map(_close, got, want))
    return type(got) is type(want) and got == want


@pytest.mark.parametrize("protocol", EARLY_PROTOCOL_VERSIONS)
def test_a_search_and_the_tool_list_sent_during_the_sdk_import_are_answered_as_the_sdk_would(
    tmp_path: Path, protocol: str
) -> None:
    """A client that searches and lists the tools right after its handshake is answered
    while the SDK still loads: the search by the code the SDK's tool runs, the tool list
    as an earlier server's SDK gave it. Each answer equals the SDK's own; a call the
    early path will not take (a limit out of range) is still the SDK's."""
    seed(tmp_path)
    log = tmp_path / "calls.jsonl"
    env = {"MCP_EMBEDDINGS": "on", "BACKTRAIL_MCP_CALL_LOG": str(log)}

    def call(ident: int, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                "params": {"name": "search_memory", "arguments": arguments}}  # fmt: skip

    # limits above the number of results: a next-page cursor would hold the time
    opening = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": protocol}}
    messages = [
        opening,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(2, {"query": "checkpoints in the write-ahead log", "limit": 25}),
        call(3, {"query": "wal", "limit": 99}),
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "find_forgotten_content",
            "arguments": {"description": "bread starter", "limit": 25}}},
    ]
    sdk, _ = _raw_session(tmp_path, messages, BACKTRAIL_MCP_FAST_START="0", **env)
    first, first_err = _raw_session(tmp_path, messages, **env)
    logged = len(read_json_lines(log))
    early, early_err = _raw_session(tmp_path, messages, **env)

    assert "answered search_memory while the MCP SDK loads" in first_err, first_err
    assert "answered tools/list" not in first_err  # no tool list kept yet: the SDK's is kept
    assert "answered search_memory while the MCP SDK loads" in early_err, early_err
    assert "answered tools/list while the MCP SDK loads" in early_err, early_err
    assert "answered find_forgotten_content while the MCP SDK loads" in early_err, early_err
    for ident in (2, 3, 4, 5):
        (want,) = _answers(sdk, ident)
        for lines in (first, early):
            (got,) = _answers(lines, ident)
            assert _close(got, want), (ident, got, want)
    (hits,) = _answers(early, 2)
    assert hits["result"]["structuredContent"]["mode"] == "hybrid"
    assert hits["result"]["structuredContent"]["results"], hits
    (refused,) = _answers(early, 3)
    assert refused["result"]["isError"] is True
    assert "limit" in refused["result"]["content"][0]["text"]
    calls = read_json_lines(log)[logged:]  # the last server's calls, each recorded once
    assert sorted((c["tool"], c["client"], c["ok"]) for c in calls) == [
        ("find_forgotten_content", "mcp:raw-test", True),
        ("search_memory", "mcp:raw-test", False), ("search_memory", "mcp:raw-test", True),
    ]  # fmt: skip
    (candidates,) = _answers(early, 5)
    assert candidates["result"]["structuredContent"]["results"][0]["url"] == (
        "https://bread.example/sourdough"
    )


def test_only_well_formed_requests_are_taken_before_the_sdk_is_ready() -> None:
    from backtrail.mcp_server.early import _arguments, early_method

    def call(arguments: object, name: str = "search_memory") -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}  # fmt: skip

    listing = {"jsonrpc": "2.0", "id": "l", "method": "tools/list"}
    assert early_method(call({"query": "x"})) == "tools/call"
    assert early_method(listing) == early_method({**listing, "params": {"_meta": {}}})
    assert early_method(listing) == "tools/list"
    for other in ({**listing, "params": {"cursor": "2"}}, {**listing, "id": True},
                  {**listing, "jsonrpc": "1.0"}, {**listing, "id": None},
                  call({"query": "x"}, "memory_stats"), {"jsonrpc": "2.0", "id": 1},
                  [listing]):  # fmt: skip
        assert early_method(other) is None, other
    good = {"query": "wal", "limit": 3, "since": "2 days ago", "until": 1_700_000_000,
            "domains": ["sqlite.org"], "kinds": ["page", "note"], "cursor": None}  # fmt: skip
    assert _arguments("search_memory", good) == good
    assert _arguments("search_memory", {"query": "wal"}) == {
        "query": "wal", "limit": 8, "since": None, "until": None, "domains": None,
        "kinds": None, "cursor": None,
    }  # fmt: skip
    # what the SDK would coerce (a string or float limit) or refuse goes to the SDK
    for bad in ({"limit": 3}, {"query": 5}, {"query": "x", "limit": "3"},
                {"query": "x", "limit": True}, {"query": "x", "limit": 3.0},
                {"query": "x", "kinds": ["tab"]}, {"query": "x", "kinds": "page"},
                {"query": "x", "domains": "sqlite.org"}, {"query": "x", "since": 1.5},
                {"query": "x", "cursor": 2}, {"query": "x", "extra": 1}, ["x"]):  # fmt: skip
        assert _arguments("search_memory", bad) is None, bad
    forgotten = "find_forgotten_content"
    assert early_method(call({"description": "x"}, forgotten)) == "tools/call"
    assert _arguments(forgotten, {"description": "x"}) == {"description": "x", "limit": 5}
    assert _arguments(forgotten, {"description": "x", "limit": 2}) == {
        "description": "x", "limit": 2
    }  # fmt: skip
    for bad in ({"query": "x"}, {"description": "x", "limit": "2"}, {"description": None}):
        assert _arguments(forgotten, bad) is None, bad


def test_a_kept_tool_list_answers_only_the_same_code_settings_and_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import backtrail
    from backtrail.mcp_server import early
    from backtrail.mcp_server.settings import McpSettings

    def answers(**settings: Any) -> early.EarlyAnswers:
        def no_memory() -> Any:
            raise AssertionError("a tool list needs no memory")

        return early.EarlyAnswers(no_memory, McpSettings(**settings), tmp_path / "cache")

    now, older = early.Opening("2025-11-25", "x"), early.Opening("2025-06-18", "x")
    listing = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    tools = {"tools": [{"name": "search_memory", "inputSchema": {"type": "object"}}]}
    assert answers().answer(listing, now) is None  # nothing kept yet
    answers().keep_tools("2025-11-25", {**tools, "nextCursor": "2"})  # a first page only
    assert answers().answer(listing, now) is None
    answers().keep_tools("2025-11-25", tools)
    assert answers().answer(listing, now) == {"jsonrpc": "2.0", "id": 9, "result": tools}
    assert answers().answer(listing, older) is None  # kept per protocol version
    assert answers().answer(listing, early.Opening("2024-11-05", "x")) is None
    assert answers().answer(listing, None) is None  # no early handshake
    assert answers(demo_tools=True).answer(listing, now) is None  # other settings
    (kept,) = (tmp_path / "cache").iterdir()
    kept.write_text("{not json")
    assert answers().answer(listing, now) is None
    answers().keep_tools("2025-11-25", tools)
    monkeypatch.setattr(backtrail, "__version__", "0.0.0-another")
    assert answers().answer(listing, now) is None  # another release


_STRAY = """
import os, sys, threading, time

def _stray():
    deadline = time.time() + 60
    while "backtrail.mcp_server.server" not in sys.modules and time.time() < deadline:
        time.sleep(0.01)
    print("STRAY PRINT", flush=True)
    os.write(1, b"STRAY WRITE\\n")

threading.Thread(target=_stray, daemon=True).start()
"""


def test_a_stdio_server_embeds_its_queries_on_one_thread_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    from backtrail.config import Config
    from backtrail.mcp_server import _holder
    from backtrail.mcp_server.settings import McpSettings

    def threads(transport: str, **overrides: Any) -> int:
        holder = _holder(Config.load(tmp_path, overrides=overrides), McpSettings(transport))
        try:
            return holder.get().config.embed_threads
        finally:
            holder.close()

    assert threads("stdio") == 1
    assert threads("stdio", embed_threads=2) == 2
    assert threads("http") == 0  # concurrent clients: one thread per core


def test_stdout_carries_nothing_but_protocol_even_when_a_library_prints(tmp_path: Path) -> None:
    seed(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_STRAY)  # prints to stdout once the SDK loads
    calls = [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(
            [
                ("search_memory", {"query": "checkpoint"}),
                ("get_page", {"id": 99999}),
                ("no_such_tool", {}),
                ("memory_stats", {}),
            ],
            start=1,
        )
    ]
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    lines, stderr = _raw_session(tmp_path, [INITIALIZE, notification, *calls], PYTHONPATH=str(hook))
    messages = [json.loads(line) for line in lines]  # every line parses
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    assert sorted(m["id"] for m in messages) == [0, 1, 2, 3, 4]
    assert "STRAY PRINT" in stderr and "STRAY WRITE" in stderr
    assert "Traceback" not in stderr


async def test_every_browsing_tool_answers_from_the_memory(tmp_path: Path) -> None:
    s = seed(tmp_path)
    info = Implementation(name="claude-ai", version="1")
    async with Client(stdio_params(tmp_path), mode="legacy", client_info=info) as client:

        async def call(name: str, **arguments: Any) -> Any:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, text(result)
            return result

        found = await call("search_memory", query="checkpoints log")
        assert found.structured_content["results"][0]["url"] == "https://sqlite.org/wal.html"
        assert '<web_content source="https://sqlite.org/wal.html" kind="page"' in text(found)
        notes = await call("search_memory", query="WAL", kinds=["note"])
        assert [r["kind"] for r in notes.structured_content["results"]] == ["note"]
        assert "<user_note" in text(notes) and "<web_content" not in text(notes)
        sites = await call("search_memory", query="vacuum", domains=["postgresql.org"])
        assert {r["domain"] for r in sites.structured_content["results"]} == {"www.postgresql.org"}
        recent = await call("search_memory", query="sourdough", since="12h", kinds=["page"])
        assert recent.structured_content["results"] == []
        older = await call("search_memory", query="sourdough", since="2d", kinds=["page"])
        assert [r["id"] for r in older.structured_content["results"]] == [s.bread_page]
        first = await call("search_memory", query="WAL", limit=1)
        cursor = first.structured_content["next_cursor"]
        assert cursor
        second = await call("search_memory", query="WAL", limit=1, cursor=cursor)
        assert second.structured_content["results"][0] != first.structured_content["results"][0]

        forgotten = await call("find_forgotten_content", description="baking bread with yeast")
        assert (
            forgotten.structured_content["results"][0]["url"] == "https://bread.example/sourdough"
        )

        page = await call("get_page", url="https://sqlite.org/wal.html", max_chars=40)
        assert page.structured_content["page"]["text"] == WAL_TEXT[:40]
        assert page.structured_content["page"]["next_offset"] == 40
        rest = await call("get_page", id=s.wal_page, offset=40, max_chars=100_00)
        assert rest.structured_content["page"]["text"] == WAL_TEXT[40:]
        assert rest.structured_content["page"]["next_offset"] is None

        timeline = await call("get_timeline", limit=2)
        assert [e["page_id"] for e in timeline.structured_content["entries"]] == [
            s.vacuum_page,
            s.wal_page,
        ]
        older = await call(
            "get_timeline", limit=2, cursor=timeline.structured_content["next_cursor"]
        )
        assert [e["page_id"] for e in older.structured_content["entries"]] == [s.bread_page]
        only = await call("get_timeline", domain="sqlite.org")
        assert [e["page_id"] for e in only.structured_content["entries"]] == [s.wal_page]

        tabs = await call("get_open_tabs")
        assert tabs.structured_content["total"] == 5
        assert 'kind="tab titles"' in text(tabs)
        active = await call("get_active_tab")
        assert active.structured_content["tab"]["tab_id"] == 1
        assert active.structured_content["page"]["text"] == WAL_TEXT
        cleanup = await call("suggest_tab_cleanup")
        verdicts = {t["tab_id"]: t["action"] for t in cleanup.structured_content["tabs"]}
        assert verdicts == {1: "keep", 2: "close", 3: "close", 4: "close", 5: "read_later"}
        assert cleanup.structured_content["counts"] == {"keep": 1, "read_later": 1, "close": 3}
        assert "duplicate of tab 1" in text(cleanup)

        research = await call("get_bookmarks", folder="research")
        assert [b["browser_id"] for b in research.structured_content["bookmarks"]] == ["b1"]
        bread = await call("get_bookmarks", query="sourdough")
        assert [b["browser_id"] for b in bread.structured_content["bookmarks"]] == ["b2"]
        highlights = await call("get_highlights", query="checkpoints")
        assert [h["id"] for h in highlights.structured_content["highlights"]] == [s.highlight]
        assert "remember for the storage talk" in text(highlights)
        none = await call("get_highlights", url="https://bread.example/sourdough")
        assert none.structured_content["highlights"] == []

        saved = await call(
            "save_note",
            content="Try feeding the starter twice a day",
            url="https://bread.example/sourdough",
        )
        assert saved.structured_content["note"]["url"] == "https://bread.example/sourdough"
        again = await call("search_memory", query="feeding starter twice", kinds=["note"])
        assert (
            again.structured_content["results"][0]["id"] == saved.structured_content["note"]["id"]
        )

        sessions = await call("get_research_sessions")
        (session,) = sessions.structured_content["sessions"]
        assert {p["page_id"] for p in session["pages"]} == {s.wal_page, s.vacuum_page}

        summary = await call("summarize_research_topic", topic="write-ahead logging checkpoints")
        data = summary.structured_content
        assert data["provider"] == "extractive"
        assert [a["provider"] for a in data["attempts"]] == [
            "sampling",
            "anthropic",
            "ollama",
            "extractive",
        ]
        assert "(https://sqlite.org/wal.html)" in data["summary"]
        assert "Checkpoints copy the log back into the main database file." in data["summary"]

        week = datetime.fromtimestamp(s.now - 3_000, timezone.utc).date().isoformat()
        digest = await call("generate_weekly_digest", week=week)
        top = [p["id"] for p in digest.structured_content["digest"]["top_pages"]]
        assert s.vacuum_page in top and s.wal_page in top
        assert digest.structured_content["summary"]["provider"] == "extractive"

        stats = await call("memory_stats")
        assert stats.structured_content["counts"]["pages"] == 3
        assert stats.structured_content["model"] == "disabled"

        preview = await call("forget", url="https://bread.example/sourdough")
        assert preview.structured_content["done"] is False
        assert "Preview only" in text(preview)
        assert (await call("get_page", url="https://bread.example/sourdough")).structured_content
        gone = await call("forget", url="https://bread.example/sourdough", confirm=True)
        assert gone.structured_content["done"] is True
        assert gone.structured_content["counts"]["pages"] == 1
        missing = await client.call_tool("get_page", {"url": "https://bread.example/sourdough"})
        assert missing.is_error
        assert (await call("search_memory", query="sourdough starter")).structured_content[
            "results"
        ] == []


async def test_every_mistake_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    seed(tmp_path)
    mistakes: list[tuple[str, dict[str, Any], str]] = [
        ("search_memory", {"query": "x", "limit": "many"}, "valid integer"),
        ("search_memory", {"query": "x", "limit": 26}, "must be from 1 to 25"),
        ("search_memory", {"query": "x", "since": "the other day"}, "is not a time"),
        ("search_memory", {"query": "x", "kinds": ["video"]}, "kinds"),
        ("search_memory", {"query": "x", "cursor": "garbage"}, "cursor"),
        ("search_memory", {"query": ""}, "must not be empty"),
        ("find_forgotten_content", {"description": "x" * 2_000}, "limit"),
        ("get_page", {}, "give exactly one of url or id"),
        ("get_page", {"url": "https://sqlite.org/wal.html", "id": 1}, "exactly one"),
        ("get_page", {"id": 99_999}, "page 99999 does not exist"),
        ("get_page", {"url": "ftp://example.com/file"}, "invalid url"),
        ("get_page", {"id": 1, "max_chars": 0}, "must be from 1"),
        ("get_timeline", {"cursor": "next"}, "cursor"),
        ("get_open_tabs", {"limit": 0}, "must be from 1"),
        ("get_bookmarks", {"limit": 1_000}, "limit"),
        ("save_note", {"content": "   "}, "must not be empty"),
        ("forget", {}, "exactly one of url, domain, or since/until"),
        ("forget", {"url": "https://a.example/", "domain": "a.example"}, "exactly one"),
        ("generate_weekly_digest", {"week": "someday"}, "is not a week"),
        ("get_research_sessions", {"limit": 500}, "limit"),
        ("memory_get", {"key": "nothing/here"}, "no fact for key"),
        ("no_such_tool", {}, "Unknown tool"),
    ]
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        for name, arguments, expected in mistakes:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments, text(result))
            assert expected in text(result), (name, text(result))
        still = await client.call_tool("search_memory", {"query": "checkpoints"})
        assert not still.is_error and still.structured_content["results"]


async def test_two_servers_on_one_data_directory_see_each_others_writes(tmp_path: Path) -> None:
    seed(tmp_path)
    cursor_params = stdio_params(tmp_path, MCP_CLIENT_ID="cursor")
    claude = Implementation(name="claude-ai", version="1")
    async with (
        Client(cursor_params, mode="legacy") as a,
        Client(stdio_params(tmp_path), mode="legacy", client_info=claude) as b,
    ):
        assert not (
            await a.call_tool("memory_set", {"key": "shared/plan", "value": "ship"})
        ).is_error
        got = await b.call_tool("memory_get", {"key": "shared/plan"})
        assert text(got).startswith("shared/plan = ship  (source: cursor,")
        note = await b.call_tool("save_note", {"content": "Quokkas are marsupials"})
        assert note.structured_content["note"]["id"]

        deadline = time.monotonic() + 30
        while True:  # a's index catches up with b's write (b indexes it in the background)
            hits = await a.call_tool("search_memory", {"query": "quokkas", "kinds": ["note"]})
            if hits.structured_content["results"]:
                break
            assert time.monotonic() < deadline, "server a never saw server b's note"
            await anyio.sleep(0.1)
        listed = await b.call_tool("memory_list", {"prefix": "shared/"})
        assert text(listed) == "shared/plan = ship  (source: cursor)"
        searched = await b.call_tool("memory_search", {"query": "ship"})
        assert text(searched).startswith("shared/plan = ship  (source: cursor, score: ")
        history = await a.call_tool("memory_history", {"key": "shared/plan"})
        assert " cursor set: version 1, created" in text(history)
        await b.call_tool("memory_set", {"key": "shared/plan", "value": "ship friday"})
        assert "(source: mcp:claude-ai," in text(
            await a.call_tool("memory_get", {"key": "shared/plan"})
        )


async def test_summaries_use_the_clients_model_when_it_offers_sampling(tmp_path: Path) -> None:
    seed(tmp_path)
    prompts: list[str] = []

    async def sample(context: Any, params: Any) -> CreateMessageResult:
        prompts.append(params.messages[0].content.text)
        return CreateMessageResult(
            role="assistant",
            model="client-model",
            content=TextContent(type="text", text="WAL appends changes to a log [1]."),
        )

    async with Client(stdio_params(tmp_path), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("summarize_research_topic", {"topic": "write-ahead log"})
    data = result.structured_content
    assert data["provider"] == "sampling"
    assert data["summary"].startswith("WAL appends changes to a log [1].")
    assert "[1] Write-Ahead Logging — https://sqlite.org/wal.html" in data["summary"]
    (prompt,) = prompts
    assert '<source n="1" kind="page" origin="web" url="https://sqlite.org/wal.html"' in prompt

    # A 2026-07-28 connection cannot carry server requests: the chain moves on.
    async with Client(stdio_params(tmp_path), sampling_callback=sample) as modern:
        again = await modern.call_tool("summarize_research_topic", {"topic": "write-ahead log"})
    assert again.structured_content["provider"] == "extractive"
    assert len(prompts) == 1


async def test_resources_and_prompts_carry_labelled_memory(tmp_path: Path) -> None:
    s = seed(tmp_path)
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        listed = await client.list_resources()
        assert {str(r.uri) for r in listed.resources} == {
            "backtrail://pages/recent",
            "backtrail://tabs",
        }
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "backtrail://page/{page_id}"
        ]
        recent = await client.read_resource("backtrail://pages/recent")
        assert f"backtrail://page/{s.wal_page}" in recent.contents[0].text
        page = await client.read_resource(f"backtrail://page/{s.wal_page}")
        assert WAL_TEXT in page.contents[0].text
        assert (
            '<web_content source="https://sqlite.org/wal.html" kind="page text"'
            in page.contents[0].text
        )
        with pytest.raises(Exception, match="no page with id 424242"):
            await client.read_resource("backtrail://page/424242")

        names = {p.name for p in (await client.list_prompts()).prompts}
        assert names == {"weekly_review", "find_that_page", "tidy_my_tabs"}
        find = await client.get_prompt("find_that_page", {"description": "bread with wild yeast"})
        body = find.messages[0].content.text
        assert "bread with wild yeast" in body and "https://bread.example/sourdough" in body
        review = await client.get_prompt("weekly_review", {})
        assert "research sessions" in review.messages[0].content.text
        tidy = await client.get_prompt("tidy_my_tabs", {})
        assert "duplicate of tab 1" in tidy.messages[0].content.text


async def test_the_call_log_records_every_call_and_no_secrets(tmp_path: Path) -> None:
    seed(tmp_path)
    log = tmp_path / "calls.jsonl"
    params = stdio_params(tmp_path, "--log-calls", str(log), MCP_CLIENT_ID="cursor")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("search_memory", {"query": "checkpoints"})
        await client.call_tool("get_page", {"id": 99_999})
        await client.call_tool("memory_set", {"key": "k", "value": "v" * 1_000})
    entries = read_json_lines(log)
    assert [(e["tool"], e["ok"], e["client"]) for e in entries] == [
        ("search_memory", True, "cursor"),
        ("get_page", False, "cursor"),
        ("memory_set", True, "cursor"),
    ]
    assert entries[1]["outcome"] == "page_not_found: page 99999 does not exist"
    assert entries[2]["arguments"]["value"].endswith("…[1000 chars]")
    assert all(e["ms"] >= 0 for e in entries)


def _spawn_to_initialized(home: Path, **env: str) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(
        [BACKTRAIL, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(home, **env),
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        elapsed = time.perf_counter() - started
        assert answer["result"]["serverInfo"]["name"] == "backtrail"
        return elapsed
    finally:
        process.kill()
        process.wait(10)


def test_the_server_answers_initialize_before_loading_anything_heavy(tmp_path: Path) -> None:
    """Relative, because this machine is shared: the early answer must not wait for the
    SDK and the memory (absolute times: tests/mcp_timing.py)."""
    fast = min(_spawn_to_initialized(tmp_path) for _ in range(3))
    slow = _spawn_to_initialized(tmp_path, BACKTRAIL_MCP_FAST_START="0")
    assert fast < slow / 2


async def test_semantic_search_with_the_model_loaded_at_start(tmp_path: Path) -> None:
    """The one test with the embedding model: loaded at start (--preload-model), it finds
    a page by meaning with none of its words, and facts too."""
    seed(tmp_path)
    params = stdio_params(tmp_path, "--preload-model", MCP_EMBEDDINGS="on")
    async with Client(params, mode="legacy") as client:
        await client.call_tool(
            "memory_set", {"key": "user/theme", "value": "prefers dark mode interfaces"}
        )
        await client.call_tool("memory_set", {"key": "pet/name", "value": "Fluffy is a tabby cat"})
        deadline = time.monotonic() + 180
        while True:  # the server embeds the seeded passages in the background
            stats = await client.call_tool("memory_stats", {})
            if stats.structured_content["vectors_caught_up"]:
                break
            assert time.monotonic() < deadline, "the passages were never embedded"
            await anyio.sleep(0.2)
        found = await client.call_tool("search_memory", {"query": "fermented dough leavening"})
        assert found.structured_content["mode"] == "hybrid"
        urls = [r["url"] for r in found.structured_content["results"]]
        assert urls and urls[0] == "https://bread.example/sourdough"
        facts = await client.call_tool(
            "memory_search", {"query": "appearance preference for screens", "top_k": 2}
        )
        assert text(facts).index("user/theme") < text(facts).index("pet/name")
        stats = await client.call_tool("memory_stats", {})
        assert stats.structured_content["model"] == "ready"


def test_claude_config_prints_and_merges_the_entry_keeping_the_rest(tmp_path: Path) -> None:
    from backtrail.mcp_server.claude_config import doctor_checks

    env = server_env(tmp_path / "home")
    printed = subprocess.run(
        [BACKTRAIL, "claude-config"], env=env, capture_output=True, text=True, timeout=60
    )
    entry = json.loads(printed.stdout)["mcpServers"]["backtrail"]
    assert entry == {
        "command": BACKTRAIL,
        "args": ["mcp"],
        "env": {"BACKTRAIL_HOME": str(tmp_path / "home"), "MCP_CLIENT_ID": "claude-desktop"},
    }
    target = tmp_path / "claude_desktop_config.json"
    target.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}))
    written = subprocess.run(
        [BACKTRAIL, "claude-config", "--write", "--config-path", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert written.returncode == 0 and "added mcpServers.backtrail" in written.stdout
    merged = json.loads(target.read_text())
    assert merged["theme"] == "dark" and merged["mcpServers"]["other"] == {"command": "x"}
    assert merged["mcpServers"]["backtrail"] == entry
    assert json.loads((tmp_path / "claude_desktop_config.json.bak").read_text())["theme"] == "dark"
    checks = doctor_checks(target, data_dir=tmp_path / "home")
    assert [(c["check"], c["ok"]) for c in checks] == [
        ("Claude Desktop configuration", True),
        ("Backtrail in Claude Desktop", True),
        ("Claude Desktop can start backtrail", True),
        ("Claude Desktop uses this data directory", True),
    ]
    elsewhere = doctor_checks(target, data_dir=tmp_path / "other")
    assert elsewhere[-1]["ok"] is False and "claude-config --write" in elsewhere[-1]["fix"]

    target.write_text("{broken")
    refused = subprocess.run(
        [BACKTRAIL, "claude-config", "--write", "--config-path", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and "is not valid JSON" in refused.stderr
    assert target.read_text() == "{broken"
    assert doctor_checks(target)[0]["ok"] is False
