"""Translation between what a model types and what the service takes, and the labelled
text blocks results are rendered in.

Captured web text is untrusted: every piece of it the server returns, titles and page
addresses included, sits inside a ``<web_content>`` element that names its source URL,
capture time and kind, so the model can tell it from the user's own notes
(``<user_note>``), from notes and facts written by assistants (``<assistant_note>``,
``<shared_fact>``, each naming its writer) and from instructions. Delimiters inside the
text itself are defused, so a page cannot close its own block or forge another.
"""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone

from backtrail.errors import InvalidInput

_RELATIVE = re.compile(r"^(\d{1,6})\s*(m|min|mins|minutes?|h|hours?|d|days?|w|weeks?)(\s+ago)?$")
_UNITS = {"m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_TAGS = re.compile(
    r"<(\s*/?\s*)(web_content|user_note|shared_fact|assistant_note)", re.IGNORECASE
)
TIME_HELP = (
    "an ISO date or date-time, '30m', '12h', '7d', '2w' (ago), 'today', 'yesterday' or unix "
    "seconds"
)


def parse_time(value: object, field: str, *, now: float | None = None) -> int | None:
    """Unix seconds from any form listed in :data:`TIME_HELP`; ``None`` for no value."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(field, f"must be {TIME_HELP}")
    if isinstance(value, (int, float)):
        return int(value)
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be {TIME_HELP}")
    text = value.strip().lower()
    moment = time.time() if now is None else now
    today = datetime.fromtimestamp(moment, timezone.utc).date()
    if text.isdigit():
        return int(text)
    if text in ("now",):
        return int(moment)
    if text in ("today", "yesterday"):
        day = today if text == "today" else today - timedelta(days=1)
        return _midnight(day)
    match = _RELATIVE.match(text)
    if match:
        return int(moment) - int(match.group(1)) * _UNITS[match.group(2)[0]]
    try:
        if len(text) == 10:
            return _midnight(date.fromisoformat(text))
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(field, f"{value!r:.60} is not a time; use {TIME_HELP}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp())


def _midnight(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp())


def iso(ts: int | None) -> str:
    """``2024-05-01T14:30:00Z`` (or ``unknown``)."""
    if ts is None:
        return "unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def parse_cursor(cursor: str | None, field: str = "cursor") -> int:
    """An offset cursor (returned as ``next_cursor`` by list tools)."""
    if cursor is None or cursor == "":
        return 0
    if not cursor.isdigit() or len(cursor) > 7:
        raise InvalidInput(field, "is not a cursor returned by a previous call of this tool")
    return int(cursor)


def next_cursor(offset: int | None) -> str | None:
    return None if offset is None else str(offset)


def _attr(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace("\n", " ")


def defuse(text: str) -> str:
    """``text`` with anything that could open or close a result block escaped."""
    return _TAGS.sub(r"&lt;\1\2", text)


def web_block(
    text: str,
    *,
    source: str | None,
    kind: str,
    captured_at: int | None = None,
    title: str | None = None,
) -> str:
    """Untrusted web text (with its page's ``title`` on a first line, when given),
    delimited and labelled with where and when it came from."""
    head = f"title: {title}\n" if title else ""
    captured = f' captured="{iso(captured_at)}"' if captured_at is not None else ""
    return (
        f'<web_content source="{_attr(source)}" kind="{_attr(kind)}"{captured} '
        f'trust="untrusted">\n{defuse(head + text)}\n</web_content>'
    )


def note_block(
    text: str, *, about: str | None, written_at: int | None, author: str | None = None
) -> str:
    """A note: the user's own words (``author`` ``None``), or an assistant's, labelled
    with the client that wrote it."""
    about_attr = f' about="{_attr(about)}"' if about else ""
    if author:
        return (
            f'<assistant_note written_by="{_attr(author)}"{about_attr} '
            f'written="{iso(written_at)}">\n{defuse(text)}\n</assistant_note>'
        )
    return (
        f'<user_note{about_attr} written="{iso(written_at)}">\n{defuse(text)}\n'
        "</user_note>"
    )


def fact_block(text: str, *, key: str, client: str, updated_at: int | None) -> str:
    """A fact an assistant stored."""
    return (
        f'<shared_fact key="{_attr(key)}" written_by="{_attr(client)}" '
        f'updated="{iso(updated_at)}">\n{defuse(text)}\n</shared_fact>'
    )
