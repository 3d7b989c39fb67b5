"""The extension's own pages in a real browser (issue 39): the popup by keyboard alone,
its layout at 400 px, the no-host state, the options page's checks and its forget
confirmation, why a visited page was not captured, and axe-core on every page.

Debian's headless Chromium runs the real extension with the real host that
``backtrail install`` registered (as in test_e2e_browser.py, whose harness this reuses);
each test uses its own pages and words. axe-core comes from npm (a devDependency of
extension/package.json, installed here when missing). Run only these: ``pytest -m browser``.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e_browser_support import Browser, ChromiumMissing, axe_script, axe_violations, find_chromium
from e2e_cdp_support import ServiceWorker, Tab
from e2e_pages_support import PageServer
from e2e_readback_support import McpSession, ledger_rows
from e2e_support import EXTENSION_ORIGIN, ROOT, Profile, wait_for

pytestmark = pytest.mark.browser

DWELL_MS = 1000
"""Visible time before a capture in these tests (the default, 5 s, would be slow)."""

SCREENSHOT = ROOT / "docs" / "images" / "popup.png"
LINKS = "(s) => [...document.querySelectorAll(s)].map(a => a.href)"


@dataclass
class Rig:
    profile: Profile
    browser: Browser
    worker: ServiceWorker
    pages: PageServer
    mcp: McpSession

    def skipped(self) -> dict[str, int]:
        return dict(self.worker.state()["stats"]["skipped"])


def _launchable() -> None:
    try:
        find_chromium()
    except ChromiumMissing as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    _launchable()
    profile = Profile.create(tmp_path_factory.mktemp("e2e-ui"))
    with PageServer() as pages:
        browser = Browser.launch(profile)
        try:
            worker = browser.worker()
            worker.wait_connected()
            worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})
            with McpSession(profile) as mcp:
                yield Rig(profile, browser, worker, pages, mcp)
            assert worker.problems() == []
        finally:
            browser.close()


@pytest.fixture(scope="module")
def axe_source() -> str:
    return axe_script()


def _found(url: str):  # noqa: ANN202 - a search-result predicate
    return lambda results: [r for r in results if r.get("url") == url]


def _read(rig: Rig, path: str, title: str, words: str) -> tuple[str, Tab]:
    """Open a page and wait until it is searchable."""
    url = rig.pages.article(path, title, [words])
    tab = rig.browser.open_tab(url)
    rig.mcp.wait_search(" ".join(words.split()[:3]), _found(url), timeout=10)
    return url, tab


def _popup(rig: Rig) -> Tab:
    popup = rig.browser.open_popup()
    wait_for(lambda: popup.text("#status") == "Connected", 10, "the popup to connect")
    return popup


# ------------------------------------------------------------------------ popup


def test_a_result_is_found_and_opened_from_the_popup_by_keyboard_alone(rig: Rig) -> None:
    url, tab = _read(
        rig,
        "/keys/astrolabe",
        "The astrolabe — Instrument notes",
        "An astrolabe measures the altitude of stars above the horizon.",
    )
    popup = _popup(rig)
    # The search box takes the focus on opening, with no key pressed.
    wait_for(lambda: popup.focused()["id"] == "query", 5, "the search box to have the focus")
    # Before any search: the pages read most recently, as links, newest first.
    wait_for(lambda: popup.call(LINKS, "#results a.hit"), 10, "recent pages")
    assert popup.text("#results-heading") == "Recent pages"
    assert popup.call(LINKS, "#results a.hit")[0] == url
    assert popup.texts("#results a.hit .meta")[0].startswith("127.0.0.1 · just now · 1 visit")
    label = popup.call("() => document.querySelector('label[for=query]').textContent")
    assert label == "Search what you read"
    popup.evaluate(  # everything the live region says, in order
        "window.said = []; const live = document.querySelector('#search-msg');"
        "new MutationObserver(() => said.push(live.textContent))"
        ".observe(live, {childList: true, characterData: true, subtree: true})"
    )
    popup.type_text("zqxwvy")
    popup.press("Enter")
    wait_for(lambda: popup.text("#search-msg") == "Nothing found.", 10, "the miss announced")
    assert popup.evaluate("said") == ["Searching…", "Nothing found."]
    assert popup.texts("#results li") == []
    popup.fill("#query", "")
    popup.type_text("astrolabe altitude")
    popup.press("Enter")
    wait_for(lambda: popup.call(LINKS, "#results a.hit"), 10, "results in the popup")
    assert popup.call(LINKS, "#results a.hit")[0] == url
    # The live region (role=status) says how many were found.
    assert re.fullmatch(r"\d+ results?\.", popup.text("#search-msg") or "")
    assert popup.call("() => document.querySelector('#search-msg').getAttribute('aria-live')")
    # Tab goes from the box to the Search button, then to the first result (a real link);
    # the arrow keys move between results and back to the box.
    popup.press("Tab")
    assert popup.focused()["id"] == "search-button"
    popup.press("Tab")
    assert popup.focused()["href"] == url
    popup.press("ArrowUp")
    assert popup.focused()["id"] == "query"
    popup.press("ArrowDown")
    assert popup.focused()["href"] == url
    popup.press("Enter")  # opens the result in a new tab
    wait_for(
        lambda: len([t for t in rig.worker.tabs() if t.get("url") == url]) == 2,
        10,
        "the result to open in a new tab",
    )
    for opened in [t for t in rig.browser.targets("page") if t["url"] == url]:
        rig.browser.attach(opened["targetId"], Tab).close()
    del tab


def test_the_popup_fits_its_width_keeps_search_in_view_and_tucks_counters_away(rig: Rig) -> None:
    tabs = []
    for n, (title, words) in enumerate(
        [
            (
                "Sextant sights — Navigation notes",
                "A sextant measures the angle between a star and the horizon.",
            ),
            (
                "Marine chronometers",
                "A marine chronometer keeps the time of the home port for longitude.",
            ),
            (
                "Dead reckoning",
                "Dead reckoning estimates position from speed, heading and elapsed time.",
            ),
            (
                "Lead lines and soundings",
                "A lead line measures depth; tallow in its base samples the sea floor.",
            ),
            (
                "Star charts for navigators",
                "Navigators use star charts to pick bright stars near the horizon.",
            ),
            (
                "Longitude by lunar distance",
                "Lunar distances give longitude from the moon's angle to a star.",
            ),
        ]
    ):
        tabs.append(_read(rig, f"/sea/{n}", title, words)[1])
    tabs[-1].bring_to_front()
    popup = _popup(rig)
    popup.type_text("star horizon longitude")
    popup.press("Enter")
    wait_for(lambda: len(popup.texts("#results li")) >= 4, 10, "several results")
    layout = popup.evaluate(
        "({scroll: document.documentElement.scrollWidth,"
        " client: document.documentElement.clientWidth,"
        " body: document.body.getBoundingClientRect().width,"
        " paused: document.querySelector('#paused').closest('label').getBoundingClientRect().right,"
        " button: document.querySelector('#search-button').getBoundingClientRect().right})"
    )
    assert layout["scroll"] <= layout["client"] and layout["body"] <= 400, layout
    assert layout["paused"] <= 400 and layout["button"] <= 400, layout  # nothing clipped
    # The counters are behind a closed "Details" row; the embedding lag is among them.
    assert popup.evaluate("document.querySelector('#details').open") is False
    wait_for(lambda: "not yet embedded" in (popup.text("#stats") or ""), 10, "the index lag")
    assert popup.text("#details-summary").startswith("Details: ")
    # Titles lose nothing but are shown with site, time and visits, not a raw score.
    metas = popup.texts("#results li .meta")
    shape = r"127\.0\.0\.1 · (just now|\d+ minutes? ago)( · \d+ visits?)?"
    assert metas and all(re.fullmatch(shape, m) for m in metas), metas
    _screenshot(rig, "star horizon longitude")
    popup.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    wait_for(lambda: popup.evaluate("window.scrollY") > 0, 5, "the popup to scroll")
    box = popup.evaluate("document.querySelector('#query').getBoundingClientRect().toJSON()")
    assert 0 <= box["top"] and box["bottom"] <= 600, box  # the search box stays in view
    for tab in tabs:
        tab.close()


def _screenshot(rig: Rig, query: str) -> None:
    """docs/images/popup.png: the popup's page at Chrome's largest popup size, 400x600
    (a headless popup window keeps the height of its first layout), with results."""
    page = rig.browser.extension_page("src/ui/popup.html")
    page.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 400, "height": 600, "deviceScaleFactor": 1, "mobile": False},
    )
    wait_for(lambda: page.text("#status") == "Connected", 10, "the page to connect")
    page.fill("#query", query)
    page.click("#search-button")
    wait_for(lambda: len(page.texts("#results li")) >= 4, 10, "results to show")
    page.evaluate("document.activeElement.blur()")
    layout = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert layout[0] <= layout[1], layout  # no sideways scroll with a scrollbar either
    shot = page.send("Page.captureScreenshot", {"format": "png"})
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.write_bytes(base64.b64decode(shot["data"]))
    page.close()


def test_without_a_host_the_popup_says_once_what_to_do_and_links_the_setup(
    tmp_path: Path,
) -> None:
    _launchable()
    profile = Profile.create(tmp_path / "no-host")
    profile.manifest.unlink()  # as if `backtrail install` was never run
    browser = Browser.launch(profile)
    try:
        worker = browser.worker()
        wait_for(lambda: worker.state()["status"] == "not_installed", 20, "not_installed")
        popup = browser.open_popup()
        wait_for(
            lambda: not popup.evaluate("document.querySelector('#setup').hidden"),
            10,
            "the setup message",
        )
        body = popup.evaluate("document.body.innerText")
        assert "`" not in body
        assert body.count("backtrail install") == 1, body  # said once
        assert popup.text("#status") == "Not set up"
        assert popup.evaluate("document.querySelector('#query').disabled") is True
        assert popup.evaluate("document.querySelector('#search-button').disabled") is True
        described = popup.evaluate(
            "document.querySelector('#query').getAttribute('aria-describedby')"
        )
        assert described == "setup-text"
        link = popup.call("() => document.querySelector('#setup-link').getAttribute('href')")
        assert link == "setup.html"
        popup.click("#setup-link")
        setup_url = f"{EXTENSION_ORIGIN}/src/ui/setup.html"
        setup = browser.tab_for(setup_url)
        setup.wait_loaded(setup_url)
        assert "backtrail install" in setup.evaluate("document.body.innerText")
    finally:
        browser.close()


# ---------------------------------------------------------------------- options


def _options(rig: Rig) -> Tab:
    options = rig.browser.extension_page("src/ui/options.html")
    wait_for(
        lambda: options.call("() => document.querySelector('#dwell').value") != "",
        10,
        "the options to load",
    )
    return options


def test_options_refuse_bad_values_with_a_message_next_to_the_field(rig: Rig) -> None:
    before = rig.worker.state()["settings"]
    options = _options(rig)
    labelled = options.evaluate(
        "[...document.querySelectorAll('input:not([type=hidden]), textarea')]"
        ".every(e => e.labels.length > 0)"
    )
    assert labelled  # every field has a label, the rules and forget boxes included
    options.fill("#dwell", "-3")
    options.fill("#max-size", "")
    options.click("#save")
    wait_for(lambda: options.text("#save-msg").startswith("Not saved"), 5, "the refusal")
    assert options.text("#dwell-error") == (
        "-3 is out of range: enter a number from 0 to 600 seconds."
    )
    assert options.text("#max-size-error") == "Enter a number from 10 to 15000 KB."
    assert options.focused()["id"] == "dwell"
    assert options.call("() => document.querySelector('#dwell').getAttribute('aria-invalid')")
    assert rig.worker.state()["settings"] == before  # nothing was saved, nothing clamped

    options.fill("#dwell", "2")
    options.fill("#max-size", "500")
    options.fill("#rules", "example.com\nhttp://[broken")
    options.click("#save")
    wait_for(lambda: options.text("#save-msg").startswith("Not saved"), 5, "the refusal")
    assert "http://[broken" in options.text("#rules-error")
    assert options.text("#dwell-error") == ""
    options.fill("#rules", "tarn.example")
    options.click("#save")
    wait_for(lambda: options.text("#save-msg") == "Saved.", 5, "the save")
    saved = rig.worker.state()["settings"]
    assert saved["capture"]["min_dwell_ms"] == 2000
    assert saved["capture"]["max_html_bytes"] == 500_000
    assert saved["exclusions"]["rules"] == ["tarn.example"]
    assert saved["actions"]["capture_tab"] is saved["actions"]["create_bookmark"] is False
    rig.worker.hook(
        "setSettings", {"capture": before["capture"], "exclusions": before["exclusions"]}
    )
    options.close()


def test_forgetting_a_site_asks_first_with_counts_in_plain_words(rig: Rig) -> None:
    urls = []
    for path, title, words in (
        ("/forget/heron", "Grey herons", "Grey herons stand still in the shallows to fish."),
        ("/forget/egret", "Little egrets", "Little egrets stir the mud with their yellow feet."),
    ):
        url = rig.pages.article(path, title, [words], host="localhost")
        tab = rig.browser.open_tab(url)
        rig.mcp.wait_search(words.split()[1] + " " + words.split()[2], _found(url), timeout=10)
        urls.append((url, tab))
    rig.worker.hook("saveSelection", rig.worker.tab_id(urls[0][0]), "stand still in the shallows")
    for _, tab in urls:
        tab.close()
    rig.worker.flush()
    pages = ledger_rows(
        rig.profile.data_dir, "SELECT COUNT(*) AS n FROM pages WHERE domain = 'localhost'"
    )
    visits = ledger_rows(
        rig.profile.data_dir,
        "SELECT COUNT(*) AS n FROM visits v JOIN pages p ON p.id = v.page_id"
        " WHERE p.domain = 'localhost'",
    )
    assert pages[0]["n"] == 2

    options = _options(rig)
    options.fill("#forget-site", "localhost")
    options.click("#forget")
    wait_for(
        lambda: options.evaluate("!document.querySelector('#confirm').hidden"),
        10,
        "the confirmation",
    )
    n = visits[0]["n"]
    assert options.text("#confirm-text") == (
        f"Forget localhost? This permanently removes 2 pages, {n} visit{'' if n == 1 else 's'}, "
        "1 highlight."
    )
    assert options.focused()["id"] == "confirm-yes"
    assert rig.mcp.search("herons shallows")  # the preview removed nothing
    options.click("#confirm-no")
    assert options.text("#forget-msg") == "Cancelled: nothing was forgotten."
    assert rig.mcp.search("herons shallows")

    options.click("#forget")
    wait_for(
        lambda: options.evaluate("!document.querySelector('#confirm').hidden"),
        10,
        "the confirmation",
    )
    options.click("#confirm-yes")
    wait_for(lambda: options.text("#forget-msg").startswith("Forgotten"), 10, "the forget")
    assert options.text("#forget-msg").startswith("Forgotten: 2 pages, ")
    assert rig.mcp.search("herons shallows") == [] and rig.mcp.search("egrets mud") == []
    options.close()


# ------------------------------------------------------------------ capture loss


def test_every_visited_page_is_captured_or_counted_with_the_reason(rig: Rig) -> None:
    worker = rig.worker
    before = rig.skipped()
    # A page whose load does not finish (an async script held by the server) is read.
    release_image = rig.pages.hold("/loss/slow.js")
    rig.pages.add("/loss/slow.js", f"/* {'x' * 4096} */", "text/javascript")
    rig.pages.add(
        "/loss/loading",
        "<!doctype html><html lang=en><head><title>Kelp forests</title>"
        "<script async src='/loss/slow.js'></script></head><body><p>Kelp forests grow"
        " half a metre a day in cold water.</p></body></html>",
    )
    loading = rig.browser.open_tab(rig.pages.url("/loss/loading"), wait=False)
    try:
        rig.mcp.wait_search(
            "kelp forests cold water", _found(rig.pages.url("/loss/loading")), timeout=10
        )
        assert loading.evaluate("document.readyState") == "interactive"  # still loading
    finally:
        release_image.set()
    loading.close()

    # Time in view while a stylesheet held the parser counts toward the dwell.
    worker.hook("setSettings", {"capture": {"min_dwell_ms": 600_000}})
    release_css = rig.pages.hold("/loss/slow.css")
    rig.pages.add("/loss/slow.css", "p { color: #222 }\n" * 200, "text/css")
    rig.pages.add(
        "/loss/styled",
        "<!doctype html><html lang=en><head><title>Tide mills</title>"
        "</head><body><p>Tide mills store the flood tide in a pond.</p>"
        "<link rel=stylesheet href='/loss/slow.css'><p>More.</p></body></html>",
    )
    styled_url = rig.pages.url("/loss/styled")
    styled = rig.browser.open_tab(styled_url, wait=False)
    time.sleep(2)  # the page is in front, visible, still parsing
    release_css.set()
    styled.wait_loaded()

    def visible_ms() -> int | None:
        visits = worker.evaluate("chrome.storage.local.get('visits')")["visits"]
        found = [v["visible_ms"] for v in visits.values() if v["url"] == styled_url]
        return found[0] if found and found[0] > 0 else None

    assert wait_for(visible_ms, 10, "the first dwell report") >= 1900
    worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})
    styled.close()

    # Too short a visit, and a page that stayed in a background tab past the dwell.
    worker.hook("setSettings", {"capture": {"min_dwell_ms": 3000}})
    short = rig.browser.open_tab(rig.pages.article("/loss/short", "Brief", ["Gone at once."]))
    short.close()
    behind_url = rig.pages.article("/loss/behind", "Behind", ["Hidden behind another tab."])
    front_url = rig.pages.article("/loss/front", "Front", ["The tab in front."])
    front = rig.browser.open_tab(front_url)
    window = worker.call("(u) => chrome.tabs.query({url: u}).then(t => t[0].windowId)", front_url)
    behind = worker.call(
        "(w, u) => chrome.tabs.create({windowId: w, url: u, active: false})", window, behind_url
    )
    behind_tab = rig.browser.tab_for(behind_url)
    behind_tab.wait_loaded(behind_url)
    assert behind_tab.evaluate("document.visibilityState") == "hidden"
    time.sleep(3.5)  # longer than the dwell, all of it out of view
    worker.call("(id) => chrome.tabs.remove(id)", behind["id"])
    front.close()
    worker.flush()
    worker.hook("setSettings", {"capture": {"min_dwell_ms": DWELL_MS}})

    after = rig.skipped()
    gained = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert gained.get("visit too short", 0) >= 1
    assert gained.get("not in view long enough", 0) >= 1
    popup = _popup(rig)
    details = popup.text("#stats")
    assert "visit too short" in details and "not in view long enough" in details
    popup.close()

    # The popup says what became of the page in front, here a sign-in form.
    portal_url = rig.pages.add(
        "/loss/portal",
        "<!doctype html><html lang=en><head><title>Staff portal</title></head><body>"
        "<p>Cormorants dry their wings on the breakwater.</p><form><input name=user>"
        "<input type=password name=pw></form></body></html>",
    )
    portal = rig.browser.open_tab(portal_url)
    portal.bring_to_front()
    wait_for(
        lambda: rig.skipped().get("password field", 0) > before.get("password field", 0),
        10,
        "the password page to be counted",
    )
    window = worker.call("(u) => chrome.tabs.query({url: u}).then(t => t[0].windowId)", portal_url)
    popup = rig.browser.open_popup(window)
    wait_for(lambda: popup.text("#page-status"), 10, "the page's status in the popup")
    assert popup.text("#page-status") == "This page is not saved: it has a password field."
    popup.close()
    portal.close()
    versions = ledger_rows(
        rig.profile.data_dir,
        "SELECT COUNT(*) AS n FROM page_versions v"
        " JOIN pages p ON p.id = v.page_id WHERE p.url = ?",
        [behind_url],
    )
    assert versions[0]["n"] == 0  # its visit is kept; no text of it was captured


# ------------------------------------------------------------------------- axe


def test_axe_core_finds_no_serious_or_critical_violation(rig: Rig, axe_source: str) -> None:
    _, tab = _read(rig, "/axe/lichen", "Lichens", "Lichens are a fungus and an alga living as one.")
    popup = _popup(rig)
    assert axe_violations(popup, axe_source) == []
    popup.type_text("lichens fungus alga")
    popup.press("Enter")
    wait_for(lambda: popup.call(LINKS, "#results a.hit"), 10, "results")
    popup.evaluate("document.querySelector('#details').open = true")
    assert axe_violations(popup, axe_source) == []
    options = _options(rig)
    assert axe_violations(options, axe_source) == []
    options.close()
    setup = rig.browser.extension_page("src/ui/setup.html")  # the full page: test_e2e_memory
    assert axe_violations(setup, axe_source) == []
    setup.close()
    tab.close()
