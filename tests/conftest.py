"""Shared pytest fixtures: a fresh data directory per test, a controllable clock, and a
ledger opened on both (on SQLite, or per the ``backends`` marker on each backend named,
PostgreSQL on a throwaway server of the session)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON_SRC = ROOT / "python"

import backtrail  # noqa: E402

# The suite tests the installed wheel, so packaging mistakes fail it (`make test` builds
# and installs the wheel first).
if Path(backtrail.__file__).resolve().is_relative_to(PYTHON_SRC):
    sys.exit("tests must run against the installed backtrail wheel, not python/ (use make test)")

from backtrail.store import HOME_ENV, LEDGER_FILENAME, Ledger  # noqa: E402
from postgres_support import PostgresServer  # noqa: E402


class FakeClock:
    """A clock that only moves when told to (unix seconds)."""

    def __init__(self, now: int = 1_700_000_000) -> None:
        self.now = now

    def __call__(self) -> float:
        return float(self.now)

    def advance(self, seconds: int) -> int:
        self.now += seconds
        return self.now


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty data directory, also set as ``BACKTRAIL_HOME``."""
    home = tmp_path / "backtrail-home"
    monkeypatch.setenv(HOME_ENV, str(home))
    return home


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger_target(request: pytest.FixtureRequest, data_home: Path) -> Path | str:
    """Where ``ledger`` lives: the ledger file in the fresh data directory (not created
    yet), or, for tests marked ``backends(..., "postgresql")``, the URL of a fresh, empty
    database on the session's throwaway PostgreSQL server."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return data_home / LEDGER_FILENAME
    return str(request.getfixturevalue("postgres_database"))


@pytest.fixture
def ledger(ledger_target: Path | str, clock: FakeClock) -> Iterator[Ledger]:
    """A ledger in the fresh data directory, on the fake clock, client ``"test"``."""
    opened = Ledger(ledger_target, client="test", clock=clock)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def open_ledger(ledger_target: Path | str) -> Callable[..., Ledger]:
    """``open_ledger(**options)``: another ledger on ``ledger_target``."""
    return lambda **options: Ledger(ledger_target, **options)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster for the session (skips without its binaries)."""
    with PostgresServer.start() as server:
        yield server


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    with postgres_server.database() as url:
        yield url


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "ledger_target" in metafunc.fixturenames:
        metafunc.parametrize("ledger_target", list(marker.args), indirect=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: end-to-end tests in a real headless Chromium")
    config.addinivalue_line(
        "markers",
        "backends(*names): run the test's ledger on each named backend (sqlite, postgresql)",
    )
    config.addinivalue_line(
        "markers",
        "postgresql: needs PostgreSQL (skipped without it, a failure with "
        "BACKTRAIL_REQUIRE_POSTGRES=1)",
    )
