"""Several server nodes on one PostgreSQL ledger, fed by devices, on the real corpus
(issue 40 item 5): ``python -m bench.system.nodes [--quick]``.

A throwaway PostgreSQL cluster (durable settings), ``backtrail mcp --http`` nodes each with
a data directory and index of its own, native hosts forwarding to a node with device
tokens, all real subprocesses; every capture is a native-messaging frame over a pipe and
every search a call of the official MCP client over HTTP (or stdio, for the single-node
comparison). Phases, in order (``--skip`` any):

1. ``ingest``: 4 devices post the vector subset's pages (``--sets``) to node 1 while node
   2 follows the ledger; clients search both nodes at a fixed rate the whole time.
   Acknowledged pages/s, how long until every page is searchable by words and by vectors
   on each node, and search p50/p95 per node while the devices post and while the nodes
   derive (embed) what they acknowledged.
2. ``vectors``: a third node started empty on that ledger (with ``ingest`` skipped, the
   subset is loaded through a text-only node first): seconds until it finds every page by
   words, then by vectors (the embedding rate, passages/s).
3. ``catchup``: the rest of the corpus (to ``--pages``) through a text-only node, devices
   pipelining (the server's acknowledging capacity); then a fourth node started empty on
   the whole ledger: seconds until it finds every page by words. Its vectors are not
   waited for: their time is extrapolated from phase 2's rate (say so when reporting),
   unless ``--sets all`` makes phase 2 measure them on the whole corpus.
4. ``compare``: one native host in local mode, the same frames, its ledger on SQLite and on
   PostgreSQL; then one MCP client over stdio searching it (BM25: the host runs without
   embeddings, so the ledgers are what differs). The ratios of pages/s and of search p50.

Results: a Markdown table on stdout and ``bench/results/nodes-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench import common, real_corpus
from bench.system import cluster as cl
from bench.system import nodes_phases as ph
from bench.system.hosts import CpuMonitor

PHASES = ("ingest", "vectors", "catchup", "compare")
EVAL_DIR = Path(os.environ.get("BACKTRAIL_EVAL_DIR")
                or Path(__file__).resolve().parents[2].parent / "shared" / "eval")  # fmt: skip
"""The human-written query sets, read at bench time (``bench/README.md``)."""


# ------------------------------------------------------------------------ corpus


def pages_path(data_dir: Path) -> Path:
    path = real_corpus.real_dir(data_dir) / real_corpus.PAGES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: build the corpus first "
                                "(python -m bench.real_corpus, bench/README.md)")  # fmt: skip
    return path


def read_pages(data_dir: Path) -> Iterator[dict[str, Any]]:
    """The real corpus's pages that have text, in id order."""
    for page in common.read_jsonl(pages_path(data_dir)):
        if page.get("text"):
            page.pop("outline", None)
            yield page


def with_html(page: dict[str, Any]) -> dict[str, Any]:
    """The page with its Debian HTML file's content (the extension's usual form of a
    capture: every node then extracts the text itself)."""
    doc = next(s for s in real_corpus.SETS if s.name == page["set"])
    path = doc.root / page["url"].removeprefix(doc.base)
    return {**page, "html": path.read_text(encoding="utf-8", errors="replace")}


def passage_counts(data_dir: Path) -> Counter[int]:
    """Passages per page id, as the indexer cuts them (the corpus's passage file, whose
    ids are page id x 10,000 + index + 1)."""
    path = real_corpus.real_dir(data_dir) / real_corpus.passages_file()
    counts: Counter[int] = Counter()
    if not path.exists():
        return counts
    leading = re.compile(rb'^\{"id": (\d+)')
    with open(path, "rb") as fh:
        for line in fh:
            match = leading.match(line)
            if match:
                counts[int(match.group(1)) // 10_000] += 1
    return counts


def queries(eval_dir: Path) -> list[str]:
    path = eval_dir / "dev-pypg.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing (set BACKTRAIL_EVAL_DIR)")
    return [q["query"] for q in common.read_jsonl(path)]


class Sampler:
    """Passes pages through, noting their ids and keeping every ``every``-th (for the
    title check)."""

    def __init__(self, pages: Iterator[dict[str, Any]], every: int) -> None:
        self.pages, self.every = pages, every
        self.ids: set[int] = set()
        self.kept: list[dict[str, Any]] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for page in self.pages:
            self.ids.add(page["id"])
            if len(self.ids) % self.every == 0:
                self.kept.append({k: page[k] for k in ("url", "title")})
            yield page


# ------------------------------------------------------------------------- main


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    data_dir = Path(args.data_dir)
    sets = [s.name for s in real_corpus.SETS] if args.sets == ["all"] else args.sets
    subset = [p for p in read_pages(data_dir) if p["set"] in sets]
    if args.subset_pages is not None:  # a seeded sample, in id order
        subset = sorted(random.Random(0).sample(subset, min(args.subset_pages, len(subset))),
                        key=lambda p: p["id"])  # fmt: skip
    if args.content == "html":
        subset = [with_html(p) for p in subset]
    subset_ids = {p["id"] for p in subset}
    counts = passage_counts(data_dir)
    subset_passages = sum(counts[i] for i in subset_ids)
    result: dict[str, Any] = {
        "args": {k: v for k, v in vars(args).items() if k != "query_list"},
        "machine": {"cores": os.cpu_count(), "load_at_start": os.getloadavg()},
        "commit": cl.commit(),
        "queries": f"{args.eval_dir}/dev-pypg.jsonl ({len(args.query_list)})",
        "subset": {"sets": sets, "pages": len(subset), "passages": subset_passages},
    }
    monitor = CpuMonitor()
    monitor.start()
    with cl.postgres() as server:
        monitor.roots.add(cl.postmaster_pid(server))
        result["postgresql"] = cl.describe(server)
        url = cl.create_database(server, "bench")
        operator = root / "operator"
        reader = cl.add_token(operator, url, "bench-reader", "read")
        tokens = []
        for i in range(args.devices):
            token_file = root / f"device-{i}.token"
            token_file.write_text(cl.add_token(operator, url, f"device-{i}", "device") + "\n")
            token_file.chmod(0o600)
            tokens.append(token_file)
        ctx = ph.Context(root, server, url, reader, tokens, args.query_list, args)
        ctx.sample = [{k: p[k] for k in ("url", "title")}
                      for p in subset[:: max(1, len(subset) // 10)]][:10]  # fmt: skip
        if "ingest" not in args.skip:
            monitor.phase("ingest")
            result["ingest"] = await ph.phase_ingest(ctx, subset, subset_passages)
        elif "vectors" not in args.skip:  # the subset into the ledger another way
            monitor.phase("load")
            result["load_subset"] = await ph.phase_load(ctx, iter(subset), "the vector subset")
        if "vectors" not in args.skip:
            monitor.phase("vectors")
            out = await ph.new_node(ctx, "node-3", vectors=True, what="vectors")
            if out.get("vectors_s") and out.get("text_s") is not None:
                seconds = out["vectors_s"] - out["text_s"]
                out["passages"] = subset_passages
                out["passages_per_s"] = subset_passages / seconds if seconds > 0 else None
            result["vectors"] = out
        if "catchup" not in args.skip:
            loaded = ctx.ledger_pages
            limit = None if args.pages is None else max(0, args.pages - loaded)
            rest = (with_html(p) if args.content == "html" else p for p in read_pages(data_dir)
                    if p["id"] not in subset_ids or not loaded)  # fmt: skip
            sampler = Sampler(itertools.islice(rest, limit), 97)
            monitor.phase("load")
            result["load"] = await ph.phase_load(ctx, iter(sampler), "the rest of the corpus")
            ctx.sample = ctx.sample[:5] + sampler.kept[:: max(1, len(sampler.kept) // 5)][:5]
            monitor.phase("catchup")
            out = await ph.new_node(ctx, "node-4", vectors=False, what="catch-up")
            in_ledger = sampler.ids | (subset_ids if loaded else set())
            total = sum(counts[i] for i in in_ledger)
            rate = (result.get("vectors") or {}).get("passages_per_s")
            out["passages"] = total
            if total and rate and out.get("text_s") is not None:
                out["vectors_s_extrapolated"] = out["text_s"] + total / rate
            result["catchup"] = out
        if "compare" not in args.skip:
            monitor.phase("compare")
            result["compare"] = await ph.phase_compare(ctx, subset[: args.compare_pages])
    monitor.stop_event.set()
    result["cpu_by_phase"] = monitor.summary()
    return result


def report(r: dict[str, Any]) -> str:
    """The Markdown summary of a result (``nodes_report.rows``)."""
    from bench.system.nodes_report import rows

    return common.markdown_table(rows(r), ["figure", "measured"])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.system.nodes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a few hundred pages: 120 of the PostgreSQL set for the nodes, 400 "
                         "in the ledger for the catch-up, 60 for the comparison")
    ap.add_argument("--sets", type=lambda s: s.split(","), default=["python", "postgresql"],
                    help="the vector subset: the sets whose pages the devices post first and "
                         "whose vectors are waited for (comma-separated, or 'all'; default "
                         "python,postgresql: 1,668 pages, ~19k passages)")
    ap.add_argument("--subset-pages", type=int, help="a seeded sample of that many of them")
    ap.add_argument("--pages", type=int,
                    help="pages in the ledger for the catch-up (default: the whole corpus)")
    ap.add_argument("--content", choices=("text", "html"), default="text",
                    help="capture_page with the extracted text (default) or the page's HTML "
                         "(every node then extracts it)")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--window", type=int, default=1,
                    help="queued messages in flight per device (1: the extension's rule)")
    ap.add_argument("--bulk-window", type=int, default=16,
                    help="in flight per device while the rest of the corpus is loaded")
    ap.add_argument("--search-clients", type=int, default=2, help="per node")
    ap.add_argument("--search-rate", type=float, default=2.0, help="calls/s per client")
    ap.add_argument("--compare-pages", type=int, default=500)
    ap.add_argument("--compare-rounds", type=int, default=2)
    ap.add_argument("--compare-queries", type=int, default=200)
    ap.add_argument("--vector-limit", type=float, default=3_600.0,
                    help="seconds to wait at most for a node's index")
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between status polls")
    ap.add_argument("--node-env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment of every node (diagnostics; repeatable)")
    ap.add_argument("--skip", type=lambda s: set(s.split(",")), default=set(),
                    help=f"phases to leave out: {', '.join(PHASES)}")
    ap.add_argument("--data-dir", default=str(common.DATA_DIR))
    ap.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    ap.add_argument("--workdir", type=Path, help="data directories (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--out", type=Path, help="the result file (default bench/results/...)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sets = args.sets if args.sets != ["python", "postgresql"] else ["postgresql"]
        args.subset_pages = args.subset_pages or 120
        args.pages = args.pages or 400
        args.compare_pages, args.compare_rounds, args.compare_queries = 60, 1, 60
        args.poll = 0.5
    args.node_env = dict(item.split("=", 1) for item in args.node_env)
    unknown = args.skip - set(PHASES)
    if unknown:
        ap.error(f"unknown phases: {', '.join(sorted(unknown))}")
    args.query_list = queries(args.eval_dir)
    return args


def main(argv: Sequence[str] | None = None) -> Path:
    args = parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bt-nodes-"))
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    started = time.perf_counter()
    try:
        result = asyncio.run(run(args, root))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    result["seconds"] = time.perf_counter() - started
    result["args"]["skip"] = sorted(args.skip)
    path = args.out or common.RESULTS_DIR / f"nodes-{stamp}.json"
    common.write_json(path, json.loads(json.dumps(result, default=str)))
    common.say(report(result))
    common.say(f"\nresult: {path}")
    return path


if __name__ == "__main__":
    main()
