"""Reading a browser's SQLite database safely: always from a private copy; and another
memory tool's database read-only, in place (:func:`read_only`).

A running browser keeps its history database open and locked (Firefox with
``locking_mode=exclusive``; on Windows Chrome's lock also blocks reading), and a reader
must never take a lock the browser could trip over. So the file and its ``-wal`` /
``-journal`` companions are copied into a temporary directory and the copy is opened:
SQLite replays the copied write-ahead log (or rolls back a half-written transaction) on
the copy, which gives a consistent snapshot of what the browser had committed.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backtrail.errors import BacktrailError, NotFound

__all__ = [
    "BrowserFileNotFound", "BrowserDataUnreadable", "snapshot", "read_only", "columns",
    "expect_tables",
]  # fmt: skip

logger = logging.getLogger(__name__)

_COMPANIONS = ("-wal", "-journal")


class BrowserFileNotFound(NotFound):
    """The profile has no history (or bookmarks) file where the browser keeps it."""

    code = "browser_file_not_found"
    kind = "browser file"

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.message = f"{path} does not exist"
        self.args = (self.message,)


class BrowserDataUnreadable(BacktrailError):
    """A browser file exists but cannot be read: locked, damaged or not what we expect."""

    code = "browser_data_unreadable"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path
        self.reason = reason


@contextmanager
def snapshot(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a fresh copy of the SQLite file at ``path``."""
    if not path.is_file():
        raise BrowserFileNotFound(path)
    with tempfile.TemporaryDirectory(prefix="backtrail-import-") as scratch:
        copy = Path(scratch) / path.name
        try:
            shutil.copyfile(path, copy)
            for suffix in _COMPANIONS:
                companion = path.with_name(path.name + suffix)
                if companion.is_file():
                    shutil.copyfile(companion, copy.with_name(copy.name + suffix))
        except PermissionError:
            raise BrowserDataUnreadable(
                path, "the browser holds it locked; close the browser and try again"
            ) from None
        except OSError as error:
            raise BrowserDataUnreadable(path, f"copying it failed ({error.strerror})") from None
        conn = sqlite3.connect(copy)
        conn.row_factory = sqlite3.Row
        # Browsers store UTF-8, but a damaged title must not stop an import.
        conn.text_factory = lambda data: data.decode("utf-8", "replace")
        try:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                conn.execute("PRAGMA query_only = 1")
            except sqlite3.DatabaseError as error:
                reason = f"not a readable SQLite database ({error})"
                raise BrowserDataUnreadable(path, reason) from None
            yield conn
        finally:
            conn.close()


@contextmanager
def read_only(path: Path, what: str, tables: dict[str, set[str]]) -> Iterator[sqlite3.Connection]:
    """A connection that can only read the SQLite file at ``path`` (URI ``mode=ro``: no
    journal, no schema change, nothing written), after checking that it is ``what`` (its
    ``tables`` have at least these columns; see :func:`expect_tables`)."""
    if not path.is_file():
        raise BrowserFileNotFound(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise BrowserDataUnreadable(path, f"cannot open it ({error})") from None
    conn.row_factory = sqlite3.Row
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    try:
        try:
            conn.execute("PRAGMA query_only = 1")
            expect_tables(conn, path, what, tables)
        except sqlite3.DatabaseError as error:
            raise BrowserDataUnreadable(
                path, f"not {what} database: not a readable SQLite database ({error})"
            ) from None
        yield conn
    finally:
        conn.close()


def expect_tables(
    conn: sqlite3.Connection, path: Path, what: str, tables: dict[str, set[str]]
) -> None:
    """Raise :class:`BrowserDataUnreadable` ("not <what> database") unless every table
    named exists with the columns named."""
    for table, wanted in tables.items():
        found = columns(conn, table)
        if not found:
            raise BrowserDataUnreadable(path, f"not {what} database: it has no table {table}")
        missing = wanted - found
        if missing:
            raise BrowserDataUnreadable(
                path,
                f"not {what} database: its table {table} lacks {', '.join(sorted(missing))}",
            )


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table`` (empty if there is no such table)."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def require(conn: sqlite3.Connection, path: Path, needed: dict[str, set[str]]) -> None:
    """Raise :class:`BrowserDataUnreadable` unless every table has the columns named."""
    for table, wanted in needed.items():
        missing = wanted - columns(conn, table)
        if missing:
            raise BrowserDataUnreadable(
                path,
                f"table {table} lacks {', '.join(sorted(missing))}; is this the right file?",
            )
