"""Status and results that tell a person the truth (issue 39 items 3 and 5), through the
real ``backtrail`` command on a real store: readable results, "hybrid" only with
vectors, "being embedded" only while a pass holds the lock, no visit time moved by a
re-run of the demo, captures extracted without a manual ``backtrail index``, and the
``recent``/``show`` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from backtrail.service import Memory, present
from helpers import LOREM, make_config, wait_for

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
NOW = 1_796_000_000
TITLE = "contextlib — Utilities for with-statement contexts — Python 3.11.2 documentation"
TEXT = (
    "A context manager is an object that defines the runtime context to be established "
    "when executing a with statement. The contextmanager decorator makes a generator "
    "function into a context manager, and I use it often, i.e. for files. " + LOREM
)


def run(home: Path, *args: str, embeddings: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "1" if embeddings else "0",
                "COLUMNS": "200"})  # fmt: skip
    return subprocess.run([BACKTRAIL, *args], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def python_docs(memory: Memory) -> None:
    """Three pages of one site sharing its title suffix, each with visits."""
    titles = [TITLE, "os.path — Common pathname manipulations — Python 3.11.2 documentation",
              "dis — Disassembler for Python bytecode — Python 3.11.2 documentation"]  # fmt: skip
    for n, title in enumerate(titles):
        url = f"https://docs.python.org/3.11/library/page{n}.html"
        for visit in range(3 if n == 0 else 1):
            memory.capture_page(
                url,
                text=TEXT if n == 0 else f"Page {n}. {LOREM}",
                title=title,
                visit={"visited_at": int(time.time()) - 7200 - visit * 60 - n * 600},
            )
    memory.catch_up(vectors=False)


def test_cli_search_reads_like_a_person_would_say_it(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        python_docs(memory)
    found = run(data_home, "search", "how do I make a context manager")
    assert found.returncode == 0, found.stderr
    out = found.stdout
    assert " 1. contextlib — Utilities for with-statement contexts\n" in out
    assert "Python 3.11.2 documentation" not in out
    assert "python.org · 2 hours ago · read 3 times · id 1" in out
    assert "score" not in out
    assert out.rstrip().endswith("(bm25)")
    data = json.loads(run(data_home, "search", "how do I make a context manager", "--json").stdout)
    first = data["results"][0]
    assert (first["display_title"], first["site"]) == (
        "contextlib — Utilities for with-statement contexts", "python.org")  # fmt: skip
    marked = {w.lower() for r in data["results"] for w in present_marks(r["snippet"])}
    assert marked.isdisjoint({"how", "do", "i", "a", "i.e"})  # no stop word is marked
    assert {"context", "manager"} <= marked


def present_marks(snippet: str) -> list[str]:
    import re

    return re.findall(r"\*\*(.+?)\*\*", snippet)


def test_a_hybrid_search_without_vectors_says_bm25_and_status_says_what_to_do(
    data_home: Path,
) -> None:
    with Memory(make_config(data_home)) as memory:
        python_docs(memory)
        documents = memory.stats().index["documents"]
    found = run(data_home, "search", "context manager", "--json", embeddings=True)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["mode"] == "bm25"  # no passage has its vector
    stats = run(data_home, "stats", embeddings=True).stdout
    expected = f"embeddings {documents} passages not embedded yet; run `backtrail index`"
    assert expected in stats and "rebuilding" not in stats
    doctor = json.loads(run(data_home, "doctor", "--no-model", "--json", embeddings=True).stdout)
    lag = next(c for c in doctor["checks"] if c["check"] == "index lag")
    assert not lag["ok"] and lag["fix"].startswith("run `backtrail index`")
    assert lag["detail"] == f"text: up to date; embeddings: {documents} passages not embedded yet"
    # While a pass holds the lock (another process), the same lag is work in progress.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a+'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
         str(data_home / "indexer.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        stats = run(data_home, "stats", embeddings=True).stdout
        (line,) = [line.strip() for line in stats.splitlines() if "index lag" in line]
        assert (
            line
            == f"index lag       text up to date; embeddings {documents} passages being embedded"
        )
        doctor = json.loads(run(data_home, "doctor", "--no-model", "--json",
                                embeddings=True).stdout)  # fmt: skip
        lag = next(c for c in doctor["checks"] if c["check"] == "index lag")
        assert lag["ok"] and "being embedded (an indexing pass is running)" in lag["detail"]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_running_the_demo_again_moves_no_visit_time(data_home: Path) -> None:
    demo = [sys.executable, "-m", "backtrail.cli.demo", "--source", "samples", "--no-serve",
            "--no-install"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(data_home), "BACKTRAIL_EMBEDDINGS": "0"})
    first = subprocess.run(demo, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr

    def visits() -> list[tuple[int, int, int, int]]:
        entries = json.loads(run(data_home, "recent", "--json").stdout)
        return [(e["page_id"], e["first_seen"], e["last_seen"], e["visit_count"]) for e in entries]

    before = visits()
    assert len(before) == 6 and len({seen for _, _, seen, _ in before}) == 6  # an hour apart
    time.sleep(1.1)
    again = subprocess.run(demo, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert visits() == before


def test_recent_and_show_read_what_the_assistant_tools_read(data_home: Path) -> None:
    with Memory(make_config(data_home)) as memory:
        python_docs(memory)
        memory.record_visit("https://never.example/only-a-visit?q=secret", title="Only visited")
    listed = run(data_home, "recent", "--limit", "2")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and "Only visited" in lines[0]
    assert lines[1].split()[0] == "1" and "contextlib — Utilities for with-statement" in lines[1]
    assert lines[1].endswith("python.org · 2 hours ago · read 3 times")
    shown = run(data_home, "show", "1", "--chars", "40")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("contextlib — Utilities for with-statement contexts\n"
                                   "https://docs.python.org/3.11/library/page0.html\n")  # fmt: skip
    assert TEXT[:40] in shown.stdout and TEXT[40:80] not in shown.stdout
    assert "more with --offset 40" in shown.stderr
    bare = run(data_home, "show", "4")
    assert bare.stdout.endswith(
        "\n\n(no text was captured for this page; only its visits are known)\n"
    )
    # Nor does a search show pieces of its address in place of text it does not have.
    found = json.loads(run(data_home, "search", "only visited", "--json").stdout)["results"]
    assert [(r["id"], r["snippet"]) for r in found] == [(4, "")]
    missing = run(data_home, "show", "999")
    assert missing.returncode == 3 and "999" in missing.stderr


def test_relative_times_read_as_people_say_them() -> None:
    from datetime import timezone

    utc = timezone.utc
    now = NOW  # 2026-11-30 08:53:20 UTC
    cases = [(now - 20, "just now"), (now - 300, "5 minutes ago"), (now - 3 * 3600, "3 hours ago"),
             (now - 86_400, "yesterday"), (now - 6 * 86_400, "Nov 24"),
             (now - 400 * 86_400, "Oct 26, 2025"), (None, "")]  # fmt: skip
    assert [present.relative_time(ts, now, utc) for ts, _ in cases] == [w for _, w in cases]
    assert [present.visits_text(n) for n in (None, 0, 1, 3, 1200)] == [
        "", "", "read once", "read 3 times", "read 1,200 times"]  # fmt: skip


def test_a_capture_queued_while_another_process_indexes_is_extracted_without_help(
    data_home: Path,
) -> None:
    config = make_config(data_home, background_indexing=True, indexer_debounce=0.05)
    html = (
        "<html><head><title>Queued</title></head><body><article><h1>Queued</h1>"
        f"<p>Zebra crossings everywhere. {LOREM}</p><p>{LOREM}</p></article></body></html>"
    )
    with Memory(config) as memory:
        memory.capture_page("https://example.com/q", text="first text " + LOREM)
        wait_for(lambda: memory.index_lag(passages=False).text_caught_up, 30)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a+'); "
             "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
             str(data_home / "indexer.lock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # A re-capture of a known page, queued for extraction: it writes no change.
        assert memory.capture_page("https://example.com/q", html=html).outcome == "queued"
        time.sleep(0.5)  # the background pass found the lock taken and looked again
        assert memory.index_lag(passages=False).captures == 1
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        wait_for(lambda: memory.index_lag(passages=False).captures == 0, 30, "extraction")
        wait_for(lambda: memory.search("zebra crossings").results, 30, "searchable")


def test_the_host_gives_readable_results_and_forgets_open_tabs_when_the_browser_closes(
    data_home: Path,
) -> None:
    from host_client import VISIT_TIME, HostProcess, capture_fields

    tab = {"tab_id": 1, "window_id": 1, "index": 0, "url": "https://example.com/one",
           "title": "One", "active": True, "pinned": False, "group_id": None,
           "last_accessed_time": VISIT_TIME}  # fmt: skip
    with HostProcess(data_home) as host:
        host.hello()
        host.ok("capture_page", **capture_fields("https://docs.python.org/3.11/library/c.html",
                                                 TEXT, visit_id="v1", title=TITLE))  # fmt: skip
        assert host.ok("tab_snapshot", tabs=[tab, {**tab, "tab_id": 2}], time=VISIT_TIME) == {
            "tabs": 2}  # fmt: skip
        assert host.ok("status")["counts"]["tabs"] == 2
        (result,) = wait_for(lambda: host.ok("search", query="context manager")["results"], 30)
        assert {k: result[k] for k in ("display_title", "site", "visits", "last_visit_ms",
                                       "visits_text")} == {  # fmt: skip
            "display_title": "contextlib — Utilities for with-statement contexts",
            "site": "python.org", "visits": 1, "last_visit_ms": VISIT_TIME // 1000 * 1000,
            "visits_text": "read once"}  # fmt: skip
        assert result["when"] == present.relative_time(VISIT_TIME // 1000)
        host.close_stdin()
        assert host.wait() == 0
    with HostProcess(data_home) as host:  # the browser starts again, before its snapshot
        host.hello()
        assert host.ok("status")["counts"]["tabs"] == 0
