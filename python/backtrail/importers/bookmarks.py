"""Bookmarks from the browsers' own files.

Chrome family: the ``Bookmarks`` JSON file in the profile directory,
``{"roots": {"bookmark_bar": node, "other": node, "synced": node}, ...}`` where a node is
``{"type": "folder", "name", "children": [...]}`` or ``{"type": "url", "id", "guid",
"name", "url", "date_added"}`` (``date_added``: microseconds since 1601, as a string).
The ``id`` is the one the ``chrome.bookmarks`` API (and so the extension) uses.

Firefox: ``moz_bookmarks`` in ``places.sqlite``: ``type`` 1 is a bookmark (``fk`` points
at its ``moz_places`` row), 2 a folder, 3 a separator; ``parent`` builds the tree from
the built-in roots (menu, toolbar, unfiled, mobile; the tags root is left out);
``dateAdded`` is in microseconds since 1970; ``guid`` is the stable id.

Both readers return ``BookmarkInput`` fields with the folder path joined by ``/``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from backtrail.importers._sqlite import BrowserDataUnreadable, BrowserFileNotFound, require
from backtrail.importers.chrome import from_chrome_time

__all__ = ["read_chromium_bookmarks", "read_firefox_bookmarks", "FIREFOX_ROOTS"]

FIREFOX_ROOTS = {
    "menu________": "Bookmarks Menu",
    "toolbar_____": "Bookmarks Toolbar",
    "unfiled_____": "Other Bookmarks",
    "mobile______": "Mobile Bookmarks",
}
_CHROMIUM_ROOTS = {
    "bookmark_bar": "Bookmarks bar",
    "other": "Other bookmarks",
    "synced": "Mobile bookmarks",
}
_MAX_DEPTH = 100


def read_chromium_bookmarks(path: Path) -> list[dict[str, Any]]:
    """Every bookmark (not folder) in a Chrome-family ``Bookmarks`` file."""
    if not path.is_file():
        raise BrowserFileNotFound(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, ValueError) as error:
        raise BrowserDataUnreadable(path, f"not a bookmarks JSON file ({error})") from None
    roots = data.get("roots") if isinstance(data, dict) else None
    if not isinstance(roots, dict):
        raise BrowserDataUnreadable(path, 'it has no "roots"; is this the right file?')
    found: list[dict[str, Any]] = []
    for key, node in roots.items():
        if isinstance(node, dict):
            name = node.get("name") or _CHROMIUM_ROOTS.get(key, key)
            _walk(node.get("children"), str(name), found, 0)
    return found


def _walk(children: object, folder: str, found: list[dict[str, Any]], depth: int) -> None:
    if not isinstance(children, list) or depth > _MAX_DEPTH:
        return
    for node in children:
        if not isinstance(node, dict):
            continue
        name = node.get("name") if isinstance(node.get("name"), str) else ""
        if node.get("type") == "folder":
            _walk(node.get("children"), f"{folder}/{name}", found, depth + 1)
        elif node.get("type") == "url" and isinstance(node.get("url"), str):
            ident = node.get("id") or node.get("guid")
            if ident is None:
                continue
            found.append(
                {
                    "browser_id": str(ident),
                    "url": node["url"],
                    "title": name or None,
                    "folder": folder,
                    "created_at": from_chrome_time(node.get("date_added")),
                }
            )


def read_firefox_bookmarks(conn: sqlite3.Connection, path: Path) -> list[dict[str, Any]]:
    """Every bookmark under Firefox's menu, toolbar, other and mobile roots."""
    needed = {
        "moz_bookmarks": {"id", "type", "fk", "parent", "title", "guid", "dateAdded"},
        "moz_places": {"id", "url"},
    }
    require(conn, path, needed)
    roots = ", ".join(f"('{guid}', '{name}')" for guid, name in FIREFOX_ROOTS.items())
    sql = f"""
        WITH RECURSIVE
          names(guid, name) AS (VALUES {roots}),
          tree(id, path, depth) AS (
            SELECT b.id, names.name, 0 FROM moz_bookmarks b JOIN names ON names.guid = b.guid
            UNION ALL
            SELECT b.id, tree.path || '/' || COALESCE(b.title, ''), tree.depth + 1
            FROM moz_bookmarks b JOIN tree ON b.parent = tree.id
            WHERE b.type = 2 AND tree.depth < {_MAX_DEPTH}
          )
        SELECT b.guid, b.id, p.url, b.title, tree.path AS folder, b.dateAdded AS added
        FROM moz_bookmarks b
        JOIN tree ON b.parent = tree.id
        JOIN moz_places p ON p.id = b.fk
        WHERE b.type = 1
        ORDER BY b.id
    """
    found = []
    for row in conn.execute(sql):
        added = row["added"]
        found.append(
            {
                "browser_id": row["guid"] or str(row["id"]),
                "url": row["url"] or "",
                "title": row["title"] or None,
                "folder": row["folder"],
                "created_at": added // 1_000_000 if isinstance(added, int) and added > 0 else None,
            }
        )
    return found
