"""The several-node benchmark (``python -m bench.system.nodes``) runs end to end on a few
pages: a corpus file made of the packaged sample articles and their sections, a query
file of three queries. It checks that every phase ran and that nothing was lost or
refused on the way (every page acknowledged, found on every node, no failed search),
never how fast: speed is the benchmark's business, not a test's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backtrail.indexer.extract import extract_main_text
from postgres_support import PostgresServer

pytestmark = pytest.mark.postgresql

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "python" / "backtrail" / "samples").glob("*.html"))
BASE = "https://www.postgresql.org/docs/15/"  # the bench's default set is "postgresql"


def corpus(data: Path) -> int:
    """``real/pages.jsonl`` in the corpus's format: each sample article and its sections."""
    records = []
    for path in SAMPLES:
        html = path.read_text(encoding="utf-8")
        title = re.search(r"<title>(.*?)</title>", html)
        assert title is not None
        pieces = [(f"{path.stem}.html", html)] + [
            (f"{path.stem}-{k}.html", f"<html><head><title>{heading} ({title.group(1)})</title>"
             f"</head><body><article><h1>{heading}</h1>{body}</article></body></html>")
            for k, (heading, body) in enumerate(
                re.findall(r"<h2>(.*?)</h2>\s*(<p>.*?</p>)", html, re.S), 1)
        ]  # fmt: skip
        for name, page in pieces:
            found = extract_main_text(page.encode("utf-8"), BASE + name)
            records.append({"id": len(records) + 1, "set": "postgresql", "url": BASE + name,
                            "title": found.title or name, "language": "en", "method": "test",
                            "html_bytes": len(page), "text": found.text})  # fmt: skip
    (data / "real").mkdir(parents=True)
    with open(data / "real" / "pages.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    return len(records)


def test_the_nodes_benchmark_runs_every_phase_on_a_few_pages(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """(``postgres_server``: skipped, or failed under CI, without PostgreSQL; the bench
    starts a durable cluster of its own.)"""
    assert corpus(tmp_path / "data") >= 12
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "dev-pypg.jsonl").write_text("".join(
        json.dumps({"id": f"q{n}", "query": q}) + "\n" for n, q in enumerate(
            ("interactive git rebase", "write-ahead log checkpoint", "http cache validation"))))
    out = tmp_path / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    done = subprocess.run(
        [sys.executable, "-m", "bench.system.nodes", "--quick", "--subset-pages", "4",
         "--pages", "10", "--compare-pages", "4", "--compare-queries", "3", "--search-rate", "1",
         "--data-dir", str(tmp_path / "data"), "--eval-dir", str(tmp_path / "eval"),
         "--workdir", str(tmp_path / "work"), "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    r = json.loads(out.read_text())
    assert "| figure | measured |" in done.stdout

    ingest = r["ingest"]
    assert (ingest["fed"]["pages"], ingest["fed"]["errors"]) == (4, 0)
    assert ingest["complete"]
    for node in ingest["nodes"].values():  # both nodes: every page, by words and vectors
        assert node["text_s_from_start"] is not None and node["vectors_s_from_start"] is not None
        assert node["found_by_title_of_20"] == 4
        for window in ("search_while_posting", "search_while_deriving"):
            assert node[window]["errors"] == 0
        assert node["search_while_deriving"]["n"] > 0
    assert r["vectors"]["text_complete"] and r["vectors"]["vectors_complete"]
    agreement = r["vectors"]["agreement"]  # node 3, built from the ledger, against 1 and 2
    assert agreement["ready"] and agreement["queries"] == 3
    assert (agreement["same_top10"], agreement["differing"]) == (3, [])
    assert (r["load"]["pages"], r["load"]["errors"]) == (6, 0)
    catchup = r["catchup"]
    assert catchup["pages"] == 10 and catchup["text_complete"]
    found, asked = catchup["found_by_title"].split("/")
    assert found == asked
    for runs in r["compare"]["runs"].values():
        assert [(run["pages"], run["errors"], run["search"]["errors"]) for run in runs] == [
            (4, 0, 0)]  # fmt: skip
    assert r["compare"]["ratio_pages_per_s_pg_over_sqlite"] > 0
