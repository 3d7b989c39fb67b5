"""``make run``'s main job (``python -m backtrail.cli.demo``): stores sample pages, shows a
search, prints how to connect, and serves MCP over HTTP with a generated token."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from backtrail.cli import demo
from backtrail.service import Memory
from helpers import LOREM, make_config, share_model, wait_for

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "demo-test", "version": "1"},
    },
}


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKTRAIL_", "MCP_"))}
    env.update({"BACKTRAIL_HOME": str(home), "BACKTRAIL_EMBEDDINGS": "0", "HOME": str(home.parent)})
    return env


def run_demo(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "backtrail.cli.demo", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_shipped_samples_are_real_pages_with_addresses() -> None:
    samples = demo.shipped_samples()
    assert len(samples) >= 5
    assert all(s.url.startswith("https://samples.backtrail.example/") for s in samples)
    assert all(s.path.stat().st_size > 1500 for s in samples)


def test_demo_stores_the_samples_searches_and_says_how_to_connect(data_home: Path) -> None:
    result = run_demo(data_home, "--source", "samples", "--no-serve", "--no-install")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Data directory: {data_home}" in out
    assert "6 pages new or changed; the memory holds 6 pages" in out
    assert '$ backtrail search "write-ahead log checkpoint"' in out
    assert " 1. How SQLite's write-ahead log works" in out
    assert "(1 result, keyword (BM25) ranking)" in out  # embeddings are off here
    config = json.loads(out[out.index("{") : out.index("\n}\n") + 2])
    entry = config["mcpServers"]["backtrail"]
    assert entry["args"] == ["mcp"] and entry["env"]["BACKTRAIL_HOME"] == str(data_home)
    assert "Load the unpacked extension from" in out or "extension/ directory" in out
    again = run_demo(data_home, "--source", "samples", "--no-serve", "--no-install")
    assert "0 pages new or changed; the memory holds 6 pages" in again.stdout


def test_the_demo_says_which_ranking_ran(data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    share_model(monkeypatch)
    with Memory(make_config(data_home, embeddings=True)) as memory:
        memory.capture_page("https://example.com/wal", text=LOREM)
        memory.catch_up(vectors=False)  # what the demo does before its search
        page = memory.search("write-ahead log")
        assert page.mode == "bm25"  # hybrid was asked for, but no vector exists to rank with
        note = demo.ranking_note(memory, page.mode)
        assert note == "keyword (BM25) ranking: no passage has its vector yet"
        memory.catch_up()
        page = memory.search("write-ahead log")
        assert demo.ranking_note(memory, page.mode) == "hybrid ranking: keywords and meaning"


@pytest.mark.skipif(not demo.PYTHON_DOCS.is_dir(), reason="python3.11-doc is not installed")
def test_demo_uses_the_python_documentation_when_installed(data_home: Path) -> None:
    result = run_demo(data_home, "--pages", "4", "--no-serve", "--no-install")
    assert result.returncode == 0, result.stderr
    assert "Storing 4 pages from Debian's Python 3.11 documentation" in result.stdout
    assert "https://docs.python.org/3.11/tutorial/" in result.stdout


def test_demo_serves_mcp_over_http_with_a_generated_token(data_home: Path) -> None:
    pytest.importorskip("backtrail.mcp_server")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backtrail.cli.demo",
            "--source",
            "samples",
            "--no-install",
            "--port",
            "0",
        ],
        env=env_for(data_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()

    def serving() -> re.Match[str] | None:
        return re.search(r"Serving MCP on (http://127\.0\.0\.1:\d+/mcp)", "".join(lines))

    try:
        address = wait_for(serving, timeout=120, what="the server").group(1)
        token = (data_home / demo.TOKEN_FILENAME).read_text().strip()
        assert f"Authorization: Bearer {token}" in "".join(lines)
        assert oct((data_home / demo.TOKEN_FILENAME).stat().st_mode & 0o777) == "0o600"

        def post(headers: dict[str, str]) -> int:
            request = urllib.request.Request(
                address,
                data=json.dumps(INITIALIZE).encode(),
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    **headers,
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status
            except urllib.error.HTTPError as error:
                return error.code

        def answered() -> int:
            try:
                return post({"Authorization": f"Bearer {token}"})
            except OSError:
                return 0

        assert wait_for(answered, timeout=60, what="an answer") == 200
        assert post({}) == 401
        assert post({"Authorization": "Bearer wrong"}) == 401
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            process.kill()
