"""Setting a device up to forward to a Backtrail server: the settings ``server_url`` and
``server_token_file`` and their checks, ``backtrail install --server --token-file``
(run as the installed command under a HOME of its own) and the host's clear error at
start when they are wrong. The install and doctor checks that need a server answering
run against a real ``backtrail mcp --http`` (tests/device_support.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backtrail.config import Config, read_token_file
from backtrail.errors import InvalidInput
from device_support import device_token, free_port, revoke, server
from host_client import HostProcess, hello_fields

TOKEN = "device-token-0123456789abcdef"


def token_file(tmp_path: Path, text: str = TOKEN + "\n", mode: int = 0o600) -> Path:
    path = tmp_path / "device.token"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def load(home: Path, **settings: Any) -> Config:
    return Config.load(home, overrides=settings, environ={})


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize("url, kept", [
    ("https://memory.example.com", "https://memory.example.com"),
    ("https://memory.example.com:8443/backtrail/", "https://memory.example.com:8443/backtrail"),
    ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
    ("http://[::1]:8765/", "http://[::1]:8765"),
    ("http://localhost:8765", "http://localhost:8765"),
])  # fmt: skip
def test_a_server_url_is_https_or_http_to_this_machine(tmp_path: Path, url: str,
                                                       kept: str) -> None:  # fmt: skip
    config = load(tmp_path, server_url=url, server_token_file=token_file(tmp_path))
    assert config.server_url == kept
    assert config.server_token() == TOKEN


@pytest.mark.parametrize("url, says", [
    ("http://memory.example.com", "must use https://"),
    ("http://10.0.0.5:8765", "must use https://"),
    ("ftp://memory.example.com", "must be an https:// address"),
    ("memory.example.com", "must be an https:// address"),
    ("https://user:secret@memory.example.com", "must not hold a user name or password"),
    ("https://memory.example.com/?a=1", "must not have a ?query"),
    ("https://memory.example.com/mcp", "without /mcp or /host"),
    ("https://memory.example.com:port", "is not a URL"),
])  # fmt: skip
def test_a_bad_server_url_is_refused_saying_what_to_give(tmp_path: Path, url: str,
                                                         says: str) -> None:  # fmt: skip
    with pytest.raises(InvalidInput) as caught:
        load(tmp_path, server_url=url, server_token_file=token_file(tmp_path))
    assert caught.value.field == "server_url" and says in caught.value.reason


def test_a_server_url_needs_a_token_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        load(tmp_path, server_url="https://memory.example.com")
    assert caught.value.field == "server_token_file"
    assert "backtrail install --server URL --token-file PATH" in caught.value.reason


def test_the_settings_come_from_the_environment(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    config = Config.load(tmp_path, environ={"BACKTRAIL_SERVER_URL": "https://m.example.com",
                                            "BACKTRAIL_SERVER_TOKEN_FILE": str(path)})  # fmt: skip
    assert (config.server_url, config.server_token_file) == ("https://m.example.com", path)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("case, says", [
    ("missing", "does not exist; make the token on the server"),
    ("group", "can be read by other users (mode 640); run `chmod 600"),
    ("world", "can be read by other users (mode 604); run `chmod 600"),
    ("unreadable", "cannot be read by this user"),
    ("empty", "must hold one token on one line"),
    ("two words", "must hold one token on one line"),
    ("directory", "is not a file"),
])  # fmt: skip
def test_a_bad_token_file_is_refused_naming_the_fix(tmp_path: Path, case: str, says: str) -> None:
    path = token_file(tmp_path)
    if case == "missing":
        path.unlink()
    elif case == "group":
        os.chmod(path, 0o640)
    elif case == "world":
        os.chmod(path, 0o604)
    elif case == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads every file")
        os.chmod(path, 0o200)
    elif case == "empty":
        path.write_text("\n")
    elif case == "two words":
        path.write_text("two words\n")
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(InvalidInput) as caught:
        read_token_file(path)
    assert caught.value.field == "server_token_file"
    assert str(path) in caught.value.reason and says in caught.value.reason


# --------------------------------------------------------------- the host


@pytest.mark.parametrize("case, says", [
    ("plain http", "must use https://"),
    ("no token file", "does not exist; make the token on the server"),
    ("readable by others", "run `chmod 600"),
])  # fmt: skip
def test_a_host_with_bad_server_settings_says_why_to_every_request(
    tmp_path: Path, case: str, says: str
) -> None:
    path = token_file(tmp_path, mode=0o644 if case == "readable by others" else 0o600)
    if case == "no token file":
        path.unlink()
    url = "http://memory.example.com" if case == "plain http" else "http://127.0.0.1:9"
    env = {"BACKTRAIL_SERVER_URL": url, "BACKTRAIL_SERVER_TOKEN_FILE": str(path)}
    with HostProcess(tmp_path / "device", env=env) as host:
        for answer in (host.call("hello", **hello_fields()), host.call("status")):
            assert answer["ok"] is False and answer["error"]["code"] == 14, answer
            assert says in answer["error"]["message"]
        assert host.wait() == 0
    assert not (tmp_path / "device" / "ledger.sqlite3").exists()
    assert says in host.stderr()


# -------------------------------------------------------------------- install


def run_backtrail(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``backtrail`` with ``home`` as HOME, as a user's shell runs it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "BACKTRAIL_", "MCP_"))}  # fmt: skip
    env.update(HOME=str(home), BACKTRAIL_EMBEDDINGS="0")
    command = [str(Path(sys.executable).parent / "backtrail"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def manifest(home: Path) -> Path:
    return home / ".config/chromium/NativeMessagingHosts/com.backtrail.host.json"


@pytest.mark.parametrize("args, says", [
    (["--server", "http://memory.example.com"], "server_url must use https://"),
    (["--server", "https://memory.example.com"], "--server and --token-file go together"),
    (["--server", "https://memory.example.com", "--token-file", "missing.token"],
     "does not exist; make the token on the server"),
])  # fmt: skip
def test_install_refuses_bad_server_settings_before_writing_anything(
    tmp_path: Path, args: list[str], says: str
) -> None:
    home = tmp_path / "home"
    if "--token-file" not in args:
        args = [*args, "--token-file", str(token_file(tmp_path))] if "http:" in args[1] else args
    else:
        args = [a if a != "missing.token" else str(tmp_path / a) for a in args]
    done = run_backtrail(home, "install", "--browser", "chromium", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert not manifest(home).exists()


def test_install_with_an_unreachable_server_registers_records_and_warns(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    path = token_file(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = run_backtrail(home, "install", "--browser", "chromium", "--data-dir", str(data),
                         "--server", url, "--token-file", str(path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert manifest(home).is_file()
    assert f"Forwarding to {url}" in done.stdout
    assert f"Warning: the Backtrail server at {url} cannot be reached" in done.stderr
    assert "delivers it once the server answers" in done.stderr
    recorded = run_backtrail(home, "--data-dir", str(data), "config", "list", "--json")
    settings = {s["name"]: s["value"] for s in json.loads(recorded.stdout)}
    assert settings["server_url"] == url and settings["server_token_file"] == str(path)


def test_install_and_doctor_against_a_real_server(tmp_path: Path) -> None:
    """The server answers hello with the device's token: install says so, doctor's
    server check passes; with the token revoked, or the server stopped, doctor fails
    the check and says what to do."""
    home, data, server_home = tmp_path / "home", tmp_path / "data", tmp_path / "server"
    port = free_port()
    path = device_token(server_home, "laptop", tmp_path / "laptop.token")
    url = f"http://127.0.0.1:{port}"
    with server(server_home, port):
        done = run_backtrail(home, "install", "--browser", "chromium", "--data-dir", str(data),
                             "--server", url, "--token-file", str(path))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "The server answers and accepts this device's token" in done.stdout
        checks = doctor(home, data)
        assert checks["server"]["ok"] is True, checks["server"]
        assert f"{url} answers over plain http on this machine" in checks["server"]["detail"]
        assert checks["device token"]["ok"] is True
        assert checks["device outbox"]["detail"].startswith("empty")
        revoke(server_home, "laptop")
        checks = doctor(home, data)
        assert checks["server"]["ok"] is False
        assert "refused this device's token (HTTP 401" in checks["server"]["detail"]
    checks = doctor(home, data)
    assert checks["server"]["ok"] is False
    assert "cannot be reached" in checks["server"]["detail"]
    assert "captures wait in the host's outbox" in checks["server"]["fix"]


def test_doctor_reports_a_failed_tls_handshake(tmp_path: Path) -> None:
    """https to a port that speaks plain HTTP: the TLS check fails with the reason."""
    home, data, server_home = tmp_path / "home", tmp_path / "data", tmp_path / "server"
    port = free_port()
    path = device_token(server_home, "laptop", tmp_path / "laptop.token")
    done = run_backtrail(home, "--data-dir", str(data), "config", "set", "server_token_file",
                         str(path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = run_backtrail(home, "--data-dir", str(data), "config", "set", "server_url",
                         f"https://127.0.0.1:{port}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with server(server_home, port):
        checks = doctor(home, data)
    assert checks["server"]["ok"] is False
    assert f"the TLS connection to https://127.0.0.1:{port} failed" in checks["server"]["detail"]
    assert "certificate" in checks["server"]["fix"]


def doctor(home: Path, data: Path) -> dict[str, dict[str, Any]]:
    done = run_backtrail(home, "--data-dir", str(data), "doctor", "--no-model", "--json")
    report = json.loads(done.stdout)
    return {item["check"]: item for item in report["checks"]}
