"""Things the user keeps on purpose: highlights, notes and bookmarks.

Highlights and notes may carry a client-made ``external_id`` (e.g. a uuid the extension
puts on each queued message): sending the same one again returns the stored record and
changes nothing, so retried deliveries never duplicate. Bookmarks are keyed by the
browser's bookmark id within a browser profile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from backtrail.errors import (
    BookmarkNotFound,
    HighlightNotFound,
    InvalidInput,
    InvalidUrl,
    NoteNotFound,
)
from backtrail.store import checks
from backtrail.store.core import LedgerCore
from backtrail.store.models import Bookmark, BookmarkInput, Highlight, Note, SyncResult
from backtrail.urls import normalize_domain

__all__ = ["ItemsMixin"]


def _highlight(row: sqlite3.Row) -> Highlight:
    return Highlight(**{key: row[key] for key in row.keys()})


def _note(row: sqlite3.Row) -> Note:
    return Note(**{key: row[key] for key in row.keys()})


def _bookmark(row: sqlite3.Row) -> Bookmark:
    return Bookmark(**{key: row[key] for key in row.keys()})


def _filters(
    url: str | None, domain: str | None, since: int | None, until: int | None
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if url is not None:
        clauses.append("canonical_url = ?")
        params.append(checks.web_url(url)[1])
    if domain is not None:
        name = normalize_domain(domain)
        clauses.append("(domain = ? OR domain LIKE ? ESCAPE '\\')")
        params += [name, "%." + name.replace("_", "\\_")]
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(checks.timestamp(since, "since"))
    if until is not None:
        clauses.append("created_at < ?")
        params.append(checks.timestamp(until, "until"))
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


class ItemsMixin(LedgerCore):
    # --------------------------------------------------------------- highlights

    def add_highlight(
        self,
        url: str,
        text: str,
        *,
        context: str | None = None,
        note: str | None = None,
        created_at: int | None = None,
        external_id: str | None = None,
    ) -> Highlight:
        """Store text the user highlighted on ``url``, with its surrounding ``context``
        and an optional ``note``. Idempotent per ``external_id``."""
        limits = self._limits
        original, canonical, domain = checks.web_url(url)
        body = checks.text(text, "text", limits.max_highlight_chars)
        around = checks.text(
            context, "context", limits.max_highlight_chars, optional=True, allow_empty=True
        )
        remark = checks.text(note, "note", limits.max_note_chars, optional=True, allow_empty=True)
        at = self._now() if created_at is None else checks.timestamp(created_at, "created_at")
        external = checks.label(
            external_id, "external_id", limits.max_label_chars, optional=True
        )
        with self._write() as conn:
            if external is not None:
                row = conn.execute(
                    "SELECT * FROM highlights WHERE external_id = ?", (external,)
                ).fetchone()
                if row is not None:
                    return _highlight(row)
            cursor = conn.execute(
                "INSERT INTO highlights (url, canonical_url, domain, text, context, note, "
                "created_at, updated_at, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (original, canonical, domain, body, around or None, remark or None, at, at,
                 external),
            )  # fmt: skip
            highlight_id = int(cursor.lastrowid or 0)
            self._change(conn, "highlight", highlight_id)
            self._event(
                conn, "highlight.add", "highlight", highlight_id, {"chars": len(body)}
            )
            row = conn.execute("SELECT * FROM highlights WHERE id = ?", (highlight_id,)).fetchone()
        return _highlight(row)

    def set_highlight_note(self, highlight_id: int, note: str | None) -> Highlight:
        """Attach, replace or (with ``None`` or ``""``) remove a highlight's note."""
        highlight_id = checks.identifier(highlight_id, "highlight_id")
        remark = checks.text(
            note, "note", self._limits.max_note_chars, optional=True, allow_empty=True
        )
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE highlights SET note = ?, updated_at = ? WHERE id = ?",
                (remark or None, self._now(), highlight_id),
            )
            if cursor.rowcount == 0:
                raise HighlightNotFound(highlight_id)
            self._change(conn, "highlight", highlight_id)
            self._event(
                conn, "highlight.note", "highlight", highlight_id, {"chars": len(remark or "")}
            )
            row = conn.execute("SELECT * FROM highlights WHERE id = ?", (highlight_id,)).fetchone()
        return _highlight(row)

    def delete_highlight(self, highlight_id: int) -> None:
        highlight_id = checks.identifier(highlight_id, "highlight_id")
        with self._write() as conn:
            cursor = conn.execute("DELETE FROM highlights WHERE id = ?", (highlight_id,))
            if cursor.rowcount == 0:
                raise HighlightNotFound(highlight_id)
            self._change(conn, "highlight", highlight_id, "delete")
            self._event(conn, "highlight.delete", "highlight", highlight_id)

    def get_highlight(self, highlight_id: int) -> Highlight:
        highlight_id = checks.identifier(highlight_id, "highlight_id")
        with self._read() as conn:
            row = conn.execute("SELECT * FROM highlights WHERE id = ?", (highlight_id,)).fetchone()
        if row is None:
            raise HighlightNotFound(highlight_id)
        return _highlight(row)

    def list_highlights(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Highlight]:
        """Highlights, newest first, filtered by page, domain (with subdomains) and
        creation time in [since, until); ``offset`` skips the newest ones."""
        where, params = _filters(url, domain, since, until)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM highlights {where} ORDER BY created_at DESC, id DESC "
                "LIMIT ? OFFSET ?",
                (*params, checks.limit(limit), checks.integer(offset, "offset", minimum=0)),
            ).fetchall()
        return [_highlight(row) for row in rows]

    # -------------------------------------------------------------------- notes

    def add_note(
        self,
        content: str,
        *,
        url: str | None = None,
        created_at: int | None = None,
        external_id: str | None = None,
        author: str | None = None,
    ) -> Note:
        """Store a note, optionally about the page at ``url``. Idempotent per
        ``external_id``. ``author`` names the assistant that wrote it; ``None`` means the
        user did (their words)."""
        limits = self._limits
        body = checks.text(content, "content", limits.max_note_chars)
        original = canonical = domain = None
        if url is not None:
            original, canonical, domain = checks.web_url(url)
        at = self._now() if created_at is None else checks.timestamp(created_at, "created_at")
        external = checks.label(
            external_id, "external_id", limits.max_label_chars, optional=True
        )
        writer = checks.label(author, "author", limits.max_label_chars, optional=True)
        with self._write() as conn:
            if external is not None:
                row = conn.execute("SELECT * FROM notes WHERE external_id = ?", (external,))
                found = row.fetchone()
                if found is not None:
                    return _note(found)
            cursor = conn.execute(
                "INSERT INTO notes (content, url, canonical_url, domain, created_at, updated_at, "
                "external_id, author) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (body, original, canonical, domain, at, at, external, writer),
            )
            note_id = int(cursor.lastrowid or 0)
            self._change(conn, "note", note_id)
            self._event(conn, "note.add", "note", note_id, {"chars": len(body)})
            found = conn.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
        return _note(found)

    def update_note(self, note_id: int, content: str) -> Note:
        note_id = checks.identifier(note_id, "note_id")
        body = checks.text(content, "content", self._limits.max_note_chars)
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE notes SET content = ?, updated_at = ? WHERE id = ?",
                (body, self._now(), note_id),
            )
            if cursor.rowcount == 0:
                raise NoteNotFound(note_id)
            self._change(conn, "note", note_id)
            self._event(conn, "note.update", "note", note_id, {"chars": len(body)})
            row = conn.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
        return _note(row)

    def delete_note(self, note_id: int) -> None:
        note_id = checks.identifier(note_id, "note_id")
        with self._write() as conn:
            if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 0:
                raise NoteNotFound(note_id)
            self._change(conn, "note", note_id, "delete")
            self._event(conn, "note.delete", "note", note_id)

    def get_note(self, note_id: int) -> Note:
        note_id = checks.identifier(note_id, "note_id")
        with self._read() as conn:
            row = conn.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
        if row is None:
            raise NoteNotFound(note_id)
        return _note(row)

    def list_notes(
        self,
        *,
        url: str | None = None,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Note]:
        """Notes, newest first, with the same filters as :meth:`list_highlights`."""
        where, params = _filters(url, domain, since, until)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM notes {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (*params, checks.limit(limit), checks.integer(offset, "offset", minimum=0)),
            ).fetchall()
        return [_note(row) for row in rows]

    # ---------------------------------------------------------------- bookmarks

    def _clean_bookmark(self, item: BookmarkInput, prefix: str) -> dict[str, Any]:
        limits = self._limits
        original, canonical, domain = checks.web_url(item.url, f"{prefix}url")
        return {
            "browser_id": checks.label(
                item.browser_id, f"{prefix}browser_id", limits.max_label_chars
            ),
            "url": original,
            "canonical_url": canonical,
            "domain": domain,
            "title": checks.title(item.title, f"{prefix}title", limits.max_title_chars),
            "folder": checks.title(item.folder, f"{prefix}folder", limits.max_folder_chars),
            "created_at": None
            if item.created_at is None
            else checks.timestamp(item.created_at, f"{prefix}created_at"),
        }

    def _upsert_bookmark(
        self, conn: sqlite3.Connection, profile: str, values: dict[str, Any]
    ) -> tuple[int, str]:
        """Insert or update; returns (id, "added" | "updated" | "unchanged")."""
        now = self._now()
        row = conn.execute(
            "SELECT * FROM bookmarks WHERE profile = ? AND browser_id = ?",
            (profile, values["browser_id"]),
        ).fetchone()
        if row is None:
            cursor = conn.execute(
                "INSERT INTO bookmarks (profile, browser_id, url, canonical_url, domain, title, "
                "folder, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (profile, values["browser_id"], values["url"], values["canonical_url"],
                 values["domain"], values["title"], values["folder"],
                 values["created_at"] if values["created_at"] is not None else now, now),
            )  # fmt: skip
            bookmark_id = int(cursor.lastrowid or 0)
            self._change(conn, "bookmark", bookmark_id)
            return bookmark_id, "added"
        fields = ("url", "canonical_url", "domain", "title", "folder")
        created = values["created_at"] if values["created_at"] is not None else row["created_at"]
        if all(row[name] == values[name] for name in fields) and created == row["created_at"]:
            return int(row["id"]), "unchanged"
        conn.execute(
            "UPDATE bookmarks SET url = ?, canonical_url = ?, domain = ?, title = ?, folder = ?, "
            "created_at = ?, updated_at = ? WHERE id = ?",
            (*(values[name] for name in fields), created, now, row["id"]),
        )
        self._change(conn, "bookmark", int(row["id"]))
        return int(row["id"]), "updated"

    def upsert_bookmark(
        self,
        browser_id: str,
        url: str,
        *,
        title: str | None = None,
        folder: str | None = None,
        created_at: int | None = None,
        profile: str = "default",
    ) -> Bookmark:
        """Add or update the bookmark with the browser's id ``browser_id``. ``folder`` is
        the folder path, e.g. ``"Bookmarks bar/Rust"``. Only http(s) URLs are stored."""
        values = self._clean_bookmark(
            BookmarkInput(browser_id, url, title, folder, created_at), ""
        )
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        with self._write() as conn:
            bookmark_id, outcome = self._upsert_bookmark(conn, profile, values)
            if outcome != "unchanged":
                self._event(conn, f"bookmark.{outcome}", "bookmark", bookmark_id)
            row = conn.execute("SELECT * FROM bookmarks WHERE id = ?", (bookmark_id,)).fetchone()
        return _bookmark(row)

    def delete_bookmark(self, browser_id: str, *, profile: str = "default") -> None:
        browser_id = checks.label(browser_id, "browser_id", self._limits.max_label_chars)
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        with self._write() as conn:
            row = conn.execute(
                "SELECT id FROM bookmarks WHERE profile = ? AND browser_id = ?",
                (profile, browser_id),
            ).fetchone()
            if row is None:
                raise BookmarkNotFound(browser_id)
            conn.execute("DELETE FROM bookmarks WHERE id = ?", (row["id"],))
            self._change(conn, "bookmark", int(row["id"]), "delete")
            self._event(conn, "bookmark.delete", "bookmark", int(row["id"]))

    def replace_bookmarks(
        self, bookmarks: Iterable[BookmarkInput | dict[str, Any]], *, profile: str = "default"
    ) -> SyncResult:
        """Make the profile's stored bookmarks equal to ``bookmarks`` (a full sync from
        the browser): new ones are added, changed ones updated, missing ones removed.
        Bookmarks that are not http(s) (bookmarklets, ``file:``) are skipped; any other
        bad item raises ``InvalidInput`` naming its index, and nothing changes."""
        if isinstance(bookmarks, (str, bytes, dict)) or not isinstance(bookmarks, Iterable):
            raise InvalidInput("bookmarks", "must be a list of bookmarks")
        profile = checks.label(profile, "profile", self._limits.max_label_chars)
        clean: dict[str, dict[str, Any]] = {}
        skipped = 0
        for index, item in enumerate(bookmarks):
            record = checks.as_record(item, BookmarkInput, f"bookmarks[{index}]")
            try:
                values = self._clean_bookmark(record, f"bookmarks[{index}].")
            except InvalidUrl as error:
                if error.field != f"bookmarks[{index}].url" or not isinstance(record.url, str):
                    raise
                skipped += 1
                continue
            clean[values["browser_id"]] = values
        counts = {"added": 0, "updated": 0, "unchanged": 0, "removed": 0}
        with self._write() as conn:
            for values in clean.values():
                _, outcome = self._upsert_bookmark(conn, profile, values)
                counts[outcome] += 1
            stale = [
                row
                for row in conn.execute(
                    "SELECT id, browser_id FROM bookmarks WHERE profile = ?", (profile,)
                )
                if row["browser_id"] not in clean
            ]
            for row in stale:
                conn.execute("DELETE FROM bookmarks WHERE id = ?", (row["id"],))
                self._change(conn, "bookmark", int(row["id"]), "delete")
            counts["removed"] = len(stale)
            if counts["added"] or counts["updated"] or counts["removed"]:
                self._event(
                    conn, "bookmarks.sync", "bookmarks", profile, {**counts, "skipped": skipped}
                )
        return SyncResult(skipped=skipped, **counts)

    def list_bookmarks(
        self,
        *,
        profile: str | None = None,
        url: str | None = None,
        domain: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Bookmark]:
        """Bookmarks, newest first (``offset`` skips the newest ones)."""
        where, params = _filters(url, domain, None, None)
        if profile is not None:
            name = checks.label(profile, "profile", self._limits.max_label_chars)
            where += (" AND " if where else "WHERE ") + "profile = ?"
            params.append(name)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM bookmarks {where} ORDER BY created_at DESC, id DESC "
                "LIMIT ? OFFSET ?",
                (*params, checks.limit(limit), checks.integer(offset, "offset", minimum=0)),
            ).fetchall()
        return [_bookmark(row) for row in rows]
