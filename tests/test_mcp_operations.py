"""What an operator of ``backtrail mcp`` gets, as mcp-memory-bridge documents it: the
opt-in ``lock_hold`` demo (fail fast versus queue, by busy timeout), the embedding
model loaded at start, lean mode, and the systemd unit and deployment guide."""

from __future__ import annotations

import shlex
import shutil
import sqlite3
import subprocess
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
from mcp import Client

from backtrail.store import LEDGER_FILENAME
from mcp_support import BACKTRAIL, lean_config, seed, stdio_params, text

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
DEMO = {"MCP_ENABLE_DEMO_TOOLS": "1"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_locked(home: Path) -> bool:
    """Whether another connection holds the ledger's write lock right now."""
    probe = sqlite3.connect(home / LEDGER_FILENAME, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


async def test_lock_hold_exists_only_when_demo_tools_are_enabled(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path), mode="legacy") as plain:
        assert "lock_hold" not in {t.name for t in (await plain.list_tools()).tools}
    async with Client(stdio_params(tmp_path, BACKTRAIL_MCP_DEMO_TOOLS="1"), mode="legacy") as on:
        tools = {t.name: t for t in (await on.list_tools()).tools}
        assert tools["lock_hold"].input_schema["properties"]["seconds"]["default"] == 2.0
        assert len(tools) == 19
        bad = await on.call_tool("lock_hold", {"seconds": 0})
        assert bad.is_error and "must be more than 0 and at most 60" in text(bad)


async def test_a_held_write_lock_makes_other_clients_fail_fast_or_queue(tmp_path: Path) -> None:
    """mcp-memory-bridge's lock demo: client A holds the write lock; B (busy timeout 0)
    is refused at once, C (busy timeout 20 s) waits for the lock and then writes."""
    seed(tmp_path)
    a_params = stdio_params(tmp_path, MCP_CLIENT_ID="client-A", **DEMO)
    b_params = stdio_params(tmp_path, MCP_CLIENT_ID="client-B", MCP_SQLITE_BUSY_TIMEOUT="0")
    c_params = stdio_params(tmp_path, MCP_CLIENT_ID="client-C", MCP_SQLITE_BUSY_TIMEOUT="20000")
    async with AsyncExitStack() as stack:
        a, c, b = [await stack.enter_async_context(Client(params, mode="legacy"))
                   for params in (a_params, c_params, b_params)]  # fmt: skip
        for client in (a, c, b):  # each has opened the memory (B, with no patience, last)
            assert not (await client.call_tool("get_status", {})).is_error
        held: list[object] = []

        async def hold() -> None:
            held.append(await a.call_tool("lock_hold", {"seconds": 3}))

        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            with anyio.fail_after(60):  # held for 0.3 s: A's hold, not a brief write
                since = None
                while since is None or time.monotonic() - since < 0.3:
                    since = (since or time.monotonic()) if write_locked(tmp_path) else None
                    await anyio.sleep(0.02)
            locked_at = started = time.monotonic()
            refused = await b.call_tool("memory_set", {"key": "contended", "value": "B"})
            refused_after = time.monotonic() - started
            assert refused.is_error and "the store is locked" in text(refused)
            assert "retry with backoff" in text(refused)
            assert refused_after < 1.5
            queued = await c.call_tool("memory_set", {"key": "contended", "value": "C"})
            assert not queued.is_error, text(queued)
            assert time.monotonic() - locked_at >= 2.0  # C got through only once A let go
        (result,) = held
        assert text(result) == "held the write lock for 3s (client 'client-A')"
        trail = await a.call_tool("memory_get", {"key": "contended", "include_events": True})
        assert text(trail).startswith("contended = C  (source: client-C,")
        assert "client-B" not in text(trail)  # the refused write left nothing
        events = subprocess.run(
            [BACKTRAIL, "--data-dir", str(tmp_path), "events", "--action", "demo.lock_hold",
             "--json"], capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert '"client": "client-A"' in events and '"seconds": 3' in events


async def test_lean_mode_serves_keyword_search_without_a_model(tmp_path: Path) -> None:
    seed(tmp_path)
    params = stdio_params(tmp_path, "--lean", MCP_EMBEDDINGS="on")
    async with Client(params, mode="legacy") as client:
        found = await client.call_tool("search_browsing", {"query": "checkpoints"})
        assert found.structured_content["mode"] == "bm25"
        stats = await client.call_tool("get_status", {})
        assert stats.structured_content["model"] == "disabled"


async def test_get_status_says_when_the_index_is_still_being_built_from_the_ledger(
    tmp_path: Path,
) -> None:
    """An index built again from the ledger (here: deleted) counts in
    ``index_text_behind`` only what changed after its build began, so ``text_caught_up``
    says whether the build is finished: false while nothing indexes (background indexing
    off), true once a server has built it."""
    seed(tmp_path)
    shutil.rmtree(lean_config(tmp_path).index_dir)
    idle = stdio_params(tmp_path, "--lean", BACKTRAIL_BACKGROUND_INDEXING="0")
    async with Client(idle, mode="legacy") as client:
        status = await client.call_tool("get_status", {})
        assert status.structured_content["text_caught_up"] is False
        assert "a rebuild of the index from the ledger is not finished" in text(status)
    async with Client(stdio_params(tmp_path, "--lean"), mode="legacy") as client:
        with anyio.fail_after(120):
            while True:
                status = await client.call_tool("get_status", {})
                if status.structured_content["text_caught_up"]:
                    break
                await anyio.sleep(0.1)
        assert status.structured_content["index_text_behind"] == 0
        assert "rebuild" not in text(status)
        found = await client.call_tool("search_browsing", {"query": "checkpoints"})
        assert found.structured_content["results"][0]["url"] == "https://sqlite.org/wal.html"


async def test_preload_model_loads_it_at_start_and_without_it_nothing_loads(
    tmp_path: Path,
) -> None:
    lazy = stdio_params(tmp_path / "lazy", MCP_EMBEDDINGS="on")
    async with Client(lazy, mode="legacy") as client:
        stats = await client.call_tool("get_status", {})
        assert stats.structured_content["model"] == "not loaded"
    eager = stdio_params(tmp_path / "eager", "--preload-model", MCP_EMBEDDINGS="on")
    async with Client(eager, mode="legacy") as client:
        with anyio.fail_after(180):  # no search is made: the server loads it by itself
            while True:
                stats = await client.call_tool("get_status", {})
                if stats.structured_content["model"] != "not loaded":
                    break
                await anyio.sleep(0.1)
        assert stats.structured_content["model"] == "ready"


# ------------------------------------------------------------------ deployment


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in (ROOT / "deploy" / "backtrail-mcp.service").read_text().splitlines():
        if line.strip() and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_the_systemd_unit_serves_http_on_loopback_with_options_that_exist() -> None:
    unit = unit_settings()
    (exec_start,) = unit["ExecStart"]
    command = shlex.split(exec_start)
    assert command[0].endswith("/bin/backtrail") and command[1:3] == ["mcp", "--http"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    help_text = subprocess.run(
        [BACKTRAIL, "mcp", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in (part for part in command if part.startswith("--")):
        assert flag in help_text, f"{flag} is not an option of backtrail mcp"
    assert unit["EnvironmentFile"] == ["/etc/backtrail/mcp.env"]
    assert unit["StateDirectory"] == ["backtrail"] and unit["User"] == ["backtrail"]
    assert unit["RestartPreventExitStatus"] == ["2"]  # no token: fail closed, stay down
    for hardening in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert unit[hardening] == ["true"]
    assert unit["ProtectSystem"] == ["strict"]


def test_the_environment_template_and_the_guide_cover_every_operator_setting() -> None:
    env = (ROOT / "deploy" / "mcp.env.example").read_text()
    guide = (ROOT / "docs" / "deploy.md").read_text()
    home = {line.split("=", 1)[0].lstrip("# ") for line in env.splitlines() if "=" in line}
    assert {"BACKTRAIL_HOME", "MCP_HTTP_HOST", "MCP_ALLOWED_HOSTS", "BACKTRAIL_MCP_TOKEN_FILE",
            "MCP_AUTH_TOKEN", "MCP_PRELOAD_MODEL", "MCP_EMBEDDINGS", "MCP_DEBUG_LOG",
            "MCP_SQLITE_BUSY_TIMEOUT"} <= home  # fmt: skip
    for topic in ("127.0.0.1", "MCP_ALLOWED_HOSTS", "Rotation", "MCP_PRELOAD_MODEL",
                  "MCP_EMBEDDINGS=off", "MCP_DEBUG_LOG", "MCP_ENABLE_DEMO_TOOLS",
                  "reverse proxy", "Tunnel"):  # fmt: skip
        assert topic in guide, topic
    assert 'BACKTRAIL_HOME=/var/lib/backtrail' in env


def test_action_and_demo_settings_come_from_the_environment() -> None:
    from backtrail.mcp_server.settings import McpSettings

    default = McpSettings.from_env({})
    assert (default.action_wait, default.action_claim_wait, default.action_ttl) == (15.0, 3.0, 120)
    assert default.demo_tools is False
    chosen = McpSettings.from_env({
        "BACKTRAIL_MCP_ACTION_WAIT": "5", "BACKTRAIL_MCP_ACTION_CLAIM_WAIT": "0.5",
        "BACKTRAIL_MCP_ACTION_TTL": "0", "MCP_ENABLE_DEMO_TOOLS": "1",
    })  # fmt: skip
    assert (chosen.action_wait, chosen.action_claim_wait, chosen.action_ttl) == (5.0, 0.5, 1)
    assert chosen.demo_tools is True
    with pytest.raises(ValueError, match="BACKTRAIL_MCP_ACTION_WAIT must be a number"):
        McpSettings.from_env({"BACKTRAIL_MCP_ACTION_WAIT": "soon"})
    with pytest.raises(ValueError, match="from 0 to 3600"):
        McpSettings.from_env({"BACKTRAIL_MCP_ACTION_TTL": "-1"})
