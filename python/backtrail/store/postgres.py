"""The ledger's connection to PostgreSQL (``ledger_url = postgresql://…``), via psycopg 3.

The store's SQL is written once, in SQLite's dialect where the two agree (``?``
placeholders, ``INSERT … ON CONFLICT``, savepoints); :class:`PgConnection` gives it the
small part of ``sqlite3.Connection`` it uses: ``execute`` (``?`` becomes psycopg's ``%s``,
values are bound client-side so untyped NULLs and literals behave as in SQLite), rows
that answer ``row["name"]``, ``row[0]`` and ``row.keys()``, ``rowcount`` and
``in_transaction``. What differs (write lock, schema version, the few SQLite functions,
purging) is chosen by the mixins through ``LedgerCore._pg``.

Writers are serialised as on SQLite: every write transaction first takes one advisory
lock (:data:`~backtrail.store.schema_pg.WRITE_LOCK`), waiting at most the busy timeout
(``lock_timeout``), so change-feed sequence numbers commit in order and compare-and-swap
reads what the last writer committed. Reads that span statements run in ``REPEATABLE
READ`` (one snapshot).

psycopg is an optional dependency (``pip install 'backtrail[postgres]'``); it is imported
only when a PostgreSQL ledger is opened.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from backtrail.errors import StoreBusy, StoreError
from backtrail.store.schema_pg import CHANGES_CHANNEL, WRITE_LOCK

__all__ = ["ChangeListener", "PgConnection", "is_postgres_url", "probe", "redact"]

_SCHEMES = ("postgresql", "postgres")
# A ``?`` placeholder outside string literals and quoted names; ``%`` is doubled for psycopg.
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")


def is_postgres_url(target: object) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(target, str) and target.split(":", 1)[0].lower() in _SCHEMES


def redact(url: str) -> str:
    """``url`` without its password (for logs, errors and ``stats().path``)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))
    except ValueError:
        return url.split("://", 1)[0] + "://…"


def _translate(sql: str) -> str:
    def token(match: re.Match[str]) -> str:
        text = match.group(0)
        return "%s" if text == "?" else "%%" if text == "%" else text.replace("%", "%%")

    return _TOKENS.sub(token, sql)


class Row:
    """A result row like ``sqlite3.Row``: by name, by position, ``keys()``."""

    __slots__ = ("_values", "_names", "_index")

    def __init__(self, values: Sequence[Any], names: list[str], index: dict[str, int]) -> None:
        self._values = tuple(values)
        self._names = names
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = [column.name for column in cursor.description or ()]
    index = {name: position for position, name in enumerate(names)}
    return lambda values: Row(values, names, index)


class PgConnection:
    """One psycopg connection in autocommit mode (transactions are explicit)."""

    def __init__(self, url: str, busy_timeout_ms: int, connect_timeout_s: int = 10) -> None:
        self.url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._connect_timeout_s = connect_timeout_s
        self._conn = self._open()

    def _open(self) -> Any:
        try:
            import psycopg
            from psycopg.adapt import Dumper
        except ImportError as error:
            raise StoreError(
                "the ledger is on PostgreSQL but psycopg is not installed: "
                "pip install 'backtrail[postgres]'"
            ) from error

        class BoolAsInteger(Dumper):  # SQLite stores booleans as 0/1; so does this schema
            oid = psycopg.adapters.types["int8"].oid

            def dump(self, obj: Any) -> bytes:
                return b"1" if obj else b"0"

            def quote(self, obj: Any) -> bytes:
                return self.dump(obj)

        try:
            conn = psycopg.connect(
                self.url, autocommit=True, cursor_factory=psycopg.ClientCursor,
                row_factory=_row_factory, connect_timeout=self._connect_timeout_s,
                application_name="backtrail",
            )  # fmt: skip
        except psycopg.Error as error:
            raise StoreError(
                f"cannot open the PostgreSQL ledger at {redact(self.url)}: "
                f"{_first_line(error, self.url)}"
            ) from None
        conn.adapters.register_dumper(bool, BoolAsInteger)
        # lock_timeout 0 would wait forever; a busy timeout of 0 means "do not wait".
        conn.execute(f"SET lock_timeout = {max(1, int(self._busy_timeout_ms))}")
        return conn

    @property
    def closed(self) -> bool:
        return bool(self._conn.closed)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        if self._conn.closed or self._conn.broken:
            return False  # nothing to commit or roll back on a lost connection
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def reopen_if_lost(self) -> None:
        """Between transactions: reconnect if the server closed the connection."""
        if self._conn.closed or self._conn.broken:
            self._conn = self._open()

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        if params is None or len(params) == 0:
            return self._conn.execute(sql)
        return self._conn.execute(_translate(sql), tuple(params))

    def begin_write(self) -> None:
        """Open a write transaction holding the write lock (or none: a lock wait past
        the busy timeout raises, and leaves no transaction open)."""
        self._conn.execute("BEGIN")
        try:
            self._conn.execute(WRITE_LOCK)
        except BaseException:
            if self.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def begin_read(self) -> None:
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")

    def close(self) -> None:
        self._conn.close()


def _first_line(error: BaseException, url: str) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.replace(url, redact(url)) if url else text


def error_types() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.Error,)


def translate(error: BaseException, busy_timeout_ms: int) -> StoreError:
    """Backtrail's error for a psycopg one: lock waits past the busy timeout (and
    serialisation failures) are ``StoreBusy``, the rest ``StoreError``."""
    from psycopg import errors

    if isinstance(
        error,
        (errors.LockNotAvailable, errors.SerializationFailure, errors.DeadlockDetected),
    ):
        return StoreBusy(busy_timeout_ms)
    return StoreError(f"ledger error: {_first_line(error, '')}" if str(error) else "ledger error")


def probe(url: str, timeout_s: int = 5) -> tuple[str, int]:
    """(server version, ledger schema version; 0 for an empty database) of the
    PostgreSQL ledger at ``url``, without creating or migrating anything. Raises
    ``StoreError`` when it cannot be reached."""
    from backtrail.store.schema_pg import user_version

    conn = PgConnection(url, busy_timeout_ms=timeout_s * 1000, connect_timeout_s=timeout_s)
    try:
        version = str(conn.execute("SHOW server_version").fetchone()[0])
        return version, user_version(conn)
    except error_types() as error:
        raise translate(error, timeout_s * 1000) from error
    finally:
        conn.close()


class ChangeListener:
    """A connection of its own that listens (``LISTEN``) for commits to the ledger's change feed
    (:data:`~backtrail.store.schema_pg.CHANGES_CHANNEL`; a trigger on ``changes`` sends
    the schema's name when a write transaction commits). Not thread-safe: one thread
    waits on it."""

    def __init__(self, url: str, connect_timeout_s: int = 10) -> None:
        self.url = url
        self._connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        self._schema = ""

    def _open(self) -> None:
        import psycopg

        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout_s,
                               application_name="backtrail-follower")  # fmt: skip
        try:
            conn.execute(f"LISTEN {CHANGES_CHANNEL}")
            self._schema = str(conn.execute("SELECT current_schema()").fetchone()[0])
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a commit to this ledger's change feed; True
        when one came, or when (re)connecting: changes may have been missed meanwhile.
        Raises ``StoreError`` when the server cannot be reached (after ``timeout``)."""
        import psycopg

        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._open()
            except psycopg.Error as error:
                self._conn = None
                raise StoreError(f"cannot listen for ledger changes at {redact(self.url)}: "
                                 f"{_first_line(error, self.url)}") from None  # fmt: skip
            return True
        try:
            # Another schema's ledger in the same database notifies too: not ours.
            return any(note.payload == self._schema
                       for note in self._conn.notifies(timeout=timeout, stop_after=1))
        except psycopg.Error as error:
            self.close()
            raise StoreError(f"lost the change-feed listener: {_first_line(error, self.url)}"
                             ) from None  # fmt: skip

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
