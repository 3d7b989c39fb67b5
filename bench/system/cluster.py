"""The processes of the several-node benchmark (``bench/system/nodes.py``): a throwaway
PostgreSQL cluster, ``backtrail mcp --http`` nodes on it, tokens made with ``backtrail
token add``, official MCP clients over HTTP, and native hosts (forwarding to a node, or
local on SQLite or PostgreSQL) fed the extension's frames over pipes.

Everything is a real subprocess speaking its real protocol; the helpers come from the
tests (``tests/postgres_support.py``, ``mcp_support.py``, ``host_client.py``).
"""

from __future__ import annotations

import itertools
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from host_client import HostProcess, frame, hello_fields  # noqa: E402
from mcp_support import BACKTRAIL, HttpServer, server_env  # noqa: E402

#: A durable cluster (PostgreSQL's defaults: fsync, synchronous commit, full page writes),
#: so that the PostgreSQL ledger is compared with SQLite's ``synchronous=FULL`` fairly.
DURABLE = "-c max_connections=200"
RETRYABLE = {13, 14, 17}
"""Error codes the extension retries (PROTOCOL.md section 4): the bench does the same."""


@contextmanager
def postgres() -> Iterator[Any]:
    """A throwaway cluster (``tests/postgres_support.py``: Debian's binaries, a non-root
    user, a temporary directory, a free port), durable."""
    from postgres_support import PostgresServer

    with PostgresServer.start(settings=DURABLE) as server:
        yield server


def postmaster_pid(server: Any) -> int:
    """The cluster's postmaster (its backends are its children)."""
    return int((Path(server.root) / "data" / "postmaster.pid").read_text().split()[0])


def describe(server: Any) -> dict[str, str]:
    """The server's version and the settings that decide what a commit costs."""
    import psycopg

    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level")
    with psycopg.connect(server.url(), autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def commit() -> str:
    """The commit of the tree the bench runs from (the product is the installed wheel)."""
    done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.strip()


def create_database(server: Any, name: str) -> str:
    server.admin(f"CREATE DATABASE {name}")
    return str(server.url(name))


def backtrail(home: Path, *args: str, **env: str) -> str:
    """The installed ``backtrail`` command on ``home``; its stdout (raises on failure)."""
    done = subprocess.run([BACKTRAIL, *args], env=server_env(home, **env), capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"backtrail {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def add_token(operator: Path, ledger_url: str, client: str, scope: str) -> str:
    """``backtrail token add CLIENT --scope SCOPE`` on the shared ledger: the token."""
    return backtrail(operator, "token", "add", client, "--scope", scope,
                     BACKTRAIL_LEDGER_URL=ledger_url).strip()  # fmt: skip


# ------------------------------------------------------------------------ nodes


@dataclass
class Node:
    """One ``backtrail mcp --http`` node with its own data directory (its own index)."""

    name: str
    home: Path
    embeddings: bool
    server: HttpServer
    started: float  # perf_counter before the process was spawned

    @property
    def pid(self) -> int:
        return int(self.server.process.pid)

    @property
    def host_url(self) -> str:
        """What a device's ``server_url`` is (the node's /host is beside /mcp)."""
        assert self.server.url is not None
        return self.server.url.removesuffix("/mcp")

    def stop(self) -> None:
        self.server.stop()


def start_node(root: Path, name: str, ledger_url: str, *, embeddings: bool,
               env: dict[str, str] | None = None) -> Node:  # fmt: skip
    """A node with default settings (debounce, follow poll) and ``env``, the model
    loaded at start when it embeds; the model cache and index in ``root/name``."""
    home = root / name
    home.mkdir(parents=True, exist_ok=True)
    args = ("--preload-model",) if embeddings else ()
    started = time.perf_counter()
    server = HttpServer(home, *args, BACKTRAIL_LEDGER_URL=ledger_url,
                        MCP_EMBEDDINGS="on" if embeddings else "off", **(env or {}))  # fmt: skip
    return Node(name, home, embeddings, server, started)


@dataclass
class Call:
    seconds: float
    at: float  # perf_counter when sent
    ok: bool
    data: dict[str, Any] | None = None
    error: str | None = None


class Session:
    """One official MCP client (streamable HTTP) held open across calls."""

    def __init__(self, node: Node, token: str) -> None:
        self.node, self.token = node, token
        self._stack = AsyncExitStack()
        self.client: Any = None

    async def __aenter__(self) -> Session:
        self.client = await self._stack.enter_async_context(
            self.node.server.client(self.token, mode="legacy", read_timeout_seconds=300))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def call(self, tool: str, arguments: dict[str, Any]) -> Call:
        at = time.perf_counter()
        try:
            result = await self.client.call_tool(tool, arguments)
        except Exception as error:  # noqa: BLE001 - counted and reported
            return Call(time.perf_counter() - at, at, False, error=repr(error)[:300])
        seconds = time.perf_counter() - at
        if result.is_error:
            text = "\n".join(getattr(b, "text", "") for b in result.content)
            return Call(seconds, at, False, error=text[:300])
        return Call(seconds, at, True, result.structured_content)

    async def status(self) -> dict[str, Any]:
        call = await self.call("get_status", {})
        if not call.ok or call.data is None:
            raise RuntimeError(f"get_status on {self.node.name} failed: {call.error}")
        return call.data

    async def search(self, query: str, limit: int = 10, *, explain: bool = False) -> Call:
        arguments = {"query": query, "limit": limit, **({"explain": True} if explain else {})}
        return await self.call("search_browsing", arguments)


# ------------------------------------------------------------------------ hosts


def forwarding_host(home: Path, node: Node, token_file: Path) -> HostProcess:
    """A device's native host forwarding to ``node`` (``server_url``/``server_token_file``)."""
    return HostProcess(home, env={"BACKTRAIL_SERVER_URL": node.host_url,
                                  "BACKTRAIL_SERVER_TOKEN_FILE": str(token_file)})  # fmt: skip


def local_host(home: Path) -> HostProcess:
    """A host on its own data directory (SQLite, or the ``ledger_url`` its config names),
    default settings except embeddings off (the comparison is of the ledgers)."""
    return HostProcess(home, env={"BACKTRAIL_EMBEDDINGS": "0", "BACKTRAIL_INDEXER_DEBOUNCE": "0.5"})


_visit_ids = itertools.count(1)


def page_messages(page: dict[str, Any], device: str, tag: str, at_ms: int
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """What the extension sends for one page it read: ``capture_page`` (its text, or its
    HTML when the page record carries ``html``) with the visit, then ``visit`` when the
    visit ends (its final dwell). Ids are made once, as the extension's queue does."""
    visit_id = f"{device}-{tag}-v{page['id']}-{next(_visit_ids)}"
    visit = {"visit_id": visit_id, "time": at_ms, "tab_id": 7, "window_id": 1,
             "transition": "link", "referrer": None, "dwell_ms": 5_000}  # fmt: skip
    body = {"content_type": "html", "html": page["html"]} if page.get("html") else {
        "content_type": "text", "text": page["text"]}  # fmt: skip
    capture = {"id": f"{visit_id}-cap", "type": "capture_page", "url": page["url"],
               "title": page["title"], "language": page.get("language") or "en", **body,
               "truncated": False, "dedupe_key": f"capture:{visit_id}",
               "captured_time": at_ms + 5_000, "visit": visit}  # fmt: skip
    final = {"id": f"{visit_id}-visit", "type": "visit", "url": page["url"],
             "title": page["title"], "visit": {**visit, "dwell_ms": 45_000}}  # fmt: skip
    return [capture, final]


@dataclass
class Fed:
    """What one host acknowledged: pages whose capture and visit both came back ok."""

    name: str
    pages: int = 0
    messages: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    first_at: float = float("nan")
    last_at: float = float("nan")
    page_seconds: list[float] = field(default_factory=list)  # capture sent -> visit acked


class PageSource:
    """A thread-safe iterator over page records, shared by the feeders (each takes the
    next page when it is ready for one)."""

    def __init__(self, pages: Iterator[dict[str, Any]]) -> None:
        self._pages, self._lock = pages, threading.Lock()

    def take(self) -> dict[str, Any] | None:
        with self._lock:
            return next(self._pages, None)


def feed(host: HostProcess, name: str, source: PageSource, *, window: int, tag: str,
         start_ms: int, profile: str, fed: Fed | None = None) -> Fed:  # fmt: skip
    """Say hello, then send every page ``source`` gives as capture + visit frames, at most
    ``window`` queued messages in flight (1: the extension's discipline, PROTOCOL.md
    section 4). Retryable answers (13, 14, 17) are resent after ``retry_after_ms``, as
    the extension does. Blocking: run one per thread."""
    answer = host.call("hello", timeout=120, **hello_fields(profile))
    if not answer.get("ok"):
        raise RuntimeError(f"{name}: hello refused: {answer}")
    fed = fed or Fed(name)
    pending: list[dict[str, Any]] = []  # messages to send, in order
    delayed: list[tuple[float, dict[str, Any]]] = []
    in_flight: dict[str, tuple[dict[str, Any], float]] = {}
    page_sent: dict[str, float] = {}
    n = 0
    fed.first_at = time.perf_counter()
    while True:
        now = time.perf_counter()
        for due, message in [d for d in delayed if d[0] <= now]:
            delayed.remove((due, message))
            pending.insert(0, message)
        while len(in_flight) < window:
            if not pending:
                page = None if delayed else source.take()  # a retry holds the queue (FIFO)
                if page is None:
                    break
                pending.extend(page_messages(page, name, tag, start_ms + n * 60_000))
                n += 1
            message = pending.pop(0)
            sent = time.perf_counter()
            page_sent.setdefault(message["id"].rsplit("-", 1)[0], sent)
            in_flight[message["id"]] = (message, sent)
            host.send_raw(frame(message))
        if not in_flight:
            if not delayed:
                break
            time.sleep(max(0.0, min(d[0] for d in delayed) - time.perf_counter()))
            continue
        wait = min((d[0] for d in delayed), default=now + 600) - time.perf_counter()
        try:
            got = host.frames.get(timeout=max(0.01, wait))
        except queue.Empty:
            continue
        if got is None:
            raise RuntimeError(f"{name}: the host closed stdout: {host.stderr()[-2000:]}")
        message, _sent = in_flight.pop(got["id"])
        if got.get("ok"):
            fed.messages += 1
            if message["type"] == "visit":
                done = time.perf_counter()
                fed.pages += 1
                fed.last_at = done
                fed.page_seconds.append(done - page_sent.pop(got["id"].rsplit("-", 1)[0]))
        elif got["error"]["code"] in RETRYABLE:
            fed.retries += 1
            wait_ms = got["error"].get("retry_after_ms") or 1_000
            delayed.append((time.perf_counter() + min(wait_ms, 5_000) / 1000.0, message))
        else:
            fed.errors.append(str(got)[:300])
    return fed


def feed_all(hosts: dict[str, HostProcess], source: PageSource, *, window: int, tag: str,
             start_ms: int, every: float = 60.0) -> list[Fed]:  # fmt: skip
    """Every host fed from ``source`` at once (a thread each); their results. Progress
    on stderr every ``every`` seconds."""
    results = {name: Fed(name) for name in hosts}
    failures: list[BaseException] = []

    def run(name: str, host: HostProcess) -> None:
        try:
            feed(host, name, source, window=window, tag=tag, start_ms=start_ms,
                 profile=f"{name}-profile", fed=results[name])  # fmt: skip
        except BaseException as error:  # noqa: BLE001 - re-raised below
            failures.append(error)

    threads = [threading.Thread(target=run, args=item, name=f"feed-{item[0]}")
               for item in hosts.items()]  # fmt: skip
    for thread in threads:
        thread.start()
    started = said = time.perf_counter()
    while any(thread.is_alive() for thread in threads):
        time.sleep(0.1)
        if time.perf_counter() - said >= every:
            said = time.perf_counter()
            pages = sum(f.pages for f in results.values())
            sys.stderr.write(f"{time.strftime('%H:%M:%S')}   {pages:,} pages acknowledged, "
                             f"{pages / (said - started):.1f}/s\n")  # fmt: skip
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [results[name] for name in hosts]


def host_status(host: HostProcess) -> dict[str, Any]:
    answer = host.call("status", timeout=120)
    if not answer.get("ok"):
        raise RuntimeError(f"status failed: {answer}")
    return dict(answer["result"])


def close_host(host: HostProcess) -> None:
    try:
        host.wait(120)
    finally:
        host.kill()

