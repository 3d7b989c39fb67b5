"""Input validation for the ledger: every public method checks its arguments here
before it opens a transaction, so bad input raises a clear error and changes nothing."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, overload

from backtrail.errors import InvalidInput, InvalidUrl, LimitExceeded
from backtrail.urls import canonical_url, scrub_title, scrub_url, url_host

MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z, in seconds
_INT64 = 2**63 - 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACES = re.compile(r"\s+")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]{1,8})*$")


def _type_name(value: object) -> str:
    return type(value).__name__


def _require_unicode(value: str, field: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInput(
            field, f"contains invalid Unicode (a lone surrogate at index {error.start})"
        ) from None


@overload
def label(
    value: object, field: str, max_chars: int, *, optional: Literal[False] = ...
) -> str: ...
@overload
def label(value: object, field: str, max_chars: int, *, optional: bool) -> str | None: ...
def label(value: object, field: str, max_chars: int, *, optional: bool = False) -> str | None:
    """A short single-line identifier (client, source, key...): non-empty, no control
    characters, at most ``max_chars``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {_type_name(value)}")
    _require_unicode(value, field)
    if not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > max_chars:
        raise LimitExceeded(field, max_chars, len(value))
    if _CONTROL.search(value):
        raise InvalidInput(field, "must not contain control characters (tabs, newlines...)")
    return value


@overload
def text(
    value: object,
    field: str,
    max_chars: int,
    *,
    optional: Literal[False] = ...,
    allow_empty: bool = ...,
) -> str: ...
@overload
def text(
    value: object, field: str, max_chars: int, *, optional: bool, allow_empty: bool = ...
) -> str | None: ...
def text(
    value: object, field: str, max_chars: int, *, optional: bool = False, allow_empty: bool = False
) -> str | None:
    """Free text written on purpose (notes, highlights, fact values): refused when too
    long, or when it holds NUL or lone surrogates."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {_type_name(value)}")
    _require_unicode(value, field)
    if not allow_empty and not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > max_chars:
        raise LimitExceeded(field, max_chars, len(value))
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL characters")
    return value


def web_text(value: object, field: str) -> str:
    """Captured web text: must be a valid string; stray control characters are dropped."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {_type_name(value)}")
    _require_unicode(value, field)
    return _TEXT_CONTROL.sub("", value)


def title(value: object, field: str, max_chars: int) -> str | None:
    """A title from the web: every URL in it scrubbed (:func:`~backtrail.urls.scrub_title`:
    a title-less page's title is its URL), whitespace collapsed, cut to ``max_chars``;
    empty -> None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {_type_name(value)}")
    _require_unicode(value, field)
    cleaned = _SPACES.sub(" ", scrub_title(_TEXT_CONTROL.sub("", value))).strip()
    return cleaned[:max_chars] or None


MAX_OUTLINE_HEADINGS = 5_000
"""Most headings kept of one page version's outline (the first ones)."""
MAX_HEADING_CHARS = 300


def outline(value: object, text_chars: int, field: str = "outline") -> str | None:
    """A text's headings as the ledger stores them: JSON ``[[offset, level, words], ...]``
    in text order, or None for none. Each entry is ``(offset, level, words)`` with
    ``0 <= offset <= text_chars``, ``1 <= level <= 6`` and the words cleaned as a title
    (URLs scrubbed); headings past the (possibly cut) text are left out."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(field, f"must be a list of headings, not {_type_name(value)}")
    kept: list[list[object]] = []
    last = 0
    for entry in value[:MAX_OUTLINE_HEADINGS]:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InvalidInput(field, "each heading must be [offset, level, words]")
        offset, level, words = entry
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < last:
            raise InvalidInput(field, "heading offsets must be integers in text order")
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 6:
            raise InvalidInput(field, "heading levels must be integers from 1 to 6")
        clean = title(words, field, MAX_HEADING_CHARS)
        last = offset
        if offset <= text_chars and clean:
            kept.append([offset, level, clean])
    return json.dumps(kept, ensure_ascii=False) if kept else None


def language(value: object, field: str = "language") -> str | None:
    """A BCP 47 language tag from page metadata, lower-cased (``en_US`` -> ``en-us``).
    Web metadata is often junk (``"en-US,fr"``, ``"{{lang}}"``): anything that is not a
    tag becomes ``None`` instead of refusing the capture. A non-string is refused."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {_type_name(value)}")
    tag = value.strip().replace("_", "-").lower()
    return tag if len(tag) <= 35 and _LANGUAGE.match(tag) else None


def timestamp(value: object, field: str) -> int:
    """Unix seconds: an int (not bool) in [0, year 9999]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer (unix seconds), not {_type_name(value)}")
    if value < 0:
        raise InvalidInput(field, f"must not be negative, got {value}")
    if value > MAX_TIMESTAMP:
        hint = " (it looks like milliseconds)" if value <= MAX_TIMESTAMP * 1000 else ""
        raise InvalidInput(field, f"{value} is not a unix time in seconds{hint}")
    return value


@overload
def integer(
    value: object, field: str, *, minimum: int = ..., optional: Literal[False] = ...
) -> int: ...
@overload
def integer(value: object, field: str, *, minimum: int = ..., optional: bool) -> int | None: ...
def integer(
    value: object, field: str, *, minimum: int = -_INT64 - 1, optional: bool = False
) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an integer, not {_type_name(value)}")
    if value < minimum or value > _INT64:
        raise InvalidInput(field, f"must be between {minimum} and {_INT64}, got {value}")
    return value


def identifier(value: object, field: str) -> int:
    """A row id: a positive int."""
    return integer(value, field, minimum=1)


def boolean(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(field, f"must be true or false, not {_type_name(value)}")
    return value


def limit(value: object, field: str = "limit", maximum: int = 100_000) -> int:
    result = integer(value, field, minimum=1)
    if result > maximum:
        raise InvalidInput(field, f"must be at most {maximum}, got {result}")
    return result


def json_value(value: object, field: str, max_bytes: int) -> str:
    """Serialise a JSON-compatible value (no NaN, no lone surrogates, size-limited)."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise InvalidInput(field, f"must be JSON-serialisable: {error}") from None
    try:
        size = len(encoded.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains invalid Unicode (a lone surrogate)") from None
    if size > max_bytes:
        raise LimitExceeded(field, max_bytes, size, "bytes")
    return encoded


def one_of(value: object, field: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidInput(field, f"must be one of {', '.join(allowed)}; got {value!r:.60}")
    return value


def truncate_utf8(value: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``value`` to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    if len(value) * 4 <= max_bytes:
        return value, False
    encoded = value.encode("utf-8")
    if len(encoded) <= max_bytes:
        return value, False
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True


def web_url(value: object, field: str = "url") -> tuple[str, str, str]:
    """(scrubbed URL, canonical URL, domain) of a capturable URL, else ``InvalidUrl``."""
    try:
        scrubbed = scrub_url(value)
    except InvalidUrl as error:
        if error.field == field:
            raise
        raise InvalidUrl(value, error.reason, field) from None
    canonical = canonical_url(scrubbed)
    return scrubbed, canonical, url_host(canonical)


def as_record(item: Any, cls: type, field: str) -> Any:
    """Accept an instance of the dataclass ``cls`` or a mapping of its fields."""
    if isinstance(item, cls):
        return item
    if isinstance(item, dict):
        try:
            return cls(**item)
        except TypeError as error:
            raise InvalidInput(field, str(error)) from None
    raise InvalidInput(field, f"must be a {cls.__name__} or a mapping, not {_type_name(item)}")
