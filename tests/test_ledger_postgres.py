"""The ledger on PostgreSQL, around the store: the ``ledger_url`` setting, its own
schema and version, a bad or unreachable URL stopping the CLI and the MCP server at
start in one line, ``backtrail doctor``'s checks, a local index derived from it (deleted
and rebuilt from the ledger), the write lock and its busy timeout, reconnecting, and two
MCP servers sharing facts by compare-and-swap. The store's and the service's own tests
run on both backends (``backends`` marker); these are what only PostgreSQL has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backtrail.config import Config
from backtrail.errors import InvalidInput, SchemaTooNew, StoreError
from backtrail.service import Memory
from backtrail.store import SCHEMA_VERSION, Ledger
from helpers import make_config, wait_for
from postgres_support import PostgresServer, free_port

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
SECRET = "s3cret-pw"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0", "COLUMNS": "200"})
    env.update(extra)
    return env


def run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKTRAIL, *args], env=env_for(home, **env), capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def unreachable_url() -> str:
    """A URL with a password, on a port where nothing listens."""
    return f"postgresql://backtrail:{SECRET}@127.0.0.1:{free_port()}/ledger"


# ----------------------------------------------------------------------- settings


def test_ledger_url_comes_from_the_environment_and_must_be_postgresql(tmp_path: Path) -> None:
    url = f"postgresql://team:{SECRET}@db.internal:5432/memory"
    config = Config.load(tmp_path, environ={"BACKTRAIL_LEDGER_URL": url})
    assert config.ledger_url == url and config.ledger_target == url
    shown = {item["name"]: item["value"] for item in config.describe()}
    assert shown["ledger_url"] == "postgresql://team:***@db.internal:5432/memory"
    plain = Config.load(tmp_path, environ={})
    assert (plain.ledger_url, plain.ledger_target) == ("", plain.ledger_path)
    # The index is derived per ledger: a PostgreSQL ledger gets a directory of its own.
    assert plain.index_dir == tmp_path / "index"
    assert config.index_dir.parent == tmp_path and config.index_dir != plain.index_dir
    other = Config.load(tmp_path, environ={"BACKTRAIL_LEDGER_URL": url.replace("memory", "x")})
    assert other.index_dir != config.index_dir
    for bad in ("mysql://db/memory", "/var/lib/backtrail/ledger.db", f"http://u:{SECRET}@h/"):
        with pytest.raises(InvalidInput, match="must be a postgresql:// URL") as caught:
            Config.load(tmp_path, environ={"BACKTRAIL_LEDGER_URL": bad})
        assert SECRET not in str(caught.value)


# ------------------------------------------------------------------------ schema


def test_a_new_database_gets_schema_7_and_a_newer_schema_is_refused(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    import psycopg

    with Ledger(postgres_database) as ledger:
        stats = ledger.stats()
        assert stats.schema_version == SCHEMA_VERSION == 7
        assert stats.path == postgres_database and stats.wal_bytes == 0
    with Ledger(postgres_database) as again:  # opening a current ledger migrates nothing
        assert again.stats().schema_version == SCHEMA_VERSION
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute("UPDATE backtrail_schema SET version = 99")
    with pytest.raises(SchemaTooNew, match="schema version 99"):
        Ledger(postgres_database)


def test_a_bad_or_unreachable_url_is_one_clear_error_without_the_password(
    postgres_server: PostgresServer,
) -> None:
    with pytest.raises(StoreError) as caught:
        Ledger(unreachable_url(), busy_timeout_ms=1000)
    message = str(caught.value)
    assert message.startswith("cannot open the PostgreSQL ledger at postgresql://backtrail:***@")
    assert "\n" not in message and SECRET not in message
    with pytest.raises(StoreError) as caught:
        Ledger(f"postgresql://u:{SECRET}@[broken/db")
    assert "cannot open the PostgreSQL ledger" in str(caught.value)
    assert SECRET not in str(caught.value)
    missing = postgres_server.tcp_url("no_such_database")
    with pytest.raises(StoreError, match='database "no_such_database" does not exist'):
        Ledger(missing)


# ------------------------------------------------------------ front ends at start


def test_the_cli_stops_at_start_on_an_unreachable_ledger(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    result = run(tmp_path, "stats", BACKTRAIL_LEDGER_URL=unreachable_url())
    assert result.returncode == 6, result.stderr  # storage
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot open the PostgreSQL ledger")
    assert SECRET not in result.stderr and "Traceback" not in result.stderr
    bad = run(tmp_path, "stats", BACKTRAIL_LEDGER_URL="mysql://db/memory")
    assert bad.returncode == 2 and "must be a postgresql:// URL" in bad.stderr


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_server_exits_before_serving_on_an_unreachable_ledger(
    postgres_server: PostgresServer, tmp_path: Path, transport: str
) -> None:
    args = ["mcp"] if transport == "stdio" else ["mcp", "--http", "--port", str(free_port())]
    result = run(tmp_path, *args, BACKTRAIL_LEDGER_URL=unreachable_url(), MCP_AUTH_TOKEN="t" * 32)
    assert result.returncode == 1, result.stderr  # 1: a service manager may retry
    assert result.stdout == ""  # not one protocol byte: it never started serving
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("backtrail mcp: cannot open the PostgreSQL")
    assert SECRET not in result.stderr


def test_the_native_host_reports_an_unreachable_ledger_and_keeps_serving(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    from host_client import HostProcess, hello_fields

    with HostProcess(tmp_path / "home", env={"BACKTRAIL_LEDGER_URL": unreachable_url()}) as host:
        answer = host.call("hello", **hello_fields())
        assert answer["ok"] is False and answer["error"]["code"] == 14, answer
        assert "cannot open the PostgreSQL ledger" in answer["error"]["message"]
        assert SECRET not in json.dumps(answer)
        assert host.call("status")["error"]["code"] == 14  # still answering, frame by frame
        assert host.wait() == 0


def test_doctor_checks_the_configured_postgresql_and_its_schema(
    postgres_server: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    import psycopg

    def checks(url: str) -> tuple[int, dict[str, dict[str, object]]]:
        # A HOME of its own: a host registered for this user would be started by the
        # handshake check, and the host opens (so creates) the ledger.
        result = run(tmp_path, "doctor", "--no-model", "--json", BACKTRAIL_LEDGER_URL=url,
                     HOME=str(tmp_path / "user"))  # fmt: skip
        return result.returncode, {c["check"]: c for c in json.loads(result.stdout)["checks"]}

    _, empty = checks(postgres_database)
    assert empty["postgresql"]["ok"] and "PostgreSQL 1" in str(empty["postgresql"]["detail"])
    assert "empty database" in str(empty["ledger"]["detail"])
    with psycopg.connect(postgres_database) as conn:  # doctor only looked: still empty
        assert conn.execute("SELECT to_regclass('backtrail_schema')").fetchone() == (None,)
    with Ledger(postgres_database) as ledger:
        ledger.set_fact("team/release", "friday")
    _, found = checks(postgres_database)
    assert found["postgresql"]["ok"] and found["schema version"]["ok"]
    assert str(found["schema version"]["detail"]).startswith(f"{SCHEMA_VERSION} ")
    assert found["index"]["ok"] and "index lag" in found  # the local index of this ledger
    code, down = checks(unreachable_url())
    assert code == 1 and not down["postgresql"]["ok"] and down["postgresql"]["fix"]
    assert "ledger" not in down and SECRET not in json.dumps(down)


# ------------------------------------------------------------------ derived index


def test_the_local_index_derives_from_the_postgresql_ledger_and_rebuilds_from_it(
    postgres_database: str, tmp_path: Path
) -> None:
    config = make_config(tmp_path, ledger_url=postgres_database)
    with Memory(config, client="node-1") as memory:
        memory.capture_page("https://wiki.example.org/raft", text="raft consensus log replication")
        memory.capture_page("https://notes.example.com/paxos", text="paxos consensus proposers")
        memory.set_fact("team/leader", "raft")
        memory.catch_up()
        found = [r.url for r in memory.search("consensus").results]
        assert sorted(found) == ["https://notes.example.com/paxos", "https://wiki.example.org/raft"]
    assert not config.ledger_path.exists()  # nothing went to a SQLite file
    shutil.rmtree(config.index_dir)  # the index is derived: deleting it loses nothing
    with Memory(config, client="node-2") as memory:
        memory.catch_up()
        assert sorted(r.url for r in memory.search("consensus").results) == sorted(found)
        report = memory.forget(domain="example.org")
        assert report.counts["pages"] == 1 and report.index_purged
        assert [r.url for r in memory.search("consensus").results] == [
            "https://notes.example.com/paxos"
        ]
        assert memory.get_fact("team/leader").value == "raft"


# ------------------------------------------------------------- while it runs


def test_a_writer_waits_for_the_write_lock_up_to_its_busy_timeout(postgres_database: str) -> None:
    import threading

    import psycopg

    from backtrail.errors import StoreBusy

    holder = Ledger(postgres_database, client="holder")
    impatient = Ledger(postgres_database, client="impatient", busy_timeout_ms=0)  # no wait
    patient = Ledger(postgres_database, client="patient", busy_timeout_ms=20_000)
    held = threading.Thread(target=holder.hold_write_lock, args=(2.0,))
    try:
        held.start()
        with psycopg.connect(postgres_database) as watcher:  # until the holder has the lock
            wait_for(
                lambda: watcher.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                    "WHERE locktype = 'advisory' AND granted AND datname = current_database()"
                ).fetchone()[0],
                timeout=10, what="the advisory write lock",
            )  # fmt: skip
        with pytest.raises(StoreBusy):
            impatient.set_fact("k", "refused")
        assert patient.set_fact("k", "waited").version == 1  # once the hold commits
        held.join()
        assert impatient.set_fact("k", "later", expected_version=1).version == 2  # still works
        actions = [(e.client, e.action) for e in patient.list_events()]
        assert actions == [
            ("holder", "demo.lock_hold"), ("patient", "fact.set"), ("impatient", "fact.set"),
        ]  # fmt: skip
    finally:
        held.join()
        for ledger in (holder, impatient, patient):
            ledger.close()


def test_a_ledger_reconnects_after_the_server_dropped_its_connection(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    name = postgres_database.split("/")[3].split("?")[0]
    with Ledger(postgres_database) as ledger:
        ledger.set_fact("k", "1")
        postgres_server.admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        with pytest.raises(StoreError, match="terminating connection"):
            ledger.get_fact("k")  # the call in progress fails ...
        assert ledger.get_fact("k").value == "1"  # ... and the next one reconnects
        assert ledger.set_fact("k", "2", expected_version=1).version == 2


# ------------------------------------------------- two servers, one database


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_two_mcp_servers_on_one_database_share_facts_and_compare_and_swap(
    postgres_database: str, tmp_path: Path
) -> None:
    """Two ``backtrail mcp --http`` processes, each with a data directory of its own,
    on one PostgreSQL ledger: four clients (two per server) increment one counter by
    compare-and-swap; none is lost and each write is attributed to its token's client."""
    import anyio

    from mcp_support import http_server, text

    agents, rounds = 4, 25
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [
        {"token": f"agent-token-{n}-0123456789", "client_id": f"agent-{n}", "scope": "write"}
        for n in range(agents)
    ]}))  # fmt: skip
    tokens.chmod(0o600)
    conflicts = 0

    async def increment(server: Any, n: int) -> None:
        nonlocal conflicts
        async with server.client(f"agent-token-{n}-0123456789", mode="legacy") as client:
            done = 0
            while done < rounds:
                got = await client.call_tool("memory_get", {"key": "team/counter"})
                fact = got.structured_content["fact"]
                answer = await client.call_tool("memory_set", {
                    "key": "team/counter", "value": str(int(fact["value"]) + 1),
                    "expected_version": fact["version"],
                })  # fmt: skip
                if answer.is_error:
                    assert "CAS failed" in text(answer), text(answer)
                    conflicts += 1
                    continue
                done += 1

    env = {"BACKTRAIL_LEDGER_URL": postgres_database}
    with (
        http_server(tmp_path / "node-1", "--token-file", str(tokens), **env) as one,
        http_server(tmp_path / "node-2", "--token-file", str(tokens), **env) as two,
    ):
        async with one.client("agent-token-0-0123456789", mode="legacy") as first:
            await first.call_tool("memory_set", {"key": "team/counter", "value": "0"})
        async with anyio.create_task_group() as group:
            for n in range(agents):
                group.start_soon(increment, (one, two)[n % 2], n)
        async with two.client("agent-token-3-0123456789", mode="legacy") as last:
            final = await last.call_tool("memory_get", {"key": "team/counter"})
            fact = final.structured_content["fact"]
    assert (fact["value"], fact["version"]) == (str(agents * rounds), agents * rounds + 1)
    with Ledger(postgres_database) as ledger:
        history = ledger.fact_history("team/counter", limit=10_000)
    sets = [e.client for e in history if e.action == "fact.set"]
    assert {name: sets.count(name) for name in set(sets)} == {
        "agent-0": rounds + 1, **{f"agent-{n}": rounds for n in range(1, agents)},
    }  # fmt: skip
    refused = [e for e in history if e.action == "fact.cas_fail"]
    assert len(refused) == conflicts  # every lost race is in the audit trail
    assert not (tmp_path / "node-1" / "ledger.sqlite3").exists()


def test_forgetting_through_one_node_removes_it_from_every_nodes_index(
    postgres_database: str, tmp_path: Path
) -> None:
    one = Memory(make_config(tmp_path / "node-1", ledger_url=postgres_database), client="n1")
    two = Memory(make_config(tmp_path / "node-2", ledger_url=postgres_database), client="n2")
    try:
        one.capture_page("https://secret.example/plan", text="the quarterly wombat plan")
        one.capture_page("https://kept.example/", text="wombat habitats and burrows")
        for memory in (one, two):
            memory.catch_up()
        assert len(two.search("wombat").results) == 2  # node 2 indexed node 1's captures
        assert two.indexer.index.stats()["documents"] == 2
        one.forget(domain="secret.example")
        # Before node 2 catches up its index still holds the page; results never show it.
        assert [r.url for r in two.search("wombat").results] == ["https://kept.example/"]
        assert two.indexer.index.stats()["documents"] == 2
        two.catch_up()  # the change feed's deletes reach node 2's own index
        assert two.indexer.index.stats()["documents"] == 1
    finally:
        one.close()
        two.close()
