"""Shared pytest fixtures: a fresh data directory per test, a controllable clock, and a
ledger opened on both."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON_SRC = ROOT / "python"

import backtrail  # noqa: E402

# The suite tests the installed wheel, so packaging mistakes fail it (`make test` builds
# and installs the wheel first).
if Path(backtrail.__file__).resolve().is_relative_to(PYTHON_SRC):
    sys.exit("tests must run against the installed backtrail wheel, not python/ (use make test)")

from backtrail.store import HOME_ENV, Ledger  # noqa: E402


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
def ledger(data_home: Path, clock: FakeClock) -> Iterator[Ledger]:
    """A ledger in the fresh data directory, on the fake clock, client ``"test"``."""
    opened = Ledger.open(data_home, client="test", clock=clock)
    try:
        yield opened
    finally:
        opened.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: end-to-end tests in a real headless Chromium")
