"""How a result reads to a person, the same in the popup, the full page, the CLI and the
assistant's text: a title without the site's name its pages repeat, the site (the
registrable domain), when it was last read ("3 hours ago", "yesterday", "Dec 4") and how
often ("read 3 times"). Scores are for ranking, never shown.

A title's site suffix is its last part after a separator (`` — ``, `` | ``, `` - ``,
`` · ``...) when that part names the site (``Python 3.11.2 documentation`` on
python.org, ``The Rust Programming Language`` on rust-lang.org) or when several pages of
the same site end with it in the ledger (``JavaScript | MDN``): :class:`SiteSuffixes`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, tzinfo

from backtrail import urls

__all__ = ["SiteSuffixes", "display_title", "relative_time", "site", "suffixes", "visits_text"]

_SEPARATOR = re.compile(r"\s+(?:[—–|·•‧»]|-{1,2}|::)\s+")
_WORD = re.compile(r"[^\W_]+")
_ARTICLES = frozenset({"the", "a", "an"})
_SHARED_BY = 3  # pages of one site ending with the same part make it the site's suffix
_SAMPLE = 200  # titles of a site read to find its shared suffixes
_TTL = 600.0  # seconds a site's shared suffixes are kept


def site(domain: str | None) -> str | None:
    """The registrable domain of ``domain`` by the Public Suffix List (``docs.python.org``
    -> ``python.org``, ``user.github.io`` stays); a host the list does not know
    (``localhost``, an address) is its own site."""
    if not domain:
        return None
    if domain.startswith("[") or domain.replace(".", "").isdigit():
        return domain
    return urls.registrable_domain(domain) or domain


def suffixes(title: str) -> list[str]:
    """Each ending of ``title`` that starts at a separator, shortest first:
    ``"a — b — c"`` -> ``[" — c", " — b — c"]``."""
    return [title[m.start() :] for m in reversed(list(_SEPARATOR.finditer(title)))]


def _compact(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _names_site(part: str, site_name: str | None) -> bool:
    """True when ``part`` (a title's ending, separator stripped) starts with the site's
    name: its first word (after an article) is part of the site's name, or its first two
    words spell it (``Python 3.11.2 documentation`` on python.org, ``The Rust Programming
    Language`` on rust-lang.org, ``Django`` on djangoproject.com, ``Stack Overflow``), but
    not ``Automated Python 2 to 3 code translation``, which only mentions it."""
    if not site_name:
        return False
    label = _compact(site_name.split(".")[0])
    words = _WORD.findall(part)
    if words and words[0].lower() in _ARTICLES:
        words = words[1:]
    lead = [word.lower() for word in words[:2]]
    if len(label) < 3 or not lead:
        return False
    return "".join(lead).startswith(label) or (len(lead[0]) >= 4 and lead[0] in label)


def display_title(
    title: str | None, site_name: str | None, shared: Iterable[str] = ()
) -> str | None:
    """``title`` without the site's suffix: the longest of ``shared`` it ends with
    (endings several pages of the site have; see :class:`SiteSuffixes`), else its last
    part when that starts with the site's name, twice at most (``Making queries | Django
    documentation | Django`` -> ``Making queries``). A title that would be left empty is
    kept whole."""
    if not title:
        return title
    common = set(shared)
    text = title.strip()
    for _ in range(2):
        ends = suffixes(text)
        longest = next((end for end in reversed(ends) if end in common), None)
        named = (
            longest is None
            and bool(ends)
            and _names_site(_SEPARATOR.sub("", ends[0], 1), site_name)
        )
        cut = longest or (ends[0] if named else None)
        if cut is None or not text[: -len(cut)].strip():
            break
        text = text[: -len(cut)].rstrip()
        if not named:
            break
    return text


def shared_suffixes(titles: Iterable[str | None]) -> frozenset[str]:
    """The endings (see :func:`suffixes`) that at least three of ``titles`` have."""
    counts: Counter[str] = Counter()
    for title in titles:
        if title:
            counts.update(set(suffixes(title.strip())))
    return frozenset(end for end, n in counts.items() if n >= _SHARED_BY)


class SiteSuffixes:
    """The shared title endings of each domain, read from the ledger by ``titles`` (a
    domain's page titles, at most ``limit``) and kept for ten minutes."""

    def __init__(self, titles: Callable[[str, int], Sequence[str | None]]) -> None:
        self._titles = titles
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, frozenset[str]]] = {}

    def of(self, domain: str | None) -> frozenset[str]:
        if not domain:
            return frozenset()
        now = time.monotonic()
        with self._lock:
            kept = self._known.get(domain)
        if kept is not None and now - kept[0] < _TTL:
            return kept[1]
        found = shared_suffixes(self._titles(domain, _SAMPLE))
        with self._lock:
            self._known[domain] = (now, found)
        return found


def relative_time(ts: int | None, now: float | None = None, tz: tzinfo | None = None) -> str:
    """When ``ts`` (unix seconds) was, as people say it: ``just now``, ``5 minutes ago``,
    ``3 hours ago`` (the same day, or within 12 hours), ``yesterday``, ``Dec 4`` (this
    year), ``Dec 4, 2024``; local time unless ``tz`` is given. ``""`` for no time."""
    if ts is None:
        return ""
    moment = time.time() if now is None else now
    seconds = moment - ts
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        minutes = int(seconds // 60)
        return "1 minute ago" if minutes == 1 else f"{minutes} minutes ago"
    then = datetime.fromtimestamp(ts, tz).astimezone(tz)
    today = datetime.fromtimestamp(moment, tz).astimezone(tz)
    days = (today.date() - then.date()).days
    if days == 0 or seconds < 12 * 3600:
        hours = int(seconds // 3600)
        return "1 hour ago" if hours == 1 else f"{hours} hours ago"
    if days == 1:
        return "yesterday"
    day = f"{then:%b} {then.day}"
    return day if then.year == today.year else f"{day}, {then.year}"


def visits_text(count: int | None) -> str:
    """``read once``, ``read 3 times``; ``""`` when no visit is known."""
    if not count:
        return ""
    return "read once" if count == 1 else f"read {count:,} times"
