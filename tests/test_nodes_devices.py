"""Two devices and two server nodes on one PostgreSQL ledger (issue 40 item 3), every part
a real process: ``backtrail mcp --http`` nodes on ports chosen before they start, and two
native hosts in forwarding mode (``python -m backtrail.native_host``, fed real
native-messaging frames over pipes as the extension sends them), each with a device
token made by ``backtrail token add``.

- Pages captured through device A (forwarding to node 1) are found through node 2, by
  the official MCP client, with their embeddings; the time from device A's
  acknowledgement is printed (the bound is the benchmark's: bench/system/README.md).
- Device B's server (node 2) is down for a while: device B keeps everything in its
  outbox, answering the extension "busy"; once node 2 is back, everything arrives exactly
  once (``skipped`` counts each application), and node 1 finds it too.
- Each device's writes are attributed to its token's client.

Needs PostgreSQL (skipped without it, failed with BACKTRAIL_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from backtrail.service import Memory
from backtrail.store import Ledger
from device_support import device_env, exchange, free_port
from helpers import make_config
from host_client import HostProcess
from mcp_support import HttpServer
from postgres_support import PostgresServer
from test_nodes import sample_pages, until

pytestmark = [pytest.mark.anyio, pytest.mark.postgresql]

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
START_MS = 1_765_000_000_000
SKIPS = 7


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Site:
    """The database, its tokens, and nodes started on fixed ports (so a device can be
    pointed at a node while it is down)."""

    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root
        self.ports = {"node-1": free_port(), "node-2": free_port()}
        self.nodes: dict[str, HttpServer] = {}
        self.tokens: dict[str, Path] = {}
        self.reader = ""

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
        env.update(BACKTRAIL_HOME=str(self.root / "operator"), BACKTRAIL_LEDGER_URL=self.url,
                   BACKTRAIL_EMBEDDINGS="0")  # fmt: skip
        done = subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    def device_token(self, client: str) -> Path:
        path = self.root / f"{client}.token"
        self.cli("token", "add", client, "--scope", "device", "--out", str(path))
        os.chmod(path, 0o600)
        return path

    def start(self, name: str) -> HttpServer:
        self.nodes[name] = HttpServer(
            self.root / name, "--port", str(self.ports[name]), "--preload-model",
            BACKTRAIL_LEDGER_URL=self.url, MCP_EMBEDDINGS="on",
            BACKTRAIL_INDEXER_DEBOUNCE="0.1", BACKTRAIL_FOLLOW_POLL="2",
        )  # fmt: skip
        return self.nodes[name]

    def stop(self, name: str) -> None:
        self.nodes.pop(name).stop()

    async def search(self, name: str, query: str) -> dict[str, Any]:
        async with self.nodes[name].client(self.reader, mode="legacy") as client:
            found = await client.call_tool("search_browsing", {"query": query, "limit": 10})
            status = await client.call_tool("get_status", {})
        assert not found.is_error and not status.is_error
        return {**found.structured_content, "status": status.structured_content}

    def device(self, name: str, node: str, client: str) -> HostProcess:
        env = device_env(self.ports[node], self.tokens[client])
        return HostProcess(self.root / name, env=env)


@pytest.fixture
def site(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[Site]:
    with postgres_server.database() as url:
        made = Site(url, tmp_path)
        made.tokens = {c: made.device_token(c) for c in ("laptop", "desktop")}
        made.reader = made.cli("token", "add", "dashboard", "--scope", "read").stdout.strip()
        try:
            yield made
        finally:
            for name in list(made.nodes):
                made.stop(name)


def page_captures(host: HostProcess, pages: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The extension's ``capture_page`` for each page read, with its visit."""
    out = []
    for n, (url, html) in enumerate(pages):
        at = START_MS + n * 60_000
        out.append(host.message(
            "capture_page", ident=f"a-cap-{n}", url=url, title=None, language="en",
            content_type="html", html=html, truncated=False, dedupe_key=f"capture:a-{n}",
            captured_time=at + 4_000,
            visit={"visit_id": f"a-visit-{n}", "time": at, "tab_id": 3, "window_id": 1,
                   "transition": "link", "referrer": None, "dwell_ms": 30_000},
        ))  # fmt: skip
    return out


def writes_by_client(url: str) -> dict[str, int]:
    with Ledger(url) as ledger:
        events = ledger.list_events(limit=100_000)
    counts: dict[str, int] = {}
    for event in events:
        counts[event.client] = counts.get(event.client, 0) + 1
    return counts


async def test_pages_from_device_a_are_found_through_node_2_and_device_b_waits_for_its_node(
    site: Site,
) -> None:
    site.start("node-1")
    site.start("node-2")
    pages = [page for page in sample_pages() if not page[0].endswith(tuple("0123456789"))]
    assert len(pages) == 6  # the six sample articles, without their sections
    with site.device("device-a", "node-1", "laptop") as a:
        assert a.hello("laptop-profile")["capabilities"] == ["search"]
        answers = exchange(a, page_captures(a, pages))
        assert all(answer["ok"] for answer in answers.values()), answers
        acknowledged = time.monotonic()
        url = pages[0][0]
        assert url.endswith("/git-rebase/")

        async def found() -> bool:
            result = await site.search("node-2", "rebase or merge a branch")
            urls = [hit["url"] for hit in result["results"]]
            status = result["status"]
            return (result["mode"] == "hybrid" and url in urls and status["vectors_caught_up"]
                    and status["index_vectors_behind"] == 0)  # fmt: skip

        await until(found, 120, "node 2 to find device A's page, embedded")
        elapsed = time.monotonic() - acknowledged
        sys.stderr.write(f"\ndevice A acknowledged -> found with vectors on node 2: "
                         f"{elapsed:.2f} s\n")  # fmt: skip
        # The popup's search on device A goes through node 1 and finds it too.
        hits = a.ok("search", query="interactive rebase", limit=10)["results"]
        assert url in [hit["url"] for hit in hits]

    # Device B's node is down: everything is kept, the extension is told to retry.
    site.stop("node-2")
    with site.device("device-b", "node-2", "desktop") as b:
        b.hello("desktop-profile")
        kept = [b.message("skipped", ident=f"b-skip-{n}", rule="bank.example",
                          time=START_MS + n) for n in range(SKIPS)]  # fmt: skip
        for answer in exchange(b, kept).values():
            assert answer["ok"] is False and answer["error"]["code"] == 13, answer
        assert b.ok("status")["server"]["outbox"] == SKIPS
        await anyio.sleep(3)  # down for a while: the host keeps retrying in the background
        assert b.ok("status")["server"]["state"] == "unreachable"
        site.start("node-2")
        # The host delivers its outbox on its own; the extension's resends change nothing.
        await until(_async(lambda: b.ok("status")["server"]["outbox"] == 0), 120,
                    "device B's outbox to empty")  # fmt: skip
        again = exchange(b, kept)
        assert all(answer["ok"] for answer in again.values()), again

    memory = Memory(make_config(site.root / "reader", ledger_url=site.url), client="test")
    try:
        assert memory.skipped_counts() == {"bank.example": SKIPS}  # once each, not twice
    finally:
        memory.close()
    by_client = writes_by_client(site.url)
    assert by_client.get("laptop", 0) >= 2 * len(pages)  # a page and a visit each
    assert by_client.get("desktop", 0) >= 1


def _async(check: Any) -> Any:
    async def run() -> bool:
        return bool(check())

    return run
