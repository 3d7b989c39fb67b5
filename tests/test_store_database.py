"""The ledger's database: where the data directory is, opening it (permissions, WAL, busy
timeout, a newer schema), settings and stats, and migrations from older schemas."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
import pytest

from backtrail.errors import FactNotFound, InvalidInput, SchemaTooNew, StoreBusy
from backtrail.store import LEDGER_FILENAME, SCHEMA_VERSION, Ledger, data_dir
from backtrail.store.schema import MIGRATIONS, SCHEMA_V1
from store_support import T0

if TYPE_CHECKING:
    from conftest import FakeClock


# ---------------------------------------------------------------- data directory


def test_data_dir_uses_backtrail_home_env_var(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BACKTRAIL_HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home"
    assert (tmp_path / "home").is_dir()


def test_data_dir_override_beats_env_var(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BACKTRAIL_HOME", str(tmp_path / "env"))
    assert data_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    assert not (tmp_path / "env").exists()


def test_data_dir_defaults_to_platform_user_data_dir(monkeypatch) -> None:
    monkeypatch.delenv("BACKTRAIL_HOME", raising=False)
    expected = Path(platformdirs.user_data_dir("backtrail", appauthor=False)).absolute()
    assert data_dir(create=False) == expected


def test_open_creates_an_owner_only_wal_database_in_the_data_dir(data_home: Path) -> None:
    with Ledger.open() as ledger:
        assert ledger.path == data_home / LEDGER_FILENAME
        ledger.set_fact("k", "v")
    mode = stat.S_IMODE((data_home / LEDGER_FILENAME).stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(data_home.stat().st_mode) == 0o700
    raw = sqlite3.connect(data_home / LEDGER_FILENAME)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    raw.close()


def test_write_waits_for_busy_timeout_then_raises_store_busy_and_stores_nothing(
    data_home: Path,
) -> None:
    ledger = Ledger.open(busy_timeout_ms=50)
    blocker = sqlite3.connect(ledger.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreBusy) as caught:
        ledger.set_fact("k", "v")
    assert str(caught.value) == (
        "the store is busy: another process held the write lock for more than 50 ms; try again"
    )
    blocker.execute("ROLLBACK")
    blocker.close()
    with pytest.raises(FactNotFound):
        ledger.get_fact("k")
    assert ledger.set_fact("k", "v").version == 1
    ledger.close()


def test_opening_a_database_from_a_newer_backtrail_raises_schema_too_new(
    data_home: Path,
) -> None:
    path = data_home / LEDGER_FILENAME
    data_home.mkdir(parents=True)
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(SchemaTooNew, match=f"has schema version {SCHEMA_VERSION + 1} but"):
        Ledger(path)


# ----------------------------------------------------------- settings and stats


def test_settings_hold_json_values(ledger: Ledger) -> None:
    assert ledger.get_setting("exclusions", []) == []
    ledger.set_setting("exclusions", ["bank.example", "*/private/*"])
    ledger.set_setting("pause", {"until": T0 + 3600, "reason": "meeting"})
    ledger.set_setting("pause", {"until": None})
    assert ledger.get_setting("exclusions") == ["bank.example", "*/private/*"]
    assert ledger.list_settings() == {
        "exclusions": ["bank.example", "*/private/*"],
        "pause": {"until": None},
    }
    assert ledger.delete_setting("pause") is True
    assert ledger.delete_setting("pause") is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1, 2}, "must be JSON-serialisable"),
        (float("nan"), "must be JSON-serialisable"),
        ("\ud800", "lone surrogate"),
        ("x" * 1_000_001, "value is 1000003 bytes long; the limit is 1000000 bytes"),
    ],
)
def test_settings_refuse_values_that_are_not_json_or_too_large(
    ledger: Ledger, value: object, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        ledger.set_setting("k", value)
    assert ledger.list_settings() == {}


def test_stats_report_counts_last_times_and_sizes(ledger: Ledger, clock: FakeClock) -> None:
    empty = ledger.stats()
    assert (empty.last_capture_at, empty.last_visit_at, empty.max_change_seq) == (None, None, 0)
    ledger.capture_page("https://e.com/a", text="t")
    ledger.record_visit("https://e.com/a", visited_at=T0 - 5)
    clock.advance(100)
    ledger.capture_page("https://e.com/b", text="t")
    ledger.set_fact("k", "v")
    ledger.delete_fact("k")
    stats = ledger.stats()
    assert stats.counts["pages"] == 2 and stats.counts["visits"] == 1
    assert stats.counts["facts"] == 0  # deleted facts are not counted
    assert (stats.last_capture_at, stats.last_visit_at) == (T0 + 100, T0 - 5)
    assert stats.schema_version == SCHEMA_VERSION
    assert stats.db_bytes > 0 and stats.wal_bytes > 0
    assert stats.path == str(ledger.path)


# -------------------------------------------------------------------- migrations

FROZEN_SCHEMA_V1 = """
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


def schema_of(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
    ).fetchall()


def test_released_migration_1_still_builds_the_frozen_v1_schema() -> None:
    frozen = sqlite3.connect(":memory:")
    frozen.executescript(FROZEN_SCHEMA_V1)
    migrated = sqlite3.connect(":memory:", isolation_level=None)
    MIGRATIONS[0](migrated, T0)
    assert schema_of(migrated) == schema_of(frozen)
    assert SCHEMA_V1 == FROZEN_SCHEMA_V1


def build_v1_database(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.executescript(FROZEN_SCHEMA_V1)
    raw.executescript(
        f"""
        INSERT INTO pages (canonical_url, url, domain, title, current_version, first_seen,
                           last_seen, visit_count, last_captured_at)
            VALUES ('https://old.example/a', 'https://old.example/a', 'old.example', 'Old page',
                    1, {T0 - 100}, {T0 - 50}, 2, {T0 - 100});
        INSERT INTO page_versions (page_id, version, title, text, content_hash, text_bytes,
                                   captured_at, updated_at)
            VALUES (1, 1, 'Old page', 'old text', 'hash', 8, {T0 - 100}, {T0 - 100});
        INSERT INTO visits (page_id, visited_at, dwell_ms, source)
            VALUES (1, {T0 - 100}, 1200, 'extension'), (1, {T0 - 50}, 300, 'extension');
        INSERT INTO highlights (url, canonical_url, domain, text, created_at, updated_at)
            VALUES ('https://old.example/a', 'https://old.example/a', 'old.example', 'hl',
                    {T0 - 90}, {T0 - 90});
        INSERT INTO facts (key, value, version, client, created_at, updated_at)
            VALUES ('counter', '7', 7, 'old-client', {T0 - 80}, {T0 - 80});
        INSERT INTO facts (key, value, version, client, created_at, updated_at, deleted_at)
            VALUES ('gone', NULL, 3, 'old-client', {T0 - 80}, {T0 - 70}, {T0 - 70});
        INSERT INTO events (at, client, action, target_type, target)
            VALUES ({T0 - 80}, 'old-client', 'fact.set', 'fact', 'counter');
        PRAGMA user_version = 1;
        """
    )
    raw.close()


def test_upgrading_a_v1_database_keeps_data_and_backfills_the_change_feed(
    data_home: Path, clock: FakeClock
) -> None:
    data_home.mkdir(parents=True)
    path = data_home / LEDGER_FILENAME
    build_v1_database(path)
    with Ledger(path, clock=clock) as ledger:
        assert ledger.stats().schema_version == SCHEMA_VERSION == 7
        page = ledger.get_page("https://old.example/a", with_text=True)
        assert (page.title, page.text, page.visit_count, page.dwell_ms) == (
            "Old page", "old text", 2, 1500,
        )  # fmt: skip
        assert ledger.get_fact("counter").version == 7
        assert [(c.entity_type, c.entity_id, c.op, c.at) for c in ledger.changes_since(0)] == [
            ("page", 1, "upsert", T0), ("highlight", 1, "upsert", T0), ("fact", 1, "upsert", T0),
        ]  # fmt: skip
        assert ledger.list_events()[0].client == "old-client"
        assert ledger.set_fact("counter", "8", expected_version=7).version == 8
        ledger.record_visit("https://old.example/a", visited_at=T0, dwell_ms=500)
        assert ledger.get_page("https://old.example/a").dwell_ms == 2000
    with Ledger(path, clock=clock) as reopened:  # migrating again is a no-op
        assert reopened.max_change_seq() == 5


def test_upgrading_to_schema_5_names_the_assistants_of_notes_saved_over_mcp(
    data_home: Path, clock: FakeClock
) -> None:
    path = data_home / LEDGER_FILENAME
    with Ledger(path, client="mcp:cursor", clock=clock) as ledger:
        assistant = ledger.add_note("saved by an assistant before notes had authors")
    with Ledger(path, client="native-host", clock=clock) as ledger:
        own = ledger.add_note("the user's own note")
    raw = sqlite3.connect(path)
    raw.execute("ALTER TABLE notes DROP COLUMN author")
    raw.execute("ALTER TABLE page_versions DROP COLUMN outline")
    raw.execute("DROP TABLE tokens")
    raw.execute("DROP TABLE deliveries")
    raw.execute("PRAGMA user_version = 4")
    raw.commit()
    raw.close()
    with Ledger(path, clock=clock) as ledger:
        assert ledger.get_note(assistant.id).author == "mcp:cursor"
        assert ledger.get_note(own.id).author is None
