"""Acceptance tests of the "ledger and service layer" issue, over real processes sharing
one data directory: (a) concurrent mixed operations, (b) SIGKILL at random points,
(c) bad input to every service call, (d) forget leaves no trace."""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from backtrail import _core
from backtrail.errors import (
    BacktrailError,
    InvalidInput,
    InvalidUrl,
    LimitExceeded,
    TokenNotFound,
)
from backtrail.indexer import TYPE_PASSAGE, doc_id
from backtrail.service import Memory
from backtrail.store import LEDGER_FILENAME, Ledger
from helpers import index_files_containing, make_config, share_model, wait_for

T0 = 1_700_000_000


def token(worker: int | str, n: int) -> str:
    """A word that occurs in exactly one capture (letters and digits: one BM25 term)."""
    return f"cap{worker}x{n}z"


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


# ------------------------------------------------------- (a) concurrent operations

WORKER = r"""
import json, random, sys
from backtrail.config import Config
from backtrail.errors import FactNotFound, KeyExists, VersionConflict
from backtrail.service import Memory

home, worker, ops, embeddings = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
config = Config.load(home, environ={}, overrides={
    "embeddings": embeddings, "indexer_debounce": 0.2, "search_fresh_wait": 30.0,
})
memory = Memory(config, client=f"worker-{worker}")
rng = random.Random(worker)
print("ready", flush=True)
sys.stdin.readline()  # start together
report = {"captures": [], "increments": {}, "conflicts": 0, "searches": 0, "misses": [],
          "errors": []}

def increment(key):
    while True:
        try:
            fact = memory.get_fact(key)
        except FactNotFound:
            try:
                memory.set_fact(key, "1", require_absent=True)
                return
            except KeyExists:
                report["conflicts"] += 1
                continue
        try:
            if rng.random() < 0.5:
                memory.set_fact(key, str(int(fact.value) + 1), expected_version=fact.version)
            else:
                memory.set_fact(key, str(int(fact.value) + 1), expected_value=fact.value)
            return
        except VersionConflict:
            report["conflicts"] += 1

for i in range(ops):
    try:
        roll = rng.random()
        if roll < 0.5 or not report["captures"]:
            word = f"cap{worker}x{i}z"
            url = f"https://w{worker}.example.com/page/{i}?utm_source=test"
            memory.capture_page(url, text=f"Worker {worker} page {i} mentions {word}.",
                                title=f"w{worker} p{i}")
            report["captures"].append([url, word])
        elif roll < 0.92:
            key = f"shared/counter{rng.randrange(4)}"
            increment(key)
            report["increments"][key] = report["increments"].get(key, 0) + 1
        else:
            url, word = rng.choice(report["captures"])
            found = [r.url for r in memory.search(word).results]
            report["searches"] += 1
            if url not in found:
                report["misses"].append(word)
    except Exception as error:
        report["errors"].append(f"{type(error).__name__}: {error}")
memory.close()
print(json.dumps(report), flush=True)
"""


def run_workers(home: Path, processes: int, ops: int, embeddings: bool) -> list[dict[str, Any]]:
    workers = [spawn(WORKER, home, n, ops, int(embeddings)) for n in range(processes)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline() == "ready\n", worker.communicate(timeout=60)[1]
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=1200)
            assert worker.returncode == 0, err[-3000:]
            reports.append(json.loads(out.splitlines()[-1]))
        return reports
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()


def check_every_capture_is_stored_and_searchable(memory: Memory, captures: list[str]) -> None:
    for url, word in captures:
        page = memory.get_page(url)  # PageNotFound if an acknowledged capture was lost
        assert word in page.text
        found = memory.search(word, mode="bm25").results
        assert [r.url for r in found] == [page.url], word


def test_four_processes_of_mixed_operations_lose_nothing(data_home: Path) -> None:
    """(a) 4 processes x 2,500 operations: captures, compare-and-swap increments of
    shared facts, and searches that must find the process's own earlier captures.
    Embeddings are disabled here to keep the run short on two cores (the indexer's
    vector phase is covered by the smaller test below)."""
    processes, ops = 4, 2_500
    reports = run_workers(data_home, processes, ops, embeddings=False)
    assert [r["errors"] for r in reports] == [[]] * processes
    assert [r["misses"] for r in reports] == [[]] * processes  # read-your-writes held
    assert sum(r["searches"] for r in reports) > processes * ops * 0.06
    captures = [capture for r in reports for capture in r["captures"]]
    increments: dict[str, int] = {}
    for report in reports:
        for key, count in report["increments"].items():
            increments[key] = increments.get(key, 0) + count
    with Memory(make_config(data_home)) as memory:
        for key, count in increments.items():
            fact = memory.get_fact(key)
            assert (fact.value, fact.version) == (str(count), count)
        stats = memory.stats().ledger
        mutations = len(captures) + sum(increments.values())
        assert stats.counts["pages"] == len(captures)
        events = memory._ledger.list_events(limit=100_000)
        lost = sum(e.action == "fact.cas_fail" for e in events)  # races lost, then retried
        assert stats.counts["events"] == mutations + lost
        assert mutations == stats.max_change_seq
        per_client: dict[str, int] = {}
        for event in events:
            if event.action == "fact.cas_fail":
                continue
            per_client[event.client] = per_client.get(event.client, 0) + 1
        assert per_client == {
            f"worker-{n}": len(r["captures"]) + sum(r["increments"].values())
            for n, r in enumerate(reports)
        }
        assert memory.catch_up().text_caught_up
        check_every_capture_is_stored_and_searchable(memory, captures)


def test_two_processes_with_embeddings_leave_every_capture_embedded(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a, with vectors) 2 processes x 60 operations with the model loaded; after a
    final catch-up every passage has a vector and hybrid search finds every capture."""
    reports = run_workers(data_home, 2, 60, embeddings=True)
    assert [r["errors"] for r in reports] == [[], []]
    assert [r["misses"] for r in reports] == [[], []]
    share_model(monkeypatch)
    with Memory(make_config(data_home, embeddings=True)) as memory:
        lag = memory.catch_up()
        assert lag.vectors_caught_up
        index = memory.stats().index
        assert index["documents_with_vectors"] == index["documents"] > 0
        captures = [capture for r in reports for capture in r["captures"]]
        for url, word in captures:
            page = memory.search(word)
            assert page.mode == "hybrid" and page.results[0].url == memory.get_page(url).url


# ------------------------------------------------------------------- (b) SIGKILL

CAPTURER = r"""
import sys
from backtrail.config import Config
from backtrail.service import Memory

home, run = sys.argv[1], sys.argv[2]
config = Config.load(home, environ={}, overrides={
    "embeddings": False, "indexer_debounce": 0.01, "indexer_max_delay": 0.05,
})
memory = Memory(config, client=f"capturer-{run}")
print("ready", flush=True)
n = 0
while True:
    word = f"cap{run}x{n}z"
    url = f"https://kill.example.com/{run}/{n}"
    memory.capture_page(url, text=f"Run {run} capture {n}: {word}. " * (1 + n % 7),
                        visit={"visited_at": 1_700_000_000 + n})
    print("ack", url, word, flush=True)
    n += 1
"""


def test_killing_a_capturing_process_loses_no_acknowledged_capture(data_home: Path) -> None:
    """(b) SIGKILL a capturing process (whose background indexer commits every few
    captures) at random points, 20 times; the ledger stays intact, every acknowledged
    capture is there, and the index catches up by itself."""
    rng = random.Random(20)
    acked: list[tuple[str, str]] = []
    for run in range(20):
        child = spawn(CAPTURER, data_home, run)
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n", child.communicate(timeout=60)[1]
            for _ in range(rng.randrange(0, 120)):
                kind, url, word = child.stdout.readline().split()
                assert kind == "ack"
                acked.append((url, word))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
    assert len(acked) > 500
    with sqlite3.connect(data_home / LEDGER_FILENAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    _core.Index(str(data_home / "index"))  # opens: not corrupt
    config = make_config(data_home, background_indexing=True)
    with Memory(config) as memory:  # nothing to call: the background indexer catches up
        wait_for(lambda: memory.index_lag().text_caught_up, what="the index to catch up")
        check_every_capture_is_stored_and_searchable(memory, acked)
        assert memory.stats().ledger.counts["visits"] >= len(acked)


# ---------------------------------------------------------------- (c) bad input

HUGE = "x" * 2_000_001  # over the max_capture_bytes of the test (2,000,000)
LONE = "bad \ud800 surrogate"
BAD_URLS = [
    "javascript:alert(1)", "ftp://example.com/x", "https://", "not a url",
    "https://example.com/" + "a" * 9000, "https://exa mple.com/", LONE, 42, None,
]  # fmt: skip
PAGE = "https://example.com/n"

# (method, args, kwargs, expected exception)
BAD_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any], type[BacktrailError]]] = [
    *[("capture_page", (url,), {"text": "x"}, InvalidUrl) for url in BAD_URLS],
    ("capture_page", (PAGE,), {}, InvalidInput),
    ("presented_title", (12, "example.com"), {}, InvalidInput),
    ("presented_title", ("A title", ["example.com"]), {}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "html": "<p>a</p>"}, InvalidInput),
    ("capture_page", (PAGE,), {"text": 12}, InvalidInput),
    ("capture_page", (PAGE,), {"text": b"\xff\xfe bytes"}, InvalidInput),
    ("capture_page", (PAGE,), {"text": LONE}, InvalidInput),
    ("capture_page", (PAGE,), {"html": LONE}, InvalidInput),
    ("capture_page", (PAGE,), {"html": 3.5}, InvalidInput),
    ("capture_page", (PAGE,), {"text": HUGE}, LimitExceeded),
    ("capture_page", (PAGE,), {"html": HUGE.encode()}, LimitExceeded),
    ("capture_page", (PAGE,), {"text": "a", "title": 5}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "title": LONE}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "captured_at": "now"}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "captured_at": T0 * 1000}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "visit": 1}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "visit": {"tab": 1}}, InvalidInput),
    ("capture_page", (PAGE,), {"text": "a", "visit": {"tab_id": "1"}}, InvalidInput),
    ("record_visit", ("data:text/html,hi",), {}, InvalidUrl),
    ("record_visit", ("https://example.com/n",), {"visited_at": "now"}, InvalidInput),
    ("record_visit", ("https://example.com/n",), {"source": LONE}, InvalidInput),
    ("import_visits", ("https://example.com",), {}, InvalidInput),
    ("import_visits", ([{"url": "https://example.com/n", "visited_at": -5}],), {}, InvalidInput),
    ("import_visits", ([{"url": 5, "visited_at": T0}],), {}, InvalidUrl),
    ("set_visit_dwell", ("1", 5), {}, InvalidInput),
    ("set_visit_dwell", (1, -5), {}, InvalidInput),
    ("pause_capture", ("tomorrow",), {}, InvalidInput),
    ("set_exclusions", ("example.com",), {}, InvalidInput),
    ("set_exclusions", ([5],), {}, InvalidUrl),
    ("set_exclusions", ([LONE],), {}, InvalidUrl),
    ("add_exclusion", ("",), {}, InvalidUrl),
    ("remove_exclusion", (5,), {}, InvalidUrl),
    ("remove_exclusion", ("not-a-rule-in-use.example",), {}, InvalidInput),
    ("exclusion_for", ("javascript:void(0)",), {}, InvalidUrl),
    ("count_skipped", ("",), {}, InvalidInput),
    ("count_skipped", (7,), {}, InvalidInput),
    ("count_skipped", ("a\nb",), {}, InvalidInput),
    ("search", ("",), {}, InvalidInput),
    ("search", (LONE,), {}, InvalidInput),
    ("search", (["list"],), {}, InvalidInput),
    ("search", ("x" * 5000,), {}, LimitExceeded),
    ("search", ("ok",), {"limit": 10_000}, InvalidInput),
    ("search", ("ok",), {"domains": [LONE]}, InvalidUrl),
    ("search", ("ok",), {"cursor": "forged"}, InvalidInput),
    ("search", ("ok",), {"mode": 3}, InvalidInput),
    ("find_forgotten", ("",), {}, InvalidInput),
    ("find_forgotten", ("ok",), {"since": 1.5}, InvalidInput),
    ("search_facts", (5,), {}, InvalidInput),
    ("search_highlights", (LONE,), {}, InvalidInput),
    ("search_notes", ("ok",), {"limit": -1}, InvalidInput),
    ("search_bookmarks", ("ok",), {"cursor": 5}, InvalidInput),
    ("get_page", (), {}, InvalidInput),
    ("get_page", ("ftp://example.com",), {}, InvalidUrl),
    ("get_page", (), {"page_id": "1"}, InvalidInput),
    ("get_page", (), {"page_id": 1, "offset": -1}, InvalidInput),
    ("get_page", (), {"page_id": 1, "length": 10**9}, InvalidInput),
    ("forget_site", ("org",), {}, InvalidUrl),
    ("forget_site", ("co.uk",), {}, InvalidUrl),
    ("forget_site", (5,), {}, InvalidUrl),
    ("timeline", ("yesterday",), {}, InvalidInput),
    ("timeline", (), {"domain": 5}, InvalidUrl),
    ("timeline", (), {"limit": 0}, InvalidInput),
    ("add_highlight", ("https://example.com/n", ""), {}, InvalidInput),
    ("add_highlight", ("https://example.com/n", LONE), {}, InvalidInput),
    ("add_highlight", ("https://example.com/n", "x" * 30_000), {}, LimitExceeded),
    ("add_highlight", ("mailto:a@example.com", "x"), {}, InvalidUrl),
    ("set_highlight_note", ("1", "note"), {}, InvalidInput),
    ("set_highlight_note", (1, 5), {}, InvalidInput),
    ("delete_highlight", (True,), {}, InvalidInput),
    ("get_highlight", (0,), {}, InvalidInput),
    ("list_highlights", (), {"domain": 7}, InvalidUrl),
    ("add_note", (5,), {}, InvalidInput),
    ("add_note", ("x" * 200_000,), {}, LimitExceeded),
    ("add_note", (LONE,), {}, InvalidInput),
    ("add_note", ("ok",), {"url": "file:///etc/passwd"}, InvalidUrl),
    ("update_note", (1, None), {}, InvalidInput),
    ("delete_note", ("1",), {}, InvalidInput),
    ("get_note", (-3,), {}, InvalidInput),
    ("list_notes", (), {"since": "x"}, InvalidInput),
    ("upsert_bookmark", (5, "https://example.com"), {}, InvalidInput),
    ("upsert_bookmark", ("b9", "chrome://settings"), {}, InvalidUrl),
    ("upsert_bookmark", ("b9", "https://example.com"), {"title": LONE}, InvalidInput),
    ("delete_bookmark", (5,), {}, InvalidInput),
    ("replace_bookmarks", ("not a list",), {}, InvalidInput),
    ("replace_bookmarks", ([{"browser_id": "1", "url": "https://e.com", "x": 1}],), {},
     InvalidInput),
    ("list_bookmarks", (), {"limit": -1}, InvalidInput),
    ("snapshot_tabs", ("tabs",), {}, InvalidInput),
    ("snapshot_tabs", ([{"tab_id": "1", "window_id": 1}],), {}, InvalidInput),
    ("apply_tab_event", ("exploded", 1), {}, InvalidInput),
    ("apply_tab_event", ("opened", "1"), {"window_id": 1}, InvalidInput),
    ("apply_tab_event", ("updated", 1), {"url": 5}, InvalidInput),
    ("list_tabs", (), {"profile": 5}, InvalidInput),
    ("active_tab", (), {"profile": LONE}, InvalidInput),
    ("set_fact", ("", "v"), {}, InvalidInput),
    ("set_fact", (LONE, "v"), {}, InvalidInput),
    ("set_fact", ("k", "v" * 20_000), {}, LimitExceeded),
    ("set_fact", ("k" * 300, "v"), {}, LimitExceeded),
    ("set_fact", ("k", 5), {}, InvalidInput),
    ("set_fact", ("k", "v"), {"expected_version": "1"}, InvalidInput),
    ("set_fact", ("k", "v"), {"require_absent": "yes"}, InvalidInput),
    ("get_fact", (5,), {}, InvalidInput),
    ("list_facts", (5,), {}, InvalidInput),
    ("delete_fact", ("",), {}, InvalidInput),
    ("fact_history", (LONE,), {}, InvalidInput),
    ("find_facts", ("",), {}, InvalidInput),
    ("find_facts", ("q",), {"top_k": 0}, InvalidInput),
    ("events", (), {"after_id": -1}, InvalidInput),
    ("events", (), {"action": LONE}, InvalidInput),
    ("browser", ("",), {}, InvalidInput),
    ("browser", (5,), {}, InvalidInput),
    ("forget", (), {}, InvalidInput),
    ("forget", (), {"url": "nope"}, InvalidUrl),
    ("forget", (), {"domain": 5}, InvalidUrl),
    ("forget", (), {"since": "x"}, InvalidInput),
    ("forget", (), {"everything": "yes"}, InvalidInput),
    ("forget", (), {"url": "https://example.com/a", "domain": "example.com"}, InvalidInput),
    ("catch_up", (), {"progress": 5}, InvalidInput),
    ("catch_up", (), {"vectors": "yes"}, InvalidInput),
    ("reindex", (), {"progress": "x"}, InvalidInput),
    ("similar_pages", ("1",), {}, InvalidInput),
    ("similar_pages", (1,), {"probes": 0}, InvalidInput),
    ("import_facts", ("not a list",), {}, InvalidInput),
    ("import_facts", (["not an object"],), {}, InvalidInput),
    ("import_facts", ([],), {"overwrite": "yes"}, InvalidInput),
    ("imported_ids", ("page", "x"), {}, InvalidInput),
    ("imported_ids", ("note", 5), {}, InvalidInput),
    ("import_page_text", ("nope", "text"), {}, InvalidUrl),
    ("import_page_text", ("https://example.com/i", 5), {}, InvalidInput),
    ("import_page_text", ("https://example.com/i", "t"), {"captured_at": "x"}, InvalidInput),
    ("list_visits", ("1",), {}, InvalidInput),
    ("list_visits", (1,), {"limit": -1}, InvalidInput),
    ("reading_by_day", ("x", 10), {}, InvalidInput),
    ("reading_by_day", (0, 10), {"utc_offset": 10**9}, InvalidInput),
    ("forget_preview", (), {}, InvalidInput),
    ("forget_preview", (), {"url": "nope"}, InvalidUrl),
    ("forget_preview", (), {"domain": "org"}, InvalidUrl),
    ("hold_write_lock", (0,), {}, InvalidInput),
    ("hold_write_lock", ("2",), {}, InvalidInput),
    ("hold_write_lock", (1,), {"client": LONE}, InvalidInput),
    ("add_token", ("not a client id",), {"scope": "write"}, InvalidInput),
    ("add_token", ("laptop",), {"scope": "admin"}, InvalidInput),
    ("add_token", (5,), {"scope": "read"}, InvalidInput),
    ("revoke_tokens", ("",), {}, InvalidInput),
    ("revoke_tokens", ("nobody",), {}, TokenNotFound),
    ("list_tokens", (), {"include_revoked": "yes"}, InvalidInput),
    ("device", ("not a client id",), {}, InvalidInput),
    ("device", ("laptop", ""), {}, InvalidInput),
    ("prune_deliveries", (), {"older_than_days": -1}, InvalidInput),
    ("prune_deliveries", (), {"older_than_days": "5"}, InvalidInput),
]  # fmt: skip
# Methods that take no input (or none that can be wrong), and how the rest are covered.
NO_INPUT = {"capture_settings", "resume_capture", "index_lag", "stats", "model_status",
            "load_model", "close", "indexer", "announce_host", "actions", "batch",
            "skipped_counts", "follow_changes"}  # fmt: skip
OTHER_ENTRY_POINTS = {"open", "acting_as"}  # checked separately below


def ledger_dump(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(f"file:{home / LEDGER_FILENAME}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )]  # fmt: skip
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


@pytest.fixture
def stocked(data_home: Path) -> Iterator[Memory]:
    """A memory holding one of everything, fully indexed."""
    config = make_config(data_home, max_capture_bytes=2_000_000)
    with Memory(config) as memory:
        memory.capture_page("https://example.com/a", text="stocked page about herons",
                            visit={"visited_at": T0})  # fmt: skip
        memory.add_highlight("https://example.com/a", "herons", note="birds")
        memory.add_note("stocked note")
        memory.upsert_bookmark("b1", "https://example.com/b", title="Stocked bookmark")
        memory.snapshot_tabs([{"tab_id": 1, "window_id": 1, "url": "https://example.com/a"}])
        memory.set_fact("k", "v")
        memory.pause_capture(until=T0 * 2)
        memory.resume_capture()
        memory.catch_up()
        yield memory


def test_bad_input_to_every_service_call_is_refused_and_changes_nothing(
    stocked: Memory, data_home: Path
) -> None:
    """(c) Wrong types, oversize values, invalid URLs and invalid Unicode (lone
    surrogates) get the right exception with a clear message; nothing stored changes."""
    public = {name for name, _ in inspect.getmembers(Memory) if not name.startswith("_")}
    covered = {name for name, *_ in BAD_CALLS}
    assert public - NO_INPUT - OTHER_ENTRY_POINTS == covered
    before = ledger_dump(data_home), stocked.indexer.index.watermark()
    for name, args, kwargs, expected in BAD_CALLS:
        with pytest.raises(BacktrailError) as raised:
            getattr(stocked, name)(*args, **kwargs)
        error = raised.value
        assert isinstance(error, expected), (name, args, kwargs, error)
        assert error.message and "\ud800" not in error.message, (name, error.message)
        assert error.to_dict()["code"] == error.code
    with pytest.raises(InvalidInput):
        with stocked.acting_as(5):  # type: ignore[arg-type]
            pass
    with pytest.raises(InvalidInput):
        Memory.open(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        Memory("config")  # type: ignore[arg-type]
    assert (ledger_dump(data_home), stocked.indexer.index.watermark()) == before
    found = stocked.search("herons").results
    assert {(r.kind, r.url) for r in found} == {
        ("page", "https://example.com/a"),
        ("highlight", "https://example.com/a"),
    }


# -------------------------------------------------------------------- (d) forget

SECRETS = ["zygomorphicflower", "quibblesnatch", "vorpalwidget"]
SECRET_PAGE = (
    "The zygomorphicflower grows only on volcanic slopes, where bumblebees pollinate it.\n"
    "Local guides call the seed pods quibblesnatch and sell vorpalwidget charms nearby."
)


def scan(paths: Callable[[], list[Path]], words: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths():
        data = path.read_bytes()
        for word in words:
            if word.encode() in data:
                found.setdefault(word, []).append(path.name)
    return found


def test_forget_leaves_no_trace_in_search_index_files_or_ledger(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(d) After forget(url), the words cannot be found by any search mode, are gone
    from every file under the index directory and from the ledger files; the audit log
    records that a deletion happened, without the content."""
    share_model(monkeypatch)
    url = "https://secrets.example.com/flora"
    with Memory(make_config(data_home, embeddings=True)) as memory:
        memory.capture_page(url, text=SECRET_PAGE, title="Volcanic flora")
        memory.add_highlight(url, "zygomorphicflower seed pods", note="quibblesnatch!")
        memory.add_note("ask about vorpalwidget prices", url=url)
        memory.capture_page("https://kept.example.org/", text="The hellebore keeps flowering.")
        memory.catch_up()
        index_dir, files = (
            data_home / "index",
            lambda: [p for p in data_home.rglob("*") if p.is_file()],
        )
        question = "flowers pollinated by bees on volcanoes"
        for mode in ("bm25", "vector", "hybrid"):
            assert url in [
                r.url for r in memory.search(f"zygomorphicflower {question}", mode=mode).results
            ]
        for word in SECRETS:  # the scan below can see them: it is not vacuous
            assert index_files_containing(index_dir, word), word
        assert set(scan(files, SECRETS)) == set(SECRETS)
        vectors_before = memory.stats().index["documents_with_vectors"]

        report = memory.forget(url=url)

        assert report.ledger_purged and report.index_purged
        assert (report.counts["pages"], report.counts["highlights"], report.counts["notes"]) == (
            1,
            1,
            1,
        )
        for mode in ("bm25", "vector", "hybrid"):
            for query in [*SECRETS, question]:
                for result in memory.search(
                    query, mode=mode, kinds=["page", "highlight", "note"]
                ).results:
                    assert result.url != url and not any(w in result.snippet for w in SECRETS)
        assert scan(files, SECRETS) == {}  # index files, ledger, WAL: nowhere
        assert index_files_containing(index_dir, "hellebore")  # the kept page still is
        stats = memory.stats().index
        assert stats["documents"] == stats["documents_with_vectors"] == vectors_before - 3
        assert stats["vectors"] == stats["documents_with_vectors"]  # dead vectors compacted
        assert memory.indexer.index.get(doc_id(TYPE_PASSAGE, 1, 0)) is None
        events = memory._ledger.list_events(action="forget")
        assert len(events) == 1 and events[0].target == "url"
        everything = json.dumps([asdict(e) for e in memory._ledger.list_events(limit=1000)])
        assert "secrets.example.com" not in everything
        assert not any(word in everything for word in SECRETS)

        memory.forget(everything=True)
        assert scan(files, ["hellebore"]) == {}
        assert memory.stats().index["documents"] == 0
    with Ledger.open(data_home) as ledger:
        assert ledger.stats().counts["pages"] == 0
