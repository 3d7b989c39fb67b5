"""A native host in forwarding mode, over real processes: ``python -m
backtrail.native_host`` fed real frames over pipes (tests/host_client.py), forwarding to
a real ``backtrail mcp --http`` (its ``POST /host``) on a port chosen before the server
starts, with a device token made by the server's own ``backtrail token`` command.

What is checked is what the person relies on: nothing the browser sends is lost while
the server is down, a host is killed or the token is refused, and everything arrives
exactly once (``skipped`` counts each application, so a second one would show)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from device_support import (
    captures,
    device_env,
    device_token,
    exchange,
    free_port,
    revoke,
    server,
    server_counts,
    skips,
)
from helpers import wait_for
from host_client import HostProcess

PAGES = 12
SKIPS = 5


def status(host: HostProcess) -> dict[str, Any]:
    return host.ok("status")


def outbox_empty(host: HostProcess) -> bool:
    return status(host)["server"]["outbox"] == 0


def test_captures_wait_while_the_server_is_down_and_arrive_exactly_once(tmp_path: Path) -> None:
    server_home, port = tmp_path / "server", free_port()
    token = device_token(server_home, "laptop", tmp_path / "laptop.token")
    with HostProcess(tmp_path / "device", env=device_env(port, token)) as host:
        assert host.hello()["capabilities"] == ["search"]  # answered here: the server is down
        messages = captures(host, PAGES) + skips(host, SKIPS)
        for answer in exchange(host, messages).values():
            error = answer["error"]
            assert error["code"] == 13 and error["retry_after_ms"] > 0, answer
            assert f"the Backtrail server at http://127.0.0.1:{port} cannot be reached" \
                in error["message"]  # fmt: skip
            assert "the message is kept on this computer" in error["message"]
        link = status(host)["server"]
        assert link["state"] == "unreachable" and link["outbox"] == PAGES + SKIPS
        assert status(host)["counts"] is None  # nothing is counted here: no local ledger
        search = host.call("search", query="tidepools")
        assert search["ok"] is False and search["error"]["code"] == 13
        with server(server_home, port):
            # The extension resends what it was refused, with the same ids.
            again = exchange(host, messages)
            assert all(a["ok"] for a in again.values()), again
            wait_for(lambda: outbox_empty(host), what="the outbox to empty")
            assert status(host)["server"]["state"] == "ok"
            counts = server_counts(server_home)
            assert (counts["pages"], counts["visits"]) == (PAGES, PAGES)
            assert counts["skipped"] == {"bank.example": SKIPS}
            # A third resend (an answer lost on the way) is answered, and applied no more.
            assert all(a["ok"] for a in exchange(host, messages).values())
            hits = host.ok("search", query="tidepools barnacles", limit=50)["results"]
            assert len(hits) == PAGES
        assert host.wait() == 0
    counts = server_counts(server_home)
    assert (counts["pages"], counts["visits"], counts["skipped"]) == (
        PAGES, PAGES, {"bank.example": SKIPS})  # fmt: skip
    assert not (tmp_path / "device" / "ledger.sqlite3").exists()


def test_a_host_killed_with_kept_messages_is_followed_by_one_that_delivers_them(
    tmp_path: Path,
) -> None:
    server_home, port = tmp_path / "server", free_port()
    token = device_token(server_home, "laptop", tmp_path / "laptop.token")
    env = device_env(port, token)
    with HostProcess(tmp_path / "device", env=env) as first:
        first.hello()
        messages = captures(first, PAGES) + skips(first, SKIPS)
        assert not any(a["ok"] for a in exchange(first, messages).values())
        first.process.send_signal(signal.SIGKILL)  # the laptop's browser crashed
        first.process.wait(30)
    with server(server_home, port), HostProcess(tmp_path / "device", env=env) as second:
        # No extension message is needed: the new host delivers what the last one kept.
        wait_for(lambda: server_counts(server_home)["pages"] == PAGES, what="the kept pages")
        second.hello()
        wait_for(lambda: outbox_empty(second), what="the outbox to empty")
        # The extension's own queue still holds them too: its resends change nothing.
        assert all(a["ok"] for a in exchange(second, messages).values())
        counts = server_counts(server_home)
        assert (counts["pages"], counts["visits"]) == (PAGES, PAGES)
        assert counts["skipped"] == {"bank.example": SKIPS}
        assert second.wait() == 0


def test_a_refused_token_loses_nothing_and_status_says_why(tmp_path: Path) -> None:
    server_home, port = tmp_path / "server", free_port()
    token = device_token(server_home, "laptop", tmp_path / "laptop.token")
    env = device_env(port, token)
    with server(server_home, port):
        revoke(server_home, "laptop")
        with HostProcess(tmp_path / "device", env=env) as host:
            host.hello()
            messages = captures(host, 3) + skips(host, 2)
            for answer in exchange(host, messages).values():
                error = answer["error"]
                assert error["code"] == 13, answer  # retryable: the extension keeps it
                assert "refused this device's token (HTTP 401" in error["message"]
                assert error["retry_after_ms"] >= 60_000
            link = status(host)["server"]
            assert link["state"] == "token_refused" and link["outbox"] == 5
            assert "backtrail token add" in link["message"]
            assert host.wait() == 0
        assert server_counts(server_home)["pages"] == 0
        # The person makes a new token; the next host delivers everything kept.
        device_token(server_home, "laptop-2", token)
        with HostProcess(tmp_path / "device", env=env) as host:
            wait_for(lambda: server_counts(server_home)["pages"] == 3, what="the kept pages")
            host.hello()
            wait_for(lambda: outbox_empty(host), what="the outbox to empty")
            assert server_counts(server_home)["skipped"] == {"bank.example": 2}
            assert host.wait() == 0


def test_the_popup_reads_go_through_the_server(tmp_path: Path) -> None:
    """search, recent and status answer from the server's ledger; what a device token
    may not do is refused by the server, message by message."""
    server_home, port = tmp_path / "server", free_port()
    token = device_token(server_home, "laptop", tmp_path / "laptop.token")
    with server(server_home, port), HostProcess(tmp_path / "device",
                                                env=device_env(port, token)) as host:
        host.hello()
        answers = exchange(host, captures(host, 3))
        assert all(a["ok"] and a["result"]["page_id"] for a in answers.values()), answers
        result = status(host)
        assert result["counts"]["pages"] == 3 and result["profile_id"] == "profile-1"
        assert result["server"] == {"url": f"http://127.0.0.1:{port}", "state": "ok",
                                    "message": None, "outbox": 0}  # fmt: skip
        hits = host.ok("search", query="barnacles", limit=10)["results"]
        assert {h["url"] for h in hits} == {f"https://example.org/p/{n}" for n in range(3)}
        recent = host.ok("recent", limit=10)
        assert len(recent["pages"]) == 3
        refused = host.call("forget", everything=True)
        assert refused["ok"] is False and refused["error"]["code"] == 18
        assert server_counts(server_home)["pages"] == 3
        assert host.wait() == 0


def test_stdout_carries_only_frames_in_forwarding_mode(tmp_path: Path) -> None:
    server_home, port = tmp_path / "server", free_port()
    token = device_token(server_home, "laptop", tmp_path / "laptop.token")
    env = device_env(port, token, BACKTRAIL_LOG_LEVEL="DEBUG")
    with HostProcess(tmp_path / "device", env=env) as host:
        host.hello()
        exchange(host, captures(host, 2))
        with server(server_home, port):
            exchange(host, captures(host, 2))
            host.ok("status")
        assert host.wait() == 0
        assert host.junk == []
    assert os.path.getsize(tmp_path / "device" / "outbox.sqlite3") > 0
