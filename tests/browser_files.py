"""Real browser files for tests and the import benchmark: Chrome-family ``History`` and
``Bookmarks``, Firefox ``places.sqlite`` and ``profiles.ini``, with the browsers' actual
schemas (Chromium's history database version 70; Firefox places schema 78) and the
bookkeeping the browsers do themselves (``urls.visit_count`` skips reloads;
``moz_places.visit_count`` skips Firefox's excluded visit types).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

CHROME_EPOCH_OFFSET = 11_644_473_600

# Chromium components/history/core/browser/{url,visit}_database.cc and history_database.cc.
CHROME_HISTORY_SCHEMA = """
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT,url LONGVARCHAR,title LONGVARCHAR,
  visit_count INTEGER DEFAULT 0 NOT NULL,typed_count INTEGER DEFAULT 0 NOT NULL,
  last_visit_time INTEGER NOT NULL,hidden INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT,url INTEGER NOT NULL,
  visit_time INTEGER NOT NULL,from_visit INTEGER,external_referrer_url TEXT,
  transition INTEGER DEFAULT 0 NOT NULL,segment_id INTEGER,
  visit_duration INTEGER DEFAULT 0 NOT NULL,
  incremented_omnibox_typed_score BOOLEAN DEFAULT FALSE NOT NULL,opener_visit INTEGER,
  originator_cache_guid TEXT,originator_visit_id INTEGER,originator_from_visit INTEGER,
  originator_opener_visit INTEGER,is_known_to_sync BOOLEAN DEFAULT FALSE NOT NULL,
  consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,
  visited_link_id INTEGER DEFAULT 0 NOT NULL,app_id TEXT);
CREATE TABLE visit_source(id INTEGER PRIMARY KEY,source INTEGER NOT NULL);
CREATE TABLE keyword_search_terms (keyword_id INTEGER NOT NULL,url_id INTEGER NOT NULL,
  term LONGVARCHAR NOT NULL,normalized_term LONGVARCHAR NOT NULL);
CREATE TABLE segments (id INTEGER PRIMARY KEY,name VARCHAR,url_id INTEGER NON NULL);
CREATE TABLE segment_usage (id INTEGER PRIMARY KEY,segment_id INTEGER NOT NULL,
  time_slot INTEGER NOT NULL,visit_count INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE downloads (id INTEGER PRIMARY KEY,guid VARCHAR NOT NULL,
  current_path LONGVARCHAR NOT NULL,target_path LONGVARCHAR NOT NULL,
  start_time INTEGER NOT NULL,received_bytes INTEGER NOT NULL,total_bytes INTEGER NOT NULL,
  state INTEGER NOT NULL,danger_type INTEGER NOT NULL,interrupt_reason INTEGER NOT NULL,
  hash BLOB NOT NULL,end_time INTEGER NOT NULL,opened INTEGER NOT NULL,
  last_access_time INTEGER NOT NULL,transient INTEGER NOT NULL,referrer VARCHAR NOT NULL,
  site_url VARCHAR NOT NULL,embedder_download_data VARCHAR NOT NULL,
  tab_url VARCHAR NOT NULL,tab_referrer_url VARCHAR NOT NULL,http_method VARCHAR NOT NULL,
  by_ext_id VARCHAR NOT NULL,by_ext_name VARCHAR NOT NULL,by_web_app_id VARCHAR NOT NULL,
  etag VARCHAR NOT NULL,last_modified VARCHAR NOT NULL,mime_type VARCHAR(255) NOT NULL,
  original_mime_type VARCHAR(255) NOT NULL);
CREATE TABLE downloads_url_chains (id INTEGER NOT NULL,chain_index INTEGER NOT NULL,
  url LONGVARCHAR NOT NULL, PRIMARY KEY (id, chain_index));
CREATE INDEX urls_url_index ON urls (url);
CREATE INDEX visits_url_index ON visits (url);
CREATE INDEX visits_from_index ON visits (from_visit);
CREATE INDEX visits_time_index ON visits (visit_time);
CREATE INDEX visits_originator_id_index ON visits (originator_visit_id);
CREATE INDEX keyword_search_terms_index1 ON keyword_search_terms (keyword_id, normalized_term);
CREATE INDEX keyword_search_terms_index2 ON keyword_search_terms (url_id);
CREATE INDEX keyword_search_terms_index3 ON keyword_search_terms (term);
CREATE INDEX segments_name ON segments(name);
CREATE INDEX segments_url_id ON segments(url_id);
CREATE INDEX segment_usage_time_slot_segment_id ON segment_usage(time_slot, segment_id);
CREATE INDEX segments_usage_seg_id ON segment_usage(segment_id);
INSERT INTO meta VALUES ('mmap_status', '-1'), ('version', '70'),
  ('last_compatible_version', '16');
"""

# Firefox toolkit/components/places/nsPlacesTables.h and nsPlacesIndexes.h.
FIREFOX_PLACES_SCHEMA = """
CREATE TABLE moz_origins ( id INTEGER PRIMARY KEY, prefix TEXT NOT NULL, host TEXT NOT NULL,
  frecency INTEGER NOT NULL, recalc_frecency INTEGER NOT NULL DEFAULT 0,
  alt_frecency INTEGER, recalc_alt_frecency INTEGER NOT NULL DEFAULT 0,
  UNIQUE (prefix, host) );
CREATE TABLE moz_places (   id INTEGER PRIMARY KEY, url LONGVARCHAR, title LONGVARCHAR,
  rev_host LONGVARCHAR, visit_count INTEGER DEFAULT 0, hidden INTEGER DEFAULT 0 NOT NULL,
  typed INTEGER DEFAULT 0 NOT NULL, frecency INTEGER DEFAULT -1 NOT NULL,
  last_visit_date INTEGER , guid TEXT, foreign_count INTEGER DEFAULT 0 NOT NULL,
  url_hash INTEGER DEFAULT 0 NOT NULL , description TEXT, preview_image_url TEXT,
  site_name TEXT, origin_id INTEGER REFERENCES moz_origins(id),
  recalc_frecency INTEGER NOT NULL DEFAULT 0, alt_frecency INTEGER,
  recalc_alt_frecency INTEGER NOT NULL DEFAULT 0);
CREATE TABLE moz_historyvisits (  id INTEGER PRIMARY KEY, from_visit INTEGER,
  place_id INTEGER, visit_date INTEGER, visit_type INTEGER, session INTEGER,
  source INTEGER DEFAULT 0 NOT NULL, triggeringPlaceId INTEGER);
CREATE TABLE moz_inputhistory (  place_id INTEGER NOT NULL, input LONGVARCHAR NOT NULL,
  use_count INTEGER, PRIMARY KEY (place_id, input));
CREATE TABLE moz_bookmarks (  id INTEGER PRIMARY KEY, type INTEGER, fk INTEGER DEFAULT NULL,
  parent INTEGER, position INTEGER, title LONGVARCHAR, keyword_id INTEGER, folder_type TEXT,
  dateAdded INTEGER, lastModified INTEGER, guid TEXT,
  syncStatus INTEGER NOT NULL DEFAULT 0, syncChangeCounter INTEGER NOT NULL DEFAULT 1);
CREATE TABLE moz_bookmarks_deleted (  guid TEXT PRIMARY KEY,
  dateRemoved INTEGER NOT NULL DEFAULT 0);
CREATE TABLE moz_keywords (  id INTEGER PRIMARY KEY AUTOINCREMENT, keyword TEXT UNIQUE,
  place_id INTEGER, post_data TEXT);
CREATE TABLE moz_anno_attributes (  id INTEGER PRIMARY KEY,
  name VARCHAR(32) UNIQUE NOT NULL);
CREATE TABLE moz_annos (  id INTEGER PRIMARY KEY, place_id INTEGER NOT NULL,
  anno_attribute_id INTEGER, content LONGVARCHAR, flags INTEGER DEFAULT 0,
  expiration INTEGER DEFAULT 0, type INTEGER DEFAULT 0, dateAdded INTEGER DEFAULT 0,
  lastModified INTEGER DEFAULT 0);
CREATE TABLE moz_items_annos (  id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL,
  anno_attribute_id INTEGER, content LONGVARCHAR, flags INTEGER DEFAULT 0,
  expiration INTEGER DEFAULT 0, type INTEGER DEFAULT 0, dateAdded INTEGER DEFAULT 0,
  lastModified INTEGER DEFAULT 0);
CREATE TABLE moz_meta (key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID ;
CREATE TABLE moz_places_metadata (id INTEGER PRIMARY KEY, place_id INTEGER NOT NULL,
  referrer_place_id INTEGER, created_at INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL DEFAULT 0, total_view_time INTEGER NOT NULL DEFAULT 0,
  typing_time INTEGER NOT NULL DEFAULT 0, key_presses INTEGER NOT NULL DEFAULT 0,
  scrolling_time INTEGER NOT NULL DEFAULT 0, scrolling_distance INTEGER NOT NULL DEFAULT 0,
  document_type INTEGER NOT NULL DEFAULT 0, search_query_id INTEGER,
  FOREIGN KEY (place_id) REFERENCES moz_places(id) ON DELETE CASCADE,
  FOREIGN KEY (referrer_place_id) REFERENCES moz_places(id) ON DELETE CASCADE);
CREATE INDEX moz_places_url_hashindex ON moz_places (url_hash);
CREATE INDEX moz_places_hostindex ON moz_places (rev_host);
CREATE INDEX moz_places_visitcount ON moz_places (visit_count);
CREATE INDEX moz_places_frecencyindex ON moz_places (frecency);
CREATE INDEX moz_places_lastvisitdateindex ON moz_places (last_visit_date);
CREATE UNIQUE INDEX moz_places_guid_uniqueindex ON moz_places (guid);
CREATE INDEX moz_places_originidindex ON moz_places (origin_id);
CREATE INDEX moz_historyvisits_placedateindex ON moz_historyvisits (place_id, visit_date);
CREATE INDEX moz_historyvisits_fromindex ON moz_historyvisits (from_visit);
CREATE INDEX moz_historyvisits_dateindex ON moz_historyvisits (visit_date);
CREATE INDEX moz_bookmarks_itemindex ON moz_bookmarks (fk, type);
CREATE INDEX moz_bookmarks_parentindex ON moz_bookmarks (parent, position);
CREATE INDEX moz_bookmarks_itemlastmodifiedindex ON moz_bookmarks (fk, lastModified);
CREATE INDEX moz_bookmarks_dateaddedindex ON moz_bookmarks (dateAdded);
CREATE UNIQUE INDEX moz_bookmarks_guid_uniqueindex ON moz_bookmarks (guid);
CREATE UNIQUE INDEX moz_keywords_placepostdata_uniqueindex ON moz_keywords (place_id, post_data);
CREATE UNIQUE INDEX moz_annos_placeattributeindex ON moz_annos (place_id, anno_attribute_id);
CREATE UNIQUE INDEX moz_items_annos_itemattributeindex
  ON moz_items_annos (item_id, anno_attribute_id);
PRAGMA user_version = 78;
"""

# Places' built-in folders: (id, guid, parent id, position).
FIREFOX_ROOT_FOLDERS = [
    (1, "root________", 0, 0),
    (2, "menu________", 1, 0),
    (3, "toolbar_____", 1, 1),
    (4, "tags________", 1, 2),
    (5, "unfiled_____", 1, 3),
    (6, "mobile______", 1, 4),
]

# Chrome core transition types and qualifiers (ui/base/page_transition_types.h).
LINK, TYPED, AUTO_BOOKMARK, AUTO_SUBFRAME, MANUAL_SUBFRAME = 0, 1, 2, 3, 4
GENERATED, AUTO_TOPLEVEL, FORM_SUBMIT, RELOAD, KEYWORD = 5, 6, 7, 8, 9
CHAIN_START, CHAIN_END = 0x10000000, 0x20000000
# Firefox visit types (nsINavHistoryService).
FF_LINK, FF_TYPED, FF_BOOKMARK, FF_EMBED, FF_REDIRECT_PERMANENT = 1, 2, 3, 4, 5
FF_REDIRECT_TEMPORARY, FF_DOWNLOAD, FF_FRAMED_LINK, FF_RELOAD = 6, 7, 8, 9
FF_EXCLUDED = (0, FF_EMBED, FF_DOWNLOAD, FF_FRAMED_LINK, FF_RELOAD)


def chrome_time(unix_seconds: int, micros: int = 0) -> int:
    return (unix_seconds + CHROME_EPOCH_OFFSET) * 1_000_000 + micros


class ChromeHistory:
    """Writes a Chrome ``History`` file the way Chrome's HistoryBackend does."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path)
        exists = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'urls'").fetchone()
        if not exists:
            self.conn.executescript(CHROME_HISTORY_SCHEMA)

    def add_visit(
        self,
        url: str,
        at: int,
        *,
        title: str | None = None,
        transition: int = LINK | CHAIN_START | CHAIN_END,
        duration_us: int = 0,
        from_visit: int = 0,
        micros: int = 0,
    ) -> int:
        """Record one visit (unix seconds ``at``); returns the visit id."""
        core = transition & 0xFF
        hidden = core in (AUTO_SUBFRAME, MANUAL_SUBFRAME)
        when = chrome_time(at, micros)
        row = self.conn.execute("SELECT id FROM urls WHERE url = ?", (url,)).fetchone()
        if row is None:
            cursor = self.conn.execute(
                "INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden) "
                "VALUES (?, ?, 1, ?, ?, ?)",
                (url, title or "", int(core == TYPED), when, int(hidden)),
            )
            url_id = cursor.lastrowid
        else:
            url_id = row[0]
            self.conn.execute(
                "UPDATE urls SET visit_count = visit_count + ?, typed_count = typed_count + ?, "
                "last_visit_time = MAX(last_visit_time, ?), title = COALESCE(?, title), "
                "hidden = hidden AND ? WHERE id = ?",
                (int(core != RELOAD), int(core == TYPED), when, title, int(hidden), url_id),
            )
        cursor = self.conn.execute(
            "INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, "
            "visit_duration, opener_visit, originator_visit_id, originator_from_visit, "
            "originator_opener_visit, consider_for_ntp_most_visited) "
            "VALUES (?, ?, ?, ?, 0, ?, 0, 0, 0, 0, 1)",
            (url_id, when, from_visit, transition, duration_us),
        )
        return int(cursor.lastrowid or 0)

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()


def chrome_bookmarks(path: Path, bar: list[dict], other: list[dict] | None = None) -> None:
    """Write a Chrome ``Bookmarks`` file; nodes are ``url(...)`` / ``folder(...)``."""
    counter = iter(range(10, 1_000_000))

    def number(node: dict) -> dict:
        node = {**node, "id": node.get("id") or str(next(counter))}
        if node["type"] == "folder":
            node["children"] = [number(child) for child in node["children"]]
        return node

    def root(name: str, ident: str, children: list[dict]) -> dict:
        return {
            "children": [number(c) for c in children],
            "date_added": "13300000000000000",
            "date_modified": "0",
            "guid": f"0bc5d13f-2cba-5d74-951f-3f233fe6c90{ident}",
            "id": ident,
            "name": name,
            "type": "folder",
        }

    data = {
        "checksum": "3b0a4c5e2f1d6a7b8c9d0e1f2a3b4c5d",
        "roots": {
            "bookmark_bar": root("Bookmarks bar", "1", bar),
            "other": root("Other bookmarks", "2", other or []),
            "synced": root("Mobile bookmarks", "3", []),
        },
        "version": 1,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=3), encoding="utf-8")


def url(address: str, name: str, added: int, ident: str | None = None) -> dict:
    node = {
        "date_added": str(chrome_time(added)),
        "date_last_used": "0",
        "guid": f"guid-{address[-12:]}",
        "name": name,
        "type": "url",
        "url": address,
    }
    if ident is not None:
        node["id"] = ident
    return node


def folder(name: str, children: list[dict]) -> dict:
    return {
        "date_added": "13300000000000000",
        "date_modified": "0",
        "name": name,
        "type": "folder",
        "children": children,
    }


@dataclass
class FirefoxPlaces:
    """Writes a Firefox ``places.sqlite`` (WAL mode, like Firefox) with its root folders."""

    path: Path
    conn: sqlite3.Connection = field(init=False)
    _guid: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.executescript(FIREFOX_PLACES_SCHEMA)
        for ident, guid, parent, position in FIREFOX_ROOT_FOLDERS:
            self.conn.execute(
                "INSERT INTO moz_bookmarks (id, type, parent, position, title, dateAdded, "
                "lastModified, guid) VALUES (?, 2, ?, ?, ?, 1700000000000000, "
                "1700000000000000, ?)",
                (ident, parent, position, "" if ident == 1 else guid.strip("_"), guid),
            )

    def _next_guid(self) -> str:
        self._guid += 1
        return f"guid{self._guid:08d}"

    def place(self, url: str, title: str | None = None) -> int:
        row = self.conn.execute("SELECT id FROM moz_places WHERE url = ?", (url,)).fetchone()
        if row is not None:
            if title is not None:
                self.conn.execute("UPDATE moz_places SET title = ? WHERE id = ?", (title, row[0]))
            return int(row[0])
        host = url.split("://", 1)[-1].split("/", 1)[0]
        cursor = self.conn.execute(
            "INSERT INTO moz_places (url, title, rev_host, guid, url_hash) VALUES (?, ?, ?, ?, ?)",
            (url, title, host[::-1] + ".", self._next_guid(), hash(url) & 0xFFFFFFFFFFFF),
        )
        return int(cursor.lastrowid or 0)

    def add_visit(
        self,
        url: str,
        at: int,
        *,
        title: str | None = None,
        visit_type: int = FF_LINK,
        from_visit: int = 0,
    ) -> int:
        """Record one visit (unix seconds ``at``) as Firefox's triggers would."""
        place_id = self.place(url, title)
        cursor = self.conn.execute(
            "INSERT INTO moz_historyvisits (from_visit, place_id, visit_date, visit_type, "
            "session, source) VALUES (?, ?, ?, ?, 0, 0)",
            (from_visit, place_id, at * 1_000_000, visit_type),
        )
        self.conn.execute(
            "UPDATE moz_places SET visit_count = visit_count + ?, "
            "last_visit_date = MAX(COALESCE(last_visit_date, 0), ?) WHERE id = ?",
            (int(visit_type not in FF_EXCLUDED), at * 1_000_000, place_id),
        )
        return int(cursor.lastrowid or 0)

    def add_folder(self, title: str, parent: int = 3) -> int:
        cursor = self.conn.execute(
            "INSERT INTO moz_bookmarks (type, parent, position, title, dateAdded, lastModified, "
            "guid) VALUES (2, ?, 0, ?, 1700000000000000, 1700000000000000, ?)",
            (parent, title, self._next_guid()),
        )
        return int(cursor.lastrowid or 0)

    def add_bookmark(self, url: str, title: str, added: int, parent: int = 3) -> str:
        """Bookmark ``url`` in folder ``parent`` (3 is the toolbar); returns its guid."""
        place_id = self.place(url)
        guid = self._next_guid()
        self.conn.execute(
            "INSERT INTO moz_bookmarks (type, fk, parent, position, title, dateAdded, "
            "lastModified, guid) VALUES (1, ?, ?, 0, ?, ?, ?, ?)",
            (place_id, parent, title, added * 1_000_000, added * 1_000_000, guid),
        )
        self.conn.execute(
            "UPDATE moz_places SET foreign_count = foreign_count + 1 WHERE id = ?", (place_id,)
        )
        return guid

    def commit(self) -> None:
        self.conn.commit()

    def close(self) -> None:
        self.conn.commit()
        self.conn.close()


def chromium_user_data(root: Path, profiles: dict[str, str], last_used: str = "Default") -> None:
    """A Chrome-family user data directory: ``Local State`` naming ``profiles``
    (``{directory: display name}``), each directory with an empty ``History``."""
    root.mkdir(parents=True, exist_ok=True)
    state = {
        "profile": {
            "info_cache": {d: {"name": n} for d, n in profiles.items()},
            "last_used": last_used,
        }
    }
    (root / "Local State").write_text(json.dumps(state), encoding="utf-8")
    for directory in profiles:
        ChromeHistory(root / directory / "History").close()


def firefox_root(root: Path, profiles: list[tuple[str, str]], install_default: str | None) -> None:
    """A Firefox root with ``profiles.ini`` listing ``(name, relative path)`` profiles,
    each with an empty ``places.sqlite``."""
    lines = ["[General]", "StartWithLastProfile=1", "Version=2", ""]
    if install_default is not None:
        lines += ["[Install4F96D1932A9F858E]", f"Default={install_default}", "Locked=1", ""]
    for number, (name, relative) in enumerate(profiles):
        lines += [f"[Profile{number}]", f"Name={name}", "IsRelative=1", f"Path={relative}"]
        if number == len(profiles) - 1:
            lines.append("Default=1")
        lines.append("")
        FirefoxPlaces(root / relative / "places.sqlite").close()
    root.mkdir(parents=True, exist_ok=True)
    (root / "profiles.ini").write_text("\n".join(lines), encoding="utf-8")
