"""Several server nodes on one PostgreSQL ledger (issue 40 items 3 and 4): real
``backtrail mcp --http`` subprocesses, each with a data directory and a search index of
its own, driven by the official MCP client and by devices posting the native host's
messages to ``POST /host``.

- A page a device posts to node 1 is found through node 2, embeddings included, soon
  after node 1 acknowledged it: node 2 follows the ledger's commits (LISTEN/NOTIFY).
- Four clients on two nodes increment one counter by compare-and-swap, 600 times: every
  increment is recorded, attributed to its token's client.
- A node SIGKILLed while a device's batch is half applied: the device resends the batch
  to the other node, and each message is applied exactly once; the killed node, started
  again, catches up and answers like the others. So does a third node started empty, one
  whose index was deleted, and one whose index was damaged.
- A forget through one node leaves every node's index compacted without the page.
- A revoked token is refused by every node at once; a device token calls no MCP tool.

Needs PostgreSQL (skipped without it, failed with BACKTRAIL_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from backtrail.config import Config
from backtrail.store import Ledger
from helpers import index_files_containing
from host_client import hello_fields
from mcp_support import INITIALIZE, HttpServer
from postgres_support import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.postgresql]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "python" / "backtrail" / "samples").glob("*.html"))
BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
QUERIES = (
    "sqlite write-ahead log checkpoint", "interactive git rebase", "http cache validation",
    "python virtual environment", "rust ownership and borrowing", "unicode normalization forms",
    "how does a database survive a crash", "rewriting the history of commits",
    "stale copies in the browser", "comparing strings that look the same",
)  # fmt: skip
NOTE_WORD = "zqmarmot"
"""A word only the device's note holds (forget must take it out of every index)."""
START_MS = 1_764_000_000_000
AGENTS = 4
INCREMENTS = 600


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------------- the pages


def sample_pages() -> list[tuple[str, str]]:
    """``(url, html)``: the packaged sample articles, each followed by its sections as
    pages of their own (distinct texts: a ranking compared between nodes has no ties)."""
    pages = []
    for path in SAMPLES:
        html = path.read_text(encoding="utf-8")
        base = f"https://samples.backtrail.example/{path.stem}/"
        pages.append((base, html))
        match = re.search(r"<title>(.*?)</title>", html)
        assert match is not None
        sections = re.findall(r"<h2>(.*?)</h2>\s*(<p>.*?</p>)", html, re.S)
        for k, (heading, body) in enumerate(sections, 1):
            section = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>'
                       f"{heading} ({match.group(1)})</title></head><body><article><h1>"
                       f"{heading}</h1>\n{body}\n</article></body></html>")  # fmt: skip
            pages.append((f"{base}section-{k}", section))
    return pages


def capture_message(n: int, url: str, html: str) -> dict[str, Any]:
    """The ``capture_page`` message the extension sends for a page it read."""
    at = START_MS + n * 60_000
    return {
        "id": f"cap-{n}", "type": "capture_page", "url": url, "title": None, "language": "en",
        "content_type": "html", "html": html, "truncated": False,
        "dedupe_key": f"capture:visit-{n}", "captured_time": at + 4_000,
        "visit": {"visit_id": f"visit-{n}", "time": at, "tab_id": 3, "window_id": 1,
                  "transition": "link", "referrer": None, "dwell_ms": 30_000},
    }  # fmt: skip


def note_message(url: str) -> dict[str, Any]:
    return {"id": "note-1", "type": "note", "dedupe_key": "note:note-1", "url": url,
            "content": f"remember the {NOTE_WORD} trick from this section", "title": None,
            "time": START_MS + 3_600_000}  # fmt: skip


def hello() -> dict[str, Any]:
    return {"id": "hello-1", "type": "hello", **hello_fields("laptop-profile")}


# -------------------------------------------------------------------- the nodes


@dataclass
class Cluster:
    url: str
    root: Path
    tokens: dict[str, str]
    nodes: dict[str, HttpServer] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {"BACKTRAIL_LEDGER_URL": self.url, "MCP_EMBEDDINGS": "on",
                "BACKTRAIL_INDEXER_DEBOUNCE": "0.1", "BACKTRAIL_FOLLOW_POLL": "2"}  # fmt: skip

    def home(self, name: str) -> Path:
        return self.root / name

    def start(self, name: str) -> HttpServer:
        self.nodes[name] = HttpServer(self.home(name), "--preload-model", **self.env())
        return self.nodes[name]

    def stop(self, name: str) -> None:
        self.nodes.pop(name).stop()

    def index_dir(self, name: str) -> Path:
        return Config.load(self.home(name), overrides={"ledger_url": self.url},
                           environ={}).index_dir  # fmt: skip

    def post(self, name: str, batch: list[dict[str, Any]], token: str = "laptop",
             timeout: float = 120) -> httpx2.Response:  # fmt: skip
        url = self.nodes[name].url
        assert url is not None
        with httpx2.Client(timeout=timeout) as http:
            return http.post(url.replace("/mcp", "/host"), json=batch,
                             headers={"Authorization": f"Bearer {self.tokens[token]}",
                                      "X-Backtrail-Profile": "laptop-profile"})  # fmt: skip

    async def call(self, name: str, tool: str, arguments: dict[str, Any],
                   token: str = "reader") -> Any:  # fmt: skip
        async with self.nodes[name].client(self.tokens[token], mode="legacy") as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        return result.structured_content

    async def search(self, name: str, query: str) -> tuple[str, list[str]]:
        """The search's mode (``hybrid`` once the results have vectors) and top 10."""
        found = await self.call(name, "search_browsing", {"query": query, "limit": 10})
        return found["mode"], [hit["url"] for hit in found["results"]]

    async def top10(self, name: str, query: str) -> list[str]:
        mode, urls = await self.search(name, query)
        assert mode == "hybrid", (name, query, mode)  # embeddings are in use
        return urls

    async def caught_up(self, name: str) -> bool:
        status = await self.call(name, "get_status", {})
        return (status["index_text_behind"] == 0 and status["vectors_caught_up"]
                and status["index_vectors_behind"] == 0)  # fmt: skip

    async def settle(self, name: str, timeout: float = 300) -> None:
        """Until the node's index holds everything in the ledger, text and vectors."""
        await until(lambda: self.caught_up(name), timeout, f"{name} to catch up")

    async def answers(self, name: str) -> dict[str, list[str]]:
        return {query: await self.top10(name, query) for query in QUERIES}


async def until(condition: Any, timeout: float, what: str) -> Any:
    """Poll the async ``condition`` until it is truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await anyio.sleep(0.05)


def cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update(BACKTRAIL_HOME=str(cluster.home("operator")), BACKTRAIL_LEDGER_URL=cluster.url,
               BACKTRAIL_EMBEDDINGS="0")  # fmt: skip
    return subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture(scope="module")
def cluster(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A fresh database, its tokens (made with ``backtrail token add``), and nodes 1 and
    2 with embeddings, the model loaded at start."""
    with postgres_server.database() as url:
        made = Cluster(url, tmp_path_factory.mktemp("nodes"), {})
        for client, scope, name in (
            ("laptop", "device", "laptop"), ("tablet", "device", "tablet"),
            ("dashboard", "read", "reader"),
            *((f"agent-{n}", "write", f"agent-{n}") for n in range(AGENTS)),
        ):  # fmt: skip
            added = cli(made, "token", "add", client, "--scope", scope)
            assert added.returncode == 0, added.stderr
            made.tokens[name] = added.stdout.strip()
        try:
            made.start("node-1")
            made.start("node-2")
            yield made
        finally:
            for name in list(made.nodes):
                made.stop(name)


# ------------------------------------------------------------------------ tests


async def test_a_page_posted_to_one_node_is_found_with_embeddings_through_another(
    cluster: Cluster,
) -> None:
    await cluster.settle("node-2")  # model loaded, nothing pending
    url, html = sample_pages()[0]
    assert url.endswith("/git-rebase/")
    posted = cluster.post("node-1", [hello(), capture_message(0, url, html)])
    acknowledged = time.monotonic()
    assert [a["ok"] for a in posted.json()] == [True, True], posted.text

    async def found() -> bool:
        mode, hits = await cluster.search("node-2", "rebase or merge a branch")
        return mode == "hybrid" and hits[:1] == [url] and await cluster.caught_up("node-2")

    await until(found, 60, "node 2 to find node 1's page, embedded")
    elapsed = time.monotonic() - acknowledged
    # How soon is the benchmark's question (bench/system/README.md), not a timed assertion.
    sys.stderr.write(f"\nacknowledged by node 1 -> found, embedded, on node 2: {elapsed:.2f} s\n")


async def test_a_node_killed_mid_batch_loses_nothing_and_catches_up(cluster: Cluster) -> None:
    """Node 1 is SIGKILLed while it applies a device's batch; the device resends the
    batch to node 2 and every message is applied exactly once. Node 1, started again,
    catches up and gives the same top 10 as node 2."""
    pages = sample_pages()[1:]  # the first was posted by the first test
    messages = [capture_message(n, url, html) for n, (url, html) in enumerate(pages, 1)]
    messages.append(note_message(pages[-1][0]))
    first, second = messages[:12], messages[12:]
    assert codes(cluster.post("node-1", [hello(), *first[:10]])) == ["ok"] * 11
    cut = threading.Thread(target=lambda: _post_quietly(cluster, "node-1", second))
    cut.start()
    with Ledger(cluster.url) as ledger:  # kill once part of the batch is committed
        wait_until(lambda: ledger.delivery("laptop", second[0]["id"]) is not None, 60)
    cluster.nodes["node-1"].process.send_signal(signal.SIGKILL)
    cluster.nodes["node-1"].process.wait(30)
    cut.join(60)
    cluster.stop("node-1")
    # The device's outbox still holds what was not acknowledged, and resends all of it.
    resent = cluster.post("node-2", [hello(), *first[10:], *second])
    assert codes(resent) == ["ok"] * (1 + len(first) - 10 + len(second)), resent.text
    with Ledger(cluster.url) as ledger:
        written = device_writes(ledger)
        delivered = [ledger.delivery("laptop", m["id"]) for m in messages]
    # One page, one visit and one queued capture per message: none lost, none twice.
    assert written == {"pages": len(pages) + 1, "visits": len(pages) + 1,
                       "visit.record": len(pages) + 1, "page.capture_queued": len(pages) + 1,
                       "note.add": 1}  # fmt: skip
    assert all(d is not None and d["ok"] for d in delivered)
    again = cluster.post("node-2", second[-3:])
    assert again.json() == delivered[-3:]  # the stored answers, and no writes
    with Ledger(cluster.url) as ledger:
        assert device_writes(ledger) == written
    cluster.start("node-1")
    await cluster.settle("node-1")
    await cluster.settle("node-2")
    assert await cluster.answers("node-1") == await cluster.answers("node-2")


async def test_a_new_node_builds_its_index_from_the_ledger_and_answers_the_same(
    cluster: Cluster,
) -> None:
    await cluster.settle("node-2")
    expected = await cluster.answers("node-2")
    assert expected["interactive git rebase"][0].startswith(
        "https://samples.backtrail.example/git-rebase/")  # fmt: skip
    assert len(expected["interactive git rebase"]) == 10
    cluster.start("node-3")  # an empty data directory
    await cluster.settle("node-3")
    assert await cluster.answers("node-3") == expected
    cluster.stop("node-3")
    shutil.rmtree(cluster.index_dir("node-3"))  # derived: deleting it loses nothing
    cluster.start("node-3")
    await cluster.settle("node-3")
    assert await cluster.answers("node-3") == expected
    cluster.stop("node-3")
    (cluster.index_dir("node-3") / "meta.json").write_text("{ not tantivy")  # damaged
    server = cluster.start("node-3")
    await cluster.settle("node-3")
    assert await cluster.answers("node-3") == expected
    assert "damaged" in "".join(server.stderr)


async def test_a_forget_through_one_node_reaches_every_nodes_index(cluster: Cluster) -> None:
    """Forgetting a page (and the note on it) through node 1: no node returns it, and
    every node's index is compacted, so the note's words leave its files."""
    for name in cluster.nodes:
        await cluster.settle(name)
    target = sample_pages()[-1][0]
    for name in cluster.nodes:
        assert target in await cluster.top10(name, NOTE_WORD)
        assert index_files_containing(cluster.index_dir(name), NOTE_WORD)  # the check sees it
    done = await cluster.call("node-1", "forget", {"url": target, "confirm": True},
                              token="agent-1")  # fmt: skip
    assert (done["counts"]["pages"], done["counts"]["notes"]) == (1, 1)

    async def gone_everywhere() -> bool:
        for name in cluster.nodes:
            if target in (await cluster.search(name, NOTE_WORD))[1]:
                return False
            if index_files_containing(cluster.index_dir(name), NOTE_WORD):
                return False  # still on disk: not compacted yet
        return True

    await until(gone_everywhere, 60, "every node's index to drop and compact the page")
    for name in cluster.nodes:  # the other pages are still there
        assert (await cluster.top10(name, "interactive git rebase"))[0].startswith(
            "https://samples.backtrail.example/git-rebase/")  # fmt: skip


async def test_a_revoked_token_is_refused_by_every_node_at_once_and_devices_call_no_tools(
    cluster: Cluster,
) -> None:
    names = sorted(cluster.nodes)
    for name in names:
        assert codes(cluster.post(name, [hello()], token="tablet")) == ["ok"]
    revoked = cli(cluster, "token", "revoke", "tablet")
    assert revoked.returncode == 0, revoked.stderr
    for name in names:  # the very next request, on every node
        refused = cluster.post(name, [hello()], token="tablet")
        assert refused.status_code == 401, (name, refused.text)
    with httpx2.Client(timeout=30) as http:
        for name in names:
            url = cluster.nodes[name].url
            assert url is not None
            mcp = http.post(url, json=INITIALIZE, headers={
                **JSON_HEADERS, "Authorization": f"Bearer {cluster.tokens['laptop']}"})  # fmt: skip
            assert mcp.status_code == 403, mcp.text  # no assistant tools, no facts
            facts = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": "memory_get",
                                                    "arguments": {"key": "team/counter"}}},
                              headers={**JSON_HEADERS,
                                       "Authorization": f"Bearer {cluster.tokens['laptop']}"})
            assert facts.status_code == 403 and "team" not in facts.text  # fmt: skip
    with Ledger(cluster.url) as ledger:
        events = ledger.list_events(action="token.revoke")
    assert [(e.client, e.target) for e in events] == [("cli", "tablet")]


async def test_four_clients_on_two_nodes_increment_one_counter_600_times(
    cluster: Cluster,
) -> None:
    """Last: the counter's 600 versions each replace its document in every node's index,
    and the deleted documents weigh in tantivy's BM25 statistics until segments merge,
    so near-ties in rankings compared between nodes could then differ."""
    conflicts = 0

    async def increment(name: str, agent: int, rounds: int) -> None:
        nonlocal conflicts
        async with cluster.nodes[name].client(cluster.tokens[f"agent-{agent}"],
                                              mode="legacy") as client:  # fmt: skip
            done = 0
            while done < rounds:
                got = await client.call_tool("memory_get", {"key": "team/counter"})
                fact = got.structured_content["fact"]
                answer = await client.call_tool("memory_set", {
                    "key": "team/counter", "value": str(int(fact["value"]) + 1),
                    "expected_version": fact["version"], "client_id": "someone-else",
                })  # fmt: skip
                if answer.is_error:
                    assert "CAS failed" in answer.content[0].text
                    conflicts += 1
                    continue
                done += 1

    await cluster.call("node-1", "memory_set", {"key": "team/counter", "value": "0"},
                       token="agent-0")  # fmt: skip
    async with anyio.create_task_group() as group:
        for agent in range(AGENTS):
            group.start_soon(increment, ("node-1", "node-2")[agent % 2], agent,
                             INCREMENTS // AGENTS)  # fmt: skip
    final = (await cluster.call("node-2", "memory_get", {"key": "team/counter"}))["fact"]
    assert (final["value"], final["version"]) == (str(INCREMENTS), INCREMENTS + 1)
    with Ledger(cluster.url) as ledger:
        history = ledger.fact_history("team/counter", limit=100_000)
    sets = [e.client for e in history if e.action == "fact.set"]
    assert {name: sets.count(name) for name in set(sets)} == {
        "agent-0": INCREMENTS // AGENTS + 1,
        **{f"agent-{n}": INCREMENTS // AGENTS for n in range(1, AGENTS)},
    }  # fmt: skip
    assert len([e for e in history if e.action == "fact.cas_fail"]) == conflicts


# ---------------------------------------------------------------------- helpers


def codes(answer: httpx2.Response) -> list[int | str]:
    assert answer.status_code == 200, answer.text
    return [a["error"]["code"] if not a["ok"] else "ok" for a in answer.json()]


def device_writes(ledger: Ledger) -> dict[str, int]:
    """Pages and visits in the ledger, and the laptop's write events by action."""
    counts = ledger.stats().counts
    actions = [e.action for e in ledger.list_events(limit=100_000) if e.client == "laptop"]
    return {"pages": counts["pages"], "visits": counts["visits"],
            **{action: actions.count(action) for action in set(actions)}}  # fmt: skip


def _post_quietly(cluster: Cluster, name: str, batch: list[dict[str, Any]]) -> None:
    try:
        cluster.post(name, [hello(), *batch])
    except httpx2.HTTPError:
        pass  # the node was killed under the request: the device never got an answer


def wait_until(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)

