"""Logging for the host: a rotating file in the data directory, never stdout.

The browser keeps the host's stdout for frames; a log line there would corrupt the
stream. Lines name message types, ids, codes and timings, never captured content.
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

__all__ = ["LOG_DIRNAME", "LOG_FILENAME", "LEVEL_ENV", "log_path", "setup_logging"]

LOG_DIRNAME = "logs"
LOG_FILENAME = "native-host.log"
LEVEL_ENV = "BACKTRAIL_LOG_LEVEL"
_MAX_BYTES = 1_048_576
_BACKUPS = 3
_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def log_path(data_dir: Path) -> Path:
    """``<data dir>/logs/native-host.log``."""
    return data_dir / LOG_DIRNAME / LOG_FILENAME


def setup_logging(data_dir: Path | None, environ: dict[str, str] | None = None) -> Path | None:
    """Send the ``backtrail`` loggers to the rotating log file (1 MiB x 4) at the level
    in ``BACKTRAIL_LOG_LEVEL`` (default INFO); returns its path, or ``None`` when the
    file cannot be opened (then warnings go to stderr, which the browser keeps)."""
    env = os.environ if environ is None else environ
    level = logging.getLevelName(env.get(LEVEL_ENV, "INFO").strip().upper() or "INFO")
    root = logging.getLogger("backtrail")
    root.setLevel(level if isinstance(level, int) else logging.INFO)
    root.propagate = False
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    path = None if data_dir is None else log_path(data_dir)
    handler: logging.Handler
    try:
        if path is None:
            raise OSError("no data directory")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handler = RotatingFileHandler(path, maxBytes=_MAX_BYTES, backupCount=_BACKUPS,
                                      encoding="utf-8")  # fmt: skip
    except OSError:
        handler = logging.StreamHandler()  # stderr
        handler.setLevel(logging.WARNING)
        path = None
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    return path
