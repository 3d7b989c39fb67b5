"""Where Backtrail keeps its data.

The data directory is, in order of precedence: an explicit override (a command-line
flag or a config value), the ``BACKTRAIL_HOME`` environment variable, else the
platform's per-user data directory for the application ``backtrail`` (for example
``~/.local/share/backtrail`` on Linux, ``~/Library/Application Support/backtrail`` on
macOS, ``%LOCALAPPDATA%\\backtrail`` on Windows). The ledger is one SQLite file in it.
"""

from __future__ import annotations

import os
from pathlib import Path

from backtrail.errors import InvalidInput

__all__ = ["APP_NAME", "HOME_ENV", "LEDGER_FILENAME", "data_dir", "ledger_path"]

APP_NAME = "backtrail"
HOME_ENV = "BACKTRAIL_HOME"
LEDGER_FILENAME = "ledger.sqlite3"


def data_dir(override: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """The data directory (see the module doc for the precedence), absolute, ``~``
    expanded. With ``create`` it is made (owner-only permissions) if missing."""
    if override is not None and not isinstance(override, (str, os.PathLike)):
        raise InvalidInput("data directory", f"must be a path, not {type(override).__name__}")
    chosen = override if override not in (None, "") else os.environ.get(HOME_ENV) or None
    if chosen is None:
        import platformdirs

        path = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    else:
        path = Path(chosen).expanduser()
    path = path.absolute()
    if create:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def ledger_path(directory: str | os.PathLike[str] | None = None) -> Path:
    """The ledger file inside :func:`data_dir` ``(directory)``."""
    return data_dir(directory) / LEDGER_FILENAME
