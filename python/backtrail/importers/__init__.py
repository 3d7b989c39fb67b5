"""Reading what browsers already know: the history and bookmarks of Chrome, Chromium,
Brave, Edge and Firefox profiles, from private copies of their own files.

Readers only read: they know the browsers' file formats and where profiles live, and
nothing of the memory. :mod:`backtrail.service.importing` stores what they read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from backtrail.importers import bookmarks as _bookmarks
from backtrail.importers import chrome, firefox
from backtrail.importers._sqlite import BrowserDataUnreadable, BrowserFileNotFound, snapshot
from backtrail.importers.profiles import (
    BROWSERS,
    CHROMIUM_BROWSERS,
    Profile,
    ProfileNotFound,
    browser_roots,
    find_profiles,
    resolve_profile,
)
from backtrail.store.models import IMPORT_SOURCE_PREFIX

__all__ = [
    "BROWSERS", "CHROMIUM_BROWSERS", "Profile", "ProfileNotFound", "BrowserFileNotFound",
    "BrowserDataUnreadable", "browser_roots", "find_profiles", "resolve_profile",
    "history_source", "read_visits", "read_bookmarks",
]  # fmt: skip


def history_source(profile: Profile) -> str:
    """The ``source`` label of visits imported from ``profile``'s browser."""
    return f"{IMPORT_SOURCE_PREFIX}{profile.browser}"


@contextmanager
def read_visits(
    profile: Profile, since: int | None = None
) -> Iterator[tuple[int, Iterator[dict[str, Any]]]]:
    """``(count, visits)`` of ``profile``'s history from ``since`` (unix seconds), read
    from a private copy of the browser's database that lives as long as the block."""
    reader = firefox if profile.is_firefox else chrome
    path = profile.history_file
    with snapshot(path) as conn:
        yield reader.count_visits(conn, path, since), reader.read_visits(conn, path, since)


def read_bookmarks(profile: Profile) -> list[dict[str, Any]]:
    """The profile's bookmarks as ``BookmarkInput`` fields (every scheme)."""
    path = profile.bookmarks_file
    if profile.is_firefox:
        with snapshot(path) as conn:
            return _bookmarks.read_firefox_bookmarks(conn, path)
    return _bookmarks.read_chromium_bookmarks(path)
