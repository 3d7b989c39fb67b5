"""Tokens kept in the ledger (issue 40): made, listed and revoked through the service and
``backtrail token``, on both backends; checked by ``backtrail mcp --http`` on every
request, so a token added or revoked counts at once; a ledger token's client is who the
audit log says wrote; ``read`` tokens cannot write and ``device`` tokens cannot call MCP
tools at all. Devices' deliveries (what ``POST /host`` already applied) are kept beside
them; their endpoint is tested in test_host_endpoint.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from backtrail.errors import InvalidInput, TokenNotFound
from backtrail.service import Memory, TokenVerifier, token_digest
from backtrail.store import Ledger
from conftest import FakeClock
from helpers import make_config
from mcp_support import INITIALIZE, http_server, text

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def home_of(tmp_path: Path, ledger_target: Path | str) -> Path:
    """The data directory whose ledger ``ledger_target`` is (on SQLite: its directory)."""
    return tmp_path / "home" if isinstance(ledger_target, str) else ledger_target.parent


def backend_of(ledger_target: Path | str) -> dict[str, Any]:
    return {"ledger_url": ledger_target} if isinstance(ledger_target, str) else {}


def env_of(ledger_target: Path | str) -> dict[str, str]:
    return {"BACKTRAIL_LEDGER_URL": ledger_target} if isinstance(ledger_target, str) else {}


@pytest.fixture
def memory(tmp_path: Path, clock: FakeClock, ledger_target: Path | str) -> Iterator[Memory]:
    config = make_config(home_of(tmp_path, ledger_target), **backend_of(ledger_target))
    with Memory(config, client="operator", clock=clock) as opened:
        yield opened


# ------------------------------------------------------------------ the service


@pytest.mark.backends("sqlite", "postgresql")
def test_a_token_is_shown_once_kept_as_its_digest_and_revoked_by_client_or_digest(
    memory: Memory, clock: FakeClock, ledger_target: Path | str
) -> None:
    laptop = memory.add_token("laptop", scope="device")
    clock.advance(1)
    agent = memory.add_token("agent-7", scope="write")
    assert len(laptop.token) >= 40 and laptop.token != agent.token
    assert laptop.record.digest == token_digest(laptop.token)
    assert (laptop.record.client_id, laptop.record.scope, laptop.record.active) == (
        "laptop", "device", True,
    )  # fmt: skip
    assert [(t.client_id, t.scope) for t in memory.list_tokens()] == [
        ("laptop", "device"), ("agent-7", "write"),
    ]  # fmt: skip
    verifier = TokenVerifier(memory.config)
    try:
        assert verifier.verify(laptop.token) == laptop.record
        assert verifier.verify(agent.token).client_id == "agent-7"  # type: ignore[union-attr]
        assert verifier.verify("not-a-token-at-all-0123456789") is None
        assert verifier.verify("") is None and verifier.verify("x" * 10_000) is None
        assert verifier.active_count() == 2
        clock.advance(60)
        revoked = memory.revoke_tokens("laptop")  # by client
        assert [(t.client_id, t.revoked_at) for t in revoked] == [("laptop", clock.now)]
        assert verifier.verify(laptop.token) is None  # at once: nothing is cached
        assert memory.revoke_tokens(agent.record.digest[:10])[0].client_id == "agent-7"
        assert verifier.verify(agent.token) is None and verifier.active_count() == 0
    finally:
        verifier.close()
    with pytest.raises(TokenNotFound, match="'laptop' does not exist"):
        memory.revoke_tokens("laptop")  # nothing active left to revoke
    assert [t.active for t in memory.list_tokens()] == [False, False]
    assert memory.list_tokens(include_revoked=False) == []
    events = [(e.client, e.action, e.target) for e in memory.events(target_type="token")]
    assert events == [
        ("operator", "token.add", "laptop"), ("operator", "token.add", "agent-7"),
        ("operator", "token.revoke", "laptop"), ("operator", "token.revoke", "agent-7"),
    ]  # fmt: skip
    with Ledger(ledger_target) as ledger:  # the secret itself is nowhere in the ledger
        dumped = json.dumps([e.details for e in ledger.list_events()])
        dumped += json.dumps([vars(t) for t in ledger.list_tokens()])
    assert laptop.token not in dumped and agent.token not in dumped


@pytest.mark.backends("sqlite", "postgresql")
def test_bad_token_requests_are_refused_and_change_nothing(
    memory: Memory, ledger_target: Path | str
) -> None:
    for client, scope in (("", "write"), ("has space", "write"), ("x" * 65, "read"),
                          ("ok", "admin"), ("ok", None)):  # fmt: skip
        with pytest.raises(InvalidInput):
            memory.add_token(client, scope=scope)  # type: ignore[arg-type]
    with Ledger(ledger_target) as ledger:
        digest = "ab" * 32
        ledger.add_token(digest, "one", "read")
        with pytest.raises(InvalidInput, match="already known"):
            ledger.add_token(digest, "two", "write")
        ledger.add_token("ab" * 31 + "cd", "three", "read")
        with pytest.raises(InvalidInput, match="matches 2 tokens"):
            ledger.revoke_tokens("abababab")  # a prefix must name one token
        for bad in ("ABAB" * 16, "ab" * 31, "zz" * 32):
            with pytest.raises(InvalidInput, match="hexadecimal"):
                ledger.token(bad)
        with pytest.raises(InvalidInput):
            ledger.revoke_tokens("")
        assert ledger.revoke_tokens("abab") == []  # too short for a prefix, and no client
        assert [t.client_id for t in ledger.list_tokens(include_revoked=False)] == [
            "one", "three",
        ]  # fmt: skip


@pytest.mark.backends("sqlite", "postgresql")
def test_a_delivery_is_stored_once_per_client_and_message_and_pruned_when_old(
    memory: Memory, clock: FakeClock, ledger_target: Path | str
) -> None:
    answer = {"id": "m-1", "ok": True, "result": {"page_id": 4}}
    with Ledger(ledger_target, clock=clock) as ledger:
        assert ledger.delivery("laptop", "m-1") is None
        assert ledger.record_delivery("laptop", "m-1", "capture_page", answer) is True
        assert ledger.record_delivery("laptop", "m-1", "capture_page", {"other": 1}) is False
        assert ledger.delivery("laptop", "m-1") == answer  # the first answer stays
        assert ledger.delivery("desktop", "m-1") is None  # ids are per client
        with pytest.raises(InvalidInput):
            ledger.delivery("laptop", "bad id!")
        with ledger.transaction():  # inside the write, the write's own delivery is seen
            ledger.record_delivery("laptop", "m-2", "visit", {"id": "m-2", "ok": True})
            assert ledger.delivery("laptop", "m-2") == {"id": "m-2", "ok": True}
        try:
            with ledger.transaction():
                ledger.record_delivery("laptop", "m-3", "visit", {"id": "m-3", "ok": True})
                raise RuntimeError("the write failed")
        except RuntimeError:
            pass
        assert ledger.delivery("laptop", "m-3") is None  # rolled back with the write
    clock.advance(40 * 86_400)
    with Ledger(ledger_target, clock=clock) as ledger:
        ledger.record_delivery("laptop", "m-4", "visit", {"id": "m-4", "ok": True})
    assert memory.prune_deliveries() == 2  # older than 30 days
    with Ledger(ledger_target) as ledger:
        assert ledger.delivery("laptop", "m-1") is None
        assert ledger.delivery("laptop", "m-4") is not None


# ---------------------------------------------------------------------- the CLI


def run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    clean.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0", "COLUMNS": "200"})
    clean.update(env)
    return subprocess.run([BACKTRAIL, *args], env=clean, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def test_backtrail_token_adds_lists_and_revokes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = tmp_path / "laptop.token"
    made = run(home, "token", "add", "laptop", "--scope", "device", "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert made.stdout == "" and "written to" in made.stderr  # the secret only in the file
    token = out.read_text().strip()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and len(token) >= 40
    again = run(home, "token", "add", "laptop", "--scope", "device", "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr
    assert out.read_text().strip() == token  # never overwritten
    printed = run(home, "token", "add", "agent", "--scope", "write")
    assert printed.returncode == 0 and len(printed.stdout.strip()) >= 40
    assert "not shown again" in printed.stderr
    bad = run(home, "token", "add", "agent", "--scope", "admin")
    assert bad.returncode == 2 and "admin" in bad.stderr
    listed = json.loads(run(home, "token", "list", "--json").stdout)
    listed.sort(key=lambda t: t["client_id"] != "laptop")
    assert [(t["client_id"], t["scope"], t["revoked_at"]) for t in listed] == [
        ("laptop", "device", None), ("agent", "write", None),
    ]  # fmt: skip
    assert token not in json.dumps(listed)
    revoked = run(home, "token", "revoke", listed[0]["digest"][:12])
    assert revoked.returncode == 0 and "revoked laptop (device" in revoked.stdout
    missing = run(home, "token", "revoke", "laptop")
    assert missing.returncode == 3 and missing.stderr.startswith("Error: active token")
    table = run(home, "token", "list", "--active")
    assert "agent" in table.stdout and "laptop" not in table.stdout


# ------------------------------------------------------------ over HTTP, live


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.backends("sqlite", "postgresql")
async def test_the_server_checks_ledger_tokens_on_every_request(
    tmp_path: Path, ledger_target: Path | str
) -> None:
    """A server started with no token but the ledger's: a write token's writes are its
    client's whatever client_id it claims, a read token cannot write, a device token
    cannot call MCP at all, and a revoked token is refused from the next request."""
    home = home_of(tmp_path, ledger_target)
    with Memory(make_config(home, **backend_of(ledger_target)), client="operator") as memory:
        writer = memory.add_token("agent-w", scope="write").token
        reader = memory.add_token("agent-r", scope="read").token
        device = memory.add_token("laptop", scope="device").token
    with http_server(home, **env_of(ledger_target)) as server:
        assert server.url is not None
        async with server.client(writer, mode="legacy") as client:
            done = await client.call_tool(
                "memory_set", {"key": "team/plan", "value": "ship", "client_id": "someone-else"}
            )
            assert text(done) == "set 'team/plan' (from agent-w, version 1)"
        async with server.client(reader, mode="legacy") as client:
            got = await client.call_tool("memory_get", {"key": "team/plan"})
            assert "ship" in text(got)
            refused = await client.call_tool("memory_set", {"key": "team/plan", "value": "x"})
            assert refused.is_error and "only allows reading" in text(refused)
        with httpx2.Client(timeout=30) as http:
            answer = http.post(server.url, json=INITIALIZE,
                               headers={**JSON_HEADERS, "Authorization": f"Bearer {device}"})  # fmt: skip
            assert answer.status_code == 403
            assert "scope is device" in answer.json()["error"]["message"]
            assert run(home, "token", "revoke", "agent-w", **env_of(ledger_target)).returncode == 0
            gone = http.post(server.url, json=INITIALIZE,
                             headers={**JSON_HEADERS, "Authorization": f"Bearer {writer}"})  # fmt: skip
            assert gone.status_code == 401
            assert gone.json()["error"]["message"] == "invalid bearer token"
            late = run(home, "token", "add", "late", "--scope", "read", **env_of(ledger_target))
            fresh = http.post(server.url, json=INITIALIZE, headers={
                **JSON_HEADERS, "Authorization": f"Bearer {late.stdout.strip()}"})  # fmt: skip
            assert fresh.status_code == 200  # a token added while it runs works at once
        assert writer not in "".join(server.stderr)
    with Ledger(ledger_target) as ledger:
        fact = ledger.get_fact("team/plan")
        sets = [e.client for e in ledger.fact_history("team/plan") if e.action == "fact.set"]
    assert (fact.client, sets) == ("agent-w", ["agent-w"])


def test_the_server_refuses_to_start_without_any_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(make_config(home), client="operator") as memory:
        memory.add_token("gone", scope="write")
        memory.revoke_tokens("gone")
    started = subprocess.run(
        [BACKTRAIL, "mcp", "--http", "--port", "0"],
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))},
             "BACKTRAIL_HOME": str(home)},
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode == 2
    assert "refusing to serve" in started.stderr and "backtrail token add" in started.stderr
