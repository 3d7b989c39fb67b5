"""The native host's end of session, over real pipes and real processes: when stdin
closes during an indexing pass, the host exits promptly without waiting for the pass,
loses nothing it acknowledged, and a host started by a reconnect meanwhile resumes the
work instead of doing it a second time beside the first."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from backtrail.store import LEDGER_FILENAME
from helpers import wait_for
from host_client import HostProcess, capture_fields

PAGES = 60
SECTION = "<p>" + "Every transaction appends its changes to the journal first. " * 10 + "</p>"


def heavy_page(n: int) -> str:
    """A page whose extraction takes a noticeable time, with one word of its own."""
    body = "".join(f"<h2>Section {i}</h2>{SECTION}" for i in range(200))
    return (f"<html><body><article><h1>Journal {n}</h1><p>marker{n}word</p>{body}"
            "</article></body></html>")


def pending_captures(home: Path) -> int:
    conn = sqlite3.connect(f"file:{home / LEDGER_FILENAME}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM raw_captures").fetchone()[0])
    finally:
        conn.close()


def extracted_by(log: str, pid: int) -> set[int]:
    return {int(n) for n in re.findall(rf" {pid} DEBUG \S+: extracted queued capture (\d+)", log)}


def test_a_host_whose_stdin_ends_mid_pass_exits_at_once_and_the_next_host_resumes_the_pass(
    tmp_path: Path,
) -> None:
    home = tmp_path / "backtrail-home"
    debug = {"BACKTRAIL_LOG_LEVEL": "DEBUG"}
    first = HostProcess(home, env=debug)
    try:
        first.hello()
        for n in range(PAGES):
            first.ok("capture_page", **capture_fields(
                f"https://docs.example/journal/{n}", heavy_page(n), visit_id=f"v-{n}", html=True,
            ))  # fmt: skip
        wait_for(lambda: 0 < pending_captures(home) < PAGES, what="the pass to be under way")
        first.close_stdin()
        second = HostProcess(home, env=debug)  # the browser reconnects at once
        try:
            assert first.wait(timeout=10) == 0
            second.hello()
            wait_for(lambda: pending_captures(home) == 0 and second.ok("status")["index_lag"] == 0,
                     timeout=300, what="the second host to finish the pass")  # fmt: skip
            for n in range(PAGES):  # every acknowledged capture is searchable
                found = second.ok("search", query=f"marker{n}word", limit=1)["results"]
                assert [r["url"] for r in found] == [f"https://docs.example/journal/{n}"], n
            assert second.wait() == 0
        finally:
            second.kill()
    finally:
        first.kill()
    log = (home / "logs" / "native-host.log").read_text(encoding="utf-8")
    by_first = extracted_by(log, first.process.pid)
    by_second = extracted_by(log, second.process.pid)
    assert by_first and by_second  # the first stopped mid-pass; the second took over
    assert not by_first & by_second  # no capture was extracted twice
    assert len(by_first | by_second) == PAGES
    assert "closed database" not in log + first.stderr()
    assert "Traceback" not in first.stderr()
