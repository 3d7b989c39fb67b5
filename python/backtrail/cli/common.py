"""What every ``backtrail`` command module shares: the per-invocation :class:`App`
(settings and the opened memory), exit codes and error lines, JSON output, dates, and
safe printing of untrusted text.

Command modules stay thin: parse with Click, call the service, print with these helpers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from backtrail.errors import (
    BacktrailError,
    Conflict,
    IndexBusy,
    InvalidInput,
    NotFound,
    StoreBusy,
    StoreError,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from backtrail.config import Config
    from backtrail.service import Memory

__all__ = [
    "lag_text",
    "UsageProblem",
    "JSON_OPTION",
    "new_table",
    "App",
    "pass_app",
    "EXIT_CODES",
    "exit_code_for",
    "error_line",
    "DATE",
    "Date",
    "emit_json",
    "jsonable",
    "clean",
    "stdout_console",
    "when",
    "CLI_CLIENT",
]

CLI_CLIENT = "cli"
"""The client name the CLI's writes are recorded under in the audit log."""

F = TypeVar("F", bound=Callable[..., Any])

# ----------------------------------------------------------------- exit codes

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_BUSY = 5
EXIT_STORAGE = 6
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success"),
    (EXIT_FAILURE, "failure: an unexpected error, or `doctor` found a problem"),
    (EXIT_USAGE, "usage: a bad option or argument, or invalid input"),
    (EXIT_NOT_FOUND, "not found: a page, fact, browser profile or browser file"),
    (EXIT_CONFLICT, "conflict: a fact changed since it was read (compare-and-swap)"),
    (EXIT_BUSY, "busy: another process kept the store or the index locked; try again"),
    (EXIT_STORAGE, "storage: the ledger, the index or a browser file cannot be read or written"),
    (EXIT_INTERRUPTED, "interrupted by Ctrl-C: the work done so far is kept"),
)
"""Every exit code with its meaning (documented in ``backtrail --help`` and the docs)."""


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error a command let escape."""
    from backtrail.cli.progress import Interrupted

    if isinstance(error, (Interrupted, KeyboardInterrupt)):
        return EXIT_INTERRUPTED
    if isinstance(error, InvalidInput):
        return EXIT_USAGE
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, Conflict):
        return EXIT_CONFLICT
    if isinstance(error, (StoreBusy, IndexBusy)):
        return EXIT_BUSY
    if isinstance(error, StoreError) or getattr(error, "code", "") in (
        "browser_data_unreadable",
    ):
        return EXIT_STORAGE
    return EXIT_FAILURE


_HINTS = {
    "profile_not_found": "pass --profile with a name or directory from `backtrail import profiles`",
    "browser_file_not_found": "is the browser right, and has it been used with this profile?",
    "index_error": "run `backtrail reindex` to rebuild the index from the ledger",
    "store_error": "run `backtrail doctor` to see what is wrong",
    "search_unavailable": "search with --mode bm25, or see `backtrail doctor`",
}


def error_line(error: BaseException) -> str:
    """One line saying what went wrong and what to do."""
    if isinstance(error, BacktrailError):
        message = error.message
        hint = _HINTS.get(error.code)
    elif isinstance(error, OSError):
        message, hint = f"{error.strerror or error}: {error.filename or ''}".rstrip(": "), None
    else:
        message = f"unexpected {type(error).__name__}: {error}"
        hint = "run again with -v for details, and report it if it persists"
    text = " ".join(str(message).split())
    return f"{text}; {hint}" if hint else text


# ------------------------------------------------------------------------ app


class App:
    """Per-invocation state: the global options, the settings and the opened memory."""

    def __init__(self, data_dir: Path | None = None, verbose: int = 0) -> None:
        self.data_dir = data_dir
        self.verbose = verbose
        self._config: Config | None = None
        self._memory: Memory | None = None

    @property
    def config(self) -> Config:
        """The settings (``--data-dir`` < …, see :mod:`backtrail.config`)."""
        if self._config is None:
            from backtrail.config import Config

            self._config = Config.load(self.data_dir)
        return self._config

    def memory(self, **overrides: Any) -> Memory:
        """The memory, opened once for this command, without a background indexer
        (commands index explicitly, with progress)."""
        if self._memory is None:
            from backtrail.service import Memory

            config = self.config.replace(background_indexing=False, **overrides)
            self._memory = Memory(config, client=CLI_CLIENT)
        return self._memory

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None


pass_app = click.make_pass_decorator(App, ensure=True)


# ---------------------------------------------------------------------- output


def jsonable(value: Any) -> Any:
    """Dataclasses (with their properties of interest), paths and tuples as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("text_caught_up", "vectors_caught_up"):
            if hasattr(value, name):
                data[name] = getattr(value, name)
        return data
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(value: Any) -> None:
    """Print ``value`` as JSON on standard output."""
    click.echo(json.dumps(jsonable(value), ensure_ascii=False, indent=2))


def stdout_console() -> Console:
    """A rich console on standard output: colour on a terminal, plain text otherwise."""
    from rich.console import Console  # here: `backtrail mcp` starts without rich

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 120  # files and pipes: wider than the 80 columns rich assumes
    return console


_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, *, one_line: bool = True) -> str:
    """Untrusted text (titles, snippets) made safe for a terminal: no control
    characters or bidi overrides; newlines folded when ``one_line``."""
    value = "" if text is None else str(text)
    if one_line:
        value = " ".join(value.split())
    return _UNSAFE.sub("", value)


def when(ts: int | None, *, seconds: bool = False) -> str:
    """Unix seconds as local ``YYYY-MM-DD HH:MM`` (``-`` for none)."""
    if ts is None:
        return "-"
    fmt = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(ts).strftime(fmt)


# ------------------------------------------------------------------------ dates

_RELATIVE = re.compile(r"^(\d+)\s*(m|min|h|d|w)(?:\s+ago)?$", re.IGNORECASE)
_UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}


class Date(click.ParamType):
    """A point in time: ``2024-05-01``, ``2024-05-01T14:30`` (local time unless it says
    otherwise), ``7d``/``12h``/``30m``/``2w`` ago, ``today``, ``yesterday``, ``now``, or
    unix seconds. Converted to unix seconds."""

    name = "DATE"

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        now = self._clock() if self._clock else datetime.now().astimezone()
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        lowered = text.lower()
        if lowered in ("now", "today", "yesterday"):
            point = {"now": now, "today": midnight, "yesterday": midnight - timedelta(days=1)}
            return int(point[lowered].timestamp())
        if text.isdigit():
            return int(text)
        relative = _RELATIVE.match(text)
        if relative:
            seconds = int(relative.group(1)) * _UNITS[relative.group(2).lower()]
            return int(now.timestamp()) - seconds
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            self.fail(
                f"{text!r} is not a date: use 2024-05-01, 2024-05-01T14:30, 7d (ago), "
                "today, yesterday or unix seconds",
                param,
                ctx,
            )
        if parsed.tzinfo is None:
            parsed = parsed.astimezone()  # local time
        return int(parsed.astimezone(timezone.utc).timestamp())


DATE = Date()


# --------------------------------------------------------------------- helpers


def is_interactive() -> bool:
    """Whether standard input and output are a terminal (prompts make sense)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


# -------------------------------------------------------------- command parts


class UsageProblem(click.ClickException):
    """A misuse the command can explain in one line (exit code 2)."""

    exit_code = 2


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
"""The ``--json`` flag of every command that reads."""


def new_table(*headers: str) -> Table:
    """A rich table whose cells wrap (long paths and URLs are folded, never cut)."""
    from rich.table import Table

    result = Table()
    for header in headers:
        result.add_column(header, overflow="fold")
    return result


def lag_text(lag: Any, model: str) -> str:
    """``text up to date; embeddings up to date``, or what is left and what to do about
    it: ``embeddings 1,234 passages not embedded yet; run `backtrail index``` (the
    captures waiting for text extraction too). "rebuilding" and "being embedded" only
    while a pass runs (``lag.indexing``)."""
    if lag.ledger_seq == 0 and not lag.captures:
        return "nothing to index yet"
    running = getattr(lag, "indexing", False)
    if lag.rebuilding_text:
        text = "rebuilding" if running else "rebuild interrupted"
    else:
        text = "up to date" if not lag.text else f"{lag.text:,} changes behind"
    if lag.captures:
        text += f", {lag.captures:,} captured page{_s(lag.captures)} waiting for text extraction"
    waiting = f"{lag.vectors:,} passage{_s(lag.vectors)}" if lag.vectors else None
    if getattr(lag, "reembedding", False) and lag.vectors is not None and lag.passages:
        done = lag.passages - lag.vectors
        vectors = f"re-embedding for the new model: {done:,} of {lag.passages:,} passages"
        hint = "; run `backtrail index`" if not running and model != "disabled" else ""
        return f"text {text}; embeddings {vectors}{hint}"
    if model == "disabled":
        vectors = f"off ({waiting} without vectors)" if waiting else "off"
    elif lag.vectors is None:  # a search's lag: not counted
        vectors = "not counted"
    elif not waiting:
        vectors = "up to date"
    else:
        vectors = f"{waiting} being embedded" if running else f"{waiting} not embedded yet"
    pending = lag.rebuilding_text or lag.text or lag.captures or (waiting and model != "disabled")
    hint = "; run `backtrail index`" if pending and not running else ""
    return f"text {text}; embeddings {vectors}{hint}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
