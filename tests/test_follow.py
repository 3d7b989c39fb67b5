"""Following the change feed on PostgreSQL (issue 40 item 3), in one process: schema 7's
trigger notifies listeners when a write commits (never for one rolled back), a node's
follower makes another node's writes searchable without anyone calling ``catch_up``,
polling takes over when notifications cannot be had, and a forget through one node is
compacted out of every node's index. The same across real processes: test_nodes.py."""

from __future__ import annotations

import dataclasses
import multiprocessing
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backtrail.errors import StoreError
from backtrail.indexer.follow import Follower
from backtrail.service import Memory
from backtrail.store import SCHEMA_VERSION, Ledger
from backtrail.store.postgres import ChangeListener
from backtrail.store.schema_pg import SCHEMA_V6
from helpers import index_files_containing, make_config, wait_for
from postgres_support import PostgresServer, free_port

pytestmark = pytest.mark.postgresql


def node(home: Path, url: str, **overrides: object) -> Memory:
    """A server node: background indexing, a quick debounce, its own data directory."""
    settings = {"ledger_url": url, "background_indexing": True, "indexer_debounce": 0.05,
                **overrides}  # fmt: skip
    return Memory(make_config(home, **settings), client=home.name)


@pytest.fixture
def nodes(tmp_path: Path, postgres_database: str) -> Iterator[tuple[Memory, Memory]]:
    one, two = node(tmp_path / "node-1", postgres_database), node(tmp_path / "node-2",
                                                                   postgres_database)
    try:
        yield one, two
    finally:
        one.close()
        two.close()


def test_a_schema_6_database_gains_tokens_deliveries_and_notifications(
    postgres_database: str,
) -> None:
    import psycopg

    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(SCHEMA_V6)  # a ledger as the previous release left it
        conn.execute("INSERT INTO settings (key, value, updated_at) VALUES ('kept', '1', 1)")
    with Ledger(postgres_database) as ledger:
        assert ledger.stats().schema_version == SCHEMA_VERSION == 7
        assert ledger.get_setting("kept") == 1
        assert ledger.list_tokens() == [] and ledger.delivery("laptop", "m-1") is None
    listener = ChangeListener(postgres_database)
    try:
        assert listener.wait(0.1) is True  # connecting: anything may have been missed
        assert listener.wait(0.05) is False
        with Ledger(postgres_database) as ledger:
            ledger.set_setting("not-a-change", 2)  # no change-feed row: no notification
            assert listener.wait(0.2) is False
            try:
                with ledger.transaction():
                    ledger.add_note("rolled back")
                    raise RuntimeError("abort")
            except RuntimeError:
                pass
            assert listener.wait(0.2) is False  # rolled back: nobody is told
            with ledger.transaction():  # one transaction, several changes: one notification
                ledger.add_note("first")
                ledger.add_note("second")
        assert listener.wait(10) is True
        assert listener.wait(0.2) is False
    finally:
        listener.close()


def test_a_node_follows_what_another_node_commits(nodes: tuple[Memory, Memory]) -> None:
    one, two = nodes
    assert two.follow_changes() is True
    follower = two.indexer.follower
    assert follower is not None
    wait_for(lambda: follower.wakeups, 30, "the follower to connect")
    one.capture_page("https://wiki.example.org/raft", text="raft elects a leader by votes")
    one.add_note("the quokka ate the raft log")
    found = wait_for(lambda: two.search("raft").results if len(two.search("raft").results) == 2
                     else None, 30, "node 2 to index node 1's writes")  # fmt: skip
    assert {r.url for r in found} == {"https://wiki.example.org/raft", None}
    assert follower.notifications >= 1


def test_a_node_polls_when_it_cannot_listen(tmp_path: Path, postgres_database: str) -> None:
    with node(tmp_path / "one", postgres_database) as one, node(
        tmp_path / "two", postgres_database, follow_poll=0.1, background_indexing=False
    ) as two:
        # Node two starts no indexing thread of its own; from now on only a wake-up (the
        # follower's) starts one, so finding the page proves the follower woke it.
        two._indexer.config = dataclasses.replace(two._indexer.config, background_indexing=True)
        # A listener that can never connect: the follower falls back to polling.
        follower = Follower(two.indexer, f"postgresql://x@127.0.0.1:{free_port()}/none",
                            poll_seconds=0.1)  # fmt: skip
        with pytest.raises(StoreError, match="cannot listen"):
            ChangeListener(f"postgresql://x@127.0.0.1:{free_port()}/none").wait(0.1)
        follower.start()
        try:
            one.capture_page("https://wiki.example.org/paxos", text="paxos proposers and acceptors")
            wait_for(lambda: two.search("acceptors").results, 30, "a poll to find the change")
            assert follower.notifications == 0 and follower.wakeups >= 1
        finally:
            assert follower.stop(5.0)


def test_forgetting_through_one_node_compacts_every_nodes_index(
    nodes: tuple[Memory, Memory], tmp_path: Path
) -> None:
    one, two = nodes
    two.follow_changes()
    one.capture_page("https://secret.example/plan", text="the zygomorphic quarterly plan")
    one.capture_page("https://kept.example/", text="wombat habitats and burrows")
    wait_for(lambda: two.search("zygomorphic").results, 30, "node 2 to index the page")
    index_two = two.config.index_dir
    assert index_files_containing(index_two, "zygomorphic")  # the check can see it
    one.forget(domain="secret.example")
    assert not index_files_containing(one.config.index_dir, "zygomorphic")
    forgotten = one.indexer.watermark().forgets  # type: ignore[union-attr]
    assert forgotten > 0  # node 1 compacted when it forgot
    # Node 2 compacts once it has applied the deletions, and records that it did.
    wait_for(lambda: two.indexer.watermark().forgets == forgotten, 30,  # type: ignore[union-attr]
             "node 2 to compact the forgotten page away")  # fmt: skip
    assert not index_files_containing(index_two, "zygomorphic")
    assert [r.url for r in two.search("wombat").results] == ["https://kept.example/"]
    # A node started after the forget builds an index with nothing left to compact.
    shutil.rmtree(index_two, ignore_errors=True)
    with node(tmp_path / "node-3", one.config.ledger_url) as three:
        three.catch_up()
        assert three.indexer.watermark().forgets == one.indexer.watermark().forgets  # type: ignore[union-attr]
        assert [r.url for r in three.search("wombat").results] == ["https://kept.example/"]


def test_the_follower_is_for_postgresql_only(tmp_path: Path) -> None:
    with Memory(make_config(tmp_path), client="solo") as memory:
        assert memory.follow_changes() is False  # SQLite: every process shares one index
        assert memory.indexer.follower is None



def _open_when_released(url: str, barrier: Any, outcomes: Any) -> None:
    barrier.wait()
    try:
        Ledger(url, busy_timeout_ms=60_000).close()
        outcomes.put("ok")
    except Exception as error:  # reported to the test
        outcomes.put(f"{type(error).__name__}: {error}")


def test_eight_processes_creating_one_ledger_at_once_all_succeed(
    postgres_server: PostgresServer,
) -> None:
    """Openers of an empty database race to create the ledger: the first to take the
    write lock creates it, the others must see it once they have the lock (a check
    answered from a connection's catalog cache made some create it again: "function
    min already exists", in most rounds)."""
    fork = multiprocessing.get_context("fork")  # released together, without start-up skew
    for _ in range(6):
        with postgres_server.database() as url:
            barrier, outcomes = fork.Barrier(8), fork.Queue()
            openers = [fork.Process(target=_open_when_released, args=(url, barrier, outcomes))
                       for _ in range(8)]  # fmt: skip
            for opener in openers:
                opener.start()
            for opener in openers:
                opener.join(120)
            assert sorted(outcomes.get(timeout=10) for _ in openers) == ["ok"] * 8
            with Ledger(url) as ledger:
                assert ledger.stats().schema_version == SCHEMA_VERSION
