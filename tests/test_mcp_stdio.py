"""``backtrail mcp`` over stdio, driven by the official MCP client (a spawned server,
the real protocol): every browsing tool, its error paths, resources, prompts, sampling,
two servers on one data directory, and spawn-to-initialized with the plain SDK."""

from __future__ import annotations

import json
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


def test_a_ping_first_and_an_unknown_protocol_version_get_the_sdks_answers(tmp_path: Path) -> None:
    old = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "1999-01-01"}}
    lines, _ = _raw_session(tmp_path, [{"jsonrpc": "2.0", "id": 7, "method": "ping"}, old])
    assert [a.get("result") for a in _answers(lines, 7)] == [{}]
    (answer,) = _answers(lines, 0)
    assert answer["result"]["protocolVersion"] == "2025-11-25"  # the SDK's counter-offer


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
                ("search_browsing", {"query": "checkpoint"}),
                ("get_page", {"id": 99999}),
                ("no_such_tool", {}),
                ("get_status", {}),
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

        found = await call("search_browsing", query="checkpoints log")
        assert found.structured_content["results"][0]["url"] == "https://sqlite.org/wal.html"
        assert '<web_content source="https://sqlite.org/wal.html" kind="highlight"' in text(found)
        assert "explanation" not in found.structured_content["results"][0]
        explained = await call("search_browsing", query="checkpoints log", explain=True)
        assert "bm25" in json.dumps(explained.structured_content["results"][0]["explanation"])
        notes = await call("search_browsing", query="WAL", kinds=["note"])
        assert [r["kind"] for r in notes.structured_content["results"]] == ["note"]
        assert "<user_note" in text(notes) and "<web_content" not in text(notes)
        sites = await call("search_browsing", query="vacuum", domains=["postgresql.org"])
        assert {r["domain"] for r in sites.structured_content["results"]} == {"www.postgresql.org"}
        recent = await call("search_browsing", query="sourdough", since="12h", kinds=["page"])
        assert recent.structured_content["results"] == []
        older = await call("search_browsing", query="sourdough", since="2d", kinds=["page"])
        assert [r["id"] for r in older.structured_content["results"]] == [s.bread_page]
        first = await call("search_browsing", query="WAL", limit=1)
        cursor = first.structured_content["next_cursor"]
        second = await call("search_browsing", query="WAL", limit=1, cursor=cursor)
        assert second.structured_content["results"][0] != first.structured_content["results"][0]
        vague = await call("search_browsing", query="baking bread with yeast", vague=True)
        assert vague.structured_content["results"][0]["url"] == "https://bread.example/sourdough"
        similar = await call("search_browsing", similar_to=s.wal_page)
        assert s.wal_page not in [r["id"] for r in similar.structured_content["results"]]

        page = await call("get_page", url="https://sqlite.org/wal.html", max_chars=40)
        assert page.structured_content["next_offset"] == 40
        assert WAL_TEXT[:40] in text(page) and WAL_TEXT[40:60] not in text(page)
        assert "title: Write-Ahead Logging" in text(page)
        rest = await call("get_page", id=s.wal_page, offset=40, max_chars=10_000)
        assert WAL_TEXT[40:] in text(rest) and "next_offset" not in rest.structured_content
        active = await call("get_page", active_tab=True)
        assert active.structured_content["tab_id"] == 1 and WAL_TEXT in text(active)

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
        sessions = await call("get_timeline", sessions=True)
        (session,) = sessions.structured_content["sessions"]
        assert set(session["page_ids"]) == {s.wal_page, s.vacuum_page}

        tabs = await call("get_open_tabs")
        assert tabs.structured_content["total"] == 5
        assert 'kind="tab titles"' in text(tabs)
        cleanup = await call("get_open_tabs", advise=True)
        verdicts = {t["tab_id"]: t["advice"] for t in cleanup.structured_content["tabs"]}
        assert verdicts == {1: "keep", 2: "close", 3: "close", 4: "close", 5: "read_later"}
        assert cleanup.structured_content["counts"] == {"keep": 1, "read_later": 1, "close": 3}
        assert "duplicate of tab 1" in text(cleanup)

        research = await call("get_saved", kind="bookmark", folder="research")
        assert [b["id"] for b in research.structured_content["items"]] == [1]
        bread = await call("get_saved", kind="bookmark", query="sourdough")
        assert [b["url"] for b in bread.structured_content["items"]] == [
            "https://bread.example/sourdough"
        ]
        highlights = await call("get_saved", kind="highlight", query="checkpoints")
        assert [h["id"] for h in highlights.structured_content["items"]] == [s.highlight]
        assert "remember for the storage talk" in text(highlights)
        none = await call("get_saved", kind="highlight", url="https://bread.example/sourdough")
        assert none.structured_content["items"] == []

        saved = await call(
            "save_note",
            content="Try feeding the starter twice a day",
            url="https://bread.example/sourdough",
        )
        assert saved.structured_content["author"] == "mcp:claude-ai"
        again = await call("search_browsing", query="feeding starter twice", kinds=["note"])
        (hit,) = again.structured_content["results"]
        assert (hit["id"], hit["origin"], hit["author"]) == (
            saved.structured_content["id"], "assistant", "mcp:claude-ai"
        )
        assert '<assistant_note written_by="mcp:claude-ai"' in text(again)
        assert "<user_note" not in text(again)
        mine = await call("get_saved", kind="note")
        assert "<user_note" in text(mine)
        assert '<assistant_note written_by="mcp:claude-ai"' in text(mine)

        summary = await call("summarize_reading", topic="write-ahead logging checkpoints")
        assert summary.structured_content["provider"] == "extractive"
        assert "(https://sqlite.org/wal.html)" in text(summary)
        assert "Checkpoints copy the log back into the main database file." in text(summary)
        assert '<web_content source="summary of the sources below" kind="summary"' in text(summary)

        day = datetime.fromtimestamp(s.now - 3_000, timezone.utc).date()
        digest = await call("summarize_reading", week=day.isoformat())
        # The week runs Monday to Sunday (UTC): on a Monday the page read yesterday, at
        # now - 1 day - 2 hours, belongs to the week before.
        monday = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() - (
            day.weekday() * 86_400
        )
        read_at = (s.now - 3_600, s.now - 3_000, s.now - 86_400 - 7_200)
        assert digest.structured_content["pages_seen"] == sum(t >= monday for t in read_at)
        assert digest.structured_content["provider"] == "extractive"
        tabs_summary = await call("summarize_reading", open_tabs=True)
        assert tabs_summary.structured_content["open_tabs"] >= 1

        stats = await call("get_status")
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
        assert (await call("search_browsing", query="sourdough starter")).structured_content[
            "results"
        ] == []


async def test_every_mistake_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    seed(tmp_path)
    mistakes: list[tuple[str, dict[str, Any], str]] = [
        ("search_browsing", {"query": "x", "limit": "many"}, "valid integer"),
        ("search_browsing", {"query": "x", "limit": "10"}, "valid integer"),
        ("search_browsing", {"query": "x", "limit": True}, "valid integer"),
        ("search_browsing", {"query": "x", "limit": 26}, "less than or equal to 25"),
        ("search_browsing", {"query": "x", "since": "the other day"}, "is not a time"),
        ("search_browsing", {"query": "x", "kinds": ["video"]}, "kinds"),
        ("search_browsing", {"query": "x", "cursor": "garbage"}, "cursor"),
        ("search_browsing", {"query": ""}, "at least 1 character"),
        ("search_browsing", {"query": "x" * 2_000}, "at most 1000 characters"),
        ("search_browsing", {}, "give exactly one of query, similar_to"),
        ("search_browsing", {"query": "x", "vague": 1}, "valid boolean"),
        ("search_browsing", {"query": "x", "vague": True, "kinds": ["note"]}, "vague"),
        ("get_page", {}, "give exactly one of url, id, active_tab"),
        ("get_page", {"url": "https://sqlite.org/wal.html", "id": 1}, "exactly one"),
        ("get_page", {"id": 99_999}, "page 99999 does not exist"),
        ("get_page", {"url": "ftp://example.com/file"}, "invalid url"),
        ("get_page", {"id": 1, "max_chars": 0}, "greater than or equal to 1"),
        ("get_timeline", {"cursor": "next"}, "cursor"),
        ("get_timeline", {"sessions": True, "limit": 50}, "at most 20"),
        ("get_open_tabs", {"limit": 0}, "greater than or equal to 1"),
        ("get_saved", {"kind": "bookmark", "limit": 1_000}, "less than or equal to 200"),
        ("get_saved", {"kind": "video"}, "kind"),
        ("save_note", {"content": "   "}, "must not be empty"),
        ("forget", {}, "exactly one of url, domain, or since/until"),
        ("forget", {"url": "https://a.example/", "domain": "a.example"}, "exactly one"),
        ("forget", {"domain": "org"}, "is a public suffix"),
        ("forget", {"domain": "co.uk", "confirm": True}, "is a public suffix"),
        ("summarize_reading", {"week": "someday"}, "is not a week"),
        ("summarize_reading", {}, "exactly one of topic, week or open_tabs"),
        ("get_status", {"action_id": "a-424242"}, "action 424242 does not exist"),
        ("memory_get", {"key": "nothing/here"}, "no fact for key"),
        ("no_such_tool", {}, "Unknown tool"),
    ]
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        for name, arguments, expected in mistakes:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments, text(result))
            assert expected in text(result), (name, text(result))
        still = await client.call_tool("search_browsing", {"query": "checkpoints"})
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
        assert note.structured_content["id"]

        deadline = time.monotonic() + 30
        while True:  # a's index catches up with b's write (b indexes it in the background)
            hits = await a.call_tool("search_browsing", {"query": "quokkas", "kinds": ["note"]})
            if hits.structured_content["results"]:
                break
            assert time.monotonic() < deadline, "server a never saw server b's note"
            await anyio.sleep(0.1)
        listed = await b.call_tool("memory_list", {"prefix": "shared/"})
        assert text(listed) == "shared/plan = ship  (source: cursor)"
        got_b = await b.call_tool("memory_get", {"key": "shared/plan"})
        assert text(got_b).startswith("shared/plan = ship  (source: cursor,")
        history = await a.call_tool("memory_history", {"key": "shared/plan"})
        assert " cursor set: ship" in text(history)
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
        result = await client.call_tool("summarize_reading", {"topic": "write-ahead log"})
    data = result.structured_content
    assert data["provider"] == "sampling"
    assert "WAL appends changes to a log [1]." in text(result)
    assert "[1] Write-Ahead Logging — https://sqlite.org/wal.html" in text(result)
    (prompt,) = prompts
    assert '<source n="1" kind="page" origin="web" url="https://sqlite.org/wal.html"' in prompt

    # A 2026-07-28 connection cannot carry server requests: the chain moves on.
    async with Client(stdio_params(tmp_path), sampling_callback=sample) as modern:
        again = await modern.call_tool("summarize_reading", {"topic": "write-ahead log"})
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
        await client.call_tool("search_browsing", {"query": "checkpoints"})
        await client.call_tool("get_page", {"id": 99_999})
        await client.call_tool("memory_set", {"key": "k", "value": "v" * 1_000})
    entries = read_json_lines(log)
    assert [(e["tool"], e["ok"], e["client"]) for e in entries] == [
        ("search_browsing", True, "cursor"),
        ("get_page", False, "cursor"),
        ("memory_set", True, "cursor"),
    ]
    assert entries[1]["outcome"] == "page_not_found: page 99999 does not exist"
    assert entries[2]["arguments"]["value"].endswith("…[1000 chars]")
    assert all(e["ms"] >= 0 for e in entries)


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
            stats = await client.call_tool("get_status", {})
            if stats.structured_content["vectors_caught_up"]:
                break
            assert time.monotonic() < deadline, "the passages were never embedded"
            await anyio.sleep(0.2)
        found = await client.call_tool("search_browsing", {"query": "fermented dough leavening"})
        assert found.structured_content["mode"] == "hybrid"
        urls = [r["url"] for r in found.structured_content["results"]]
        assert urls and urls[0] == "https://bread.example/sourdough"
        nothing = await client.call_tool("search_browsing",
                                         {"query": "running shoes for flat feet"})  # fmt: skip
        assert not nothing.is_error and nothing.structured_content["results"] == []
        assert nothing.structured_content["no_match"] is True
        assert "Nothing in memory matches this" in text(nothing)
        facts = await client.call_tool(
            "memory_search", {"query": "appearance preference for screens", "top_k": 2}
        )
        assert text(facts).index("user/theme") < text(facts).index("pet/name")
        assert len(facts.structured_content["results"]) == 2  # top_k, nearest first
        one = await client.call_tool("memory_search", {"query": "cats", "top_k": 1})
        assert [h["fact"]["key"] for h in one.structured_content["results"]] == ["pet/name"]
        stats = await client.call_tool("get_status", {})
        assert stats.structured_content["model"] == "ready"


def test_claude_config_prints_and_merges_the_entry_keeping_the_rest(tmp_path: Path) -> None:
    from backtrail.cli.client_config import doctor_checks

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
