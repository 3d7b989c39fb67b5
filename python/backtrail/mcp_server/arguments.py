"""Parameter types the tools share, with their limits in the schema (``minimum``,
``maximum``, ``maxLength``, ``enum``) and strict types: the SDK refuses ``true`` for a
number and ``"10"`` for an integer before a tool runs."""

# No `from __future__ import annotations`: the SDK reads these annotations at run time.

from typing import Annotated

from pydantic import Field

__all__ = ["When", "Until", "Cursor", "Url", "Domain", "Text", "count", "Flag", "Doc", "Id"]

When = Annotated[
    str | None,
    Field(max_length=40, strict=True, description="ISO time, '7d' (ago), 'today'..."),
]
Cursor = Annotated[
    str | None, Field(max_length=512, description="An answer's next_cursor.")
]
Url = Annotated[str | None, Field(max_length=2048)]
Until = Annotated[str | None, Field(max_length=40, strict=True)]
"""The end of a time range (the same forms as :data:`When`)."""
Domain = Annotated[str, Field(max_length=253)]
Id = Annotated[int, Field(strict=True, ge=1, le=10**15)]


def Text(description: str, max_length: int = 1_000, min_length: int = 1) -> object:  # noqa: N802
    """A string parameter of at most ``max_length`` characters."""
    return Field(description=description, min_length=min_length, max_length=max_length,
                 strict=True)  # fmt: skip


def count(description: str, high: int, low: int = 1) -> object:
    """An integer parameter from ``low`` to ``high`` (``description`` may be empty)."""
    return Field(description=description or None, ge=low, le=high, strict=True)


def Flag(description: str) -> object:  # noqa: N802
    return Field(description=description, strict=True)


def Doc(description: str) -> object:  # noqa: N802
    """Only a description (the type already carries its limits)."""
    return Field(description=description)
