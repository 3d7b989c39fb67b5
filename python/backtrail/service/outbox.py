"""A device that forwards the browser's messages to a Backtrail server instead of keeping
a ledger of its own: the durable outbox and its delivery.

Every queued write the browser sends (a capture, a visit, tabs, bookmarks, highlights,
notes...) is first kept in the outbox, a SQLite file in the data directory
(``outbox.sqlite3``, ``synchronous=FULL``), and leaves it only once the server answered
that it committed it. :meth:`DeviceLink.deliver` sends a connection's messages now, in
the order they were made (older messages of the same browser profile first);
a background thread (:meth:`DeviceLink.start`) keeps delivering what is left, with
exponential backoff, for as long as the host runs, and a host started later delivers
what an earlier one left. A message may reach the server twice (a lost answer, two hosts
of one machine delivering the same backlog): the server keeps the answer of every
message id it committed and answers a resend with it, writing nothing.

Reads (search, status...) are sent as they come (:meth:`DeviceLink.request`) and never
kept.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backtrail.service.server_link import (
    ANSWER_SECONDS,
    ServerLink,
    ServerUnavailable,
    TokenRefused,
)

if TYPE_CHECKING:
    from backtrail.config import Config

__all__ = ["OUTBOX_FILENAME", "DeviceLink", "Outbox", "committed", "outbox_check"]

logger = logging.getLogger(__name__)

OUTBOX_FILENAME = "outbox.sqlite3"
NOT_COMMITTED = frozenset({13, 17})
"""Response codes that mean the server did not apply a message (busy, hello_required:
native-host/PROTOCOL.md section 6); every other answer is final."""
MAX_BATCH_MESSAGES = 200
MAX_BATCH_BYTES = 24 * 1024 * 1024
"""One POST at most (the server takes 500 messages and 32 MiB)."""
DELIVER_SECONDS = 5.0
"""How long :meth:`DeviceLink.deliver` spends on older messages before it answers."""
GREET_SECONDS = 4.0
"""A hello's answer (the extension waits 10 s for the host's)."""
REQUEST_SECONDS = 12.0
"""A read's answer (the extension waits 15 s for a search or status)."""
BACKOFF_SECONDS = (1.0, 300.0)
"""The background delivery's first and longest wait after a failure."""
TOKEN_BACKOFF_SECONDS = 60.0
"""The shortest wait after the server refused the token (a person has to act)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS profiles (
    profile TEXT PRIMARY KEY,
    hello   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    id       TEXT NOT NULL UNIQUE,
    profile  TEXT NOT NULL,
    body     TEXT NOT NULL,
    bytes    INTEGER NOT NULL,
    kept_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_profile ON messages (profile, seq);
"""


def committed(response: dict[str, Any]) -> bool:
    """Whether a server's response is final (ok, or an error other than busy/hello)."""
    if response.get("ok") is True:
        return True
    error = response.get("error")
    return not (isinstance(error, dict) and error.get("code") in NOT_COMMITTED)


def _encode(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Batch:
    """Kept messages of one profile, oldest first, with that profile's hello."""

    hello: dict[str, Any]
    messages: list[dict[str, Any]]


class Outbox:
    """The messages not yet committed by the server, in the order they were kept. Safe
    to share between threads, and between processes (SQLite's locking)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():  # captured pages: readable by this user only
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                   check_same_thread=False)  # fmt: skip
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA secure_delete=ON")  # delivered page text leaves no trace
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def keep(self, hello: dict[str, Any], messages: Iterable[dict[str, Any]]) -> int:
        """Keep ``messages`` (a message already kept stays where it is) with the hello
        of their profile, durably; the newest position among them."""
        profile = str(hello.get("profile_id"))
        hello_text = _encode({k: v for k, v in hello.items() if k != "id"})
        rows = [(m["id"], profile, text, len(text.encode("utf-8")), time.time())
                for m in messages for text in [_encode(m)]]  # fmt: skip
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT OR REPLACE INTO profiles VALUES (?, ?)", (profile, hello_text))
            self._db.executemany(
                "INSERT OR IGNORE INTO messages (id, profile, body, bytes, kept_at) "
                "VALUES (?, ?, ?, ?, ?)", rows,
            )  # fmt: skip
            marks = ",".join("?" * len(rows))
            (newest,) = self._db.execute(
                f"SELECT coalesce(max(seq), 0) FROM messages WHERE id IN ({marks})",
                [row[0] for row in rows],
            ).fetchone()
        return int(newest)

    def batch(self, profile: str | None = None, through: int | None = None) -> Batch | None:
        """The oldest kept messages of ``profile`` (default: of the oldest message's),
        up to position ``through``, within one POST's limits; ``None`` if there are none."""
        with self._lock:
            if profile is None:
                row = self._db.execute(
                    "SELECT profile FROM messages ORDER BY seq LIMIT 1"
                ).fetchone()
                if row is None:
                    return None
                profile = str(row[0])
            rows = self._db.execute(
                "SELECT body, bytes FROM messages WHERE profile = ? AND seq <= ? "
                "ORDER BY seq LIMIT ?", (profile, through or 2**62, MAX_BATCH_MESSAGES),
            ).fetchall()  # fmt: skip
            hello = self._db.execute(
                "SELECT hello FROM profiles WHERE profile = ?", (profile,)
            ).fetchone()
        if not rows or hello is None:
            return None
        taken: list[dict[str, Any]] = []
        size = 0
        for body, count in rows:
            if taken and size + count > MAX_BATCH_BYTES:
                break
            taken.append(json.loads(body))
            size += count
        return Batch(json.loads(hello[0]), taken)

    def remove(self, ids: Iterable[str]) -> None:
        chosen = [(i,) for i in ids]
        if chosen:
            with self._lock, self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("DELETE FROM messages WHERE id = ?", chosen)

    def holds(self, ident: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM messages WHERE id = ?", (ident,)).fetchone() \
                is not None  # fmt: skip

    def count(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT count(*) FROM messages").fetchone()
        return int(count)


class DeviceLink:
    """A device's link to its server: the outbox, the HTTP link and the background
    delivery. ``problem`` is why the last attempt failed (``None`` after a success)."""

    def __init__(self, config: Config, *, link: ServerLink | None = None) -> None:
        self.url = config.server_url
        self.link = link or ServerLink(config.server_url, config.server_token())
        self.outbox = Outbox(config.home / OUTBOX_FILENAME)
        self.problem: ServerUnavailable | None = None
        self.answered = False  # the server answered at least once
        self._sending = threading.Lock()
        self._wake = threading.Condition()
        self._poked = False
        self._idle = False
        self._closed = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- sending

    def greet(self, hello: dict[str, Any]) -> dict[str, Any]:
        """The server's response to ``hello`` alone (answered within
        :data:`GREET_SECONDS`); raises :class:`ServerUnavailable`."""
        with self._sending:
            first, _ = self._post(hello, [], timeout=GREET_SECONDS)
        return first

    def request(self, hello: dict[str, Any], messages: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:  # fmt: skip
        """The server's responses to ``messages`` (nothing kept, each answered within
        :data:`REQUEST_SECONDS`); raises :class:`ServerUnavailable`."""
        out: list[dict[str, Any]] = []
        with self._sending:
            for start in range(0, len(messages), MAX_BATCH_MESSAGES):
                chunk = messages[start : start + MAX_BATCH_MESSAGES]
                out += self._post(hello, chunk, timeout=REQUEST_SECONDS)[1]
        return out

    def deliver(self, hello: dict[str, Any], messages: list[dict[str, Any]]
                ) -> dict[str, dict[str, Any]]:  # fmt: skip
        """Keep ``messages``, then deliver this profile's kept messages in order up to
        them (for at most :data:`DELIVER_SECONDS`): the server's responses by id of
        those of ``messages`` it answered. A message without an answer stays kept;
        :attr:`problem` says why, when the server failed."""
        through = self.outbox.keep(hello, messages)
        wanted = {m["id"] for m in messages}
        answers: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + DELIVER_SECONDS
        with self._sending:
            try:
                while time.monotonic() < deadline:
                    batch = self.outbox.batch(str(hello.get("profile_id")), through)
                    if batch is None:
                        break
                    got = self._post_kept(batch)
                    answers.update({i: r for i, r in got.items() if i in wanted})
                    if not all(committed(r) for r in got.values()):
                        break  # the server is busy: the rest waits, in order
                gone = [m for m in messages if m["id"] not in answers
                        and not self.outbox.holds(m["id"])]  # fmt: skip
                if gone:  # delivered meanwhile by another sender: the server answers again
                    answers.update({r["id"]: r for r in self._post(hello, gone)[1]})
            except ServerUnavailable:
                self._poke(only_if_idle=True)
                return answers
        if self.outbox.count():
            self._poke()
        return answers

    def _post_kept(self, batch: Batch) -> dict[str, dict[str, Any]]:
        _, responses = self._post(batch.hello, batch.messages)
        self.outbox.remove(r["id"] for r in responses if committed(r))
        return {r["id"]: r for r in responses}

    def _post(self, hello: dict[str, Any], messages: list[dict[str, Any]], *,
              timeout: float = ANSWER_SECONDS) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """POST the connection's hello (with a fresh id) and ``messages``: the hello's
        response and theirs."""  # fmt: skip
        greeting = {**hello, "id": f"fwd-hello-{uuid.uuid4()}", "type": "hello"}
        try:
            first, *responses = self.link.post([greeting, *messages], timeout=timeout)
        except ServerUnavailable as error:
            if self.problem is None or self.problem.message != error.message:
                logger.warning("%s", error.message)
            self.problem = error
            raise
        if self.problem is not None:
            logger.info("the server at %s answers again", self.url)
        self.problem = None
        self.answered = True
        if not first["ok"]:
            logger.warning("the server refused the hello of profile %s: %s",
                           hello.get("profile_id"), first.get("error"))  # fmt: skip
        return first, responses

    # ----------------------------------------------------------- background

    def start(self) -> None:
        """Deliver the kept messages in the background until :meth:`close`."""
        self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 1.0) -> bool:
        """Stop the background delivery; False if a delivery was still out after
        ``timeout`` (its messages stay kept; the process may exit anyway)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        if not self._sending.acquire(timeout=timeout):
            return False
        try:
            self.link.close()
            self.outbox.close()
        finally:
            self._sending.release()
        return True

    def _poke(self, *, only_if_idle: bool = False) -> None:
        with self._wake:
            if only_if_idle and not self._idle:
                return
            self._poked = True
            self._wake.notify_all()

    def _run(self) -> None:
        delay: float | None = 0.0
        attempts = 0
        while True:
            with self._wake:
                self._idle = delay is None
                self._wake.wait_for(lambda: self._closed or self._poked, timeout=delay)
                if self._closed:
                    return
                self._poked = False
                self._idle = False
            try:
                emptied = self._deliver_backlog()
            except Exception:  # never let the thread die: the outbox is still on disk
                logger.exception("delivering the outbox failed")
                emptied = False
            if emptied:
                attempts, delay = 0, None
                continue
            attempts += 1
            delay = self._backoff(attempts)
            logger.info("%d message(s) wait for the server; next try in %.0f s",
                        self.outbox.count(), delay)  # fmt: skip

    def _deliver_backlog(self) -> bool:
        """Deliver kept messages until none is left (True) or the server fails."""
        while not self._closed:
            with self._sending:
                if self._closed:
                    break
                batch = self.outbox.batch()
                if batch is None:
                    return True
                try:
                    answers = self._post_kept(batch)
                except ServerUnavailable:
                    return False
            logger.info("delivered %d kept message(s) to %s", len(answers), self.url)
            if not all(committed(r) for r in answers.values()):
                return False
        return False

    def _backoff(self, attempts: int) -> float:
        first, longest = BACKOFF_SECONDS
        delay = min(longest, first * 2 ** min(attempts - 1, 20))
        problem = self.problem
        if isinstance(problem, TokenRefused):
            delay = max(delay, TOKEN_BACKOFF_SECONDS)
        elif problem is not None and problem.retry_after:
            delay = max(delay, problem.retry_after)
        return delay * random.uniform(0.8, 1.2)

    # --------------------------------------------------------------- status

    def state(self) -> dict[str, Any]:
        """``{"url", "state", "message", "outbox"}``: ``state`` is ``ok``, ``unknown``
        (not tried yet), ``unreachable``, ``token_refused`` or ``server_error``."""
        problem = self.problem
        if problem is None:
            state, message = ("ok" if self.answered else "unknown"), None
        elif isinstance(problem, TokenRefused):
            state, message = "token_refused", problem.message
        elif problem.reason in ("unreachable", "timeout", "tls"):
            state, message = "unreachable", problem.message
        else:
            state, message = "server_error", problem.message
        return {"url": self.url, "state": state, "message": message,
                "outbox": self.outbox.count()}  # fmt: skip



def outbox_check(config: Config) -> dict[str, Any]:
    """``backtrail doctor``: how many messages wait in the outbox (nothing is created)."""
    from backtrail.service.health import check

    path = config.home / OUTBOX_FILENAME
    if not path.exists():
        return check("device outbox", True, "empty (nothing waits for the server)")
    outbox = Outbox(path)
    try:
        count = outbox.count()
    finally:
        outbox.close()
    if not count:
        return check("device outbox", True, "empty (nothing waits for the server)")
    return check("device outbox", True, f"{count:,} message(s) in {path} wait for the server; "
                 "the native host delivers them while the browser is open")  # fmt: skip
