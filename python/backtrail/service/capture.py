"""Capturing: pages and visits in, under the capture policy every process shares.

Pause and exclusion rules are stored in the ledger, so a pause in the popup holds for
the native host, every MCP server and the CLI alike. Every record the browser sends
passes :meth:`CaptureOps.check_capture` (pages and visits here; the browser's other
records in :mod:`.browser_sync`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from backtrail import urls
from backtrail.errors import (
    Excluded,
    InvalidInput,
    InvalidUrl,
    LimitExceeded,
    PageNotFound,
    Paused,
)
from backtrail.indexer.extract import decode_html, extract_main_text
from backtrail.service.base import MemoryBase
from backtrail.service.types import (
    CaptureReceipt,
    CaptureSettings,
    VisitInfo,
)
from backtrail.store import (
    ImportResult,
    Visit,
    VisitInput,
    VisitResult,
    checks,
)

logger = logging.getLogger(__name__)

_PAUSE_KEY = "capture.pause"
_EXCLUSIONS_KEY = "capture.exclusions"
_SKIPPED_KEY = "capture.skipped"
_MAX_SKIP_RULES = 1_000


class CaptureOps(MemoryBase):
    """Capturing pages and visits, and the capture policy (pause, exclusions)."""

    # ---------------------------------------------------------------- capture

    def capture_page(
        self,
        url: str,
        *,
        html: str | bytes | None = None,
        text: str | None = None,
        title: str | None = None,
        language: str | None = None,
        captured_at: int | None = None,
        visit: VisitInfo | Mapping[str, Any] | None = None,
        outline: Sequence[Sequence[Any]] | None = None,
    ) -> CaptureReceipt:
        """Store a page's main text: give ``text`` (with its headings, ``outline``:
        ``(offset, level, words)`` each, if known), or ``html`` to extract both from.
        Refuses with ``Paused`` while capture is paused and ``Excluded`` for URLs that
        match an exclusion rule. ``title``/``language`` override what the HTML says.
        With ``visit`` a visit is recorded in the same transaction. Returns once the
        ledger commit is durable; indexing follows."""
        self._check_capture(url)
        info = _visit_info(visit)
        if html is not None and text is None and self.config.defer_extraction:
            return self._queue_capture(url, html, title, language, captured_at, info)
        body, found_title, found_language, headings = self._main_text(url, html, text)
        chosen_title = title if title is not None else found_title
        with self._ledger.transaction():
            # The visit first: a page it creates is dated by the visit, not the capture.
            visit_id = None
            if info is not None:
                visit_id = self._record(url, info, chosen_title, captured_at).visit.id
            result = self._ledger.capture_page(
                url, text=body, title=chosen_title,
                language=language if language is not None else found_language,
                captured_at=captured_at, outline=outline if text is not None else headings,
            )  # fmt: skip
        self._wrote()
        page, version = result.page, result.version
        return CaptureReceipt(
            page_id=page.id, url=page.url, canonical_url=page.canonical_url, title=page.title,
            outcome=result.outcome, version=version.version, text_chars=len(version.text or ""),
            truncated=version.truncated, visit_id=visit_id,
        )  # fmt: skip

    def import_page_text(
        self, url: str, text: str, *, title: str | None = None, captured_at: int | None = None
    ) -> bool:
        """Store the text another memory kept for ``url`` as if captured at
        ``captured_at``, unless the page has text here already (what was captured here is
        never replaced by an older copy); ``True`` if stored. ``Excluded`` for URLs an
        exclusion rule matches; the user asked for it, so a pause does not apply."""
        rule = self.exclusion_for(url)  # InvalidUrl first
        if rule is not None:
            raise Excluded(urls.scrub_url(url), rule)
        _utf8_size(text, "text", self.config.max_capture_bytes)
        with self._ledger.transaction():
            try:
                page = self._ledger.get_page(url)
            except PageNotFound:
                page = None
            if page is not None and page.current_version is not None:
                return False
            self._ledger.capture_page(url, text=text, title=title, captured_at=captured_at)
        self._wrote()
        return True

    def _queue_capture(
        self,
        url: str,
        html: str | bytes,
        title: str | None,
        language: str | None,
        captured_at: int | None,
        info: VisitInfo | None,
    ) -> CaptureReceipt:
        limit = self.config.max_capture_bytes
        if isinstance(html, bytes):
            if len(html) > limit:
                raise LimitExceeded("html", limit, len(html), "bytes")
            html = decode_html(html)
        elif isinstance(html, str):
            _utf8_size(html, "html", limit)
        else:
            raise InvalidInput("html", f"must be a string, got {type(html).__name__}")
        with self._ledger.transaction():
            visit_id = None
            if info is not None:
                visit_id = self._record(url, info, title, captured_at).visit.id
            page, _ = self._ledger.queue_capture(
                url, html=html, title=title, language=language, captured_at=captured_at
            )
        self._wrote()
        return CaptureReceipt(
            page_id=page.id, url=page.url, canonical_url=page.canonical_url, title=page.title,
            outcome="queued", version=0, text_chars=0, truncated=False, visit_id=visit_id,
        )  # fmt: skip

    def _record(
        self, url: str, info: VisitInfo, title: str | None, default_at: int | None
    ) -> VisitResult:
        at = info.visited_at if info.visited_at is not None else default_at
        return self._ledger.record_visit(
            url, visited_at=at, title=title, tab_id=info.tab_id, window_id=info.window_id,
            transition=info.transition, referrer=info.referrer, dwell_ms=info.dwell_ms,
            source=info.source, external_id=info.external_id,
        )  # fmt: skip

    def _main_text(
        self, url: str, html: object, text: object
    ) -> tuple[str, str | None, str | None, tuple[Any, ...]]:
        if (html is None) == (text is None):
            raise InvalidInput("text", "give exactly one of html or text")
        limit = self.config.max_capture_bytes
        if text is not None:
            _utf8_size(text, "text", limit)
            return str(text), None, None, ()
        if isinstance(html, bytes):
            if len(html) > limit:
                raise LimitExceeded("html", limit, len(html), "bytes")
        else:
            _utf8_size(html, "html", limit)
        extracted = extract_main_text(html, url)  # type: ignore[arg-type]
        return extracted.text, extracted.title, extracted.language, extracted.outline

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
        """Record a visit (idempotent per ``(source, external_id)``); honours pause and
        exclusions like :meth:`capture_page`."""
        self._check_capture(url)
        info = VisitInfo(visited_at, tab_id, window_id, transition, referrer, dwell_ms, source,
                         external_id)  # fmt: skip
        result = self._record(url, info, title, None)
        if result.created:
            self._wrote()
        return result

    def import_visits(self, visits: Iterable[VisitInput | Mapping[str, Any]]) -> ImportResult:
        """Import browser history in one transaction. Excluded URLs are skipped (and
        counted as skipped); a bad item raises ``InvalidInput`` naming its index and
        nothing is stored. The user asked for it, so a pause does not apply."""
        if isinstance(visits, (str, bytes, Mapping)) or not isinstance(visits, Iterable):
            raise InvalidInput("visits", "must be a list of visits")
        rules = self._exclusions()
        kept: list[Any] = []
        positions: list[int] = []
        excluded = 0
        for position, item in enumerate(visits):
            url = item.get("url") if isinstance(item, Mapping) else getattr(item, "url", None)
            try:
                if urls.matching_rule(url, rules) is not None:
                    excluded += 1
                    continue
            except InvalidUrl:
                pass  # the ledger names the bad item
            kept.append(dict(item) if isinstance(item, Mapping) else item)
            positions.append(position)
        try:
            result = self._ledger.import_visits(kept)
        except InvalidInput as error:
            raise _renumbered(error, "visits", positions) from None
        if result.added:
            self._wrote()
        return ImportResult(result.added, result.skipped + excluded, result.pages_created)

    def set_visit_dwell(self, visit_id: int, dwell_ms: int) -> Visit:
        """Set a visit's active dwell time, known when the user leaves the page."""
        visit = self._ledger.set_visit_dwell(visit_id, dwell_ms)
        self._wrote()
        return visit

    # ----------------------------------------------------------- capture policy

    def _check_capture(self, url: object) -> None:
        rule = urls.matching_rule(url, self._exclusions())  # InvalidUrl first
        settings = self._pause()
        if settings is not None:
            raise Paused(settings)
        if rule is not None:
            raise Excluded(urls.scrub_url(url), rule)

    def _pause(self) -> int | None:
        """``None`` when capturing, else the pause's end (0 for "until resumed")."""
        value = self._ledger.get_setting(_PAUSE_KEY)
        if value is None:
            return None
        until = value.get("until") if isinstance(value, dict) else None
        if isinstance(until, int) and not isinstance(until, bool):
            return until if until > self._now() else None
        return 0

    def _exclusions(self) -> tuple[str, ...]:
        stored = self._ledger.get_setting(_EXCLUSIONS_KEY)
        if isinstance(stored, list) and all(isinstance(rule, str) for rule in stored):
            return tuple(stored)
        return urls.DEFAULT_EXCLUSIONS

    def capture_settings(self) -> CaptureSettings:
        until = self._pause()
        stored = self._ledger.get_setting(_EXCLUSIONS_KEY)
        return CaptureSettings(
            paused=until is not None, paused_until=until or None,
            exclusions=self._exclusions(), default_exclusions=stored is None,
        )  # fmt: skip

    def pause_capture(self, until: int | None = None) -> CaptureSettings:
        """Pause capturing in every process, until ``until`` (unix seconds) or until
        :meth:`resume_capture`."""
        if until is not None:
            until = checks.timestamp(until, "until")
            if until <= self._now():
                raise InvalidInput("until", "must be in the future")
        self._ledger.set_setting(_PAUSE_KEY, {"until": until})
        return self.capture_settings()

    def resume_capture(self) -> CaptureSettings:
        self._ledger.delete_setting(_PAUSE_KEY)
        return self.capture_settings()

    def set_exclusions(self, rules: Sequence[str] | None) -> CaptureSettings:
        """Replace the exclusion rules (syntax: :class:`backtrail.urls.ExclusionRules`);
        ``None`` restores the defaults."""
        if rules is None:
            self._ledger.delete_setting(_EXCLUSIONS_KEY)
        else:
            if isinstance(rules, (str, bytes)) or not isinstance(rules, Sequence):
                raise InvalidInput("rules", "must be a list of exclusion rules")
            clean = list(dict.fromkeys(urls.ExclusionRules(rules).rules))
            self._ledger.set_setting(_EXCLUSIONS_KEY, clean)
        return self.capture_settings()

    def add_exclusion(self, rule: str) -> CaptureSettings:
        clean = urls.validate_exclusion_rule(rule)
        return self.set_exclusions([*self._exclusions(), clean])

    def remove_exclusion(self, rule: str) -> CaptureSettings:
        clean = urls.validate_exclusion_rule(rule)
        current = self._exclusions()
        if clean not in current:
            raise InvalidInput("rule", f"{clean!r:.80} is not an exclusion rule in use")
        return self.set_exclusions([r for r in current if r != clean])

    def count_skipped(self, rule: str) -> int:
        """Count one page the browser did not capture because of ``rule`` (an exclusion
        rule, or ``"password field"``); returns the rule's count. Only the rule and its
        count are kept, never the page's URL."""
        name = checks.label(rule, "rule", 1_024)
        with self._ledger.transaction():
            counts = self.skipped_counts()
            if name not in counts and len(counts) >= _MAX_SKIP_RULES:
                name = "other rules"
            counts[name] = counts.get(name, 0) + 1
            self._ledger.set_setting(_SKIPPED_KEY, counts)
        return counts[name]

    def skipped_counts(self) -> dict[str, int]:
        """Pages not captured, per rule (:meth:`count_skipped`), most first."""
        stored = self._ledger.get_setting(_SKIPPED_KEY)
        if not isinstance(stored, dict):
            return {}
        counts = {k: v for k, v in stored.items() if isinstance(v, int) and v > 0}
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def exclusion_for(self, url: str) -> str | None:
        """The exclusion rule ``url`` matches, or ``None`` (``InvalidUrl`` if it cannot
        be captured at all)."""
        return urls.matching_rule(url, self._exclusions())


def _utf8_size(value: object, field: str, limit: int) -> int:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise LimitExceeded(field, limit, len(value.encode("utf-8", "replace")), "bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidInput(
            field, f"contains invalid Unicode (a lone surrogate at index {error.start})"
        ) from None
    if size > limit:
        raise LimitExceeded(field, limit, size, "bytes")
    return size


def _renumbered(error: InvalidInput, name: str, positions: list[int]) -> InvalidInput:
    """``error`` about ``name[i]`` of a filtered list, renamed to the caller's index."""
    match = re.match(rf"{name}\[(\d+)\]", error.field)
    if match is None or int(match.group(1)) >= len(positions):
        return error
    field = f"{name}[{positions[int(match.group(1))]}]{error.field[match.end() :]}"
    if isinstance(error, InvalidUrl):
        return InvalidUrl(error.url, error.reason, field)
    if isinstance(error, LimitExceeded):
        return LimitExceeded(field, error.limit, error.actual, error.unit)
    return InvalidInput(field, error.reason)


def _visit_info(visit: object) -> VisitInfo | None:
    if visit is None or isinstance(visit, VisitInfo):
        return visit
    if isinstance(visit, Mapping):
        names = {f.name for f in fields(VisitInfo)}
        unknown = sorted(str(key) for key in visit if key not in names)
        if unknown:
            raise InvalidInput("visit", f"unknown field {unknown[0]!r:.60}")
        return VisitInfo(**visit)
    raise InvalidInput("visit", f"must be a mapping of visit fields, not {type(visit).__name__}")
