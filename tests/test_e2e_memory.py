"""The full-page memory (issue 39 items 1, 2 and 8) in real headless Chromium: the real
extension, the real host ``backtrail install`` registered, and a real store seeded with
a week of reading (e2e_memory_support). Each view renders real data; a search is made
and a result opened with the keyboard alone; filters narrow results; a page is forgotten
after a preview of what goes; the omnibox and the shortcut open the page (their
listeners called through the service worker's test hook: DevTools cannot type into the
omnibox or press a browser shortcut); axe-core finds no serious or critical problem;
and the README's screenshot is taken at 1280×900.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from e2e_browser_support import Browser, ChromiumMissing, axe_script, axe_violations, find_chromium
from e2e_cdp_support import ServiceWorker, Tab
from e2e_memory_support import Seeded, seed
from e2e_pages_support import PageServer
from e2e_support import EXTENSION_DIR, EXTENSION_ORIGIN, Profile, wait_for

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
MEMORY = f"{EXTENSION_ORIGIN}/src/ui/memory.html"
KEYS = {"Enter": 13, "Tab": 9, "ArrowDown": 40, "ArrowUp": 38}


@dataclass
class Rig:
    browser: Browser
    worker: ServiceWorker
    tab: Tab
    seeded: Seeded


@pytest.fixture(scope="module")
def axe_source() -> str:
    return axe_script()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    try:
        find_chromium()
    except ChromiumMissing as error:
        pytest.fail(str(error), pytrace=False)
    profile = Profile.create(tmp_path_factory.mktemp("e2e-memory"))
    with PageServer() as pages:
        local = pages.article(
            "/talks/checkpoints",
            "Checkpoints in practice",
            ["A checkpoint copies pages from the log back into the database."],
        )
        seeded = seed(profile, local)
        browser = Browser.launch(profile)
        try:
            worker = browser.worker()
            worker.wait_connected()
            for url, title in ((seeded.wal_url, "SQLite WAL"),
                               ("https://www.theperfectloaf.example/sourdough-starter",
                                "Sourdough starter")):  # fmt: skip
                worker.call("(b) => chrome.bookmarks.create(b)", {"title": title, "url": url})
            wait_for(lambda: worker.state()["queue"]["length"] == 0 or None, 15, "bookmarks")
            worker.flush()
            tab = browser.extension_page("src/ui/memory.html#/search")
            tab.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
            yield Rig(browser, worker, tab, seeded)
            assert worker.problems() == []
        finally:
            browser.close()


# ------------------------------------------------------------------ helpers


def go(tab: Tab, hash_: str) -> None:
    """Show a view of the memory page (as following one of its links does)."""
    tab.call("(h) => { location.hash = h; }", hash_)


def live(tab: Tab) -> str:
    return tab.text("#live") or ""


def wait_live(tab: Tab, *words: str, timeout: float = 15.0) -> str:
    return wait_for(lambda: (said := live(tab)) and all(w in said for w in words) and said,
                    timeout, f"the live region to say {words}")  # fmt: skip


def press(tab: Tab, key: str) -> None:
    """A real key press, as the person's keyboard sends it."""
    base: dict[str, Any] = {"key": key, "code": key, "windowsVirtualKeyCode": KEYS[key]}
    if key == "Enter":
        base["text"] = "\r"
    tab.send("Input.dispatchKeyEvent", {"type": "keyDown", **base})
    tab.send("Input.dispatchKeyEvent", {"type": "keyUp", **base})


def focused(tab: Tab) -> dict[str, Any]:
    return tab.evaluate("({id: document.activeElement.id, cls: document.activeElement.className,"
                        " href: document.activeElement.href ?? null,"
                        " text: document.activeElement.textContent})")  # fmt: skip


def items(tab: Tab, selector: str = "#results .item") -> list[dict[str, Any]]:
    return tab.call(
        "(s) => [...document.querySelectorAll(s)].map(li => ({"
        " title: li.querySelector('.result')?.textContent, href: li.querySelector('a.result')?.href"
        " ?? null, meta: li.querySelector('.meta')?.textContent ?? '',"
        " snippet: li.querySelector('.snippet')?.textContent ?? ''}))",
        selector,
    )  # fmt: skip


def set_filters(tab: Tab, *, site: str = "", kinds: tuple[str, ...] | None = None) -> None:
    tab.call(
        "(site, kinds) => { const f = document.querySelector('#filters'); f.site.value = site;"
        " for (const box of f.querySelectorAll('input[name=kind]'))"
        "   box.checked = kinds === null || kinds.includes(box.value);"
        " f.requestSubmit(); }",
        site, list(kinds) if kinds is not None else None,
    )  # fmt: skip


def screenshot(tab: Tab, name: str) -> Path:
    shot = tab.send("Page.captureScreenshot", {"format": "png"})
    path = ROOT / "docs" / "images" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


# -------------------------------------------------------------------- views


def test_recent_pages_show_before_a_search_with_site_time_and_visits(rig: Rig) -> None:
    go(rig.tab, "#/search")
    wait_live(rig.tab, "7 recent pages")
    shown = items(rig.tab)
    assert len(shown) == 7
    assert "contextlib" in shown[0]["title"]  # read 40 minutes ago: the newest
    assert shown[0]["href"] == "https://docs.python.org/3/library/contextlib.html"
    assert "docs.python.org" in shown[0]["meta"] and "2 visits" in shown[0]["meta"]
    assert "minutes ago" in shown[0]["meta"]
    wal = next(s for s in shown if s["href"] == rig.seeded.wal_url)
    assert "sqlite.org" in wal["meta"] and "3 visits" in wal["meta"]
    assert "score" not in " ".join(s["meta"] for s in shown).lower()


def test_filters_narrow_by_site_and_by_kind(rig: Rig) -> None:
    tab = rig.tab
    go(tab, "#/search")
    set_filters(tab, site="docs.python.org")
    wait_live(tab, "3 recent pages")
    assert all("docs.python.org" in s["meta"] for s in items(tab))
    set_filters(tab, site="", kinds=("highlight",))
    go(tab, "#/search?q=" + quote("writers readers checkpoints"))
    wait_live(tab, "result")
    shown = items(tab)
    assert shown and all(s["meta"].startswith("highlight") for s in shown), shown
    set_filters(tab, kinds=("page",))
    wait_live(tab, "result")
    assert all(not s["meta"].startswith(("highlight", "note")) for s in items(tab))
    set_filters(tab)


def test_the_timeline_groups_sessions_by_day_under_a_chart_of_reading(rig: Rig) -> None:
    tab = rig.tab
    go(tab, "#/timeline")
    wait_live(tab, "reading sessions")
    days = tab.texts("#days h2.day")
    assert days[0] in ("Today", "Yesterday") and len(days) == len(set(days)) >= 3, days
    bars = tab.evaluate("document.querySelectorAll('#chart svg rect.bar').length")
    local_days = {time.localtime(t)[:3] for t in rig.seeded.visit_times}
    assert bars == len(local_days)  # one bar per day with visits
    visits = len(rig.seeded.visit_times)
    assert f"{visits} visits in all" in (tab.text("#chart-caption") or "")
    label = tab.evaluate("document.querySelector('#chart svg').getAttribute('aria-label')")
    assert label.startswith("Pages visited per day")
    sessions = tab.texts("#days .session .session-head")
    assert any("sourdough" in s.lower() or "theperfectloaf" in s for s in sessions), sessions
    links = tab.evaluate("[...document.querySelectorAll('#days a.result')].map(a => a.href)")
    assert rig.seeded.wal_url in links


def test_highlights_notes_and_bookmarks_have_their_lists(rig: Rig) -> None:
    tab = rig.tab
    go(tab, "#/highlights")
    wait_live(tab, "3 highlights")
    quotes = tab.texts("#saved .quote")
    assert quotes[0] == "the code before yield runs on entry and the code after it on exit"
    assert "This is why WAL suits the app." in tab.texts("#saved .note-text")
    go(tab, "#/notes")
    wait_live(tab, "2 notes")
    assert tab.texts("#saved .note-text") == [
        "Switch the app's database to WAL and checkpoint when idle.",
        "Feed the starter before bed on Friday.",
    ]
    go(tab, "#/bookmarks")
    wait_live(tab, "2 bookmarks")  # made in the browser, sent by the extension
    hrefs = [s["href"] for s in items(tab, "#saved .item")]
    assert rig.seeded.wal_url in hrefs


def test_the_page_view_shows_stored_text_visits_and_highlights(rig: Rig) -> None:
    tab = rig.tab
    go(tab, f"#/page?id={rig.seeded.wal_page_id}")
    wait_live(tab, "3 visits")
    assert tab.text("#page-heading") and "Write-Ahead Logging" in tab.text("#page-heading")
    assert "readers never block writers" in (tab.text("#page .page-text") or "")
    assert tab.text("#block-visits") == "Visits (3)"
    assert tab.text("#block-highlights") == "Highlights (2)"
    go(tab, "#/page?url=" + quote("https://nowhere.example/", safe=""))
    wait_live(tab, "Nothing found")


def test_a_search_is_made_and_a_result_opened_with_the_keyboard_alone(rig: Rig) -> None:
    tab = rig.tab
    go(tab, "#/search")
    wait_live(tab, "recent pages")
    tab.evaluate("document.querySelector('#query').focus()")
    tab.send("Input.insertText", {"text": "checkpoint practice"})
    press(tab, "Enter")
    wait_live(tab, "result")
    assert "Results for" in (tab.text("#search-heading") or "")
    press(tab, "ArrowDown")
    assert focused(tab)["cls"] == "result"
    for _ in range(10):  # arrow down to the talk notes served by the test's own server
        if focused(tab)["href"] == rig.seeded.local_url:
            break
        press(tab, "ArrowDown")
    assert focused(tab)["href"] == rig.seeded.local_url
    press(tab, "ArrowUp")
    press(tab, "ArrowDown")
    press(tab, "Enter")
    tab.wait_loaded(rig.seeded.local_url)
    assert tab.text("h1") == "Checkpoints in practice"
    tab.navigate(f"{MEMORY}#/search")


def test_omnibox_suggests_as_you_type_and_enter_opens_the_memory_page(rig: Rig) -> None:
    suggestions = rig.worker.hook("omniboxInput", "write-ahead logging")
    wal = [s for s in suggestions if s["content"] == rig.seeded.wal_url]
    assert wal and "<url>https://sqlite.org/wal.html</url>" in wal[0]["description"]
    assert wal[0]["description"].startswith("Write-Ahead Logging")
    assert rig.worker.hook("omniboxInput", "w") == []  # too short to search
    rig.worker.hook("omniboxEnter", "sourdough starter", "newForegroundTab")
    opened = rig.browser.tab_for(f"{MEMORY}#/search?q=sourdough%20starter")
    wait_live(opened, "result")
    assert any("Sourdough" in (s["title"] or "") for s in items(opened))
    opened.close()
    rig.worker.hook("omniboxEnter", rig.seeded.wal_url, "newForegroundTab")
    page = rig.browser.tab_for(f"{MEMORY}#/page?url={quote(rig.seeded.wal_url, safe='')}")
    wait_live(page, "3 visits")
    page.close()


def test_the_shortcut_and_the_popup_open_the_memory_page(rig: Rig) -> None:
    manifest = (EXTENSION_DIR / "manifest.json").read_text(encoding="utf-8")
    assert '"Alt+Shift+M"' in manifest and '"keyword": "bt"' in manifest
    go(rig.tab, "#/notes")  # so the new tab is the only one at #/search
    rig.worker.hook("command", "open-memory")
    opened = rig.browser.tab_for(f"{MEMORY}#/search")
    wait_live(opened, "recent pages")
    opened.close()
    popup = rig.browser.open_popup()
    assert popup.text("#open-memory") == "Open full memory"
    popup.call("(q) => { document.querySelector('#query').value = q; }", "wal")
    popup.click("#open-memory")
    from_popup = rig.browser.tab_for(f"{MEMORY}#/search?q=wal")
    wait_live(from_popup, "result")
    from_popup.close()


@pytest.mark.parametrize("view", ["#/search?q=checkpoint", "#/timeline", "#/highlights", "page"])
def test_axe_finds_no_serious_or_critical_problem(rig: Rig, axe_source: str, view: str) -> None:
    tab = rig.tab
    go(tab, f"#/page?id={rig.seeded.wal_page_id}" if view == "page" else view)
    wait_live(tab, ".")
    found = axe_violations(tab, axe_source)
    assert found == [], found


def test_a_screenshot_of_the_memory_page_for_the_readme(rig: Rig) -> None:
    tab = rig.tab
    go(tab, "#/search?q=" + quote("write-ahead log checkpoint"))
    wait_live(tab, "result")
    tab.evaluate("document.activeElement.blur()")
    path = screenshot(tab, "memory.png")
    assert path.stat().st_size > 20_000
    go(tab, "#/timeline")
    wait_live(tab, "reading sessions")
    assert screenshot(tab, "memory-timeline.png").stat().st_size > 20_000


def test_forget_this_page_previews_what_goes_and_asks_first(rig: Rig) -> None:
    tab = rig.tab
    go(tab, f"#/page?id={rig.seeded.wal_page_id}")
    wait_live(tab, "3 visits")
    tab.click(".page-actions button.danger")
    wait_live(tab, "Forgetting would remove")
    said = tab.text("#forget-what") or ""
    assert ("1 page, 1 stored version of its text, 3 visits, 2 highlights, 1 note and "
            "1 bookmark record") in said, said  # fmt: skip
    assert focused(tab)["text"] == "Keep it"  # the safe choice has the focus
    press(tab, "Enter")  # keep it: nothing goes
    wait_live(tab, "Nothing was forgotten")
    tab.click(".page-actions button.danger")
    wait_live(tab, "Forgetting would remove")
    tab.click(".confirm button.danger")
    wait_live(tab, "Forgotten:")
    assert "3 visits" in (tab.text(".confirm .done") or "")
    go(tab, "#/search")
    wait_live(tab, "6 recent pages")
    assert rig.seeded.wal_url not in [s["href"] for s in items(tab)]
    go(tab, f"#/page?id={rig.seeded.wal_page_id}")
    wait_live(tab, "Nothing found")
