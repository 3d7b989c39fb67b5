"""Validation of request members against PROTOCOL.md, with the protocol's codes.

:class:`Fields` wraps one JSON object and reads typed members from it: a missing
required member is error 5, a member of the wrong JSON type error 6, a member of the
right type with an unacceptable value error 16 (``details.field`` names it, with its
path such as ``tabs[3].url``). ``null`` counts as absent for optional members only.
Unknown members are ignored. Times arrive in milliseconds and leave in unix seconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from backtrail.errors import InvalidUrl
from backtrail.native_host.codes import Code, HostError, scheme_refused
from backtrail.service import scrub_url

__all__ = ["Fields", "MAX_TIME_MS", "MAX_TITLE_CHARS", "MAX_URL_CHARS"]

MAX_URL_CHARS = 8_192
MAX_TITLE_CHARS = 1_000
MAX_TIME_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest time the ledger stores."""
_MAX_SAFE_INT = 2**53 - 1
_MISSING = object()

_JSON_TYPES = {str: "a string", bool: "true or false", int: "an integer", list: "an array",
               dict: "an object"}  # fmt: skip


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


class Fields:
    """Typed access to the members of one JSON object; ``path`` prefixes field names
    in errors."""

    def __init__(self, obj: dict[str, Any], path: str = "") -> None:
        self.obj = obj
        self.path = path

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def missing(self, key: str) -> HostError:
        return HostError(
            Code.MISSING_FIELD, f"{self.name(key)} is required", {"field": self.name(key)}
        )

    def wrong(self, key: str, expected: str, value: object) -> HostError:
        return HostError(
            Code.WRONG_FIELD_TYPE,
            f"{self.name(key)} must be {expected}, not {_kind(value)}",
            {"field": self.name(key)},
        )

    def invalid(self, key: str, reason: str, **details: Any) -> HostError:
        return HostError(
            Code.INVALID_VALUE, f"{self.name(key)} {reason}", {"field": self.name(key), **details}
        )

    def has(self, key: str) -> bool:
        """True if ``key`` is present and not null."""
        return self.obj.get(key) is not None

    def _get(self, key: str, expected: str, check: Any, required: bool, nullable: bool) -> Any:
        value = self.obj.get(key, _MISSING)
        if value is _MISSING:
            if required:
                raise self.missing(key)
            return None
        if value is None:
            if nullable or not required:
                return None
            raise self.wrong(key, expected, value)
        if not check(value):
            raise self.wrong(key, expected, value)
        return value

    # ------------------------------------------------------------- scalars

    def string(
        self,
        key: str,
        *,
        required: bool = True,
        nullable: bool = False,
        min_chars: int = 1,
        max_chars: int | None = None,
        cut: bool = False,
    ) -> str | None:
        """A string of ``min_chars``..``max_chars`` characters (``cut``: longer is cut
        instead of refused). Only whitespace counts as empty."""
        value = self._get(key, "a string", lambda v: isinstance(v, str), required, nullable)
        if value is None:
            return None
        if min_chars and len(value.strip()) < min_chars:
            raise self.invalid(key, "must not be empty" if min_chars == 1 else
                               f"must have at least {min_chars} characters")  # fmt: skip
        if max_chars is not None and len(value) > max_chars:
            if cut:
                return value[:max_chars]
            raise self.invalid(
                key, f"is {len(value)} characters long; the limit is {max_chars}",
                limit=max_chars, actual=len(value),
            )  # fmt: skip
        return value

    def text(self, key: str, *, required: bool = True, max_chars: int) -> str | None:
        """Free text that may be empty (``context``, ``note``...), null when optional."""
        return self.string(key, required=required, nullable=True, min_chars=0,
                           max_chars=max_chars)  # fmt: skip

    def choice(self, key: str, allowed: Sequence[str], *, required: bool = True) -> str | None:
        value = self.string(key, required=required, min_chars=0)
        if value is not None and value not in allowed:
            raise self.invalid(key, f"must be one of {', '.join(allowed)}, got {value!r:.40}")
        return value

    def integer(
        self,
        key: str,
        *,
        required: bool = True,
        nullable: bool = False,
        minimum: int | None = None,
        maximum: int | None = _MAX_SAFE_INT,
    ) -> int | None:
        value = self._get(
            key, "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool),
            required, nullable,
        )  # fmt: skip
        if value is None:
            return None
        if minimum is not None and value < minimum:
            raise self.invalid(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.invalid(key, f"must be at most {maximum}, got {value}")
        return int(value)

    def boolean(self, key: str, *, required: bool = True, default: bool = False) -> bool:
        value = self._get(key, "true or false", lambda v: isinstance(v, bool), required, False)
        return default if value is None else bool(value)

    def time(self, key: str, *, required: bool = True, nullable: bool = False) -> int | None:
        """A protocol time (ms since the epoch) as unix seconds: ``floor(ms / 1000)``."""
        value = self.integer(key, required=required, nullable=nullable, minimum=0,
                             maximum=MAX_TIME_MS)  # fmt: skip
        return None if value is None else value // 1000

    def duration(self, key: str, *, required: bool = True) -> int | None:
        return self.integer(key, required=required, nullable=True, minimum=0)

    def url(self, key: str, *, required: bool = True, nullable: bool = False) -> str | None:
        """An http(s) URL, scrubbed again: another scheme is error 8, a malformed URL
        error 16."""
        value = self.string(key, required=required, nullable=nullable, max_chars=MAX_URL_CHARS)
        if value is None:
            return None
        try:
            return scrub_url(value)
        except InvalidUrl as error:
            code = Code.FORBIDDEN_SCHEME if scheme_refused(error) else Code.INVALID_VALUE
            raise HostError(code, f"{self.name(key)} {error.reason}",
                            {"field": self.name(key)}) from None  # fmt: skip

    def title(self, key: str = "title", *, required: bool = False) -> str | None:
        """A title: string or null, cut to 1,000 characters."""
        return self.string(key, required=required, nullable=True, min_chars=0,
                           max_chars=MAX_TITLE_CHARS, cut=True)  # fmt: skip

    # ----------------------------------------------------------- structure

    def object(self, key: str, *, required: bool = True, nullable: bool = False) -> Fields | None:
        value = self._get(key, "an object", lambda v: isinstance(v, dict), required, nullable)
        return None if value is None else Fields(value, self.name(key))

    def array(
        self,
        key: str,
        *,
        required: bool = True,
        nullable: bool = False,
        min_items: int = 0,
        max_items: int,
    ) -> list[Any] | None:
        value = self._get(key, "an array", lambda v: isinstance(v, list), required, nullable)
        if value is None:
            return None
        if len(value) < min_items:
            raise self.invalid(key, f"must have at least {min_items} item(s)")
        if len(value) > max_items:
            raise self.invalid(
                key, f"has {len(value)} items; the limit is {max_items}",
                limit=max_items, actual=len(value),
            )  # fmt: skip
        return value

    def objects(
        self, key: str, *, min_items: int = 0, max_items: int, required: bool = True
    ) -> Iterator[Fields]:
        """Each item of an array of objects, as :class:`Fields` named ``key[i]``."""
        items = self.array(key, min_items=min_items, max_items=max_items, required=required)
        for index, item in enumerate(items or []):
            path = f"{self.name(key)}[{index}]"
            if not isinstance(item, dict):
                raise HostError(Code.WRONG_FIELD_TYPE,
                                f"{path} must be an object, not {_kind(item)}",
                                {"field": path})  # fmt: skip
            yield Fields(item, path)

    def strings(
        self, key: str, *, min_items: int = 0, max_items: int, max_chars: int,
        required: bool = True, nullable: bool = False,
    ) -> list[str] | None:  # fmt: skip
        """An array of non-empty strings."""
        items = self.array(key, min_items=min_items, max_items=max_items, required=required,
                           nullable=nullable)  # fmt: skip
        if items is None:
            return None
        out = []
        for index, item in enumerate(items):
            path = f"{self.name(key)}[{index}]"
            if not isinstance(item, str):
                raise HostError(Code.WRONG_FIELD_TYPE,
                                f"{path} must be a string, not {_kind(item)}",
                                {"field": path})  # fmt: skip
            if not item.strip() or len(item) > max_chars:
                raise HostError(Code.INVALID_VALUE,
                                f"{path} must have 1 to {max_chars} characters",
                                {"field": path})  # fmt: skip
            out.append(item)
        return out
