"""The exception hierarchy of the Backtrail Python package.

Every error raised on purpose by Backtrail derives from :class:`BacktrailError`. Each
class is named for what happened, carries the values a front end needs to explain it
(as attributes, and as a JSON-safe :meth:`BacktrailError.details` mapping) and has a
stable machine-readable :attr:`BacktrailError.code`. Front ends map classes to their own
protocol: the MCP server to tool errors, the native host to its frozen numeric codes.

Input errors also derive from :class:`ValueError` and "not found" errors from
:class:`LookupError`, so generic callers that only know the builtins still behave.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BacktrailError",
    "InvalidInput",
    "InvalidUrl",
    "LimitExceeded",
    "NotFound",
    "PageNotFound",
    "VisitNotFound",
    "FactNotFound",
    "HighlightNotFound",
    "NoteNotFound",
    "BookmarkNotFound",
    "TabNotFound",
    "Conflict",
    "VersionConflict",
    "KeyExists",
    "Paused",
    "Excluded",
    "StoreError",
    "StoreBusy",
    "SchemaTooNew",
    "IndexBusy",
    "IndexFailure",
    "SearchUnavailable",
    "short_repr",
]

_REPR_LIMIT = 80



def short_repr(value: object, limit: int = _REPR_LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for use inside messages.

    Control characters and lone surrogates come out escaped, so a hostile value can
    never break a log line or a protocol frame.
    """
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


class BacktrailError(Exception):
    """Root of every error Backtrail raises on purpose."""

    code: ClassVar[str] = "backtrail_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, Any]:
        """JSON-safe facts about the error (besides the message), for front ends."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", **details}``: a ready-made error payload."""
        return {"code": self.code, "message": self.message, **self.details()}


# ---------------------------------------------------------------------------- input


class InvalidInput(BacktrailError, ValueError):
    """A caller passed a value that is the wrong type, empty, malformed or out of range."""

    code = "invalid_input"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"invalid {field}: {reason}")
        self.field = field
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"field": self.field, "reason": self.reason}


class InvalidUrl(InvalidInput):
    """A URL cannot be captured or parsed (wrong scheme, no host, control characters...)."""

    code = "invalid_url"

    def __init__(self, url: object, reason: str, field: str = "url") -> None:
        BacktrailError.__init__(self, f"invalid {field} {short_repr(url)}: {reason}")
        self.field = field
        self.reason = reason
        self.url = url if isinstance(url, str) else None

    def details(self) -> dict[str, Any]:
        return {"field": self.field, "reason": self.reason}


class LimitExceeded(InvalidInput):
    """A value is larger than the configured limit for it."""

    code = "limit_exceeded"

    def __init__(self, field: str, limit: int, actual: int, unit: str = "characters") -> None:
        BacktrailError.__init__(
            self, f"{field} is {actual} {unit} long; the limit is {limit} {unit}"
        )
        self.field = field
        self.reason = f"longer than {limit} {unit}"
        self.limit = limit
        self.actual = actual
        self.unit = unit

    def details(self) -> dict[str, Any]:
        return {"field": self.field, "limit": self.limit, "actual": self.actual, "unit": self.unit}


# ------------------------------------------------------------------------ not found


class NotFound(BacktrailError, LookupError):
    """A record asked for by id, key or URL does not exist."""

    code = "not_found"
    kind: ClassVar[str] = "record"

    def __init__(self, ident: object) -> None:
        super().__init__(f"{self.kind} {short_repr(ident)} does not exist")
        self.ident = ident

    def details(self) -> dict[str, Any]:
        ident = self.ident if isinstance(self.ident, (str, int)) else repr(self.ident)
        return {"kind": self.kind, "ident": ident}


class PageNotFound(NotFound):
    """No page is stored for this URL or id."""

    code = "page_not_found"
    kind = "page"


class VisitNotFound(NotFound):
    """No visit is stored with this id."""

    code = "visit_not_found"
    kind = "visit"


class FactNotFound(NotFound):
    """No fact is stored under this key."""

    code = "fact_not_found"
    kind = "fact"

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class HighlightNotFound(NotFound):
    """No highlight is stored with this id."""

    code = "highlight_not_found"
    kind = "highlight"


class NoteNotFound(NotFound):
    """No note is stored with this id."""

    code = "note_not_found"
    kind = "note"


class BookmarkNotFound(NotFound):
    """No bookmark is stored with this browser id (in this profile)."""

    code = "bookmark_not_found"
    kind = "bookmark"


class TabNotFound(NotFound):
    """The open-tabs snapshot has no tab with this id."""

    code = "tab_not_found"
    kind = "tab"


# ------------------------------------------------------------------------- conflict


class TokenNotFound(NotFound):
    """No active token belongs to this client or has a digest starting so."""

    code = "token_not_found"
    kind = "active token of client or digest"


class Conflict(BacktrailError):
    """A conditional write found the stored state different from what the caller expected."""

    code = "conflict"


class VersionConflict(Conflict):
    """Compare-and-swap failed: the fact's version or value is not the one expected.

    ``what`` is ``"version"`` or ``"value"``; ``actual`` is ``None`` when the fact does
    not exist (any more).
    """

    code = "version_conflict"

    def __init__(
        self, key: str, expected: int | str, actual: int | str | None, what: str = "version"
    ) -> None:
        if actual is None:
            found = "but the fact does not exist"
        else:
            found = f"but the current {what} is {_show(actual)}"
        super().__init__(
            f"fact {short_repr(key)} was not changed: expected {what} {_show(expected)}, {found}"
        )
        self.key = key
        self.expected = expected
        self.actual = actual
        self.what = what

    def details(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "what": self.what,
            "expected": self.expected,
            "actual": self.actual,
        }


class KeyExists(Conflict):
    """A create-only write (``require_absent``) found the key already present."""

    code = "key_exists"

    def __init__(self, key: str, version: int) -> None:
        super().__init__(
            f"fact {short_repr(key)} already exists (version {version}); "
            "it was not overwritten"
        )
        self.key = key
        self.version = version

    def details(self) -> dict[str, Any]:
        return {"key": self.key, "version": self.version}


def _show(value: int | str) -> str:
    return str(value) if isinstance(value, int) else short_repr(value)


# ----------------------------------------------------------------------- capture policy


class Paused(BacktrailError):
    """Capturing is paused by the user; nothing was stored."""

    code = "paused"

    def __init__(self, until: int | None = None) -> None:
        when = f" until {until} (unix seconds)" if until is not None else ""
        super().__init__(f"capture is paused{when}; nothing was stored")
        self.until = until

    def details(self) -> dict[str, Any]:
        return {"until": self.until}


class Excluded(BacktrailError):
    """The URL matches an exclusion rule; nothing was stored."""

    code = "excluded"

    def __init__(self, url: str, rule: str) -> None:
        super().__init__(
            f"{short_repr(url)} matches the exclusion rule {short_repr(rule)}; nothing was stored"
        )
        self.url = url
        self.rule = rule

    def details(self) -> dict[str, Any]:
        return {"rule": self.rule}


# --------------------------------------------------------------------------- storage


class StoreError(BacktrailError):
    """The on-disk store failed (I/O error, corruption, unexpected SQLite error)."""

    code = "store_error"


class StoreBusy(StoreError):
    """Another process held the write lock for longer than the busy timeout."""

    code = "store_busy"

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(
            f"the store is busy: another process held the write lock for more than "
            f"{timeout_ms} ms; try again"
        )
        self.timeout_ms = timeout_ms

    def details(self) -> dict[str, Any]:
        return {"timeout_ms": self.timeout_ms}


class SchemaTooNew(StoreError):
    """The database was written by a newer Backtrail whose schema this one does not know."""

    code = "schema_too_new"

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"the ledger has schema version {found} but this Backtrail supports up to "
            f"{supported}; upgrade Backtrail"
        )
        self.found = found
        self.supported = supported

    def details(self) -> dict[str, Any]:
        return {"found": self.found, "supported": self.supported}


class IndexBusy(BacktrailError):
    """Another process kept the index busy for longer than the wait allowed."""

    code = "index_busy"

    def __init__(self, waited: float) -> None:
        super().__init__(
            f"another process is indexing and did not finish within {waited:g} s; try again"
        )
        self.waited = waited


class IndexFailure(StoreError):
    """The search index could not be read or written."""

    code = "index_error"


class SearchUnavailable(BacktrailError):
    """The search mode asked for needs the embedding model, which is not available."""

    code = "search_unavailable"

    def __init__(self, mode: str, reason: str) -> None:
        super().__init__(f"{mode} search is unavailable: {reason}; use mode 'bm25'")
        self.mode = mode
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"mode": self.mode, "reason": self.reason}
