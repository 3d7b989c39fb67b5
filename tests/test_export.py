"""Exports: JSON Lines that round-trip every record, and one self-contained HTML file
that is safe to open."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backtrail.service import Memory, VisitInfo, export
from helpers import make_config

BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
T0 = 1_700_000_000
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def memory(data_home: Path) -> Memory:
    with Memory(make_config(data_home)) as opened:
        opened.capture_page(
            "https://www.sqlite.org/wal.html",
            text="Checkpoints copy the log.",
            title="Write-Ahead Logging",
            captured_at=T0,
            visit=VisitInfo(visited_at=T0),
        )
        opened.capture_page(
            "https://evil.example/page",
            text=f"body {HOSTILE}",
            title=HOSTILE,
            captured_at=T0 + 86_400,
        )
        opened.record_visit("https://visited-only.example/", visited_at=T0 + 5, title="Only seen")
        opened.upsert_bookmark(
            "7", "https://tokio.rs/", title="Tokio", folder="Bar/Rust", created_at=T0
        )
        opened.add_highlight(
            "https://www.sqlite.org/wal.html", "copy the log", note="remember this", created_at=T0
        )
        opened.add_note("Compare with Postgres vacuum.", url="https://www.sqlite.org/wal.html")
        opened.set_fact("user.editor", "helix")
        yield opened


def test_jsonl_has_a_header_and_every_record(memory: Memory) -> None:
    out = io.StringIO()
    summary = export.write_jsonl(memory, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    header, records = lines[0], lines[1:]
    assert header["type"] == "backtrail-export" and header["format"] == 1
    assert header["counts"] == {"page": 3, "bookmark": 1, "highlight": 1, "note": 1, "fact": 1}
    assert summary.counts == header["counts"] and summary.total == len(records) == 7
    pages = [r for r in records if r["type"] == "page"]
    assert [p["url"] for p in pages] == [
        "https://evil.example/page",
        "https://visited-only.example/",
        "https://www.sqlite.org/wal.html",
    ]
    wal = pages[2]
    assert wal["text"] == "Checkpoints copy the log." and wal["visit_count"] == 1
    assert pages[1]["text"] is None and pages[1]["title"] == "Only seen"
    kinds = [r["type"] for r in records]
    assert kinds == ["page"] * 3 + ["bookmark", "highlight", "note", "fact"]
    fact = records[-1]
    assert (fact["key"], fact["value"], fact["version"]) == ("user.editor", "helix", 1)


def test_jsonl_without_text_leaves_text_out(memory: Memory) -> None:
    out = io.StringIO()
    export.write_jsonl(memory, out, include_text=False)
    pages = [json.loads(line) for line in out.getvalue().splitlines()[1:4]]
    assert all("text" not in page for page in pages)


def test_html_is_one_safe_self_contained_file(memory: Memory) -> None:
    out = io.StringIO()
    progress: list[tuple[int, int, str]] = []
    export.write_html(memory, out, progress=lambda *args: progress.append(args))
    page = out.getvalue()
    assert progress[-1] == (7, 7, "export")
    # Nothing is loaded from anywhere: no external scripts, styles, images or frames.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    # The one inline script runs because the policy allows exactly its hash.
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page
    # Web content is escaped wherever it appears.
    assert HOSTILE not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert page.count("<script>") == 1
    assert '<a href="https://tokio.rs/" rel="noreferrer noopener" target="_blank">Tokio</a>' in page
    assert "Checkpoints copy the log." in page and "remember this" in page
    for section in ("pages", "bookmarks", "highlights", "notes", "facts"):
        assert f'id="{section}"' in page


def test_html_of_an_empty_memory_still_has_every_section(data_home: Path) -> None:
    with Memory(make_config(data_home)) as empty:
        out = io.StringIO()
        summary = export.write_html(empty, out)
    assert summary.total == 0
    assert out.getvalue().count("None.") == 4
    assert out.getvalue().rstrip().endswith("</html>")


def test_export_command_writes_a_file_or_stdout(
    memory: Memory, data_home: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "BACKTRAIL_HOME": str(data_home), "BACKTRAIL_EMBEDDINGS": "0"}
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "out.html"
    written = subprocess.run(
        [BACKTRAIL, "export", "--format", "html", "-o", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert written.returncode == 0, written.stderr
    assert f"Wrote {target} (3 pages, 1 bookmark, 1 highlight, 1 note, 1 fact)." in written.stderr
    assert target.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert [p.name for p in out_dir.iterdir()] == ["out.html"]  # no temporary file left
    piped = subprocess.run(
        [BACKTRAIL, "export", "-o", "-", "--no-text"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = piped.stdout.splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["type"] == "backtrail-export"
    default = subprocess.run(
        [BACKTRAIL, "export"], env=env, cwd=out_dir, capture_output=True, text=True, timeout=120
    )
    assert default.returncode == 0
    assert len(list(out_dir.glob("backtrail-export-*.jsonl"))) == 1
