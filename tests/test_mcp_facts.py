"""Shared facts, drop-in compatible with mcp-memory-bridge: its tools, parameters,
semantics and result texts (tool errors read "Error executing tool <name>: ..." as the
SDK words them there too), and where Backtrail goes beyond it. The protocol is real
(the official client, in-process transport); the process boundary (locks, two
processes, raw clients) is covered by test_mcp_bridge, test_mcp_stdio and test_mcp_http."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import Implementation

from backtrail.mcp_server.server import MemoryHolder, build_server
from backtrail.mcp_server.settings import McpSettings, config_overrides
from backtrail.service import Memory
from mcp_support import lean_config, text

# Each test on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = [pytest.mark.anyio, pytest.mark.backends("sqlite", "postgresql")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def holder(tmp_path: Path, ledger_target: Path | str) -> Iterator[MemoryHolder]:
    backend = {"ledger_url": ledger_target} if isinstance(ledger_target, str) else {}
    config = lean_config(tmp_path, **backend)
    opened = MemoryHolder(lambda: Memory(config, client="mcp"))
    yield opened
    opened.close()


@asynccontextmanager
async def connect(
    holder: MemoryHolder, name: str = "tester", **settings: Any
) -> AsyncIterator[Any]:
    server = build_server(holder.get, holder=holder, settings=McpSettings(**settings))
    info = Implementation(name=name, version="1")
    async with Client(server, mode="legacy", client_info=info) as client:
        yield client


async def call(client: Any, name: str, **arguments: Any) -> Any:
    return await client.call_tool(name, arguments)


async def test_set_then_get_answers_key_equals_value_with_its_source(holder: MemoryHolder) -> None:
    async with connect(holder) as client:
        done = await call(client, "memory_set", key="user/theme", value="dark", client_id="test")
        assert text(done) == "set 'user/theme' (from test, version 1)"
        got = await call(client, "memory_get", key="user/theme")
        assert text(got).startswith("user/theme = dark  (source: test, updated: ")
        assert got.structured_content["fact"]["version"] == 1
        implicit = await call(client, "memory_set", key="user/font", value="mono")
        assert text(implicit) == "set 'user/font' (from mcp:tester, version 1)"


async def test_compare_and_swap_by_value_names_both_values_and_writes_nothing(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        await call(client, "memory_set", key="k", value="real", client_id="a")
        ok = await call(client, "memory_set", key="k", value="v2", expected_value="real")
        assert not ok.is_error
        refused = await call(
            client,
            "memory_set",
            key="k",
            value="hijack",
            client_id="b",
            expected_value="stale-guess",
        )
        assert refused.is_error
        assert text(refused) == (
            "Error executing tool memory_set: CAS failed for 'k': expected value "
            "'stale-guess', actual value 'v2'; not written"
        )
        assert "k = v2  (source: mcp:tester" in text(await call(client, "memory_get", key="k"))
        absent = await call(client, "memory_set", key="new", value="x", expected_value="old")
        assert text(absent).endswith(
            "CAS failed for 'new': expected value 'old', the key does not exist; not written"
        )


async def test_compare_and_swap_by_version_refuses_an_aba_change_that_value_cas_misses(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        first = await call(client, "memory_set", key="flag", value="A")
        version = first.structured_content["fact"]["version"]
        await call(client, "memory_set", key="flag", value="B")
        await call(client, "memory_set", key="flag", value="A")  # back to A: A-B-A
        by_version = await call(
            client, "memory_set", key="flag", value="C", expected_version=version
        )
        assert by_version.is_error
        assert text(by_version).endswith(
            "CAS failed for 'flag': expected version 1, actual version 3; not written"
        )
        by_value = await call(client, "memory_set", key="flag", value="C", expected_value="A")
        assert not by_value.is_error  # a value cannot tell A from A-after-B


async def test_create_only_refuses_an_existing_key_and_excludes_compare_and_swap(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        created = await call(client, "memory_set", key="once", value="v1", require_absent=True)
        assert not created.is_error
        again = await call(client, "memory_set", key="once", value="v2", require_absent=True)
        assert again.is_error
        assert text(again).endswith("key 'once' already exists (version 1); not overwritten")
        both = await call(
            client, "memory_set", key="once", value="v", expected_value="v1", require_absent=True
        )
        assert both.is_error and "mutually exclusive" in text(both)
        assert "once = v1" in text(await call(client, "memory_get", key="once"))


async def test_keys_and_values_are_size_limited_and_refusals_store_nothing(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        long_value = await call(client, "memory_set", key="ok", value="x" * 16_385)
        assert long_value.is_error and "16384" in text(long_value)
        long_key = await call(client, "memory_set", key="k" * 257, value="v")
        assert long_key.is_error and "256" in text(long_key)
        fits = await call(client, "memory_set", key="k" * 256, value="x" * 16_384)
        assert not fits.is_error
        listed = await call(client, "memory_list")
        assert [f["key"] for f in listed.structured_content["facts"]] == ["k" * 256]


async def test_get_of_a_missing_key_is_a_tool_error(holder: MemoryHolder) -> None:
    async with connect(holder) as client:
        missing = await call(client, "memory_get", key="nope")
        assert missing.is_error
        assert text(missing) == "Error executing tool memory_get: no fact for key 'nope'"


async def test_prefix_listing_is_literal_and_case_sensitive_unless_asked(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        for key in ("50%_off", "50xoff", "50%foo", "Users/Ann", "users/bob", "other"):
            await call(client, "memory_set", key=key, value="v")
        literal = await call(client, "memory_list", prefix="50%_")
        assert [f["key"] for f in literal.structured_content["facts"]] == ["50%_off"]
        assert text(literal) == "50%_off = v  (source: mcp:tester)"
        exact = await call(client, "memory_list", prefix="users/")
        assert [f["key"] for f in exact.structured_content["facts"]] == ["users/bob"]
        folded = await call(client, "memory_list", prefix="users/", case_insensitive=True)
        assert [f["key"] for f in folded.structured_content["facts"]] == ["Users/Ann", "users/bob"]
        none = await call(client, "memory_list", prefix="zzz")
        assert text(none) == "(no facts matching prefix 'zzz')"
        page = await call(client, "memory_list", limit=4)
        rest = await call(
            client, "memory_list", limit=4, cursor=page.structured_content["next_cursor"]
        )
        keys = [
            f["key"] for f in page.structured_content["facts"] + rest.structured_content["facts"]
        ]
        assert len(keys) == 6 and "next_cursor" not in rest.structured_content


async def test_delete_removes_a_key_and_a_missing_key_is_not_an_error(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        await call(client, "memory_set", key="x", value="1")
        deleted = await call(client, "memory_delete", key="x", client_id="cleaner")
        assert text(deleted) == "deleted 'x' (from cleaner)"
        assert (await call(client, "memory_get", key="x")).is_error
        nothing = await call(client, "memory_delete", key="x")
        assert not nothing.is_error
        assert text(nothing) == "nothing to delete for 'x' (from mcp:tester)"
        await call(client, "memory_set", key="y", value="1")
        stale = await call(client, "memory_delete", key="y", expected_version=7)
        assert stale.is_error and "expected version 7, actual version 1" in text(stale)


async def test_search_without_the_embedding_model_is_a_tool_error_saying_so(
    holder: MemoryHolder,
) -> None:
    async with connect(holder) as client:
        await call(client, "memory_set", key="pet/name", value="Fluffy is a tabby cat")
        refused = await call(client, "memory_search", query="tabby cat", top_k=3)
        assert refused.is_error
        assert "semantic search is disabled (MCP_EMBEDDINGS=off)" in text(refused)
        zero = await call(client, "memory_search", query="cat", top_k=0)
        assert zero.is_error and "greater than or equal to 1" in text(zero)


async def test_history_lists_values_refusals_and_deletes_in_order_and_reads_when_asked(
    holder: MemoryHolder,
) -> None:
    async with connect(holder, name="cursor") as cursor, connect(holder, name="claude") as claude:
        await call(cursor, "memory_set", key="h/k", value="first")
        await call(claude, "memory_set", key="h/k", value="second")
        refused = await call(claude, "memory_set", key="h/k", value="sneaky", expected_value="x")
        assert refused.is_error
        await call(claude, "memory_get", key="h/k")
        await call(cursor, "memory_delete", key="h/k")
        history = text(await call(cursor, "memory_history", key="h/k"))
        lines = [line.split(" ", 1)[1] for line in history.splitlines()]
        assert lines == [
            "mcp:cursor set: first",
            "mcp:claude set: second",
            "mcp:claude cas_fail: sneaky",
            "mcp:cursor delete: None",
        ]
        with_reads = text(await call(cursor, "memory_history", key="h/k", include_reads=True))
        lines = [line.split(" ", 1)[1] for line in with_reads.splitlines()]
        assert lines[3] == "mcp:claude get: None"  # reads are logged by default, by reader
        got = await call(claude, "memory_set", key="h/k", value="again")
        events = await call(claude, "memory_get", key="h/k", include_events=True)
        assert got.structured_content["fact"]["version"] == 4
        head, marker, *rest = text(events).splitlines()
        assert marker == "events:"
        assert [line.strip().split(" ", 2)[1:] for line in rest] == [
            ["mcp:cursor", "set: first"], ["mcp:claude", "set: second"],
            ["mcp:cursor", "delete: None"], ["mcp:claude", "set: again"],
        ]  # fmt: skip
        assert all(line.startswith("  ") for line in rest)
        empty = await call(cursor, "memory_history", key="never")
        assert text(empty) == "(no history for key 'never')"


async def test_with_read_logging_off_a_get_leaves_no_trace(holder: MemoryHolder) -> None:
    async with connect(holder, log_reads=False) as client:
        await call(client, "memory_set", key="quiet", value="v")
        await call(client, "memory_get", key="quiet")
        history = text(await call(client, "memory_history", key="quiet", include_reads=True))
        assert [line.split(" ", 2)[2] for line in history.splitlines()] == ["set: v"]


async def test_mcp_memory_bridge_environment_variables_are_understood() -> None:
    assert config_overrides(
        {"MCP_EMBEDDINGS": "off", "MCP_SQLITE_BUSY_TIMEOUT": "0", "MCP_LOG_READS": "on"}
    ) == {"embeddings": False, "busy_timeout_ms": 0, "log_reads": True}
    settings = McpSettings.from_env(
        {
            "MCP_CLIENT_ID": "desk",
            "MCP_TRANSPORT": "http",
            "MCP_AUTH_TOKEN": "t" * 20,
            "MCP_HTTP_HOST": "0.0.0.0",
            "MCP_HTTP_PORT": "9001",
            "MCP_ALLOWED_HOSTS": "a.lan, b.lan:9001",
            "MCP_PRELOAD_MODEL": "1",
            "MCP_DEBUG_LOG": "/tmp/calls.jsonl",
        }
    )
    assert (settings.client_id, settings.transport, settings.host, settings.port) == (
        "desk",
        "http",
        "0.0.0.0",
        9001,
    )
    assert settings.auth_token == "t" * 20
    assert settings.allowed_hosts == ("a.lan", "b.lan:9001")
    assert settings.preload_model and str(settings.call_log) == "/tmp/calls.jsonl"
    assert settings.log_reads is True  # reads are logged unless MCP_LOG_READS=off
    assert McpSettings.from_env({"MCP_LOG_READS": "off"}).log_reads is False
    with pytest.raises(ValueError, match="MCP_EMBEDDINGS must be on or off"):
        config_overrides({"MCP_EMBEDDINGS": "maybe"})
