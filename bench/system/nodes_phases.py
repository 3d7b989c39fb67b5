"""The phases of the several-node benchmark (``python -m bench.system.nodes``; see
``bench/system/README.md``). Each returns a JSON-able dict of what it measured."""

from __future__ import annotations

import asyncio
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import common
from bench.system import cluster as cl
from bench.system.hosts import cpu_seconds

DAY_MS = 86_400_000


@dataclass
class Context:
    root: Path  # data directories of nodes and devices
    server: Any  # the PostgreSQL cluster (tests/postgres_support.PostgresServer)
    url: str  # the shared ledger of the node phases
    reader: str  # a read-scope token (searches, status)
    device_tokens: list[Path]
    queries: list[str]
    args: Any
    start_ms: int = field(default_factory=lambda: int(time.time() * 1000) - 30 * DAY_MS)
    ledger_pages: int = 0  # pages the shared ledger holds (after the phases so far)
    sample: list[dict[str, Any]] = field(default_factory=list)  # pages searched by title


def say(*parts: object) -> None:
    common.say(time.strftime("%H:%M:%S"), *parts)


def fed_summary(fed: Sequence[cl.Fed]) -> dict[str, Any]:
    """Acknowledged pages/s over all hosts, from the first frame to the last answer."""
    first = min(f.first_at for f in fed)
    last = max(f.last_at for f in fed if f.pages) if any(f.pages for f in fed) else first
    pages = sum(f.pages for f in fed)
    seconds = last - first
    latencies = [s for f in fed for s in f.page_seconds]
    return {
        "pages": pages, "messages": sum(f.messages for f in fed), "seconds": seconds,
        "pages_per_s": pages / seconds if seconds > 0 else float("nan"),
        "messages_per_s": sum(f.messages for f in fed) / seconds if seconds > 0 else float("nan"),
        "page_ack_ms": common.summarize_ms(latencies),
        "retries": sum(f.retries for f in fed),
        "errors": sum(len(f.errors) for f in fed),
        "first_errors": [e for f in fed for e in f.errors][:5],
        "per_host_pages": {f.name: f.pages for f in fed},
        "first_at": first, "last_at": last,
    }  # fmt: skip


# ------------------------------------------------------------------ watching nodes


class Watcher:
    """Polls ``get_status`` of each node until its index holds ``expected`` pages in
    words (text) and in vectors; keeps the samples."""

    def __init__(self, sessions: dict[str, cl.Session], expected: int, every: float) -> None:
        self.sessions, self.expected, self.every = sessions, expected, every
        self.samples: dict[str, list[dict[str, Any]]] = {name: [] for name in sessions}
        self.text_at: dict[str, float] = {}
        self.vectors_at: dict[str, float] = {}

    async def poll(self) -> None:
        for name, session in self.sessions.items():
            status = await session.status()
            now = time.perf_counter()
            pages = (status.get("counts") or {}).get("pages", 0)
            text, vectors = status.get("index_text_behind"), status.get("index_vectors_behind")
            self.samples[name].append({"t": now, "pages": pages, "text_behind": text,
                                       "vectors_behind": vectors,
                                       "caught_up": status.get("vectors_caught_up")})
            # While a new index is built from the ledger, index_text_behind counts only
            # the changes made since the build began: text_caught_up says it is done.
            if pages >= self.expected and text == 0 and status.get("text_caught_up", True):
                self.text_at.setdefault(name, now)
                if status.get("vectors_caught_up") and vectors == 0:
                    self.vectors_at.setdefault(name, now)

    async def until(self, *, vectors: bool, limit: float) -> bool:
        """Poll until every node is done (text, or text and vectors); False at ``limit``."""
        deadline = time.perf_counter() + limit
        last_say = time.perf_counter()
        while True:
            await self.poll()
            done = self.vectors_at if vectors else self.text_at
            if len(done) == len(self.sessions):
                return True
            if time.perf_counter() > deadline:
                return False
            if time.perf_counter() - last_say > 30:
                last_say = time.perf_counter()
                say("  waiting:", ", ".join(
                    f"{n}: {s[-1]['pages']:,} pages, {s[-1]['text_behind']} text / "
                    f"{s[-1]['vectors_behind']} vector changes behind"
                    for n, s in self.samples.items()))  # fmt: skip
            await asyncio.sleep(self.every)


async def open_loop(session: cl.Session, queries: Sequence[str], rate: float,
                    stop: asyncio.Event, offset: int) -> list[cl.Call]:  # fmt: skip
    """A search every ``1 / rate`` seconds on a fixed schedule (not after the previous
    answer) until ``stop``: the latency an assistant sees."""
    calls: list[cl.Call] = []
    start = time.perf_counter() + offset * 0.137 / rate
    n = 0
    while not stop.is_set():
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
                break
            except TimeoutError:
                pass
        calls.append(await session.search(queries[(offset * 37 + n) % len(queries)]))
        n += 1
    return calls


def latency(calls: Sequence[cl.Call], lo: float, hi: float) -> dict[str, Any]:
    """p50/p95 of the calls sent in [lo, hi), their errors and search modes."""
    window = [c for c in calls if lo <= c.at < hi]
    ok = [c for c in window if c.ok]
    modes: dict[str, int] = {}
    for c in ok:
        mode = str((c.data or {}).get("mode"))
        modes[mode] = modes.get(mode, 0) + 1
    return {**common.summarize_ms([c.seconds for c in ok]), "errors": len(window) - len(ok),
            "first_error": next((c.error for c in window if not c.ok), None),
            "modes": modes}  # fmt: skip


def _urls(call: cl.Call) -> list[str | None]:
    return [r.get("url") for r in (call.data or {}).get("results", [])] if call.ok else []


async def found_by_title(session: cl.Session, pages: Sequence[dict[str, Any]]) -> int:
    """How many of ``pages`` come back in the top 10 when searched by their title."""
    hits = 0
    for page in pages:
        hits += page["url"] in _urls(await session.search(page["title"] or page["url"]))
    return hits


def _fmt(seconds: float | None) -> str:
    return "(not reached)" if seconds is None else f"{seconds:.1f} s"


def _since(moment: float | None, origin: float) -> float | None:
    return None if moment is None else moment - origin


def lag_series(watcher: Watcher, name: str, origin: float, every: float = 10.0
               ) -> list[list[Any]]:  # fmt: skip
    """``[seconds, pages, text behind, vector changes behind]`` about every ``every`` s."""
    out: list[list[Any]] = []
    for s in watcher.samples[name]:
        if not out or s["t"] - origin - out[-1][0] >= every:
            out.append([round(s["t"] - origin, 1), s["pages"], s["text_behind"],
                        s["vectors_behind"]])  # fmt: skip
    return out


def _node_times(watcher: Watcher, name: str, origin: float, acked: float) -> dict[str, Any]:
    return {"lag": lag_series(watcher, name, origin),
            "text_s_from_start": _since(watcher.text_at.get(name), origin),
            "text_s_after_last_ack": _since(watcher.text_at.get(name), acked),
            "vectors_s_from_start": _since(watcher.vectors_at.get(name), origin),
            "vectors_s_after_last_ack": _since(watcher.vectors_at.get(name), acked)}  # fmt: skip


# ------------------------------------------------------------------------ phases


async def phase_ingest(ctx: Context, pages: list[dict[str, Any]], passages: int) -> dict[str, Any]:
    """Item 1 and 2: devices forwarding to node 1 while clients search nodes 1 and 2."""
    args = ctx.args
    say(f"ingest: {len(pages):,} pages ({passages:,} passages) through {args.devices} devices "
        f"into node-1, window {args.window}; node-2 follows")  # fmt: skip
    nodes = [cl.start_node(ctx.root, f"node-{i}", ctx.url, embeddings=True, env=args.node_env)
             for i in (1, 2)]  # fmt: skip
    hosts: dict[str, Any] = {}
    out: dict[str, Any] = {"pages": len(pages), "passages": passages, "window": args.window,
                           "devices": args.devices, "content": args.content}  # fmt: skip
    try:
        async with AsyncExitStack() as stack:
            status = {n.name: await stack.enter_async_context(cl.Session(n, ctx.reader))
                      for n in nodes}  # fmt: skip
            searchers = {n.name: [await stack.enter_async_context(cl.Session(n, ctx.reader))
                                  for _ in range(args.search_clients)] for n in nodes}
            for sessions in searchers.values():  # connected and warm (model loaded)
                for s in sessions:
                    await s.search(ctx.queries[0])
            hosts = {f"device-{i}": cl.forwarding_host(ctx.root / f"device-{i}", nodes[0],
                                                       ctx.device_tokens[i])
                     for i in range(args.devices)}  # fmt: skip
            watcher = Watcher(status, ctx.ledger_pages + len(pages), args.poll)
            cpu0 = {n.name: cpu_seconds(n.pid) for n in nodes}
            stop = asyncio.Event()
            origin = time.perf_counter()
            tasks = [asyncio.create_task(open_loop(s, ctx.queries, args.search_rate, stop, k))
                     for k, s in enumerate(x for v in searchers.values() for x in v)]
            feeding = asyncio.create_task(asyncio.to_thread(
                cl.feed_all, hosts, cl.PageSource(iter(pages)), window=args.window,
                tag="a", start_ms=ctx.start_ms))  # fmt: skip
            while not feeding.done():
                await watcher.poll()
                await asyncio.sleep(args.poll)
            fed = fed_summary(feeding.result())
            acked = fed["last_at"]
            say(f"  acknowledged {fed['pages']:,} pages in {fed['seconds']:.1f} s: "
                f"{fed['pages_per_s']:.1f} pages/s ({fed['retries']} retries, "
                f"{fed['errors']} errors)")  # fmt: skip
            ctx.ledger_pages += fed["pages"]
            watcher.expected = ctx.ledger_pages
            complete = await watcher.until(vectors=True, limit=args.vector_limit)
            derived = time.perf_counter()
            stop.set()
            calls = await asyncio.gather(*tasks)
            cpu = {n.name: cpu_seconds(n.pid) - cpu0[n.name] for n in nodes}
            by_node: dict[str, list[cl.Call]] = {}
            for calls_of, (name, _s) in zip(
                calls, [(n, s) for n, v in searchers.items() for s in v], strict=True
            ):  # fmt: skip
                by_node.setdefault(name, []).extend(calls_of)
            sample = random.Random(7).sample(pages, min(20, len(pages)))
            out.update(fed={k: v for k, v in fed.items() if k not in ("first_at", "last_at")},
                       complete=complete, node_cpu_s=cpu, nodes={})  # fmt: skip
            for n in nodes:
                out["nodes"][n.name] = {
                    **_node_times(watcher, n.name, origin, acked),
                    "search_while_posting": latency(by_node[n.name], origin, acked),
                    "search_while_deriving": latency(by_node[n.name], acked, derived),
                    "found_by_title_of_20": await found_by_title(searchers[n.name][0], sample),
                }  # fmt: skip
            v1 = out["nodes"]["node-1"]
            say(f"  node-1: text {_fmt(v1['text_s_after_last_ack'])}, vectors "
                f"{_fmt(v1['vectors_s_after_last_ack'])} after the last acknowledgement")
    finally:
        for host in hosts.values():
            cl.close_host(host)
        for n in nodes:
            n.stop()
    return out


async def new_node(ctx: Context, name: str, *, vectors: bool, what: str) -> dict[str, Any]:
    """A node started with an empty data directory against the shared ledger: seconds
    from its spawn until its index holds every page in words, then in vectors."""
    say(f"{what}: {name} starts empty on {ctx.ledger_pages:,} pages")
    node = cl.start_node(ctx.root, name, ctx.url, embeddings=True, env=ctx.args.node_env)
    try:
        async with cl.Session(node, ctx.reader) as session:
            watcher = Watcher({name: session}, ctx.ledger_pages, ctx.args.poll)
            cpu0 = cpu_seconds(node.pid)
            text_done = await watcher.until(vectors=False, limit=ctx.args.vector_limit)
            text_at = watcher.text_at.get(name)
            say(f"  text searchable after {_fmt(_since(text_at, node.started))}")
            out: dict[str, Any] = {"pages": ctx.ledger_pages, "text_complete": text_done,
                                   "text_s": _since(text_at, node.started)}  # fmt: skip
            if vectors and text_done:
                done = await watcher.until(vectors=True, limit=ctx.args.vector_limit)
                out["vectors_complete"] = done
                out["vectors_s"] = _since(watcher.vectors_at.get(name), node.started)
                say(f"  vectors complete after {_fmt(out['vectors_s'])}")
            out["node_cpu_s"] = cpu_seconds(node.pid) - cpu0
            out["lag"] = lag_series(watcher, name, node.started)
            found = await found_by_title(session, ctx.sample)
            out["found_by_title"] = f"{found}/{len(ctx.sample)}"
            earlier = [n for n in ("node-1", "node-2") if (ctx.root / n).is_dir()]
            if vectors and out.get("vectors_complete") and earlier:
                out["agreement"] = await agreement(ctx, name, session, earlier)
    finally:
        node.stop()
        shutil.rmtree(node.home, ignore_errors=True)
    return out


async def agreement(ctx: Context, name: str, session: cl.Session, earlier: list[str]
                    ) -> dict[str, Any]:  # fmt: skip
    """Item 3: the new node's top 10 against the earlier nodes' for every dev query, all
    asked within a moment of each other (recency counts in the ranking). The earlier
    nodes start again on the data directories they kept, and catch up first."""
    nodes = [cl.start_node(ctx.root, n, ctx.url, embeddings=True, env=ctx.args.node_env)
             for n in earlier]  # fmt: skip
    try:
        async with AsyncExitStack() as stack:
            sessions = {name: session}
            for n in nodes:
                sessions[n.name] = await stack.enter_async_context(cl.Session(n, ctx.reader))
            watcher = Watcher(sessions, ctx.ledger_pages, ctx.args.poll)
            ready = await watcher.until(vectors=True, limit=ctx.args.vector_limit)
            same, overlap, first, differ, examples = 0, 0.0, 0, [], []
            for query in ctx.queries:
                calls = {n: await s.search(query, explain=True) for n, s in sessions.items()}
                tops = {n: _urls(c) for n, c in calls.items()}
                mine = tops.pop(name)
                same += all(top == mine for top in tops.values())
                first += all(top[:1] == mine[:1] for top in tops.values())
                overlap += min(len(set(top) & set(mine)) / max(1, len(top), len(mine))
                               if top != mine else 1.0 for top in tops.values())  # fmt: skip
                if any(top != mine for top in tops.values()):
                    differ.append(query)
                    if len(examples) < 10:  # why: each node's scores and signals
                        examples.append({"query": query, "nodes": {
                            n: [{k: r.get(k) for k in ("url", "score", "explanation")}
                                for r in (c.data or {}).get("results", [])]
                            for n, c in calls.items()}})  # fmt: skip
    finally:
        for n in nodes:
            n.stop()
    count = len(ctx.queries)
    say(f"  {name} against {', '.join(earlier)}: the same top 10 for {same}/{count} dev "
        f"queries, the same first result for {first}/{count}")  # fmt: skip
    return {"nodes": [name, *earlier], "ready": ready, "queries": count, "same_top10": same,
            "same_first": first, "mean_overlap": overlap / count if count else None,
            "differing": differ, "examples": examples}  # fmt: skip


async def phase_load(ctx: Context, pages: Iterator[dict[str, Any]], what: str
                     ) -> dict[str, Any]:  # fmt: skip
    """``pages`` into the ledger through a text-only node: devices posting pipelined
    (``--bulk-window``), the server's capacity to acknowledge."""
    args = ctx.args
    say(f"load: {what} through {args.devices} devices into a text-only node, window "
        f"{args.bulk_window}")  # fmt: skip
    node = cl.start_node(ctx.root, "loader", ctx.url, embeddings=False, env=args.node_env)
    hosts = {f"device-{i}": cl.forwarding_host(ctx.root / f"device-{i}-load", node,
                                               ctx.device_tokens[i])
             for i in range(args.devices)}  # fmt: skip
    try:
        cpu0 = cpu_seconds(node.pid)
        fed = fed_summary(await asyncio.to_thread(
            cl.feed_all, hosts, cl.PageSource(pages), window=args.bulk_window, tag="c",
            start_ms=ctx.start_ms))  # fmt: skip
        cpu = cpu_seconds(node.pid) - cpu0
    finally:
        for host in hosts.values():
            cl.close_host(host)
        node.stop()
        shutil.rmtree(node.home, ignore_errors=True)
    ctx.ledger_pages += fed["pages"]
    say(f"  acknowledged {fed['pages']:,} pages in {fed['seconds']:.1f} s: "
        f"{fed['pages_per_s']:.1f} pages/s ({fed['retries']} retries, {fed['errors']} errors)")
    return {**{k: v for k, v in fed.items() if k not in ("first_at", "last_at")},
            "window": args.bulk_window, "node_cpu_s": cpu}  # fmt: skip


async def phase_compare(ctx: Context, pages: list[dict[str, Any]]) -> dict[str, Any]:
    """Item 4: one native host in local mode, the same frames, its data directory's
    ledger on SQLite or (``backtrail config set ledger_url``) on PostgreSQL; then one
    official MCP client over stdio searching that data directory. Rounds alternate the
    order of the backends."""
    from bench.system import mcpclients as mc

    args = ctx.args
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgresql": []}
    for r in range(args.compare_rounds):
        order = ("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite")
        for backend in order:
            say(f"compare round {r + 1}: {backend}, {len(pages):,} pages, window {args.window}")
            home = ctx.root / f"compare-{backend}-{r}"
            home.mkdir(parents=True)
            if backend == "postgresql":
                url = cl.create_database(ctx.server, f"compare_{r}")
                cl.backtrail(home, "config", "set", "ledger_url", url)
            host = cl.local_host(home)
            try:
                fed = fed_summary([await asyncio.to_thread(
                    cl.feed, host, "local", cl.PageSource(iter(pages)), window=args.window,
                    tag=f"e{r}", start_ms=ctx.start_ms, profile="local-profile")])  # fmt: skip
                while cl.host_status(host)["index_lag"] != 0:
                    await asyncio.sleep(0.1)
                indexed = time.perf_counter() - fed["last_at"]
                host_cpu = cpu_seconds(host.process.pid)
            finally:
                cl.close_host(host)
            client = await mc.connect(home, f"{backend}-{r}", ctx.root, MCP_EMBEDDINGS="off")
            try:
                for q in ctx.queries[:10]:  # warm-up, not timed
                    await client.search(q)
                client.calls.clear()
                for n in range(args.compare_queries):
                    await client.search(ctx.queries[n % len(ctx.queries)])
                calls = list(client.calls)
            finally:
                await client.close()
            ok = [c.seconds for c in calls if c.ok]
            run = {"round": r + 1, **{k: v for k, v in fed.items()
                                      if k not in ("first_at", "last_at", "per_host_pages")},
                   "text_indexed_s_after_last_ack": indexed, "host_cpu_s": host_cpu,
                   "search": {**common.summarize_ms(ok), "errors": len(calls) - len(ok)}}
            say(f"  {fed['pages_per_s']:.1f} pages/s, search p50 {run['search']['p50_ms']:.1f} ms")
            runs[backend].append(run)
            shutil.rmtree(home, ignore_errors=True)

    def mean(backend: str, *keys: str) -> float:
        values = []
        for run in runs[backend]:
            value: Any = run
            for key in keys:
                value = value[key]
            values.append(value)
        return sum(values) / len(values)

    pages_s = {b: mean(b, "pages_per_s") for b in runs}
    p50 = {b: mean(b, "search", "p50_ms") for b in runs}
    return {"pages": len(pages), "window": args.window, "runs": runs,
            "pages_per_s": pages_s, "search_p50_ms": p50,
            "ratio_pages_per_s_pg_over_sqlite": pages_s["postgresql"] / pages_s["sqlite"],
            "ratio_search_p50_pg_over_sqlite": p50["postgresql"] / p50["sqlite"]}  # fmt: skip
