"""Helpers for the device tests: a real ``backtrail mcp --http`` server on a port chosen
before it starts (so a host can be pointed at it while it is still down), device tokens
made with the server's own ``backtrail token`` command, and a look into the server's
ledger."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backtrail.service import Memory
from helpers import make_config
from host_client import HostProcess, capture_fields
from mcp_support import BACKTRAIL, HttpServer, server_env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def backtrail(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``backtrail`` command on data directory ``home``."""
    return subprocess.run([BACKTRAIL, *args], env=server_env(home), capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL,
                          check=False)  # fmt: skip


def device_token(server_home: Path, client_id: str, out: Path) -> Path:
    """A new device token made on the server (``backtrail token add --scope device``),
    written to ``out`` (mode 600, as a person copies it to the device)."""
    out.unlink(missing_ok=True)
    done = backtrail(server_home, "token", "add", client_id, "--scope", "device", "--out", str(out))
    assert done.returncode == 0, done.stderr
    os.chmod(out, 0o600)
    return out


def revoke(server_home: Path, client_id: str) -> None:
    done = backtrail(server_home, "token", "revoke", client_id)
    assert done.returncode == 0, done.stderr


@contextmanager
def server(home: Path, port: int) -> Iterator[HttpServer]:
    """``backtrail mcp --http`` on ``port`` of 127.0.0.1 (its /host beside /mcp)."""
    node = HttpServer(home, "--port", str(port))
    try:
        yield node
    finally:
        node.stop()


def device_env(port: int, token_file: Path, **extra: str) -> dict[str, str]:
    return {"BACKTRAIL_SERVER_URL": f"http://127.0.0.1:{port}",
            "BACKTRAIL_SERVER_TOKEN_FILE": str(token_file), **extra}  # fmt: skip


def server_counts(home: Path) -> dict[str, Any]:
    """The server's ledger: its record counts and the skipped-page counts."""
    memory = Memory(make_config(home), client="test")
    try:
        counts = dict(memory.stats().ledger.counts)
        counts["skipped"] = memory.skipped_counts()
        return counts
    finally:
        memory.close()


def captures(host: HostProcess, count: int, prefix: str = "p") -> list[dict[str, Any]]:
    """``count`` capture_page messages (distinct pages and visits), ids made once so a
    resend carries the same id, as the extension's queue does."""
    return [
        host.message("capture_page", ident=f"{prefix}-cap-{n}", **capture_fields(
            f"https://example.org/{prefix}/{n}", f"forwarded page {prefix} number {n} about "
            "tidepools and barnacles", visit_id=f"{prefix}-visit-{n}"))
        for n in range(count)
    ]  # fmt: skip


def skips(host: HostProcess, count: int, prefix: str = "p") -> list[dict[str, Any]]:
    """``skipped`` messages: counted once per message, so a second application shows."""
    return [host.message("skipped", ident=f"{prefix}-skip-{n}", rule="bank.example",
                         time=1_732_924_800_000) for n in range(count)]  # fmt: skip


def exchange(host: HostProcess, messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Send ``messages`` back to back (as the host reads ahead) and collect one response
    per id."""
    for message in messages:
        host.send(message)
    answers = {}
    for _ in messages:
        answer = host.recv()
        answers[answer["id"]] = answer
    assert set(answers) == {m["id"] for m in messages}
    return answers
