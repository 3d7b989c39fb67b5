"""End to end in a real browser (issue 6): Debian's headless Chromium runs the real
extension (``--load-extension``), which talks to the real host that ``backtrail install``
registered in the browser's user-data-dir; pages come from a local HTTP server and the
memory is read back through ``backtrail mcp`` with the official MCP client.

The module shares one browser, one data directory and one MCP server; every test uses
its own pages and words, so its assertions see only what it did. Waits are bounded polls
(``wait_for``), never sleeps. Run only these: ``pytest -m browser``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e_browser_support import Browser, ChromiumMissing, find_chromium, process_alive
from e2e_cdp_support import ServiceWorker
from e2e_pages_support import PageServer
from e2e_readback_support import McpSession, ledger_rows, store_mentions
from e2e_support import EXTENSION_ORIGIN, CdpError, Profile, wait_for

pytestmark = pytest.mark.browser

DWELL_MS = 300
"""Minimum visible time before a page is captured, set through the extension's own
settings (the default, 5 s, would only slow the suite down)."""


@dataclass
class Rig:
    profile: Profile
    browser: Browser
    worker: ServiceWorker
    pages: PageServer
    mcp: McpSession
    killed_hosts: set[int] = field(default_factory=set)

    def urls_in_timeline(self) -> set[str]:
        entries = self.mcp.data("get_timeline", limit=200)["entries"]
        return {entry["url"] for entry in entries}


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return find_chromium()
    except ChromiumMissing as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="module")
def rig(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    profile = Profile.create(tmp_path_factory.mktemp("e2e"))
    with PageServer() as pages:
        browser = Browser.launch(profile)
        try:
            worker = browser.worker()
            worker.wait_connected()
            worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})
            with McpSession(profile) as mcp:
                # A server's first search opens the index (about a second): the assistants'
                # servers are long-lived, so the 5 s budget is measured on a warm one.
                assert mcp.search("warm up") == []
                rig = Rig(profile, browser, worker, pages, mcp)
                yield rig
            hosts = browser.host_pids()
            assert worker.problems() == []  # no warning or uncaught error in the worker
        finally:
            status = browser.close()
    # Teardown checks: the browser closed the port, every host read EOF and ended well.
    assert status == 0
    for pid in hosts:
        wait_for(lambda pid=pid: not process_alive(pid), 15, f"host {pid} to exit")
    sessions = profile.host_sessions()
    for pid, session in sessions.items():
        if pid not in rig.killed_hosts:
            assert session.status == 0 and not session.errors, (session, profile.host_log())


def _found(url: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A search-result predicate: the results for ``url`` (facts and notes may have none)."""
    return lambda results: [r for r in results if r.get("url") == url]


def _refusals(worker: ServiceWorker) -> tuple[int, int]:
    """How many queued messages the host rejected or refused (its own exclusion check
    is a second line of defence; these tests are about the extension's)."""
    stats = worker.state()["stats"]
    return stats["rejected"], stats["refused"]


def _assert_no_trace(rig: Rig, needles: Iterable[str]) -> None:
    """No ledger row (pages, versions, raw captures, visits, tabs, events...) mentions
    any of ``needles``."""
    for needle in needles:
        assert store_mentions(rig.profile.data_dir, needle) == {}, needle


# ----------------------------------------------------------------------- visits


ORRERY = (
    "An orrery is a mechanical model of the solar system. Brass gear trains turn each "
    "planet around the sun at its own period, and the gearing ratios of a good orrery "
    "follow the planets' orbital periods closely."
)


def test_a_read_page_is_searchable_through_mcp_within_5_seconds(rig: Rig) -> None:
    url = rig.pages.article("/reading/orrery", "Building a brass orrery", [ORRERY])
    started = time.monotonic()
    tab = rig.browser.open_tab(url)

    results = rig.mcp.wait_search("orrery gearing ratios", _found(url), timeout=5)
    elapsed = time.monotonic() - started

    (hit,) = _found(url)(results)
    assert hit["kind"] == "page"
    shown = rig.mcp.text("search_browsing", query="orrery gearing ratios")
    assert "title: Building a brass orrery" in shown and "orrery" in shown.lower()
    assert elapsed < 5
    page = rig.mcp.data("get_page", url=url)
    assert "Brass gear trains turn each planet" in rig.mcp.text("get_page", url=url)
    assert page["visit_count"] >= 1
    tab.close()


def test_an_spa_navigation_is_recorded_as_a_visit_of_its_own(rig: Rig) -> None:
    home = rig.pages.url("/spa/harbour")
    route = rig.pages.url("/spa/harbour/lighthouses")
    router = (
        "document.querySelector('#go').addEventListener('click', () => {"
        " history.pushState({}, '', '/spa/harbour/lighthouses');"
        " document.title = 'Lighthouse lenses';"
        " document.querySelector('article').innerHTML = '<h1>Lighthouse lenses</h1>"
        "<p>A Fresnel lens folds a thick lens into concentric prism rings, so a lighthouse "
        "beam carries far across the harbour at night.</p>'; });"
    )
    rig.pages.add(
        "/spa/harbour",
        "<!doctype html><html lang='en'><head><title>Harbour guide</title></head><body>"
        "<main><article><h1>Harbour guide</h1><p>Moorings, tides and the pilot boats of "
        "the old harbour.</p></article><button id='go'>Lighthouses</button></main>"
        f"<script>{router}</script></body></html>",
    )
    tab = rig.browser.open_tab(home)
    tab.click("#go")
    assert tab.url() == route  # same document: no navigation, only pushState

    # The route's own content is captured under the route's URL.
    rig.mcp.wait_search("fresnel prism rings", _found(route), timeout=5)
    assert "title: Lighthouse lenses" in rig.mcp.text("search_browsing",
                                                       query="fresnel prism rings")
    tab.close()  # ends the route's visit
    rig.worker.flush()

    assert {home, route} <= rig.urls_in_timeline()
    (visit,) = ledger_rows(
        rig.profile.data_dir,
        "SELECT v.transition, v.referrer, v.source FROM visits v JOIN pages p ON p.id = "
        "v.page_id WHERE p.url = ?",
        [route],
    )
    assert visit == {"transition": "history_state", "referrer": home, "source": "extension"}


# --------------------------------------------------- highlights, notes, bookmarks


BEES = [
    "Honeybees tell each other where flowers are with a waggle dance.",
    "The angle of the waggle run against the vertical gives the direction of the food "
    "relative to the sun.",
]


def test_a_context_menu_highlight_reaches_get_saved(rig: Rig) -> None:
    url = rig.pages.article("/notes/bees", "How bees dance", BEES)
    tab = rig.browser.open_tab(url)
    tab.select_text("#p1", "angle of the waggle run")

    # What the "Save selection to Backtrail" menu item runs, with info.selectionText.
    saved = rig.worker.hook("saveSelection", rig.worker.tab_id(url), "angle of the waggle run")
    assert saved["dedupe_key"].startswith("highlight:")

    highlights = wait_for(
        lambda: rig.mcp.data("get_saved", kind="highlight", url=url)["items"], 5, "the highlight"
    )
    assert [h["url"] for h in highlights] == [url]
    shown = rig.mcp.text("get_saved", kind="highlight", url=url)
    assert "angle of the waggle run" in shown and "<user_note" not in shown  # no note on it
    (row,) = ledger_rows(rig.profile.data_dir, "SELECT context FROM highlights WHERE url = ?",
                         [url])  # fmt: skip
    assert row["context"] == BEES[1]  # the selection's block, read from the page
    found = rig.mcp.wait_search("waggle run", timeout=5, kinds=["highlight"])
    assert [(r["kind"], r["url"]) for r in found] == [("highlight", url)]
    tab.close()


def test_a_note_written_in_the_popup_is_kept_with_the_page_in_front(rig: Rig) -> None:
    url = rig.pages.article(
        "/notes/tides", "Tidal bores", ["A tidal bore is a wave that runs up a river."]
    )
    tab = rig.browser.open_tab(url)
    tab.bring_to_front()
    window_id = rig.worker.call("(u) => chrome.tabs.query({url: u}).then(t => t[0].windowId)", url)
    popup = rig.browser.open_popup(window_id)
    note = "Ask the harbour master when the Severn bore runs this spring."
    popup.fill("#note", note)
    popup.click("#save-note")
    wait_for(lambda: popup.text("#note-msg") == "Saved.", 5, "the popup to confirm the note")
    assert popup.call("(s) => document.querySelector(s).value", "#note") == ""

    results = rig.mcp.wait_search("severn bore harbour master", timeout=5, kinds=["note"])
    assert [(r["kind"], r["url"]) for r in results] == [("note", url)]
    shown = rig.mcp.text("search_browsing", query="severn bore harbour master", kinds=["note"])
    assert "Severn bore" in shown.replace("**", "") and "<user_note" in shown
    tab.close()


def test_a_bookmark_made_in_the_browser_reaches_get_saved(rig: Rig) -> None:
    url = rig.pages.url("/reading/kites")
    folder = rig.worker.evaluate("chrome.bookmarks.create({parentId: '1', title: 'Windy reading'})")
    made = rig.worker.call(
        "(p, u) => chrome.bookmarks.create({parentId: p, title: 'Kite aerodynamics', url: u})",
        folder["id"], url,
    )  # fmt: skip

    def bookmarked() -> list[dict]:
        found = rig.mcp.data("get_saved", kind="bookmark", query="kite")["items"]
        return [b for b in found if b["url"] == url]

    (bookmark,) = wait_for(bookmarked, 5, "the bookmark in get_saved")
    assert "Kite aerodynamics" in rig.mcp.text("get_saved", kind="bookmark", query="kite")
    assert bookmark["folder"] == "Bookmarks bar/Windy reading"
    assert bookmark["browser_id"] == made["id"]


# ------------------------------------------------------------------- host crash


ALBATROSS = "Wandering albatrosses glide for hours on the Southern Ocean winds."


def test_captures_queued_while_the_host_was_killed_arrive_after_reconnect(rig: Rig) -> None:
    worker = rig.worker
    worker.wait_connected()
    old_host = rig.browser.wait_host()
    # A page that waits for an explicit capture (no dwell capture while the host lives).
    worker.hook("setSettings", {"capture": {"min_dwell_ms": 600_000}})
    try:
        url = rig.pages.article("/reading/albatross", "Albatross flight", [ALBATROSS])
        tab = rig.browser.open_tab(url)
        tab_id = worker.tab_id(url)
        worker.flush()

        # The host hangs, a burst of notes is sent (the first one is in flight, unread),
        # then the host is killed: the in-flight note must be sent again, not dropped.
        os.kill(old_host, signal.SIGSTOP)
        rig.killed_hosts.add(old_host)
        burst = [f"Albatross burst note {i}: dynamic soaring over the swell." for i in range(12)]
        worker.call("(ns) => Promise.all(ns.map(n => __backtrail.saveNote(n)))", burst)
        wait_for(lambda: worker.state()["queue"]["length"] == len(burst), 5, "the burst queued")
        os.kill(old_host, signal.SIGKILL)
        wait_for(lambda: worker.state()["status"] != "connected", 5, "the disconnect")
        assert worker.state()["queue"]["length"] == len(burst)

        # While no host runs: a capture, a highlight and more notes are queued.
        later = [f"Albatross queued note {i}: they sleep on the wing." for i in range(3)]
        queued = worker.call(
            "async (tab, text, notes) => {"
            " await __backtrail.captureTab(tab);"
            " await __backtrail.saveSelection(tab, text);"
            " for (const n of notes) await __backtrail.saveNote(n);"
            " return __backtrail.state(); }",
            tab_id, "glide for hours", later,
        )  # fmt: skip
        # Read in the same turn of the worker: they wait in the queue, undelivered.
        assert queued["status"] != "connected"
        assert queued["queue"]["length"] >= 2 + len(later)

        # The extension reconnects by itself (backoff) and delivers everything once.
        worker.wait_connected(timeout=15)
        new_host = rig.browser.wait_host()
        assert new_host != old_host and not process_alive(old_host)
        worker.flush()
    finally:
        if process_alive(old_host):  # never leave a stopped host behind
            os.kill(old_host, signal.SIGKILL)
        worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})

    # Each note exactly once in the ledger (resends carry the same dedupe key) and in search.
    notes = ledger_rows(
        rig.profile.data_dir,
        "SELECT id, content FROM notes WHERE content LIKE 'Albatross % note %'",
    )
    assert sorted(n["content"] for n in notes) == sorted(burst + later)
    results = rig.mcp.wait_search(
        "albatross note", lambda r: len(r) == len(burst + later), kinds=["note"], limit=25
    )
    assert sorted(r["id"] for r in results) == sorted(n["id"] for n in notes)
    assert _found(url)(rig.mcp.wait_search("southern ocean winds", _found(url)))
    highlights = rig.mcp.data("get_saved", kind="highlight", url=url)["items"]
    assert len(highlights) == 1
    assert "glide for hours" in rig.mcp.text("get_saved", kind="highlight", url=url)
    assert rig.profile.host_sessions()[old_host].status is None  # it never saw EOF
    tab.close()


# ------------------------------------------------------- what is never stored


def test_pages_on_an_excluded_domain_leave_no_trace(rig: Rig) -> None:
    worker = rig.worker
    before = _refusals(worker)
    worker.hook("setSettings", {"exclusions": {"rules": ["localhost"]}})
    try:
        diary = rig.pages.article(
            "/private/zeppelin-diary", "Zeppelin pilot diary",
            ["The zeppelin crossed the fjord at dawn; the mooring mast froze."],
            host="localhost",
        )  # fmt: skip
        # Excluded by the built-in list: sign-in paths on any site.
        signin = rig.pages.article(
            "/account/signin", "Sign in to Quillwort", ["Quillwort members sign in here."]
        )
        excluded = [rig.browser.open_tab(diary), rig.browser.open_tab(signin)]
        for url in (diary, signin):
            with pytest.raises(CdpError, match="excluded"):
                worker.hook("captureTab", worker.tab_id(url))
        with pytest.raises(CdpError, match="excluded"):
            worker.hook("saveSelection", worker.tab_id(diary), "the fjord at dawn")

        # A control page opened after them is captured: they were shown long enough.
        control = rig.pages.article(
            "/public/control-exclusion", "Basalt columns", ["Basalt cools into hexagonal columns."]
        )
        control_tab = rig.browser.open_tab(control)
        rig.mcp.wait_search("basalt hexagonal columns", _found(control), timeout=5)
        assert all(t.evaluate("document.visibilityState") == "visible" for t in excluded)
        assert rig.pages.served("/private/zeppelin-diary") == [f"localhost:{rig.pages.port}"]
        secrets = ("zeppelin", "Zeppelin", "/private/", "Quillwort", "/account/signin")
        worker.flush()
        _assert_no_trace(rig, secrets)  # open tabs included
        assert _refusals(worker) == before  # the extension sent nothing the host had to refuse
        for tab in [*excluded, control_tab]:
            tab.close()
        worker.flush()
    finally:
        worker.hook("setSettings", {"exclusions": {"rules": []}})

    _assert_no_trace(rig, secrets)  # visits end when tabs close
    assert rig.mcp.search("zeppelin fjord") == []
    assert rig.mcp.search("quillwort") == []


def test_incognito_windows_leave_no_trace(rig: Rig) -> None:
    worker = rig.worker
    before = _refusals(worker)
    by_context = rig.pages.article(
        "/incognito/marzipan", "Marzipan secrets", ["Marzipan is almond paste and sugar."]
    )
    by_window = rig.pages.article(
        "/incognito/quince", "Quince paste", ["Membrillo is a paste of quince."]
    )
    # An off-the-record DevTools context, and a real incognito window opened by the
    # extension API (the extension is "incognito": "not_allowed", it never sees either).
    context = rig.browser.incognito_context()
    tabs = [rig.browser.open_tab(by_context, context_id=context)]
    worker.call("(u) => chrome.windows.create({incognito: true, url: u})", by_window)
    tabs.append(rig.browser.tab_for(by_window))
    tabs[-1].wait_loaded(by_window)
    seen = {t["url"] for t in worker.tabs()}
    assert by_context not in seen and by_window not in seen

    control = rig.pages.article(
        "/public/control-incognito", "Tide pools", ["Anemones close in tide pools at low tide."]
    )
    control_tab = rig.browser.open_tab(control)
    rig.mcp.wait_search("anemones tide pools", _found(control), timeout=5)
    assert all(t.evaluate("document.visibilityState") == "visible" for t in tabs)
    secrets = ("/incognito/", "Marzipan", "marzipan", "Quince", "quince", "Membrillo")
    worker.flush()
    _assert_no_trace(rig, secrets)
    assert _refusals(worker) == before
    for tab in [*tabs, control_tab]:
        tab.close()
    rig.browser.close_context(context)
    worker.flush()

    _assert_no_trace(rig, secrets)
    assert rig.mcp.search("marzipan almond") == []
    assert rig.mcp.search("membrillo quince") == []


# ------------------------------------------------------------------------ popup


def test_popup_search_finds_a_page_that_was_read(rig: Rig) -> None:
    url = rig.pages.article(
        "/reading/sundials", "Sundials", ["The gnomon of a sundial points at the celestial pole."]
    )
    tab = rig.browser.open_tab(url)
    rig.mcp.wait_search("gnomon celestial pole", _found(url), timeout=5)

    popup = rig.browser.open_popup()
    wait_for(lambda: "Connected" in (popup.text("#status") or ""), 5, "the popup's status")
    popup.fill("#query", "gnomon celestial")
    popup.click("#search-form button[type=submit]")
    links = "(s) => [...document.querySelectorAll(s)].map(a => a.href)"
    wait_for(lambda: popup.call(links, "#results li a.hit"), 5, "results in the popup")
    assert popup.call(links, "#results li a.hit")[0] == url
    assert popup.texts("#results li a.hit .title")[0] == "Sundials"
    assert popup.texts("#results li a.hit .meta")[0].startswith("127.0.0.1 · ")
    assert popup.text("#search-msg") in ("1 result.", f"{len(popup.texts('#results li'))} results.")
    tab.close()


# ------------------------------------------------------------- install, close


def test_installed_host_serves_a_fresh_profile_and_exits_cleanly_on_browser_close(
    chromium: str, tmp_path: Path
) -> None:
    profile = Profile.create(tmp_path / "fresh")
    manifest = json.loads(profile.manifest.read_text(encoding="utf-8"))
    assert manifest["allowed_origins"] == [f"{EXTENSION_ORIGIN}/"]
    with PageServer() as pages:
        browser = Browser.launch(profile)
        try:
            worker = browser.worker()
            assert worker.wait_connected()["host"]["protocol"] == 1
            worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})
            url = pages.article("/reading/otters", "Sea otters", ["Sea otters hold hands."])
            tab = browser.open_tab(url)
            wait_for(lambda: worker.state()["stats"]["captured"] >= 1, 5, "the capture")
            tab.close()
            worker.flush()
            host = browser.wait_host()
        finally:
            status = browser.close()
    assert status == 0
    wait_for(lambda: not process_alive(host), 15, "the host to exit after the browser")
    session = profile.host_sessions()[host]
    assert session.status == 0, profile.host_log()
    assert session.errors == ()
    with McpSession(profile) as mcp:
        assert _found(url)(mcp.wait_search("sea otters hold hands", timeout=5))


# ------------------------------------------------------ titles, password fields

SECRETS = ("SECRETB3live", "SECRETT4live", "SECRETJ5live", "SECRETL6live")


def _extension_storage(worker: ServiceWorker) -> str:
    """Everything the extension keeps on disk (chrome.storage.local), as JSON."""
    return json.dumps(worker.evaluate("chrome.storage.local.get(null)"))


def test_a_title_that_is_the_raw_url_loses_its_secrets_before_it_is_stored_anywhere(
    rig: Rig,
) -> None:
    worker = rig.worker
    untitled = rig.pages.add(
        "/live/untitled.html", "<!doctype html><html><body><p>Quokkas of Rottnest "
        "island, noted without a title element.</p></body></html>",
    ) + "?token=SECRETB3live&q=ok"  # fmt: skip
    notes = rig.pages.add(
        "/live/notes.txt", "Wombat burrow notes, as plain text.", "text/plain; charset=utf-8"
    ) + "?access_token=SECRETT4live"
    session = rig.pages.add(
        "/live/session.html;jsessionid=SECRETJ5live",
        "<!doctype html><html><body><p>Numbat termite diet, in a session.</p></body></html>",
    )
    release = rig.pages.hold("/live/slow.html")
    slow = rig.pages.add(
        "/live/slow.html", "<!doctype html><html><body><p>Bilby burrows, slow to load.</p>"
        "</body></html>",
    ) + "?sig=SECRETL6live"  # fmt: skip
    tabs = [rig.browser.open_tab(url) for url in (untitled, notes, session)]
    loading = rig.browser.open_tab(slow, wait=False)
    try:
        # While the page loads, its tab's title is its raw URL, and the tab is sent.
        wait_for(lambda: any("/live/slow.html" in (t.get("title") or "") for t in worker.tabs()),
                 10, "the loading tab's title to be its URL")  # fmt: skip
        query = "SELECT url, title FROM tabs WHERE url LIKE '%/live/slow%'"
        rows = wait_for(lambda: ledger_rows(rig.profile.data_dir, query), 10,
                        "the loading tab to reach the host")  # fmt: skip
        assert rows[0]["title"] and "/live/slow.html" in rows[0]["title"]
        assert not any(s in json.dumps(rows) + _extension_storage(worker) for s in SECRETS)
    finally:
        release.set()
    loading.wait_loaded()
    tabs.append(loading)
    base = f"http://127.0.0.1:{rig.pages.port}/live/"
    for query, url in (("quokkas rottnest", "untitled.html?q=ok"), ("wombat burrow", "notes.txt"),
                       ("numbat termite", "session.html"), ("bilby burrows", "slow.html")):
        found = rig.mcp.wait_search(query, _found(base + url), timeout=10)
        assert not any(s in json.dumps(found) for s in SECRETS)
    titles = [r["title"] for r in ledger_rows(rig.profile.data_dir, "SELECT title FROM pages")]
    assert f"127.0.0.1:{rig.pages.port}/live/untitled.html?q=ok" in titles
    for tab in tabs:
        tab.close()
    worker.flush()
    for secret in SECRETS:
        assert store_mentions(rig.profile.data_dir, secret) == {}, secret
        assert secret not in _extension_storage(worker)
        assert rig.mcp.search(secret) == []


def test_a_page_with_a_password_field_is_not_captured_and_is_counted_as_skipped(
    rig: Rig,
) -> None:
    worker = rig.worker
    before = worker.state()["stats"].get("skipped", {}).get("password field", 0)
    portal = rig.pages.add(
        "/portal/home", "<!doctype html><html><head><title>Gannet staff portal</title></head>"
        "<body><h1>Gannet staff portal</h1><p>Gannets dive from thirty metres.</p><form>"
        "<input name=user><input type=PASSWORD name=pw></form></body></html>",
    )  # fmt: skip
    control = rig.pages.article(
        "/portal/open", "Petrel flight", ["Petrels glide low over the swell for hours."]
    )
    tab = rig.browser.open_tab(portal)
    control_tab = rig.browser.open_tab(control)
    rig.mcp.wait_search("petrels glide swell", _found(control), timeout=10)
    wait_for(lambda: worker.state()["stats"]["skipped"].get("password field", 0) == before + 1,
             10, "the password page to be counted as skipped")  # fmt: skip
    with pytest.raises(CdpError, match="password field"):
        worker.hook("captureTab", worker.tab_id(portal))
    popup = rig.browser.open_popup()
    try:
        wait_for(lambda: "password field" in (popup.text("#stats") or ""), 10, "the popup")
    finally:
        popup.close()
    tab.close()
    control_tab.close()
    worker.flush()
    assert rig.mcp.search("gannets dive thirty metres") == []
    for needle in ("Gannet", "/portal/home"):  # no page, version, visit or capture of it
        assert {k: v for k, v in store_mentions(rig.profile.data_dir, needle).items()
                if not k.startswith("tabs.")} == {}, needle  # fmt: skip
