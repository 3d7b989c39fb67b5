"""Importing browser history and bookmarks from real Chrome-family and Firefox files,
and finding browser profiles on Linux, macOS and Windows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from backtrail import importers
from backtrail.cli.progress import Interrupted
from backtrail.errors import InvalidInput
from backtrail.importers import BrowserDataUnreadable, BrowserFileNotFound, Profile, ProfileNotFound
from backtrail.service import Memory, importing
from backtrail.store import Ledger
from browser_files import (
    AUTO_SUBFRAME,
    CHAIN_END,
    CHAIN_START,
    FF_DOWNLOAD,
    FF_EMBED,
    FF_FRAMED_LINK,
    FF_LINK,
    FF_REDIRECT_TEMPORARY,
    FF_RELOAD,
    FF_TYPED,
    RELOAD,
    TYPED,
    ChromeHistory,
    FirefoxPlaces,
    chrome_bookmarks,
    chromium_user_data,
    firefox_root,
    folder,
    url,
)
from helpers import make_config

T0 = 1_700_000_000  # 2023-11-14


@pytest.fixture
def memory(data_home: Path) -> Iterator[Memory]:
    with Memory(make_config(data_home)) as opened:
        yield opened


def chrome_profile(tmp_path: Path, name: str = "Default") -> Profile:
    return Profile("chrome", name, tmp_path / "chrome" / name)


def firefox_profile(tmp_path: Path) -> Profile:
    return Profile("firefox", "default-release", tmp_path / "firefox" / "abcd.default-release")


def visits_of(home: Path) -> list:
    with Ledger.open(home, client="test") as ledger:
        return sorted(ledger.list_visits(limit=10_000), key=lambda v: v.visited_at)


def pages_of(memory: Memory) -> dict[str, object]:
    return {entry.url: entry for entry in memory.timeline(limit=10_000)}


# ------------------------------------------------------------------ chrome history


def build_chrome(profile: Profile) -> dict[str, int]:
    history = ChromeHistory(profile.history_file)
    wal = history.add_visit(
        "https://www.sqlite.org/wal.html",
        T0,
        title="Write-Ahead Logging",
        transition=TYPED | CHAIN_START | CHAIN_END,
        duration_us=42_500_000,
    )
    history.add_visit("https://www.sqlite.org/wal.html", T0 + 60, transition=RELOAD | CHAIN_END)
    history.add_visit(
        "https://www.sqlite.org/lang.html",
        T0 + 120,
        title="SQL As Understood By SQLite",
        from_visit=wal,
    )
    history.add_visit("https://www.sqlite.org/wal.html", T0 + 86_400, micros=999_999)
    history.add_visit("https://ads.example/frame", T0 + 130, transition=AUTO_SUBFRAME)
    history.add_visit("chrome://settings/", T0 + 140, title="Settings")
    history.add_visit("file:///home/me/notes.txt", T0 + 150, title="notes.txt")
    history.close()
    conn = sqlite3.connect(profile.history_file)
    counts = dict(conn.execute("SELECT url, visit_count FROM urls").fetchall())
    conn.close()
    return counts


def test_chrome_history_keeps_original_times_counts_and_referrers(
    tmp_path: Path, memory: Memory, data_home: Path
) -> None:
    profile = chrome_profile(tmp_path)
    chrome_counts = build_chrome(profile)
    result = importing.import_history(memory, profile)
    assert (result.read, result.added, result.unsupported, result.invalid) == (5, 3, 2, 0)
    assert result.pages_created == 2
    pages = pages_of(memory)
    assert set(pages) == {"https://www.sqlite.org/wal.html", "https://www.sqlite.org/lang.html"}
    wal = pages["https://www.sqlite.org/wal.html"]
    # Chrome counts every visit but reloads; so does the import.
    assert wal.visit_count == chrome_counts["https://www.sqlite.org/wal.html"] == 2
    assert pages["https://www.sqlite.org/lang.html"].visit_count == 1
    assert (wal.first_seen, wal.last_seen) == (T0, T0 + 86_400)
    assert wal.title == "Write-Ahead Logging"
    visits = visits_of(data_home)
    assert [(v.visited_at, v.transition) for v in visits] == [
        (T0, "typed"),
        (T0 + 120, "link"),
        (T0 + 86_400, "link"),
    ]
    assert visits[0].dwell_ms == 42_500
    assert visits[1].referrer == "https://www.sqlite.org/wal.html"
    assert {v.source for v in visits} == {"import:chrome"}
    assert visits[0].external_id == "Default:1"


def test_reimporting_history_adds_nothing(tmp_path: Path, memory: Memory, data_home: Path) -> None:
    profile = chrome_profile(tmp_path)
    build_chrome(profile)
    importing.import_history(memory, profile)
    before = memory.stats().ledger
    again = importing.import_history(memory, profile)
    assert (again.added, again.skipped, again.pages_created) == (0, 3, 0)
    after = memory.stats().ledger
    assert after.counts["visits"] == before.counts["visits"] == 3
    assert after.max_change_seq == before.max_change_seq
    assert pages_of(memory)["https://www.sqlite.org/wal.html"].visit_count == 2


def test_history_since_takes_only_later_visits(tmp_path: Path, memory: Memory) -> None:
    profile = chrome_profile(tmp_path)
    build_chrome(profile)
    result = importing.import_history(memory, profile, since=T0 + 100)
    assert (result.read, result.added) == (4, 2)
    assert set(pages_of(memory)) == {
        "https://www.sqlite.org/wal.html",
        "https://www.sqlite.org/lang.html",
    }


def test_imported_titles_are_searchable(tmp_path: Path, memory: Memory) -> None:
    profile = chrome_profile(tmp_path)
    build_chrome(profile)
    importing.import_history(memory, profile)
    memory.catch_up(vectors=False)
    hits = memory.search("understood", mode="bm25").results
    assert [hit.url for hit in hits] == ["https://www.sqlite.org/lang.html"]
    by_url_words = memory.search("lang", mode="bm25").results
    assert by_url_words and by_url_words[0].url == "https://www.sqlite.org/lang.html"


def test_history_of_two_profiles_is_kept_apart(tmp_path: Path, memory: Memory) -> None:
    first, second = chrome_profile(tmp_path), chrome_profile(tmp_path, "Profile 1")
    build_chrome(first)
    build_chrome(second)  # the same visit ids, in another profile
    importing.import_history(memory, first)
    result = importing.import_history(memory, second)
    assert result.added == 3
    assert pages_of(memory)["https://www.sqlite.org/lang.html"].visit_count == 2


def test_interrupted_import_keeps_its_batches_and_resumes(
    tmp_path: Path, memory: Memory, data_home: Path
) -> None:
    profile = chrome_profile(tmp_path)
    history = ChromeHistory(profile.history_file)
    for n in range(10):
        history.add_visit(f"https://example.com/{n}", T0 + n, title=f"page {n}")
    history.close()
    calls = []

    def stop_after_second_batch(done: int, total: int, phase: str) -> None:
        calls.append((done, total, phase))
        if done == 6:
            raise Interrupted

    with pytest.raises(Interrupted):
        importing.import_history(memory, profile, batch_size=3, progress=stop_after_second_batch)
    assert calls == [(0, 10, "import"), (3, 10, "import"), (6, 10, "import")]
    assert len(visits_of(data_home)) == 6
    result = importing.import_history(memory, profile, batch_size=3)
    assert (result.added, result.skipped) == (4, 6)
    assert len(visits_of(data_home)) == 10


def test_a_visit_the_ledger_refuses_is_left_out_not_fatal(tmp_path: Path, memory: Memory) -> None:
    profile = chrome_profile(tmp_path)
    history = ChromeHistory(profile.history_file)
    history.add_visit("https://example.com/ok", T0, title="fine")
    history.add_visit("https://example.com/" + "x" * 9000, T0 + 1, title="too long")
    history.add_visit("https://example.com/also-ok", T0 + 2, title="fine too")
    history.close()
    result = importing.import_history(memory, profile)
    assert (result.added, result.invalid) == (2, 1)
    assert set(pages_of(memory)) == {"https://example.com/ok", "https://example.com/also-ok"}


def test_history_is_read_from_a_copy_while_the_browser_writes(
    tmp_path: Path, memory: Memory
) -> None:
    profile = firefox_profile(tmp_path)
    places = FirefoxPlaces(profile.history_file)
    places.conn.execute("PRAGMA wal_autocheckpoint = 0")  # committed rows stay in -wal
    places.add_visit("https://www.rust-lang.org/learn", T0, title="Learn Rust")
    places.commit()
    # Like a running Firefox: exclusive locking and a transaction in progress.
    places.conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    places.conn.execute("BEGIN EXCLUSIVE")
    places.add_visit("https://uncommitted.example/", T0 + 5, title="not yet")
    try:
        assert Path(str(profile.history_file) + "-wal").stat().st_size > 0
        result = importing.import_history(memory, profile)
    finally:
        places.conn.rollback()
        places.close()
    assert result.added == 1
    assert set(pages_of(memory)) == {"https://www.rust-lang.org/learn"}


# ----------------------------------------------------------------- firefox history


def test_firefox_history_matches_firefox_counts_and_types(
    tmp_path: Path, memory: Memory, data_home: Path
) -> None:
    profile = firefox_profile(tmp_path)
    places = FirefoxPlaces(profile.history_file)
    learn = places.add_visit(
        "https://www.rust-lang.org/learn", T0, title="Learn Rust", visit_type=FF_TYPED
    )
    places.add_visit(
        "https://doc.rust-lang.org/book/", T0 + 30, title="The Rust Book", from_visit=learn
    )
    places.add_visit("https://doc.rust-lang.org/book/", T0 + 40, visit_type=FF_RELOAD)
    places.add_visit(
        "https://doc.rust-lang.org/book/ch04-01.html",
        T0 + 50,
        title="What is Ownership?",
        visit_type=FF_REDIRECT_TEMPORARY,
    )
    places.add_visit("https://ads.example/embed", T0 + 60, visit_type=FF_EMBED)
    places.add_visit("https://frame.example/", T0 + 70, visit_type=FF_FRAMED_LINK)
    places.add_visit("https://dl.example/file.zip", T0 + 80, visit_type=FF_DOWNLOAD)
    places.add_visit("about:preferences", T0 + 90, visit_type=FF_LINK)
    places.close()
    result = importing.import_history(memory, profile)
    assert (result.read, result.added, result.unsupported) == (4, 3, 1)
    conn = sqlite3.connect(profile.history_file)
    firefox_counts = dict(conn.execute("SELECT url, visit_count FROM moz_places"))
    conn.close()
    pages = pages_of(memory)
    assert {u: p.visit_count for u, p in pages.items()} == {u: firefox_counts[u] for u in pages}
    assert pages["https://doc.rust-lang.org/book/"].first_seen == T0 + 30
    visits = visits_of(data_home)
    assert [v.transition for v in visits] == ["typed", "link", "redirect_temporary"]
    assert visits[1].referrer == "https://www.rust-lang.org/learn"
    assert {v.source for v in visits} == {"import:firefox"}


# ----------------------------------------------------------------------- bookmarks


def test_chrome_bookmarks_keep_folders_times_and_follow_removals(
    tmp_path: Path, memory: Memory
) -> None:
    profile = chrome_profile(tmp_path)
    bar = [
        url("https://www.sqlite.org/wal.html", "WAL", T0, ident="5"),
        folder(
            "Rust",
            [
                url("https://doc.rust-lang.org/book/", "The Book", T0 + 1, ident="7"),
                folder("Async", [url("https://tokio.rs/", "Tokio", T0 + 2, ident="9")]),
            ],
        ),
        url("javascript:alert(1)", "a bookmarklet", T0 + 3, ident="11"),
    ]
    chrome_bookmarks(profile.bookmarks_file, bar, [url("https://example.org/", "Other", T0 + 4)])
    result = importing.import_bookmarks(memory, profile)
    assert (result.read, result.added, result.skipped, result.removed) == (5, 4, 1, 0)
    stored = {b.browser_id: b for b in memory.list_bookmarks(profile="chrome:Default")}
    assert stored["9"].folder == "Bookmarks bar/Rust/Async"
    assert stored["9"].created_at == T0 + 2
    assert stored["5"].title == "WAL"
    chrome_bookmarks(profile.bookmarks_file, bar[:1])
    again = importing.import_bookmarks(memory, profile)
    assert (again.added, again.unchanged, again.removed) == (0, 1, 3)


def test_firefox_bookmarks_follow_folders_and_leave_out_tags(
    tmp_path: Path, memory: Memory
) -> None:
    profile = firefox_profile(tmp_path)
    places = FirefoxPlaces(profile.history_file)
    research = places.add_folder("Research", parent=2)
    wal = places.add_bookmark("https://www.sqlite.org/wal.html", "WAL docs", T0, parent=research)
    places.add_bookmark("https://tokio.rs/", "Tokio", T0 + 1, parent=3)
    tag = places.add_folder("databases", parent=4)  # a tag: not a bookmark
    places.add_bookmark("https://www.sqlite.org/wal.html", "", T0 + 2, parent=tag)
    places.close()
    result = importing.import_bookmarks(memory, profile)
    assert (result.read, result.added) == (2, 2)
    stored = {
        b.browser_id: b for b in memory.list_bookmarks(profile="firefox:abcd.default-release")
    }
    assert stored[wal].folder == "Bookmarks Menu/Research"
    assert stored[wal].created_at == T0
    assert {b.folder for b in stored.values()} == {"Bookmarks Menu/Research", "Bookmarks Toolbar"}


# ------------------------------------------------------------------ damaged files


def test_files_that_are_not_browser_databases_give_clear_errors(
    tmp_path: Path, memory: Memory
) -> None:
    profile = chrome_profile(tmp_path)
    with pytest.raises(BrowserFileNotFound, match="History"):
        importing.import_history(memory, profile)
    profile.directory.mkdir(parents=True)
    profile.history_file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(BrowserDataUnreadable, match="not a readable SQLite database"):
        importing.import_history(memory, profile)
    profile.history_file.unlink()
    sqlite3.connect(profile.history_file).execute(
        "CREATE TABLE urls (id INTEGER)"
    ).connection.close()
    with pytest.raises(BrowserDataUnreadable, match="table urls lacks"):
        importing.import_history(memory, profile)
    profile.bookmarks_file.write_text("{not json", encoding="utf-8")
    with pytest.raises(BrowserDataUnreadable, match="not a bookmarks JSON file"):
        importing.import_bookmarks(memory, profile)
    assert memory.stats().ledger.counts["visits"] == 0


# ------------------------------------------------------------------------ profiles


@pytest.mark.parametrize(
    ("platform", "relative", "environ"),
    [
        ("linux", ".config/BraveSoftware/Brave-Browser", {}),
        ("darwin", "Library/Application Support/BraveSoftware/Brave-Browser", {}),
        ("win32", "Local/BraveSoftware/Brave-Browser/User Data", {"LOCALAPPDATA": "Local"}),
    ],
)
def test_chromium_profiles_are_found_with_their_names_and_default(
    tmp_path: Path, platform: str, relative: str, environ: dict[str, str]
) -> None:
    env = {key: str(tmp_path / value) for key, value in environ.items()}
    root = tmp_path / relative
    chromium_user_data(root, {"Default": "Person 1", "Profile 2": "Work"}, last_used="Profile 2")
    (root / "System Profile").mkdir()
    found = importers.find_profiles("brave", platform=platform, home=tmp_path, environ=env)
    assert [(p.name, p.directory.name, p.default) for p in found] == [
        ("Work", "Profile 2", True),
        ("Person 1", "Default", False),
    ]
    chosen = importers.resolve_profile("brave", platform=platform, home=tmp_path, environ=env)
    assert chosen.directory == root / "Profile 2"
    by_name = importers.resolve_profile(
        "brave", "person 1", platform=platform, home=tmp_path, environ=env
    )
    assert by_name.directory == root / "Default"


@pytest.mark.parametrize(
    ("platform", "relative", "environ"),
    [
        ("linux", ".mozilla/firefox", {}),
        ("darwin", "Library/Application Support/Firefox", {}),
        ("win32", "Roaming/Mozilla/Firefox", {"APPDATA": "Roaming"}),
    ],
)
def test_firefox_profiles_come_from_profiles_ini(
    tmp_path: Path, platform: str, relative: str, environ: dict[str, str]
) -> None:
    env = {key: str(tmp_path / value) for key, value in environ.items()}
    root = tmp_path / relative
    firefox_root(
        root,
        [("default-release", "Profiles/abcd.default-release"), ("old", "Profiles/wxyz.default")],
        install_default="Profiles/abcd.default-release",
    )
    found = importers.find_profiles("firefox", platform=platform, home=tmp_path, environ=env)
    assert [(p.name, p.default) for p in found] == [("default-release", True), ("old", False)]
    assert found[0].history_file == root / "Profiles/abcd.default-release/places.sqlite"


def test_firefox_default_is_the_marked_profile_without_an_install_section(tmp_path: Path) -> None:
    root = tmp_path / ".mozilla" / "firefox"
    firefox_root(root, [("a", "a.default"), ("b", "b.default")], install_default=None)
    found = importers.find_profiles("firefox", platform="linux", home=tmp_path, environ={})
    assert [(p.name, p.default) for p in found] == [("b", True), ("a", False)]


def test_profiles_are_chosen_by_path_and_missing_ones_are_named(tmp_path: Path) -> None:
    directory = tmp_path / "backup" / "Default"
    directory.mkdir(parents=True)
    chosen = importers.resolve_profile(
        "chrome", str(directory), platform="linux", home=tmp_path, environ={}
    )
    assert (chosen.directory, chosen.key) == (directory, "chrome:Default")
    with pytest.raises(
        ProfileNotFound, match=r"no edge profile found \(looked in .*microsoft-edge"
    ):
        importers.resolve_profile("edge", platform="linux", home=tmp_path, environ={})
    chromium_user_data(tmp_path / ".config" / "chromium", {"Default": "Me"})
    with pytest.raises(ProfileNotFound, match="no chromium profile 'Work'"):
        importers.resolve_profile("chromium", "Work", platform="linux", home=tmp_path, environ={})
    with pytest.raises(InvalidInput, match="browser"):
        importers.find_profiles("netscape")


def test_a_damaged_local_state_still_finds_profile_directories(tmp_path: Path) -> None:
    root = tmp_path / ".config" / "google-chrome"
    chromium_user_data(root, {"Default": "Me", "Profile 3": "Three"})
    (root / "Local State").write_text("{broken", encoding="utf-8")
    found = importers.find_profiles("chrome", platform="linux", home=tmp_path, environ={})
    assert sorted((p.name, p.default) for p in found) == [("Default", True), ("Profile 3", False)]
    json.loads(json.dumps([p.key for p in found]))
