"""The ledger's schema and its migrations.

``PRAGMA user_version`` holds the schema version. :data:`MIGRATIONS` is an append-only
list: ``MIGRATIONS[n]`` takes a database from version ``n`` to ``n + 1``. A migration is
frozen once released — never edit one, add the next. All pending migrations run in one
``BEGIN IMMEDIATE`` transaction, so concurrent openers wait for each other, the first
migrates and the others find the work done; a failed migration leaves nothing changed.

Version history:

1. Pages and their text versions, visits, bookmarks, highlights, notes, open tabs,
   facts, the event log and settings.
2. The ``changes`` feed for the indexer (back-filled with an upsert for every existing
   indexable record, so an index built after the upgrade sees everything) and a
   per-page total of active dwell time (back-filled from the visits).
3. ``raw_captures``: captured HTML waiting for main-text extraction.
4. ``actions``: browser actions an assistant proposed (group or close tabs, capture a
   tab, create a bookmark), their status and outcome (see :mod:`backtrail.store.actions`).
5. ``notes.author``: the assistant that wrote a note.
6. ``page_versions.outline``: the headings of a version's text (JSON ``[[offset, level,
   words], ...]``), so passages can break at sections and carry their heading path.
7. ``tokens``: the bearer tokens servers accept (SHA-256 digests, each with its client,
   scope and revocation time), and ``deliveries``: the messages a device delivered to
   ``POST /host`` (client, message id, type and the stored response), so a resent message
   is answered, not applied twice (see :mod:`backtrail.store.access`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from backtrail.errors import SchemaTooNew

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "SCHEMA_V1", "migrate", "run_script"]

logger = logging.getLogger(__name__)

SCHEMA_V1 = """
CREATE TABLE pages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    canonical_url    TEXT    NOT NULL UNIQUE,
    url              TEXT    NOT NULL,
    domain           TEXT    NOT NULL,
    title            TEXT,
    language         TEXT,
    current_version  INTEGER,
    first_seen       INTEGER NOT NULL,
    last_seen        INTEGER NOT NULL,
    visit_count      INTEGER NOT NULL DEFAULT 0,
    last_captured_at INTEGER
);
CREATE INDEX pages_domain ON pages (domain);
CREATE INDEX pages_last_seen ON pages (last_seen);

CREATE TABLE page_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    page_id      INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    title        TEXT,
    language     TEXT,
    text         TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    text_bytes   INTEGER NOT NULL,
    truncated    INTEGER NOT NULL DEFAULT 0,
    captured_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (page_id, version)
);
CREATE INDEX page_versions_captured ON page_versions (captured_at);

CREATE TABLE visits (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    page_id     INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    visited_at  INTEGER NOT NULL,
    tab_id      INTEGER,
    window_id   INTEGER,
    transition  TEXT,
    referrer    TEXT,
    dwell_ms    INTEGER,
    source      TEXT    NOT NULL,
    external_id TEXT
);
CREATE UNIQUE INDEX visits_external ON visits (source, external_id)
    WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX visits_natural ON visits (page_id, visited_at, source)
    WHERE external_id IS NULL;
CREATE INDEX visits_page ON visits (page_id, visited_at);
CREATE INDEX visits_time ON visits (visited_at);

CREATE TABLE bookmarks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    profile       TEXT    NOT NULL,
    browser_id    TEXT    NOT NULL,
    url           TEXT    NOT NULL,
    canonical_url TEXT    NOT NULL,
    domain        TEXT    NOT NULL,
    title         TEXT,
    folder        TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (profile, browser_id)
);
CREATE INDEX bookmarks_canonical ON bookmarks (canonical_url);
CREATE INDEX bookmarks_domain ON bookmarks (domain);

CREATE TABLE highlights (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    url           TEXT    NOT NULL,
    canonical_url TEXT    NOT NULL,
    domain        TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    context       TEXT,
    note          TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    external_id   TEXT    UNIQUE
);
CREATE INDEX highlights_canonical ON highlights (canonical_url);
CREATE INDEX highlights_domain ON highlights (domain);
CREATE INDEX highlights_created ON highlights (created_at);

CREATE TABLE notes (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    content       TEXT    NOT NULL,
    url           TEXT,
    canonical_url TEXT,
    domain        TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    external_id   TEXT    UNIQUE
);
CREATE INDEX notes_canonical ON notes (canonical_url);
CREATE INDEX notes_domain ON notes (domain);
CREATE INDEX notes_created ON notes (created_at);

CREATE TABLE tabs (
    profile       TEXT    NOT NULL,
    tab_id        INTEGER NOT NULL,
    window_id     INTEGER NOT NULL,
    tab_index     INTEGER,
    url           TEXT,
    canonical_url TEXT,
    domain        TEXT,
    title         TEXT,
    active        INTEGER NOT NULL DEFAULT 0,
    pinned        INTEGER NOT NULL DEFAULT 0,
    group_id      INTEGER,
    last_accessed INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (profile, tab_id)
);
CREATE INDEX tabs_window ON tabs (profile, window_id);

CREATE TABLE facts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT    NOT NULL UNIQUE,
    value      TEXT,
    version    INTEGER NOT NULL,
    client     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deleted_at INTEGER
);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    client      TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_type TEXT    NOT NULL,
    target      TEXT,
    details     TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_target ON events (target_type, target, id);
CREATE INDEX events_at ON events (at);

CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
"""

_SCHEMA_V2 = """
CREATE TABLE changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    entity_type TEXT    NOT NULL
        CHECK (entity_type IN ('page', 'highlight', 'note', 'bookmark', 'fact')),
    entity_id   INTEGER NOT NULL,
    op          TEXT    NOT NULL CHECK (op IN ('upsert', 'delete')),
    aspect      TEXT    NOT NULL DEFAULT 'content' CHECK (aspect IN ('content', 'stats')),
    at          INTEGER NOT NULL
);
CREATE INDEX changes_entity ON changes (entity_type, entity_id);
CREATE INDEX events_action ON events (action, id);
ALTER TABLE pages ADD COLUMN dwell_ms INTEGER NOT NULL DEFAULT 0;
UPDATE pages SET dwell_ms =
    (SELECT COALESCE(SUM(dwell_ms), 0) FROM visits WHERE visits.page_id = pages.id);
"""

# Raw HTML of captures waiting for main-text extraction (zlib-compressed UTF-8). A
# capture is acknowledged once this row is durable; a background pass extracts the text
# and deletes the row. Rows go with their page (forget by url/domain/everything).
_SCHEMA_V3 = """
CREATE TABLE raw_captures (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    page_id     INTEGER NOT NULL REFERENCES pages (id) ON DELETE CASCADE,
    url         TEXT    NOT NULL,
    html        BLOB    NOT NULL,
    title       TEXT,
    language    TEXT,
    captured_at INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX raw_captures_page ON raw_captures (page_id);
CREATE INDEX raw_captures_captured ON raw_captures (captured_at);
"""

# Browser actions proposed by assistants, delivered to the extension by a native host.
# ``payload`` and ``result`` are JSON; ``canonical_url``/``domain`` name the page an action
# is about (bookmarks, captures) so that forgetting the page forgets the action too.
_SCHEMA_V4 = """
CREATE TABLE actions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    type          TEXT    NOT NULL
        CHECK (type IN ('group_tabs', 'close_tabs', 'capture_tab', 'create_bookmark')),
    payload       TEXT    NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sent', 'done', 'failed', 'refused', 'expired')),
    client        TEXT    NOT NULL,
    profile       TEXT,
    claimed_by    TEXT,
    canonical_url TEXT,
    domain        TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    result        TEXT
);
CREATE INDEX actions_status ON actions (status, id);
CREATE INDEX actions_canonical ON actions (canonical_url);
"""

# Tokens and deliveries (see backtrail.store.access). A token is kept as the hex SHA-256
# digest of its secret; revoking sets revoked_at and keeps the row (the audit trail names
# its client). A delivery is written in the same transaction as the message's writes.
_SCHEMA_V7 = """
CREATE TABLE tokens (
    digest     TEXT    PRIMARY KEY,
    client_id  TEXT    NOT NULL,
    scope      TEXT    NOT NULL CHECK (scope IN ('read', 'write', 'device')),
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX tokens_client ON tokens (client_id);

CREATE TABLE deliveries (
    client_id    TEXT    NOT NULL,
    message_id   TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    response     TEXT    NOT NULL,
    delivered_at INTEGER NOT NULL,
    PRIMARY KEY (client_id, message_id)
);
CREATE INDEX deliveries_at ON deliveries (delivered_at);
"""

_BACKFILL_V2 = (
    ("page", "pages", ""),
    ("highlight", "highlights", ""),
    ("note", "notes", ""),
    ("bookmark", "bookmarks", ""),
    ("fact", "facts", "WHERE deleted_at IS NULL"),
)


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements one by one (``executescript`` would COMMIT the
    surrounding transaction)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement: {statement[:80]!r}")


def _migrate_1(conn: sqlite3.Connection, now: int) -> None:
    run_script(conn, SCHEMA_V1)


def _migrate_2(conn: sqlite3.Connection, now: int) -> None:
    run_script(conn, _SCHEMA_V2)
    for entity_type, table, where in _BACKFILL_V2:
        conn.execute(
            "INSERT INTO changes (entity_type, entity_id, op, aspect, at) "
            f"SELECT ?, id, 'upsert', 'content', ? FROM {table} {where} ORDER BY id",
            (entity_type, now),
        )


def _migrate_3(conn: sqlite3.Connection, now: int) -> None:
    run_script(conn, _SCHEMA_V3)


def _migrate_4(conn: sqlite3.Connection, now: int) -> None:
    run_script(conn, _SCHEMA_V4)


def _migrate_5(conn: sqlite3.Connection, now: int) -> None:
    """Notes name the assistant that wrote them (``author``; NULL: the user). Notes an
    MCP client saved before get its name from their ``note.add`` event."""
    conn.execute("ALTER TABLE notes ADD COLUMN author TEXT")
    conn.execute(
        "UPDATE notes SET author = (SELECT e.client FROM events e WHERE e.action = 'note.add' "
        "AND e.target_type = 'note' AND e.target = CAST(notes.id AS TEXT) AND (e.client = 'mcp' "
        "OR e.client LIKE 'mcp:%' OR e.client LIKE 'mcp-%') ORDER BY e.id LIMIT 1)"
    )


def _migrate_6(conn: sqlite3.Connection, now: int) -> None:
    """Page versions keep their text's headings (NULL: captured before outlines)."""
    conn.execute("ALTER TABLE page_versions ADD COLUMN outline TEXT")


def _migrate_7(conn: sqlite3.Connection, now: int) -> None:
    """Tokens in the ledger, and the deliveries of devices' messages."""
    run_script(conn, _SCHEMA_V7)


MIGRATIONS: list[Callable[[sqlite3.Connection, int], None]] = [
    _migrate_1, _migrate_2, _migrate_3, _migrate_4, _migrate_5, _migrate_6, _migrate_7,
]  # fmt: skip
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, now: int, target: int = SCHEMA_VERSION) -> int:
    """Bring the database to schema ``target`` and return the version found before.

    ``conn`` must be in autocommit mode (``isolation_level=None``) with no open
    transaction. Raises ``SchemaTooNew`` for a database from a newer Backtrail.
    """
    found = user_version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(found, SCHEMA_VERSION)
    if found >= target:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = user_version(conn)  # another process may have migrated meanwhile
        if current == 0:
            logger.info("creating a new ledger (schema version %d)", target)
        for version in range(current, target):
            if current > 0:
                logger.info("migrating the ledger schema from %d to %d", version, version + 1)
            MIGRATIONS[version](conn, now)
        conn.execute(f"PRAGMA user_version = {int(target)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
