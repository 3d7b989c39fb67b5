"""Pages, their text versions, and visits.

A page is identified by its canonical URL (:func:`backtrail.urls.canonical_url`); its
``url`` is the latest scrubbed URL it was seen at. A page row exists as soon as it is
visited or captured. Captured text is kept in versions (see
:mod:`backtrail.store.versioning` for when a capture makes a new version).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from backtrail.errors import InvalidInput, InvalidUrl, PageNotFound, VisitNotFound
from backtrail.store import checks
from backtrail.store.core import LedgerCore
from backtrail.store.models import (
    HISTORY_TWIN_SECONDS,
    CaptureOutcome,
    CaptureResult,
    ImportResult,
    Page,
    PageVersion,
    RawCapture,
    Visit,
    VisitInput,
    VisitResult,
    is_history_copy,
)
from backtrail.store.versioning import content_hash, similarity
from backtrail.urls import normalize_domain

__all__ = ["PagesMixin"]

_PAGE_COLUMNS = (
    "id, url, canonical_url, domain, title, language, first_seen, last_seen, visit_count, "
    "dwell_ms, current_version, last_captured_at"
)
_VERSION_COLUMNS = (
    "id, page_id, version, title, language, content_hash, text_bytes, truncated, "
    "captured_at, updated_at"
)
_VISIT_COLUMNS = (
    "id, page_id, visited_at, tab_id, window_id, transition, referrer, dwell_ms, source, "
    "external_id"
)


def _page(row: sqlite3.Row, text: str | None = None, outline: str | None = None) -> Page:
    values = {key: row[key] for key in row.keys() if key not in ("text", "outline")}
    return Page(**values, text=text, outline=_headings(outline))


def _headings(outline: str | None) -> tuple[tuple[int, int, str], ...]:
    """A stored outline as (offset, level, words) tuples."""
    if not outline:
        return ()
    return tuple((int(o), int(lv), str(w)) for o, lv, w in json.loads(outline))


def _version(row: sqlite3.Row, with_text: bool = False) -> PageVersion:
    values = {key: row[key] for key in row.keys() if key not in ("text", "outline")}
    values["truncated"] = bool(values["truncated"])
    return PageVersion(**values, text=row["text"] if with_text else None)


def _visit(row: sqlite3.Row) -> Visit:
    return Visit(**{key: row[key] for key in row.keys()})


@dataclass(frozen=True)
class _CleanVisit:
    """A validated visit, ready to insert."""

    url: str
    canonical: str
    domain: str
    visited_at: int
    title: str | None
    tab_id: int | None
    window_id: int | None
    transition: str | None
    referrer: str | None
    dwell_ms: int | None
    source: str
    external_id: str | None


class PagesMixin(LedgerCore):
    # ------------------------------------------------------------------ capture

    def capture_page(
        self,
        url: str,
        *,
        text: str,
        title: str | None = None,
        language: str | None = None,
        captured_at: int | None = None,
        outline: Sequence[Sequence[Any]] | None = None,
    ) -> CaptureResult:
        """Store the main text of the page at ``url`` (and its headings: ``outline``,
        ``(offset, level, words)`` each, :func:`~backtrail.store.checks.outline`).

        The first capture creates version 1 (outcome ``created``); later captures are
        ``unchanged`` (same normalised text), ``updated`` (minor change: the current
        version is rewritten in place) or a ``new_version``. Text longer than
        ``Limits.max_text_bytes`` is cut on a character boundary. Beyond
        ``Limits.max_versions_per_page`` the oldest versions are deleted. A capture is
        not a visit: it dates a page it creates (``first_seen``/``last_seen``) and
        never moves the visit times of a page already known. Web
        metadata is cleaned rather than refused: titles are whitespace-collapsed and cut,
        a ``language`` that is not a language tag is dropped, control characters in
        ``text`` are removed.
        """
        limits = self._limits
        original, canonical, domain = checks.web_url(url)
        body, truncated = checks.truncate_utf8(
            checks.web_text(text, "text"), limits.max_text_bytes
        )
        clean_title = checks.title(title, "title", limits.max_title_chars)
        clean_language = checks.language(language)
        headings = checks.outline(outline, len(body))
        at = self._now() if captured_at is None else checks.timestamp(captured_at, "captured_at")
        digest = content_hash(body)
        size = len(body.encode("utf-8"))
        with self._write() as conn:
            page_id, page_created = self._ensure_page(conn, original, canonical, domain, at)
            page = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages WHERE id = ?", (page_id,)
            ).fetchone()
            current = conn.execute(
                "SELECT * FROM page_versions WHERE page_id = ? AND version = ?",
                (page_id, page["current_version"]),
            ).fetchone()
            outcome: CaptureOutcome
            pruned = 0
            if current is None:
                outcome = "created"
                version = 1 if page["current_version"] is None else page["current_version"] + 1
                self._insert_version(
                    conn, page_id, version, clean_title, clean_language, body, digest, size,
                    truncated, at, headings,
                )  # fmt: skip
            elif current["content_hash"] == digest:
                # A capture without title/language/outline keeps the stored ones.
                new_meta = (clean_title or current["title"], clean_language or current["language"],
                            headings or current["outline"])  # fmt: skip
                changed = (current["title"], current["language"], current["outline"]) != new_meta
                outcome = "updated" if changed else "unchanged"
                version = current["version"]
                conn.execute(
                    "UPDATE page_versions SET title = ?, language = ?, outline = ?, "
                    "updated_at = MAX(updated_at, ?) WHERE id = ?",
                    (*new_meta, at, current["id"]),
                )
            elif similarity(current["text"], body) >= limits.version_similarity:
                outcome = "updated"
                version = current["version"]
                conn.execute(
                    "UPDATE page_versions SET title = ?, language = ?, text = ?, "
                    "content_hash = ?, text_bytes = ?, truncated = ?, outline = ?, "
                    "updated_at = MAX(updated_at, ?) WHERE id = ?",
                    (clean_title or current["title"], clean_language or current["language"],
                     body, digest, size, int(truncated), headings, at, current["id"]),
                )  # fmt: skip
            else:
                outcome = "new_version"
                version = current["version"] + 1
                self._insert_version(
                    conn, page_id, version, clean_title, clean_language, body, digest, size,
                    truncated, at, headings,
                )  # fmt: skip
                pruned = self._prune_versions(conn, page_id, version)
            conn.execute(
                "UPDATE pages SET url = ?, title = COALESCE(?, title), "
                "language = COALESCE(?, language), current_version = ?, "
                "last_captured_at = MAX(COALESCE(last_captured_at, 0), ?) WHERE id = ?",
                (original, clean_title, clean_language, version, at, page_id),
            )
            if outcome != "unchanged" or page_created:
                self._change(conn, "page", page_id, "upsert", "content")
            self._event(
                conn,
                "page.capture",
                "page",
                page_id,
                {
                    "outcome": outcome,
                    "version": version,
                    "bytes": size,
                    "truncated": truncated,
                    "pruned_versions": pruned,
                },
            )
            row = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages WHERE id = ?", (page_id,)
            ).fetchone()
            version_row = conn.execute(
                "SELECT * FROM page_versions WHERE page_id = ? AND version = ?",
                (page_id, version),
            ).fetchone()
        return CaptureResult(_page(row), _version(version_row, with_text=True), outcome)

    # ------------------------------------------------------ deferred extraction

    def queue_capture(
        self,
        url: str,
        *,
        html: str,
        title: str | None = None,
        language: str | None = None,
        captured_at: int | None = None,
    ) -> tuple[Page, int]:
        """Store a page's raw HTML for main-text extraction later; returns the page
        (created title-only if new) and the queued capture's id. Extraction takes tens
        of milliseconds per page, so acknowledging a capture only needs this durable
        row; :meth:`complete_capture` turns it into a version."""
        limits = self._limits
        original, canonical, domain = checks.web_url(url)
        if not isinstance(html, str):
            raise InvalidInput("html", f"must be a string, got {type(html).__name__}")
        blob = zlib.compress(checks.web_text(html, "html").encode("utf-8"), 3)
        clean_title = checks.title(title, "title", limits.max_title_chars)
        clean_language = checks.language(language)
        at = self._now() if captured_at is None else checks.timestamp(captured_at, "captured_at")
        with self._write() as conn:
            page_id, created = self._ensure_page(conn, original, canonical, domain, at)
            conn.execute(
                "UPDATE pages SET title = COALESCE(title, ?) WHERE id = ?", (clean_title, page_id)
            )
            raw_id = self._insert(
                conn,
                "INSERT INTO raw_captures (page_id, url, html, title, language, captured_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (page_id, original, blob, clean_title, clean_language, at),
            )
            if created:
                self._change(conn, "page", page_id, "upsert", "content")
            self._event(conn, "page.capture_queued", "page", page_id, {"bytes": len(blob)})
            row = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages WHERE id = ?", (page_id,)
            ).fetchone()
        return _page(row), raw_id

    def pending_captures(self, limit: int = 20, *, page_id: int | None = None) -> list[RawCapture]:
        """Queued captures, oldest first (only those of ``page_id`` when given)."""
        where, params = "", [int(limit)]
        if page_id is not None:
            where, params = "WHERE page_id = ? ", [checks.identifier(page_id, "page_id"), *params]
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM raw_captures {where}ORDER BY id LIMIT ?", params
            ).fetchall()
        return [
            RawCapture(
                id=r["id"], page_id=r["page_id"], url=r["url"],
                html=zlib.decompress(r["html"]).decode("utf-8"), title=r["title"],
                language=r["language"], captured_at=r["captured_at"], attempts=r["attempts"],
            )  # fmt: skip
            for r in rows
        ]

    def count_pending_captures(self) -> int:
        """How many captures wait for extraction."""
        with self._read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM raw_captures").fetchone()[0])

    def complete_capture(
        self,
        raw: RawCapture,
        *,
        text: str,
        title: str | None,
        language: str | None,
        outline: Sequence[Sequence[Any]] | None = None,
    ) -> CaptureResult | None:
        """Store the extracted text of a queued capture as :meth:`capture_page` does and
        drop the raw HTML, in one transaction. None when the queued row is gone (forgotten,
        or completed by another process) or the text is empty."""
        with self.transaction():
            with self._write() as conn:
                gone = conn.execute(
                    "DELETE FROM raw_captures WHERE id = ?", (raw.id,)
                ).rowcount == 0
            if gone or not text.strip():
                return None
            return self.capture_page(
                raw.url, text=text, title=raw.title or title,
                language=raw.language or language, captured_at=raw.captured_at, outline=outline,
            )  # fmt: skip

    def drop_capture(self, raw_id: int) -> None:
        """Give up on a queued capture (e.g. its HTML cannot be parsed)."""
        with self._write() as conn:
            conn.execute("DELETE FROM raw_captures WHERE id = ?", (raw_id,))

    def _ensure_page(
        self, conn: sqlite3.Connection, url: str, canonical: str, domain: str, at: int
    ) -> tuple[int, bool]:
        row = conn.execute("SELECT id FROM pages WHERE canonical_url = ?", (canonical,)).fetchone()
        if row is not None:
            return int(row["id"]), False
        page_id = self._insert(
            conn,
            "INSERT INTO pages (canonical_url, url, domain, first_seen, last_seen) "
            "VALUES (?, ?, ?, ?, ?)",
            (canonical, url, domain, at, at),
        )
        return page_id, True

    def _insert_version(
        self,
        conn: sqlite3.Connection,
        page_id: int,
        version: int,
        title: str | None,
        language: str | None,
        text: str,
        digest: str,
        size: int,
        truncated: bool,
        at: int,
        outline: str | None,
    ) -> None:
        conn.execute(
            "INSERT INTO page_versions (page_id, version, title, language, text, content_hash, "
            "text_bytes, truncated, captured_at, updated_at, outline) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (page_id, version, title, language, text, digest, size, int(truncated), at, at,
             outline),
        )  # fmt: skip

    def _prune_versions(self, conn: sqlite3.Connection, page_id: int, newest: int) -> int:
        keep_from = newest - self._limits.max_versions_per_page + 1
        cursor = conn.execute(
            "DELETE FROM page_versions WHERE page_id = ? AND version < ?", (page_id, keep_from)
        )
        return cursor.rowcount

    # ------------------------------------------------------------------- visits

    def record_visit(
        self,
        url: str,
        *,
        visited_at: int | None = None,
        title: str | None = None,
        tab_id: int | None = None,
        window_id: int | None = None,
        transition: str | None = None,
        referrer: str | None = None,
        dwell_ms: int | None = None,
        source: str = "extension",
        external_id: str | None = None,
    ) -> VisitResult:
        """Record one visit (creating the page if new) and bump the page's visit count,
        first/last seen and dwell. Idempotent: a visit with the same ``(source,
        external_id)`` — or, without an external id, the same ``(page, visited_at,
        source)`` — is not added twice (``created`` is then false and nothing changes).
        A ``referrer`` that is not an http(s) URL is dropped rather than refused."""
        visit = self._clean_visit(
            VisitInput(
                url=url,
                visited_at=self._now() if visited_at is None else visited_at,
                title=title,
                tab_id=tab_id,
                window_id=window_id,
                transition=transition,
                referrer=referrer,
                dwell_ms=dwell_ms,
                source=source,
                external_id=external_id,
            ),
            "",
        )
        with self._write() as conn:
            visit_id, page_id, created, _ = self._insert_visit(conn, visit)
            if created:
                self._event(
                    conn, "visit.record", "page", page_id,
                    {"visit_id": visit_id, "source": visit.source},
                )  # fmt: skip
            row = conn.execute(
                f"SELECT {_VISIT_COLUMNS} FROM visits WHERE id = ?", (visit_id,)
            ).fetchone()
            page = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages WHERE id = ?", (page_id,)
            ).fetchone()
        return VisitResult(_visit(row), _page(page), created)

    def import_visits(self, visits: Iterable[VisitInput | dict[str, Any]]) -> ImportResult:
        """Import many visits (e.g. browser history) in one transaction with one event.
        Every item is validated first: one bad item raises ``InvalidInput`` naming its
        index and nothing is stored. Re-importing the same visits adds nothing."""
        if isinstance(visits, (str, bytes, dict)) or not isinstance(visits, Iterable):
            raise InvalidInput("visits", "must be a list of visits")
        clean = [
            self._clean_visit(checks.as_record(item, VisitInput, f"visits[{index}]"),
                              f"visits[{index}].")
            for index, item in enumerate(visits)
        ]  # fmt: skip
        added = skipped = pages_created = 0
        with self._write() as conn:
            for visit in clean:
                _, _, created, page_created = self._insert_visit(conn, visit)
                added += created
                skipped += not created
                pages_created += page_created
            if added:
                sources = sorted({visit.source for visit in clean})
                self._event(
                    conn, "visits.import", "visits", None,
                    {"added": added, "skipped": skipped, "pages_created": pages_created,
                     "sources": sources},
                )  # fmt: skip
        return ImportResult(added=added, skipped=skipped, pages_created=pages_created)

    def _clean_visit(self, item: VisitInput, prefix: str) -> _CleanVisit:
        limits = self._limits
        original, canonical, domain = checks.web_url(item.url, f"{prefix}url")
        referrer: str | None = None
        if item.referrer is not None:
            if not isinstance(item.referrer, str):
                raise InvalidInput(
                    f"{prefix}referrer", f"must be a string, not {type(item.referrer).__name__}"
                )
            try:
                _, referrer, _ = checks.web_url(item.referrer, f"{prefix}referrer")
            except InvalidUrl:
                referrer = None
        return _CleanVisit(
            url=original,
            canonical=canonical,
            domain=domain,
            visited_at=checks.timestamp(item.visited_at, f"{prefix}visited_at"),
            title=checks.title(item.title, f"{prefix}title", limits.max_title_chars),
            tab_id=checks.integer(item.tab_id, f"{prefix}tab_id", optional=True),
            window_id=checks.integer(item.window_id, f"{prefix}window_id", optional=True),
            transition=checks.label(
                item.transition, f"{prefix}transition", 64, optional=True
            ),
            referrer=referrer,
            dwell_ms=checks.integer(item.dwell_ms, f"{prefix}dwell_ms", minimum=0, optional=True),
            source=checks.label(item.source, f"{prefix}source", limits.max_label_chars),
            external_id=checks.label(
                item.external_id, f"{prefix}external_id", limits.max_label_chars, optional=True
            ),
        )

    def _insert_visit(
        self, conn: sqlite3.Connection, visit: _CleanVisit
    ) -> tuple[int, int, bool, bool]:
        """Insert unless it exists: (visit id, page id, created, page created)."""
        if visit.external_id is not None:
            existing = conn.execute(
                "SELECT id, page_id FROM visits WHERE source = ? AND external_id = ?",
                (visit.source, visit.external_id),
            ).fetchone()
            if existing is not None:
                return int(existing["id"]), int(existing["page_id"]), False, False
        page_id, page_created = self._ensure_page(
            conn, visit.url, visit.canonical, visit.domain, visit.visited_at
        )
        if not page_created and is_history_copy(visit.source):
            twin = conn.execute(
                "SELECT id FROM visits WHERE page_id = ? AND visited_at BETWEEN ? AND ? "
                "AND source != ? LIMIT 1",
                (page_id, visit.visited_at - HISTORY_TWIN_SECONDS,
                 visit.visited_at + HISTORY_TWIN_SECONDS, visit.source),
            ).fetchone()  # fmt: skip
            if twin is not None:
                return int(twin["id"]), page_id, False, False
        if visit.external_id is None:
            existing = conn.execute(
                "SELECT id FROM visits WHERE page_id = ? AND visited_at = ? AND source = ? "
                "AND external_id IS NULL",
                (page_id, visit.visited_at, visit.source),
            ).fetchone()
            if existing is not None:
                return int(existing["id"]), page_id, False, False
        visit_id = self._insert(
            conn,
            "INSERT INTO visits (page_id, visited_at, tab_id, window_id, transition, referrer, "
            "dwell_ms, source, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (page_id, visit.visited_at, visit.tab_id, visit.window_id, visit.transition,
             visit.referrer, visit.dwell_ms, visit.source, visit.external_id),
        )  # fmt: skip
        conn.execute(
            "UPDATE pages SET visit_count = visit_count + 1, "
            "first_seen = MIN(first_seen, ?), last_seen = MAX(last_seen, ?), "
            "dwell_ms = dwell_ms + ?, "
            "title = CASE WHEN current_version IS NULL AND ? IS NOT NULL THEN ? ELSE title END "
            "WHERE id = ?",
            (visit.visited_at, visit.visited_at, visit.dwell_ms or 0, visit.title, visit.title,
             page_id),
        )  # fmt: skip
        self._change(conn, "page", page_id, "upsert", "content" if page_created else "stats")
        return visit_id, page_id, True, page_created

    def set_visit_dwell(self, visit_id: int, dwell_ms: int) -> Visit:
        """Set a visit's active dwell time (ms), known only when the user leaves the
        page; the page's total dwell follows."""
        visit_id = checks.identifier(visit_id, "visit_id")
        dwell = checks.integer(dwell_ms, "dwell_ms", minimum=0)
        with self._write() as conn:
            row = conn.execute(
                f"SELECT {_VISIT_COLUMNS} FROM visits WHERE id = ?", (visit_id,)
            ).fetchone()
            if row is None:
                raise VisitNotFound(visit_id)
            delta = dwell - (row["dwell_ms"] or 0)
            conn.execute("UPDATE visits SET dwell_ms = ? WHERE id = ?", (dwell, visit_id))
            conn.execute(
                "UPDATE pages SET dwell_ms = MAX(0, dwell_ms + ?) WHERE id = ?",
                (delta, row["page_id"]),
            )
            self._change(conn, "page", row["page_id"], "upsert", "stats")
            self._event(
                conn, "visit.dwell", "page", row["page_id"],
                {"visit_id": visit_id, "dwell_ms": dwell},
            )  # fmt: skip
            row = conn.execute(
                f"SELECT {_VISIT_COLUMNS} FROM visits WHERE id = ?", (visit_id,)
            ).fetchone()
        return _visit(row)

    # -------------------------------------------------------------------- reads

    def get_page(
        self, url: str | None = None, *, page_id: int | None = None, with_text: bool = False
    ) -> Page:
        """The page at ``url`` (any form: it is canonicalised) or with ``page_id``;
        ``PageNotFound`` if there is none. ``with_text`` fills ``Page.text`` with the
        current version's text."""
        if (url is None) == (page_id is None):
            raise InvalidInput("page", "give exactly one of url or page_id")
        with_text = checks.boolean(with_text, "with_text")
        value: str | int
        if url is not None:
            where, value = "canonical_url = ?", checks.web_url(url)[1]
        else:
            where, value = "id = ?", checks.identifier(page_id, "page_id")
        with self._read() as conn:
            row = conn.execute(f"SELECT {_PAGE_COLUMNS} FROM pages WHERE {where}", (value,))
            page = row.fetchone()
            if page is None:
                raise PageNotFound(value)
            text = outline = None
            if with_text and page["current_version"] is not None:
                version = conn.execute(
                    "SELECT text, outline FROM page_versions WHERE page_id = ? AND version = ?",
                    (page["id"], page["current_version"]),
                ).fetchone()
                text, outline = version["text"], version["outline"]
        self._log_read("page.read", "page", page["id"])
        return _page(page, text, outline)

    def pages_by_id(self, page_ids: Sequence[int], *, with_text: bool = False) -> dict[int, Page]:
        """The pages that still exist among ``page_ids`` (for the indexer); missing ids
        are simply absent from the result."""
        ids = [checks.identifier(page_id, "page_ids[]") for page_id in page_ids]
        result: dict[int, Page] = {}
        with self._read() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                text_columns = (
                    "v.text AS text, v.outline AS outline FROM pages p LEFT JOIN page_versions v "
                    "ON v.page_id = p.id AND v.version = p.current_version"
                    if with_text
                    else "NULL AS text, NULL AS outline FROM pages p"
                )
                columns = ", ".join(f"p.{name.strip()}" for name in _PAGE_COLUMNS.split(","))
                rows = conn.execute(
                    f"SELECT {columns}, {text_columns} WHERE p.id IN ({marks})", chunk
                )
                for row in rows:
                    result[row["id"]] = _page(row, row["text"], row["outline"])
        return result

    def get_page_version(
        self, page_id: int, version: int | None = None, *, with_text: bool = True
    ) -> PageVersion:
        """One version of a page (default: the current one)."""
        page_id = checks.identifier(page_id, "page_id")
        with self._read() as conn:
            page = conn.execute(
                "SELECT current_version FROM pages WHERE id = ?", (page_id,)
            ).fetchone()
            if page is None:
                raise PageNotFound(page_id)
            number = page["current_version"] if version is None else checks.identifier(
                version, "version"
            )
            row = conn.execute(
                "SELECT * FROM page_versions WHERE page_id = ? AND version = ?",
                (page_id, number),
            ).fetchone()
        if row is None:
            raise PageNotFound(f"{page_id} version {number}")
        self._log_read("page.read", "page", page_id)
        return _version(row, with_text=with_text)

    def list_page_versions(self, page_id: int) -> list[PageVersion]:
        """All stored versions of a page, oldest first, without their text."""
        page_id = checks.identifier(page_id, "page_id")
        with self._read() as conn:
            if conn.execute("SELECT 1 FROM pages WHERE id = ?", (page_id,)).fetchone() is None:
                raise PageNotFound(page_id)
            rows = conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM page_versions WHERE page_id = ? ORDER BY version",
                (page_id,),
            ).fetchall()
        return [_version(row) for row in rows]

    def list_pages(
        self,
        *,
        domain: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Page]:
        """Pages most recently seen first; ``domain`` includes subdomains; ``since`` /
        ``until`` bound ``last_seen`` to [since, until)."""
        where, params = self._page_filters(domain, since, until)
        count = checks.limit(limit)
        skip = checks.integer(offset, "offset", minimum=0)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_PAGE_COLUMNS} FROM pages {where} "
                "ORDER BY last_seen DESC, id DESC LIMIT ? OFFSET ?",
                (*params, count, skip),
            ).fetchall()
        return [_page(row) for row in rows]

    def page_titles(self, domain: str, limit: int = 200) -> list[str]:
        """Titles of the pages on exactly ``domain`` (no subdomains), most recently seen
        first: what a site's pages have in common (see ``service.present``)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT title FROM pages WHERE domain = ? AND title IS NOT NULL "
                "ORDER BY last_seen DESC LIMIT ?",
                (domain, checks.limit(limit)),
            ).fetchall()
        return [row["title"] for row in rows]

    def _page_filters(
        self, domain: str | None, since: int | None, until: int | None, column: str = "last_seen"
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if domain is not None:
            name = normalize_domain(domain)
            clauses.append("(domain = ? OR domain LIKE ? ESCAPE '\\')")
            params += [name, "%." + name.replace("_", "\\_")]
        if since is not None:
            clauses.append(f"{column} >= ?")
            params.append(checks.timestamp(since, "since"))
        if until is not None:
            clauses.append(f"{column} < ?")
            params.append(checks.timestamp(until, "until"))
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def list_visits(
        self,
        *,
        url: str | None = None,
        page_id: int | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = 100,
    ) -> list[Visit]:
        """Visits, newest first, optionally of one page and within [since, until)."""
        clauses: list[str] = []
        params: list[Any] = []
        if url is not None:
            _, canonical, _ = checks.web_url(url)
            clauses.append("page_id = (SELECT id FROM pages WHERE canonical_url = ?)")
            params.append(canonical)
        if page_id is not None:
            clauses.append("page_id = ?")
            params.append(checks.identifier(page_id, "page_id"))
        if since is not None:
            clauses.append("visited_at >= ?")
            params.append(checks.timestamp(since, "since"))
        if until is not None:
            clauses.append("visited_at < ?")
            params.append(checks.timestamp(until, "until"))
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_VISIT_COLUMNS} FROM visits {where} "
                "ORDER BY visited_at DESC, id DESC LIMIT ?",
                (*params, checks.limit(limit)),
            ).fetchall()
        return [_visit(row) for row in rows]

    def count_visits_by_day(
        self, since: int, until: int, *, utc_offset: int = 0
    ) -> list[tuple[int, int, int]]:
        """``(day, visits, dwell_ms)`` per day with visits in [since, until), oldest
        first; ``day`` is the unix time its midnight falls on, ``utc_offset`` seconds east
        of UTC (days are the reader's local days)."""
        start = checks.timestamp(since, "since")
        end = checks.timestamp(until, "until")
        shift = checks.integer(utc_offset, "utc_offset", minimum=-14 * 3600)
        if shift > 14 * 3600:
            raise InvalidInput("utc_offset", f"must be at most {14 * 3600}, got {shift}")
        with self._read() as conn:
            rows = conn.execute(
                "SELECT ((visited_at + ?) / 86400) * 86400 - ? AS day, COUNT(*), "
                "COALESCE(SUM(dwell_ms), 0) FROM visits "
                "WHERE visited_at >= ? AND visited_at < ? GROUP BY day ORDER BY day",
                (shift, shift, start, end),
            ).fetchall()
        return [(int(day), int(count), int(dwell)) for day, count, dwell in rows]

    def find_visit(self, source: str, external_id: str) -> Visit:
        """The visit recorded with this ``(source, external_id)``."""
        source = checks.label(source, "source", self._limits.max_label_chars)
        external = checks.label(external_id, "external_id", self._limits.max_label_chars)
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {_VISIT_COLUMNS} FROM visits WHERE source = ? AND external_id = ?",
                (source, external),
            ).fetchone()
        if row is None:
            raise VisitNotFound(f"{source}:{external}")
        return _visit(row)
