"""The snapshot of open tabs, per browser profile and window.

The extension sends a full snapshot (:meth:`TabsMixin.snapshot_tabs`) when it starts or
reconnects, then tab events (:meth:`TabsMixin.apply_tab_event`) as they happen. Tabs are
current state, not history: they are not indexed and have no change-feed entries.
Non-http(s) tabs (``chrome://newtab``) are kept so tab clean-up sees them, but only as
``scheme://host``, never with a path or query.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from backtrail.errors import BacktrailError, InvalidInput, TabNotFound
from backtrail.store import checks
from backtrail.store.core import LedgerCore
from backtrail.store.models import Tab, TabEventKind, TabInput

__all__ = ["TabsMixin", "UNSET"]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()
"""Default of :meth:`TabsMixin.apply_tab_event` fields: leave the stored value alone."""

_TAB_EVENTS = ("opened", "closed", "activated", "updated")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):(//([^/?#\\]*))?", re.IGNORECASE)
_NO_GROUP = -1  # chrome.tabGroups.TAB_GROUP_ID_NONE


# PostgreSQL has no INSERT OR REPLACE; a tab row has no other unique key, so updating
# every column on a (profile, tab_id) conflict stores the same row.
_PG_REPLACE = " ON CONFLICT (profile, tab_id) DO UPDATE SET " + ", ".join(
    f"{column} = excluded.{column}"
    for column in ("window_id", "tab_index", "url", "canonical_url", "domain", "title", "active",
                   "pinned", "group_id", "last_accessed", "updated_at")
)  # fmt: skip


def _tab(row: sqlite3.Row) -> Tab:
    values = {key: row[key] for key in row.keys()}
    values["index"] = values.pop("tab_index")
    values["active"] = bool(values["active"])
    values["pinned"] = bool(values["pinned"])
    return Tab(**values)


def _tab_url(value: object, field: str) -> tuple[str | None, str | None, str | None]:
    """(stored url, canonical url, domain) for any tab URL; never refuses a string."""
    if value is None:
        return None, None, None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
    try:
        return checks.web_url(value, field)
    except BacktrailError:
        match = _SCHEME.match(value.strip()[:2048])
        if match is None:
            return None, None, None
        scheme = match.group(1).lower()
        host = (match.group(3) or "").split("@")[-1].lower()
        if not re.fullmatch(r"[a-z0-9.\-_:\[\]]{0,255}", host):
            host = ""
        return (f"{scheme}://{host}" if match.group(2) else f"{scheme}:"), None, None


class TabsMixin(LedgerCore):
    def _clean_tab(self, item: TabInput, prefix: str) -> dict[str, Any]:
        url, canonical, domain = _tab_url(item.url, f"{prefix}url")
        group = checks.integer(item.group_id, f"{prefix}group_id", optional=True)
        return {
            "tab_id": checks.integer(item.tab_id, f"{prefix}tab_id"),
            "window_id": checks.integer(item.window_id, f"{prefix}window_id"),
            "tab_index": checks.integer(item.index, f"{prefix}index", minimum=0, optional=True),
            "url": url,
            "canonical_url": canonical,
            "domain": domain,
            "title": checks.title(item.title, f"{prefix}title", self._limits.max_title_chars),
            "active": int(checks.boolean(item.active, f"{prefix}active")),
            "pinned": int(checks.boolean(item.pinned, f"{prefix}pinned")),
            "group_id": None if group == _NO_GROUP else group,
            "last_accessed": None
            if item.last_accessed is None
            else checks.timestamp(item.last_accessed, f"{prefix}last_accessed"),
        }

    def _put_tab(self, conn: sqlite3.Connection, profile: str, values: dict[str, Any]) -> None:
        conn.execute(
            ("INSERT INTO tabs" if self._pg else "INSERT OR REPLACE INTO tabs")
            + " (profile, tab_id, window_id, tab_index, url, "
            "canonical_url, domain, title, active, pinned, group_id, last_accessed, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            + (_PG_REPLACE if self._pg else ""),
            (profile, values["tab_id"], values["window_id"], values["tab_index"], values["url"],
             values["canonical_url"], values["domain"], values["title"], values["active"],
             values["pinned"], values["group_id"], values["last_accessed"], self._now()),
        )  # fmt: skip

    def snapshot_tabs(
        self,
        tabs: Sequence[TabInput | dict[str, Any]],
        *,
        profile: str = "default",
        window_id: int | None = None,
    ) -> int:
        """Replace the stored tabs of ``profile`` (or of one window of it) with ``tabs``;
        returns how many are stored. With ``window_id`` every tab must belong to it."""
        if isinstance(tabs, (str, bytes, dict)) or not isinstance(tabs, Sequence):
            raise InvalidInput("tabs", "must be a list of tabs")
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        window = checks.integer(window_id, "window_id", optional=True)
        clean = []
        for index, item in enumerate(tabs):
            values = self._clean_tab(
                checks.as_record(item, TabInput, f"tabs[{index}]"), f"tabs[{index}]."
            )
            if window is not None and values["window_id"] != window:
                raise InvalidInput(
                    f"tabs[{index}].window_id", f"is {values['window_id']}, not window {window}"
                )
            clean.append(values)
        with self._write() as conn:
            if window is None:
                conn.execute("DELETE FROM tabs WHERE profile = ?", (profile,))
            else:
                conn.execute(
                    "DELETE FROM tabs WHERE profile = ? AND window_id = ?", (profile, window)
                )
            for values in clean:
                self._put_tab(conn, profile, values)
            self._event(
                conn, "tabs.snapshot", "tabs", profile, {"tabs": len(clean), "window_id": window}
            )
        return len(clean)

    def close_tabs(self, *, profile: str, before: int) -> int:
        """The browser of ``profile`` closed: its tabs stored before ``before`` (unix
        seconds) are no longer open (a session begun since keeps the ones it sent).
        Returns how many were removed."""
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        at = checks.timestamp(before, "before")
        with self._write() as conn:
            removed = conn.execute(
                "DELETE FROM tabs WHERE profile = ? AND updated_at < ?", (profile, at)
            ).rowcount
            if removed:
                self._event(conn, "tabs.closed", "tabs", profile, {"tabs": removed})
        return int(removed)

    def apply_tab_event(
        self,
        kind: TabEventKind,
        tab_id: int,
        *,
        profile: str = "default",
        window_id: int | _Unset = UNSET,
        url: str | None | _Unset = UNSET,
        title: str | None | _Unset = UNSET,
        active: bool | _Unset = UNSET,
        pinned: bool | _Unset = UNSET,
        group_id: int | None | _Unset = UNSET,
        index: int | None | _Unset = UNSET,
        last_accessed: int | None | _Unset = UNSET,
    ) -> Tab | None:
        """Apply one tab event to the snapshot and return the tab (``None`` once closed).

        ``opened`` adds the tab (``window_id`` required); ``closed`` removes it (a no-op
        if unknown); ``activated`` makes it the window's only active tab and stamps
        ``last_accessed`` (now unless given); ``updated`` changes only the fields given.
        An event for an unknown tab adds it when ``window_id`` is given (events can
        arrive before the snapshot), else raises ``TabNotFound``.
        """
        kind = checks.one_of(kind, "kind", _TAB_EVENTS)  # type: ignore[assignment]
        tab = checks.integer(tab_id, "tab_id")
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        given: dict[str, Any] = {
            name: value
            for name, value in (
                ("window_id", window_id), ("url", url), ("title", title), ("active", active),
                ("pinned", pinned), ("group_id", group_id), ("index", index),
                ("last_accessed", last_accessed),
            )
            if value is not UNSET
        }  # fmt: skip
        if kind == "opened" and "window_id" not in given:
            raise InvalidInput("window_id", "is required when a tab is opened")
        with self._write() as conn:
            row = conn.execute(
                "SELECT * FROM tabs WHERE profile = ? AND tab_id = ?", (profile, tab)
            ).fetchone()
            if kind == "closed":
                if row is not None:
                    conn.execute(
                        "DELETE FROM tabs WHERE profile = ? AND tab_id = ?", (profile, tab)
                    )
                    self._event(conn, "tab.closed", "tab", tab)
                return None
            if row is None and "window_id" not in given:
                raise TabNotFound(tab)
            if kind == "activated":
                given["active"] = True
                if given.get("last_accessed") is None:
                    given["last_accessed"] = self._now()
            base = _tab(row) if row is not None and kind != "opened" else None
            merged = TabInput(
                tab_id=tab,
                window_id=given.get("window_id", base.window_id if base else 0),
                url=given["url"] if "url" in given else (base.url if base else None),
                title=given["title"] if "title" in given else (base.title if base else None),
                active=given.get("active", base.active if base else False),
                pinned=given.get("pinned", base.pinned if base else False),
                group_id=given["group_id"] if "group_id" in given else (
                    base.group_id if base else None
                ),
                last_accessed=given["last_accessed"] if "last_accessed" in given else (
                    base.last_accessed if base else None
                ),
                index=given["index"] if "index" in given else (base.index if base else None),
            )  # fmt: skip
            values = self._clean_tab(merged, "")
            if base is not None and "url" not in given:
                # Keep the stored (already reduced) URL as it is.
                values.update(url=base.url, canonical_url=base.canonical_url, domain=base.domain)
            if values["active"]:
                conn.execute(
                    "UPDATE tabs SET active = 0 WHERE profile = ? AND window_id = ? "
                    "AND tab_id != ?",
                    (profile, values["window_id"], tab),
                )
            self._put_tab(conn, profile, values)
            self._event(conn, f"tab.{kind}", "tab", tab)
            stored = conn.execute(
                "SELECT * FROM tabs WHERE profile = ? AND tab_id = ?", (profile, tab)
            ).fetchone()
        return _tab(stored)

    def list_tabs(self, *, profile: str | None = None, window_id: int | None = None) -> list[Tab]:
        """Open tabs ordered by profile, window and position."""
        clauses: list[str] = []
        params: list[Any] = []
        if profile is not None:
            clauses.append("profile = ?")
            params.append(checks.label(profile, "profile", self._limits.max_label_chars))
        if window_id is not None:
            clauses.append("window_id = ?")
            params.append(checks.integer(window_id, "window_id"))
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM tabs {where} "
                "ORDER BY profile, window_id, tab_index IS NULL, tab_index, tab_id",
                params,
            ).fetchall()
        return [_tab(row) for row in rows]
