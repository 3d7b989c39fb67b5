"""Concurrency: a ledger shared between threads, and four processes writing at once
(compare-and-swap increments and captures) on one ledger file or PostgreSQL database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backtrail.errors import VersionConflict
from backtrail.store import Ledger

PYTHON_SRC = Path(__file__).resolve().parent.parent / "python"

# Each test runs on SQLite and on PostgreSQL (conftest.py: ledger_target).
pytestmark = pytest.mark.backends("sqlite", "postgresql")


# ------------------------------------------------------------------- concurrency


def test_a_ledger_shared_between_threads_serialises_calls(ledger: Ledger) -> None:
    errors: list[BaseException] = []

    def increment() -> None:
        try:
            for _ in range(50):
                while True:
                    try:
                        fact = ledger.get_fact("n")
                        value = str(int(fact.value) + 1)
                        ledger.set_fact("n", value, expected_version=fact.version)
                        break
                    except VersionConflict:
                        continue
        except BaseException as error:  # reported below
            errors.append(error)

    ledger.set_fact("n", "0")
    threads = [threading.Thread(target=increment) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert ledger.get_fact("n").value == "200"


WORKER = r"""
import json, sys
from backtrail.errors import FactNotFound, KeyExists, VersionConflict
from backtrail.store import Ledger

path, worker, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ledger = Ledger(path, client=f"worker-{worker}", busy_timeout_ms=60_000)
print("ready", flush=True)
sys.stdin.readline()  # start together
captures = increments = conflicts = 0
for i in range(ops):
    if i % 2 == 0:
        ledger.capture_page(
            f"https://example.com/w{worker}/p{i}?utm_source=test",
            text=f"worker {worker} wrote page {i}", title=f"w{worker} p{i}",
        )
        captures += 1
        continue
    key = f"counter/{i % 3}"
    while True:
        try:
            fact = ledger.get_fact(key)
        except FactNotFound:
            try:
                ledger.set_fact(key, "1", require_absent=True)
                break
            except KeyExists:
                conflicts += 1
                continue
        try:
            if i % 4 == 1:
                ledger.set_fact(key, str(int(fact.value) + 1), expected_version=fact.version)
            else:
                ledger.set_fact(key, str(int(fact.value) + 1), expected_value=fact.value)
            break
        except VersionConflict:
            conflicts += 1
    increments += 1
ledger.close()
print(json.dumps({"captures": captures, "increments": increments, "conflicts": conflicts}))
"""


def test_four_processes_writing_at_once_lose_nothing(ledger_target: Path | str) -> None:
    processes, ops = 4, 500
    path = ledger_target  # not created yet (an empty database): the workers race to create it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_SRC), *sys.path])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(n), str(ops)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        for n in range(processes)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line == "ready\n", worker.communicate(timeout=30)[1]
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=600)
            assert worker.returncode == 0, err
            reports.append(json.loads(out))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    expected_per_key = {k: 0 for k in range(3)}
    for i in range(1, ops, 2):
        expected_per_key[i % 3] += processes
    assert sum(r["captures"] for r in reports) == processes * ops // 2
    assert sum(r["increments"] for r in reports) == processes * ops // 2
    with Ledger(path) as ledger:
        for k, expected in expected_per_key.items():
            fact = ledger.get_fact(f"counter/{k}")
            assert (fact.value, fact.version) == (str(expected), expected)
        stats = ledger.stats()
        assert stats.counts["pages"] == stats.counts["page_versions"] == processes * ops // 2
        writes = processes * ops  # every capture and every successful set
        events = ledger.list_events(limit=100_000)
        refused = [e for e in events if e.action == "fact.cas_fail"]  # lost races, retried
        assert stats.counts["events"] == writes + len(refused)
        assert stats.counts["changes"] == writes == stats.max_change_seq
        events = [e for e in events if e.action != "fact.cas_fail"]
        assert len([e for e in events if e.action == "page.capture"]) == processes * ops // 2
        assert len([e for e in events if e.action == "fact.set"]) == processes * ops // 2
        per_client = {f"worker-{n}": 0 for n in range(processes)}
        for event in events:
            per_client[event.client] += 1
        assert per_client == {f"worker-{n}": ops for n in range(processes)}
