"""Status that tells the truth: vector lag counts the passages waiting for vectors, the
last capture time counts captures still waiting for extraction, and long commands show
their progress from the start (on a terminal or, every few seconds, in a log)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backtrail.cli.progress import ProgressReporter
from backtrail.service import Memory
from helpers import LOREM, make_config, share_model, wait_for

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
T0 = 1_700_000_000
LONG_TEXT = "\n\n".join(f"Paragraph {n}. {LOREM}" for n in range(12))  # several passages


def article(n: int) -> str:
    return (f"<html><head><title>Article {n}</title></head><body><article>"
            f"<h1>Article {n}</h1><p>Number {n}. {LOREM}</p><p>{LOREM}</p>"
            "</article></body></html>")  # fmt: skip


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0", "COLUMNS": "200"})
    return subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def test_vector_lag_counts_the_passages_waiting_for_vectors_not_changes(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    share_model(monkeypatch)
    with Memory(make_config(data_home, embeddings=True)) as memory:
        for n in range(3):
            memory.capture_page(f"https://example.com/{n}", text=f"Page {n}. {LONG_TEXT}")
        memory.add_note("a note of my own")
        memory.catch_up(vectors=False)  # searchable as text, no vector yet
        stats = memory.stats()
        documents = stats.index["documents"]
        assert documents > 4 and stats.index["documents_with_vectors"] == 0
        assert stats.lag.vectors == documents
        assert memory.index_lag().vectors == documents
        assert memory.index_lag(passages=False).vectors is None  # a search does not count
        after = memory.catch_up()
        assert after.vectors == 0 and after.vectors_caught_up
        assert memory.stats().index["documents_with_vectors"] == documents
        memory.capture_page("https://example.com/0", text=f"Rewritten entirely. {LOREM}")
        memory.catch_up(vectors=False)
        assert memory.stats().lag.vectors == 1  # the new text's passage, not the others


def test_stats_and_doctor_say_how_many_passages_wait_for_vectors(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        memory.capture_page("https://example.com/a", text=LONG_TEXT)
        memory.catch_up()
        documents = memory.stats().index["documents"]
    report = json.loads(run(data_home, "stats", "--json").stdout)
    assert report["lag"]["vectors"] == documents
    assert report["index"]["documents_with_vectors"] == 0
    text = run(data_home, "stats").stdout
    assert f"text up to date; embeddings off ({documents} passages without vectors)" in text
    checks = json.loads(run(data_home, "doctor", "--no-model", "--json").stdout)["checks"]
    lag = next(c for c in checks if c["check"] == "index lag")
    assert lag["detail"] == (
        f"text: up to date; embeddings: off ({documents} passages without vectors)"
    )


def test_last_capture_time_counts_captures_waiting_for_extraction(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        memory.capture_page("https://example.com/old", text="An older capture.", captured_at=T0)
        receipt = memory.capture_page("https://example.com/new", html=article(1),
                                      captured_at=T0 + 60)  # fmt: skip
        assert receipt.outcome == "queued"
        stats = memory.stats()
        assert stats.ledger.last_capture_at == T0 + 60
        assert stats.lag.captures == 1
        memory.catch_up()
        stats = memory.stats()
        assert (stats.ledger.last_capture_at, stats.lag.captures) == (T0 + 60, 0)
    text = run(data_home, "stats").stdout
    assert "waiting for text extraction" not in text


def test_index_shows_the_extraction_of_waiting_captures_first(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        for n in range(30):
            memory.capture_page(f"https://example.com/{n}", html=article(n), captured_at=T0 + n)
        assert memory.stats().lag.captures == 30
    status = run(data_home, "stats").stdout
    assert "30 captured pages waiting for text extraction" in status
    done = run(data_home, "index")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("Extracting page text: ")  # the first thing it says
    assert "Extracting page text: 30/30 (100%)" in done.stderr
    assert "Indexing text" in done.stderr


def test_progress_lines_come_within_a_second_and_while_a_batch_runs() -> None:
    now = [0.0]
    out = io.StringIO()
    reporter = ProgressReporter(stream=out, interactive=False, interval=5, first_line=1,
                                clock=lambda: now[0])  # fmt: skip
    with reporter as bar:
        bar(0, 100, "extract")
        now[0] = 1.5  # the first batch is still running
        wait_for(lambda: out.getvalue(), timeout=30, what="the first line")
        assert out.getvalue() == "Extracting page text: 0/100 (0%)\n"
        bar(10, 100, "extract")  # too soon after that line for another
        assert len(out.getvalue().splitlines()) == 1
        now[0] = 7.0  # no batch has ended for 5 s: a line anyway
        wait_for(lambda: len(out.getvalue().splitlines()) == 2, timeout=30, what="a heartbeat")
        assert out.getvalue().splitlines()[1].startswith("Extracting page text: 10/100 (10%)")
    assert out.getvalue().splitlines()[-1].endswith("stopped after 7 s")  # not "done"


def test_a_phase_that_ends_within_half_a_second_writes_one_line() -> None:
    now = [0.0]
    out = io.StringIO()
    with ProgressReporter(stream=out, interactive=False, clock=lambda: now[0]) as bar:
        bar(0, 3, "text")
        now[0] = 0.4
        bar(3, 3, "text")
    assert out.getvalue().splitlines() == ["Indexing text: 3/3 (100%), 8/s, done in 0 s"]
