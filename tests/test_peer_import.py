"""``backtrail import mcp-memory-bridge`` and ``backtrail import bravemcp``: real peer
databases (built with the peers' own schemas, see ``peer_files.py``) imported by the real
command, then read back through ``backtrail mcp`` and the ledger."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from backtrail.service import Memory, peer_import
from backtrail.store import Ledger
from helpers import make_config
from peer_files import BraveMcpDb, MemoryBridgeDb, iso_ms, seconds_iso
from test_cli import run
from test_mcp_bridge import raw

T0 = 1_780_000_000  # 2026-05-28


def _text(result: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in result.get("content", []))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _peer_time(value: str) -> str:
    """The peer's millisecond time as Backtrail shows it (whole seconds)."""
    return value[:19] + "Z"


# ------------------------------------------------------------- mcp-memory-bridge


def _bridge(path: Path) -> Path:
    """A memory.db with every kind of history the peer records."""
    db = MemoryBridgeDb(path)
    db.set("user/theme", "light", "cursor", iso_ms(T0, 120))
    db.get("user/theme", "claude-desktop", iso_ms(T0 + 5, 7))
    db.set("user/theme", "dark", "claude-desktop", iso_ms(T0 + 60, 999))
    db.event("cas_fail", "user/theme", "sepia", "cursor", iso_ms(T0 + 61))
    db.event("search", "user/theme", "appearance preference for screens (score 0.71)",
             "cursor", iso_ms(T0 + 62))  # fmt: skip
    db.set("pet/name", "Fluffy", "cursor", iso_ms(T0 + 100))
    db.delete("pet/name", "claude-desktop", iso_ms(T0 + 200))
    db.delete("never/there", "cursor", iso_ms(T0 + 201))  # logged by the peer all the same
    db.set("shared/decision", "cursor said A", "cursor", iso_ms(T0 + 300))
    db.delete("shared/decision", "cursor", iso_ms(T0 + 310))
    db.set("shared/decision", "claude said B", "claude", iso_ms(T0 + 320, 500))
    db.event("demo-lock-hold", None, None, "B", iso_ms(T0 + 400))  # about no fact
    db.close()
    return path


KEYS = ["user/theme", "pet/name", "never/there", "shared/decision"]


def _expected_history(answers: dict[str, Any], which: str) -> str:
    return "\n".join(f"{_peer_time(at)} {client} {action}: {value}"
                     for at, client, action, value in answers[which])  # fmt: skip


def test_facts_and_their_history_answer_as_the_peer_did(tmp_path: Path) -> None:
    peer = _bridge(tmp_path / "memory.db")
    before = _digest(peer)
    home = tmp_path / "home"
    done = run(home, "import", "mcp-memory-bridge", str(peer))
    assert done.returncode == 0, done.stderr
    assert "4 keys, 2 new" in done.stdout and "history events added" in done.stdout
    assert "Left out: 1 events about no fact." in done.stdout
    assert _digest(peer) == before  # opened read-only
    with raw(home, MCP_LOG_READS="off") as server:
        server.start()
        ident = 10
        for key in KEYS:
            answers = MemoryBridgeDb.answers(peer, key)
            ident += 1
            history = _text(server.tool(ident, "memory_history", key=key))
            assert history == _expected_history(answers, "writes"), key
            ident += 1
            with_reads = _text(server.tool(ident, "memory_history", key=key, include_reads=True))
            assert with_reads == _expected_history(answers, "reads"), key
            ident += 1
            got = server.tool(ident, "memory_get", key=key, include_events=True)
            if answers["fact"] is None:
                assert got["isError"] is True
                assert _text(got) == f"Error executing tool memory_get: no fact for key {key!r}"
                continue
            value, source, updated = answers["fact"]
            first, *events = _text(got).split("\n")
            assert first.startswith(
                f"{key} = {value}  (source: {source}, updated: {_peer_time(updated)}, version: "
            )
            assert events[0] == "events:"
            assert events[1:] == [
                f"  {_peer_time(at)} {client} {action}: {value}"
                for at, client, action, value in answers["get_events"]
            ]
        versions = {f["fact"]["key"]: f["fact"]["version"] for f in (
            server.tool(50 + i, "memory_get", key=k)["structuredContent"]
            for i, k in enumerate(["user/theme", "shared/decision"])
        )}  # fmt: skip
        # One per write and per delete of a live value, as Backtrail counts them.
        assert versions == {"user/theme": 2, "shared/decision": 3}
        # A compare-and-swap against the imported version works, and a stale one fails.
        stale = server.tool(60, "memory_set", key="user/theme", value="x", expected_version=1)
        assert stale["isError"] is True and "CAS failed" in _text(stale)
        fresh = server.tool(61, "memory_set", key="user/theme", value="x", expected_version=2)
        assert "version 3" in _text(fresh)
        server.close()


def test_importing_facts_again_adds_nothing(tmp_path: Path) -> None:
    peer = _bridge(tmp_path / "memory.db")
    home = tmp_path / "home"
    assert run(home, "import", "mcp-memory-bridge", str(peer)).returncode == 0
    with Ledger.open(home, client="test") as ledger:
        events = len(ledger.list_events(limit=10_000))
        facts = ledger.list_facts(log=False)
    again = run(home, "import", "mcp-memory-bridge", str(peer), "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)["import"]
    assert (result["created"], result["updated"], result["events"]) == (0, 0, 0)
    assert result["unchanged"] == 2 and result["history_only"] == 2
    with Ledger.open(home, client="test") as ledger:
        assert len(ledger.list_events(limit=10_000)) == events
        assert ledger.list_facts(log=False) == facts


def test_a_key_with_another_value_is_kept_unless_overwrite(tmp_path: Path) -> None:
    peer = _bridge(tmp_path / "memory.db")
    home = tmp_path / "home"
    with Ledger.open(home, client="backtrail-user") as ledger:
        mine = ledger.set_fact("user/theme", "solarized")
        ledger.set_fact("shared/decision", "claude said B")  # the same value: no conflict
    done = run(home, "import", "mcp-memory-bridge", str(peer))
    assert done.returncode == 0, done.stderr
    assert "Kept as they are (1 hold another value here; --overwrite replaces them): " \
           "'user/theme'." in done.stdout  # fmt: skip
    with Ledger.open(home, client="test") as ledger:
        kept = ledger.get_fact("user/theme", log=False)
        assert (kept.value, kept.version, kept.client) == ("solarized", 1, "backtrail-user")
        assert [e.action for e in ledger.fact_history("user/theme")] == ["fact.set"]
        assert len(ledger.fact_history("shared/decision")) == 1 + 3  # its own, the peer's 3
    forced = run(home, "import", "mcp-memory-bridge", str(peer), "--overwrite")
    assert forced.returncode == 0, forced.stderr
    assert "1 replaced" in forced.stdout
    with Ledger.open(home, client="test") as ledger:
        replaced = ledger.get_fact("user/theme", log=False)
        assert (replaced.value, replaced.client) == ("dark", "claude-desktop")
        assert replaced.version > mine.version  # a version never goes back
        assert replaced.updated_at == T0 + 60
        assert [e.details.get("value") for e in ledger.fact_history("user/theme")
                if e.action == "fact.set"] == ["solarized", "light", "dark"]  # fmt: skip


def test_a_file_that_is_not_the_peers_database_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    brave = BraveMcpDb(tmp_path / "brave-mcp.db")
    brave.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100)
    cases = [
        ("mcp-memory-bridge", brave.path,
         "not an mcp-memory-bridge database: it has no table facts"),
        ("bravemcp", _bridge(tmp_path / "memory.db"), "not a BraveMCP database: it has no table"),
        ("mcp-memory-bridge", text, "not an mcp-memory-bridge database: not a readable SQLite"),
        ("bravemcp", text, "not a BraveMCP database: not a readable SQLite database"),
        ("bravemcp", tmp_path / "missing.db", "does not exist"),
    ]  # fmt: skip
    for command, path, message in cases:
        done = run(home, "import", command, str(path))
        assert done.returncode != 0, (command, path)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], lines
        assert done.stdout == ""
    conn = sqlite3.connect(tmp_path / "odd.db")
    conn.execute("CREATE TABLE facts (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY)")
    conn.close()
    done = run(home, "import", "mcp-memory-bridge", str(tmp_path / "odd.db"))
    assert done.returncode != 0
    assert "its table facts lacks source_client, updated_at" in done.stderr


# --------------------------------------------------------------------- BraveMCP

MS = 1000
ARTICLE = (
    "Write-ahead logging keeps a journal of changes before they reach the main database "
    "file, so that a crash in the middle of a transaction never leaves a torn page behind."
)


def _brave(path: Path) -> tuple[Path, dict[str, str]]:
    db = BraveMcpDb(path)
    ids = {}
    ids["wal"] = db.visit("https://sqlite.org/wal.html", "Write-Ahead Logging", T0 * MS)
    db.visit("https://sqlite.org/wal.html", "Write-Ahead Logging", (T0 + 3_600) * MS)
    summary = "WAL journals changes before they reach the database."
    db.content("https://sqlite.org/wal.html", "Write-Ahead Logging", ARTICLE, summary,
               (T0 + 7_200) * MS)  # fmt: skip
    db.visit("https://sqlite.org/wal.html", "Write-Ahead Logging", (T0 + 86_400) * MS)
    ids["lsm"] = db.visit("https://example.org/lsm-trees", "LSM trees", (T0 + 500) * MS)
    db.visit("brave://settings", "Settings", (T0 + 600) * MS)  # not a web page
    db.highlight("https://sqlite.org/wal.html", "never leaves a torn page", "why WAL",
                 (T0 + 7_300) * MS)  # fmt: skip
    db.highlight("https://example.org/fresh", "a page seen only through its highlight", None,
                 (T0 + 9_000) * MS)  # fmt: skip
    db.note("Compare WAL with rollback journals", "https://sqlite.org/wal.html",
            (T0 + 7_400) * MS)  # fmt: skip
    db.note("Buy a new keyboard", None, (T0 + 7_500) * MS)
    db.bookmark("https://sqlite.org/wal.html", "WAL", "Databases", (T0 + 7_600) * MS)
    db.bookmark("https://example.org/lsm-trees", "LSM", None, (T0 + 7_700) * MS)
    db.close()
    return path, ids


def test_bravemcp_pages_text_and_items_arrive_with_their_times(tmp_path: Path) -> None:
    peer, _ = _brave(tmp_path / "brave-mcp.db")
    before = _digest(peer)
    home = tmp_path / "home"
    done = run(home, "import", "bravemcp", str(peer))
    assert done.returncode == 0, done.stderr
    assert _digest(peer) == before
    assert "3 new pages, 5 visits, 1 page texts, 1 summaries, 2 highlights, 2 notes; " \
           "bookmarks 2 added" in done.stdout  # fmt: skip
    assert "Left out: 1 not web pages." in done.stdout
    with Ledger.open(home, client="test") as ledger:
        wal = ledger.get_page("https://sqlite.org/wal.html", with_text=True)
        assert (wal.title, wal.visit_count) == ("Write-Ahead Logging", 3)
        assert (wal.first_seen, wal.last_seen) == (T0, T0 + 86_400)
        assert wal.text == ARTICLE
        visits = sorted(v.visited_at for v in ledger.list_visits(page_id=wal.id))
        assert visits == [T0, T0 + 43_200, T0 + 86_400]  # the one between spread evenly
        lsm = ledger.get_page("https://example.org/lsm-trees")
        assert (lsm.visit_count, lsm.first_seen, lsm.last_seen) == (1, T0 + 500, T0 + 500)
        marks = {h.text: (h.url, h.note, h.created_at) for h in ledger.list_highlights()}
        assert marks == {
            "never leaves a torn page": ("https://sqlite.org/wal.html", "why WAL", T0 + 7_300),
            "a page seen only through its highlight": ("https://example.org/fresh", None,
                                                       T0 + 9_000),
        }  # fmt: skip
        notes = {n.content: (n.url, n.author, n.created_at) for n in ledger.list_notes()}
        assert notes == {
            "Compare WAL with rollback journals": ("https://sqlite.org/wal.html", None, T0 + 7_400),
            "Buy a new keyboard": (None, None, T0 + 7_500),
            "WAL journals changes before they reach the database.": (
                "https://sqlite.org/wal.html", "bravemcp", T0 + 86_400),
        }  # fmt: skip
        books = {b.url: (b.title, b.folder, b.created_at, b.profile)
                 for b in ledger.list_bookmarks()}  # fmt: skip
        assert books == {
            "https://sqlite.org/wal.html": ("WAL", "Databases", T0 + 7_600, "bravemcp"),
            "https://example.org/lsm-trees": ("LSM", None, T0 + 7_700, "bravemcp"),
        }
    # The imported text is searchable as captured text is.
    found = run(home, "search", "torn page crash transaction", "--json")
    assert found.returncode == 0, found.stderr
    urls = [r["url"] for r in json.loads(found.stdout)["results"]]
    assert "https://sqlite.org/wal.html" in urls


def test_importing_bravemcp_again_adds_nothing_and_keeps_text_captured_here(
    tmp_path: Path,
) -> None:
    peer, _ = _brave(tmp_path / "brave-mcp.db")
    home = tmp_path / "home"
    with Ledger.open(home, client="extension") as ledger:
        ledger.capture_page("https://example.org/lsm-trees", text="Text captured here first.",
                            captured_at=T0 + 10)  # fmt: skip
    assert run(home, "import", "bravemcp", str(peer), "--no-index").returncode == 0

    def state() -> tuple[Any, ...]:
        with Ledger.open(home, client="test") as ledger:
            return (len(ledger.list_events(limit=10_000)), ledger.stats(),
                    ledger.list_notes(), ledger.list_highlights(), ledger.list_bookmarks(),
                    ledger.max_change_seq())  # fmt: skip

    first = state()
    again = run(home, "import", "bravemcp", str(peer), "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)["import"]
    assert {k: v for k, v in result["added"].items() if v} == {"visits_there": 5}
    assert result["bookmarks"] == {"added": 0, "updated": 0, "removed": 0, "unchanged": 2}
    assert state() == first
    with Ledger.open(home, client="test") as ledger:
        kept = ledger.get_page("https://example.org/lsm-trees", with_text=True)
        assert kept.text == "Text captured here first."
        assert kept.first_seen == T0 + 10 and kept.last_seen == T0 + 500


def test_no_index_leaves_the_bravemcp_import_for_backtrail_index(tmp_path: Path) -> None:
    peer, _ = _brave(tmp_path / "brave-mcp.db")
    home = tmp_path / "home"
    done = run(home, "import", "bravemcp", str(peer), "--no-index")
    assert done.returncode == 0, done.stderr
    assert "Not indexed yet: run `backtrail index`" in done.stdout


@pytest.mark.parametrize("visits", [1, 2, 50])
def test_visit_counts_keep_the_first_and_last_visit(tmp_path: Path, visits: int) -> None:
    db = BraveMcpDb(tmp_path / "brave-mcp.db")
    for n in range(visits):
        db.visit("https://example.org/often", "Often", (T0 + n * 1_000) * MS)
    db.close()
    home = tmp_path / "home"
    assert run(home, "import", "bravemcp", str(db.path), "--no-index").returncode == 0
    with Ledger.open(home, client="test") as ledger:
        page = ledger.get_page("https://example.org/often")
        times = sorted(v.visited_at for v in ledger.list_visits(page_id=page.id, limit=1_000))
    assert page.visit_count == visits == len(times)
    assert times[0] == T0 and times[-1] == T0 + (visits - 1) * 1_000
    assert seconds_iso(times[0]).startswith("2026-05-28")


def test_facts_are_read_while_the_peer_still_has_its_database_open(tmp_path: Path) -> None:
    """The peer's server keeps its connection open in WAL mode: what it committed is in
    the write-ahead log, which a read-only reader sees without checkpointing it."""
    db = MemoryBridgeDb(tmp_path / "memory.db")
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    db.set("live/key", "still open", "cursor", iso_ms(T0))
    wal = tmp_path / "memory.db-wal"
    try:
        assert wal.stat().st_size > 0
        done = run(tmp_path / "home", "import", "mcp-memory-bridge", str(db.path), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["import"]["created"] == 1
        assert wal.stat().st_size > 0  # not checkpointed by the reader
    finally:
        db.close()
    with Ledger.open(tmp_path / "home", client="test") as ledger:
        fact = ledger.get_fact("live/key", log=False)
    assert (fact.value, fact.client, fact.updated_at) == ("still open", "cursor", T0)


def test_a_visit_count_past_the_limit_is_cut_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer_import, "MAX_VISITS_PER_PAGE", 3)
    db = BraveMcpDb(tmp_path / "brave-mcp.db")
    for n in range(5):
        db.visit("https://example.org/often", "Often", (T0 + n * 100) * MS)
    db.close()
    with Memory(make_config(tmp_path / "home")) as memory:
        result = peer_import.import_bravemcp(memory, db.path)
        page = memory.get_page("https://example.org/often")
    assert result.added["visits"] == 3 and result.left_out == {"visits_over_limit": 2}
    assert (page.visit_count, page.first_seen, page.last_seen) == (3, T0, T0 + 400)
