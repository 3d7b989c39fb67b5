"""The ledger's connection, transactions, event log and change feed.

Concurrency model: one SQLite connection per :class:`LedgerCore` (and so per
``Ledger``). Calls are serialised by an internal lock, so a ledger may be handed between
threads (e.g. ``asyncio.to_thread``) but runs one call at a time; open one ledger per
thread for parallel reads. Many processes may open the same file: the database is in WAL
mode (readers never block the writer), every write transaction starts with
``BEGIN IMMEDIATE`` (it takes the write lock up front, so it can never fail half-way on
a lock upgrade) and waits up to ``busy_timeout_ms`` for other writers before raising
``StoreBusy``. Every mutation writes its audit event and its change-feed rows in the same
transaction as the data.

Given a ``postgresql://`` URL instead of a path, the ledger lives on PostgreSQL
(:mod:`backtrail.store.postgres`): the same calls, the same serialised writers (an
advisory lock taken first in every write transaction, waited for up to the busy
timeout), its own frozen schema (:mod:`backtrail.store.schema_pg`).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backtrail.errors import BacktrailError, InvalidInput, StoreBusy, StoreError
from backtrail.store import checks, postgres, schema_pg
from backtrail.store.models import Event, Limits
from backtrail.store.schema import SCHEMA_VERSION, migrate, user_version
from backtrail.urls import domain_matches, url_host

__all__ = ["LedgerCore", "SYNCHRONOUS_MODES"]

logger = logging.getLogger(__name__)

SYNCHRONOUS_MODES = ("off", "normal", "full", "extra")


def _host_or_none(url: object) -> str | None:
    try:
        return url_host(url)
    except BacktrailError:
        return None


def _starts_with_casefold(value: object, prefix: object) -> int:
    if not isinstance(value, str) or not isinstance(prefix, str):
        return 0
    return int(value.casefold().startswith(prefix.casefold()))


def _domain_match(host: object, domain: object) -> int:
    if not isinstance(host, str) or not isinstance(domain, str):
        return 0
    return int(domain_matches(host, domain))


class LedgerCore:
    """Connection and transaction plumbing shared by the ``Ledger`` mixins."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        client: str = "backtrail",
        busy_timeout_ms: int = 10_000,
        limits: Limits | None = None,
        clock: Callable[[], float] | None = None,
        log_reads: bool = False,
        synchronous: str = "full",
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidInput("path", f"must be a path, not {type(path).__name__}")
        self._pg = postgres.is_postgres_url(path)
        self._db_errors: tuple[type[BaseException], ...] = ()  # the driver's, on PostgreSQL
        self._limits = limits if limits is not None else Limits()
        self._client = checks.label(client, "client", self._limits.max_label_chars)
        self._acting = threading.local()  # the client of one thread's calls (acting_as)
        self._busy_timeout_ms = checks.integer(busy_timeout_ms, "busy_timeout_ms", minimum=0)
        self._log_reads = checks.boolean(log_reads, "log_reads")
        self._synchronous = checks.one_of(synchronous, "synchronous", SYNCHRONOUS_MODES)
        self._clock = clock if clock is not None else time.time
        self._lock = threading.RLock()
        self._txn: str | None = None  # None, "read" or "write"
        self._depth = 0
        self.path = Path(path).absolute() if not self._pg else Path(os.devnull)
        """The ledger file (on PostgreSQL: :data:`os.devnull`, no file; see ``location``)."""
        self.location = postgres.redact(str(path)) if self._pg else str(self.path)
        """Where the ledger lives: the file, or the PostgreSQL URL without its password."""
        if self._pg:
            self._conn: Any = postgres.PgConnection(str(path), self._busy_timeout_ms)
            self._db_errors = postgres.error_types()
        else:
            self._conn = self._connect()
        try:
            with self._errors():
                if self._pg:
                    schema_pg.migrate(self._conn, self._now(), SCHEMA_VERSION)
                else:
                    migrate(self._conn, self._now())
        except BaseException:
            self._conn.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        created = not self.path.exists()
        conn = sqlite3.connect(
            str(self.path),
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            if created:
                os.chmod(self.path, 0o600)
            conn.row_factory = sqlite3.Row
            with self._errors():
                conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                # Before anything writes the header: a new file gets incremental
                # auto-vacuum (so forget() can shrink it); an old one on its next VACUUM.
                # Only when it is not set yet: setting it takes the write lock, and
                # opening must not wait for (or fail on) another process's writes.
                if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"could not switch the ledger to WAL mode (got {mode!r})")
                conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute("PRAGMA trusted_schema = OFF")
            conn.create_function("bt_host", 1, _host_or_none, deterministic=True)
            conn.create_function("bt_domain_match", 2, _domain_match, deterministic=True)
            conn.create_function("bt_startswith_ci", 2, _starts_with_casefold, deterministic=True)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close the connection. The ledger cannot be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> LedgerCore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ settings

    @property
    def client(self) -> str:
        """The client name recorded on events and facts written through this ledger by
        the calling thread: the one it is acting as, else the ledger's own."""
        acting: str | None = getattr(self._acting, "client", None)
        return self._client if acting is None else acting

    @property
    def limits(self) -> Limits:
        return self._limits

    @contextmanager
    def acting_as(self, client: str) -> Iterator[None]:
        """Record writes inside the block as made by ``client`` (e.g. one MCP client of a
        server that serves several)."""
        name = checks.label(client, "client", self._limits.max_label_chars)
        # Per thread, not under the ledger's lock: a server's other callers (searches,
        # other clients' writes) go on while this one's call runs.
        previous = getattr(self._acting, "client", None)
        self._acting.client = name
        try:
            yield
        finally:
            self._acting.client = previous

    def _now(self) -> int:
        return int(self._clock())

    # -------------------------------------------------------------- transactions

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Translate SQLite errors into Backtrail's: busy/locked -> ``StoreBusy``."""
        try:
            yield
        except sqlite3.OperationalError as error:
            message = str(error).lower()
            if "locked" in message or "busy" in message:
                raise StoreBusy(self._busy_timeout_ms) from error
            raise StoreError(f"ledger error: {error}") from error
        except sqlite3.Error as error:
            raise StoreError(f"ledger error: {error}") from error
        except self._db_errors as error:
            raise postgres.translate(error, self._busy_timeout_ms) from error

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several mutations into one atomic write transaction. Each call inside
        still writes its own event; a call that raises is rolled back alone (savepoint),
        an exception escaping the block rolls everything back."""
        with self._write():
            yield

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            if self._txn == "read":
                raise RuntimeError("cannot write inside a read transaction")
            if self._txn == "write":
                name = f"bt_sp{self._depth}"
                self._depth += 1
                self._conn.execute(f"SAVEPOINT {name}")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute(f"ROLLBACK TO {name}")
                    self._conn.execute(f"RELEASE {name}")
                    raise
                else:
                    self._conn.execute(f"RELEASE {name}")
                finally:
                    self._depth -= 1
                return
            if self._pg:
                self._conn.reopen_if_lost()
                self._conn.begin_write()
            else:
                self._conn.execute("BEGIN IMMEDIATE")
            self._txn = "write"
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            finally:
                self._txn = None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-statement reads."""
        with self._lock, self._errors():
            if self._txn is not None:
                yield self._conn
                return
            if self._pg:
                self._conn.reopen_if_lost()
                self._conn.begin_read()
            else:
                self._conn.execute("BEGIN")
            self._txn = "read"
            try:
                yield self._conn
            finally:
                self._txn = None
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def _insert(self, conn: Any, sql: str, params: Any) -> int:
        """Run one ``INSERT`` and return the new row's id."""
        if self._pg:
            return int(conn.execute(sql + " RETURNING id", params).fetchone()[0])
        return int(conn.execute(sql, params).lastrowid or 0)

    def _schema_version(self, conn: Any) -> int:
        return schema_pg.user_version(conn) if self._pg else user_version(conn)

    # ------------------------------------------------------- events and changes

    def _event(
        self,
        conn: sqlite3.Connection,
        action: str,
        target_type: str,
        target: str | int | None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Append one audit event. Callers pass only ids, counts and outcomes in
        ``details``, never captured web content; facts' events also keep the value an
        assistant wrote or tried (the key's history), and forgetting facts removes it."""
        conn.execute(
            "INSERT INTO events (at, client, action, target_type, target, details) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                self._now(),
                self.client,
                action,
                target_type,
                None if target is None else str(target),
                json.dumps(details or {}, sort_keys=True),
            ),
        )

    def _change(
        self,
        conn: sqlite3.Connection,
        entity_type: str,
        entity_id: int,
        op: str = "upsert",
        aspect: str = "content",
    ) -> None:
        conn.execute(
            "INSERT INTO changes (entity_type, entity_id, op, aspect, at) VALUES (?, ?, ?, ?, ?)",
            (entity_type, entity_id, op, aspect, self._now()),
        )

    def hold_write_lock(
        self, seconds: float, *, wait: Callable[[float], object] = time.sleep
    ) -> float:
        """Take the write lock, record a ``demo.lock_hold`` event, keep the lock for
        ``seconds`` and commit; returns how long it was held. For operators who want to
        see what contention does: meanwhile every other writer, in any process, waits
        up to its busy timeout and then fails with ``StoreBusy``."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidInput("seconds", f"must be a number, not {type(seconds).__name__}")
        if not 0 < seconds <= 600:
            raise InvalidInput("seconds", f"must be more than 0 and at most 600, got {seconds}")
        with self._write() as conn:
            self._event(conn, "demo.lock_hold", "ledger", None, {"seconds": seconds})
            started = time.monotonic()
            wait(float(seconds))
            held = time.monotonic() - started
        return held

    def _log_read(
        self,
        action: str,
        target_type: str,
        target: str | int | None,
        details: dict[str, Any] | None = None,
        *,
        log: bool | None = None,
    ) -> None:
        """Record a read as an event when ``log`` says so (``None``: when the ledger
        was opened with ``log_reads``). The event is a write: with another process
        holding the write lock past the busy timeout it raises ``StoreBusy``."""
        if not (self._log_reads if log is None else log):
            return
        with self._write() as conn:
            self._event(conn, action, target_type, target, details)

    def log_read(
        self, action: str, target_type: str, target: str | int | None,
        details: dict[str, Any] | None = None, *, log: bool | None = None,
    ) -> None:  # fmt: skip
        """:meth:`_log_read` for the service (e.g. a search of facts)."""
        checks.label(action, "action", self._limits.max_label_chars)
        self._log_read(action, target_type, target, details, log=log)

    def list_events(
        self,
        *,
        target_type: str | None = None,
        target: str | int | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[Event]:
        """Audit events, oldest first, with ids greater than ``after_id``. Page events
        use ``target_type="page"`` and the page id as ``target``; fact events
        ``"fact"`` and the key."""
        clauses = ["id > ?"]
        params: list[Any] = [checks.integer(after_id, "after_id", minimum=0)]
        for column, value in (("target_type", target_type), ("action", action)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(checks.label(value, column, self._limits.max_label_chars))
        if target is not None:
            if isinstance(target, bool) or not isinstance(target, (str, int)):
                raise InvalidInput("target", f"must be a string or id, not {type(target).__name__}")
            clauses.append("target = ?")
            params.append(str(target))
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM events WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",
                (*params, checks.limit(limit)),
            ).fetchall()
        return [
            Event(
                id=row["id"],
                at=row["at"],
                client=row["client"],
                action=row["action"],
                target_type=row["target_type"],
                target=row["target"],
                details=json.loads(row["details"]),
            )
            for row in rows
        ]
