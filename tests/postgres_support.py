"""A throwaway PostgreSQL cluster for the tests: Debian's binaries (``initdb``, ``pg_ctl``),
run as a non-root user (``nobody`` when the tests run as root), its data directory and
unix socket in a temporary directory, listening on a free port of 127.0.0.1. Without the
binaries (or psycopg) the tests that need it skip, saying why; the rest of the suite runs.

``BACKTRAIL_PG_BIN`` names another directory of PostgreSQL binaries. With
``BACKTRAIL_REQUIRE_POSTGRES=1`` (set by ``.ci/run``, which installs PostgreSQL) a missing
server is a failure instead of a skip, so CI never passes without running them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _debian_bin() -> Path:
    """The newest server Debian's ``postgresql`` package installed (15 on Debian 12)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                   if p.parent.name.isdigit() else 0)  # fmt: skip
    return found[-1] if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = Path(os.environ.get("BACKTRAIL_PG_BIN") or _debian_bin())
_SETTINGS = (
    # Durability is not under test here: the cluster lives for one session.
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
)


def _unavailable(reason: str) -> None:
    if os.environ.get("BACKTRAIL_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"BACKTRAIL_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One running cluster; :meth:`database` hands out fresh databases."""

    def __init__(self, root: Path, port: int, user: str | None) -> None:
        self.root = root
        self.port = port
        self._user = user
        self._names = itertools.count(1)

    @classmethod
    @contextmanager
    def start(cls, settings: str = _SETTINGS) -> Iterator[PostgresServer]:
        """``settings``: the server's ``-c`` options (the tests' default turns durability
        off; ``bench/system/nodes.py`` passes its own, durable)."""
        missing = [name for name in ("initdb", "pg_ctl") if not (PG_BIN / name).is_file()]
        if missing:
            _unavailable(
                f"PostgreSQL binaries not found in {PG_BIN} ({', '.join(missing)}): "
                "apt-get install postgresql, or set BACKTRAIL_PG_BIN"
            )
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _unavailable("psycopg is not installed: pip install 'backtrail[postgres]'")
        user = "nobody" if os.geteuid() == 0 else None  # initdb refuses to run as root
        root = Path(tempfile.mkdtemp(prefix="backtrail-pg-"))
        if user is not None:
            shutil.chown(root, user)
        server = cls(root, free_port(), user)
        try:
            server._run("initdb", "-D", str(root / "data"), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--locale=C")  # fmt: skip
            options = f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 {settings}"
            server._run("pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"),
                        "-w", "-t", "60", "start", "-o", options)  # fmt: skip
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        try:
            yield server
        finally:
            server._run("pg_ctl", "-D", str(root / "data"), "-m", "immediate", "-w", "stop",
                        check=False)  # fmt: skip
            shutil.rmtree(root, ignore_errors=True)

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        command = [str(PG_BIN / tool), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root)
        if check and done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr}{tail}")

    def url(self, database: str = "postgres") -> str:
        """A URL reaching ``database`` over the cluster's unix socket."""
        return f"postgresql://postgres@/{database}?host={self.root}&port={self.port}"

    def tcp_url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    @contextmanager
    def database(self) -> Iterator[str]:
        """A fresh empty database (its URL), dropped afterwards."""
        name = f"ledger_{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name}")
        try:
            yield self.url(name)
        finally:
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
