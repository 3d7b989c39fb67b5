"""Browser actions end to end (issue 9): an assistant's tool call through ``backtrail
mcp`` and the official MCP client becomes a ledger row, the real native host that
``backtrail install`` registered pushes it over the open native-messaging port, the
real extension in headless Chromium performs it (or refuses it, per its options
page), and the outcome comes back to the tool and into the audit log.

One browser, one data directory and one MCP server for the module; each test uses its
own pages. Waits are bounded polls. Run only these: ``pytest -m browser``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from e2e_browser_support import Browser, ChromiumMissing, find_chromium, process_alive
from e2e_cdp_support import ServiceWorker, Tab
from e2e_pages_support import PageServer
from e2e_readback_support import McpSession, ledger_rows
from e2e_support import Profile, wait_for

pytestmark = pytest.mark.browser

ACTION_ENV = {"BACKTRAIL_MCP_ACTION_WAIT": "20", "BACKTRAIL_MCP_ACTION_CLAIM_WAIT": "15"}


@dataclass
class Rig:
    profile: Profile
    browser: Browser
    worker: ServiceWorker
    pages: PageServer
    mcp: McpSession

    def open(self, path: str, title: str, words: str) -> tuple[str, int, Tab]:
        """A new tab (in the first window) on a fresh article: its URL, its tab id (once
        the memory knows the tab) and the page."""
        url = self.pages.article(path, title, [words])
        page = self.browser.open_tab(url, new_window=False)
        tab_id = self.worker.tab_id(url)
        wait_for(lambda: self.open_tabs().get(tab_id) == url, 15, f"tab {tab_id} at {url}")
        return url, tab_id, page

    def open_tabs(self) -> dict[int, str | None]:
        """The memory's open tabs: tab id → URL (as the extension reported them)."""
        tabs = self.mcp.data("get_open_tabs", limit=200)["tabs"]
        return {t["tab_id"]: t.get("url") for t in tabs}

    def trail(self, action_id: str) -> list[tuple[str, str]]:
        rows = ledger_rows(
            self.profile.data_dir,
            "SELECT action, client FROM events WHERE target_type = 'action' AND target = ? "
            "ORDER BY id", [action_id.removeprefix("a-")],
        )  # fmt: skip
        return [(row["action"], row["client"]) for row in rows]

    def status(self, action_id: str) -> str:
        (row,) = ledger_rows(self.profile.data_dir, "SELECT status FROM actions WHERE id = ?",
                             [int(action_id.removeprefix("a-"))])  # fmt: skip
        return row["status"]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    try:
        find_chromium()
    except ChromiumMissing as error:
        pytest.fail(str(error), pytrace=False)
    profile = Profile.create(tmp_path_factory.mktemp("e2e-actions"))
    with PageServer() as pages:
        browser = Browser.launch(profile)
        try:
            worker = browser.worker()
            worker.wait_connected()
            # No automatic capture during these tests: captures come from actions only.
            worker.hook("setSettings", {"capture": {"min_dwell_ms": 600_000}})
            allowed = worker.state()["settings"]["actions"]
            assert allowed["capture_tab"] is allowed["create_bookmark"] is False  # defaults
            # What the user turns on in the options page for these tools to work.
            worker.hook("setSettings", {"actions": {"capture_tab": True, "create_bookmark": True}})
            with McpSession(profile, MCP_CLIENT_ID="assistant", **ACTION_ENV) as mcp:
                yield Rig(profile, browser, worker, pages, mcp)
            hosts = browser.host_pids()
            assert worker.problems() == []
        finally:
            status = browser.close()
    assert status == 0
    for pid in hosts:
        wait_for(lambda pid=pid: not process_alive(pid), 15, f"host {pid} to exit")
    for session in profile.host_sessions().values():
        assert session.status == 0 and not session.errors, profile.host_log()


def tool_error(rig: Rig, tool: str, **arguments: Any) -> str:
    result = rig.mcp.call(tool, **arguments)
    assert result.is_error, result.structured_content
    return "\n".join(block.text for block in result.content)


def test_a_grouping_proposed_through_mcp_becomes_a_real_tab_group(rig: Rig) -> None:
    _, first, _ = rig.open("/group/a", "Tide tables", "Tide tables list high and low water.")
    _, second, _ = rig.open("/group/b", "Tidal range", "The tidal range is largest at springs.")
    data = rig.mcp.data("organize_tabs", groups=[
        {"tab_ids": [first, second], "name": "Tides", "color": "cyan"},
    ])  # fmt: skip
    (action,) = data["actions"]
    assert (action["status"], data["done"]) == ("done", 1)
    group_id = action["result"]["group_id"]
    tabs = [rig.worker.evaluate(f"chrome.tabs.get({tab})") for tab in (first, second)]
    assert [tab["groupId"] for tab in tabs] == [group_id, group_id]
    group = rig.worker.evaluate(f"chrome.tabGroups.get({group_id})")
    assert (group["title"], group["color"]) == ("Tides", "cyan")
    assert rig.trail(action["action_id"]) == [
        ("action.create", "assistant"), ("action.sent", "native-host"),
        ("action.done", "native-host"),
    ]  # fmt: skip


def test_a_disabled_action_is_refused_and_recorded_until_the_user_allows_it(rig: Rig) -> None:
    _, tab, _ = rig.open("/close/a", "Bilge pumps", "A bilge pump keeps the hull dry.")
    assert rig.worker.state()["settings"]["actions"]["close_tabs"] is False  # the default
    message = tool_error(rig, "organize_tabs", close=[tab])
    assert "refused close_tabs" in message
    assert 'the user has not allowed "close_tabs"' in message
    assert tab in [t["id"] for t in rig.worker.tabs()]  # still open
    action_id = message.split("(action ")[1].split(")")[0]
    assert rig.status(action_id) == "refused"
    assert rig.trail(action_id)[-1] == ("action.refused", "native-host")

    rig.worker.hook("setSettings", {"actions": {"close_tabs": True}})  # the options page
    try:
        (done,) = rig.mcp.data("organize_tabs", close=[tab])["actions"]
        assert (done["status"], done["result"]) == ("done", {"closed": 1})
        wait_for(lambda: tab not in [t["id"] for t in rig.worker.tabs()], 10, "the tab to close")
    finally:
        rig.worker.hook("setSettings", {"actions": {"close_tabs": False}})


def test_an_action_on_tabs_that_no_longer_exist_fails_cleanly(rig: Rig) -> None:
    _, tab, page = rig.open("/stale/a", "Anchor chains", "Anchor chain is measured in shackles.")
    page.close()
    wait_for(lambda: tab not in [t["id"] for t in rig.worker.tabs()], 10, "the tab to close")
    message = tool_error(rig, "organize_tabs", groups=[{"tab_ids": [tab], "name": "Old"}])
    assert "could not do group_tabs" in message and "none of these tabs exist" in message
    action_id = message.split("(action ")[1].split(")")[0]
    assert rig.status(action_id) == "failed"
    assert rig.trail(action_id)[-1] == ("action.failed", "native-host")
    assert rig.worker.evaluate("chrome.tabGroups.query({title: 'Old'})") == []


def test_capture_page_captures_the_tab_now_and_returns_its_text(rig: Rig) -> None:
    words = "A sextant measures the angle between a celestial body and the horizon."
    url, tab, _ = rig.open("/capture/sextant", "Using a sextant", words)
    assert rig.mcp.call("get_page", url=url).is_error  # not captured on its own
    result = rig.mcp.call("capture_page", tab_id=tab, max_chars=5_000)
    data = result.structured_content
    assert data["action"]["status"] == "done" and data["page"]["url"] == url
    shown = "\n".join(block.text for block in result.content)
    assert "title: Using a sextant" in shown and words in shown
    found = rig.mcp.wait_search("sextant celestial horizon", lambda r: r, timeout=10)
    assert found[0]["url"] == url


def test_save_bookmark_creates_a_real_bookmark_in_the_named_folder(rig: Rig) -> None:
    url = rig.pages.article("/bookmark/knots", "Sailing knots", ["A bowline makes a loop."])
    data = rig.mcp.data("save_bookmark", url=url, title="Knots", folder="Seamanship/Knots")
    assert data["action"]["status"] == "done" and data["already_bookmarked"] is False
    (node,) = rig.worker.evaluate(f"chrome.bookmarks.search({{url: {url!r}}})")
    assert node["title"] == "Knots"
    parent = rig.worker.evaluate(f"chrome.bookmarks.get({node['parentId']!r})")[0]
    assert parent["title"] == "Knots"
    folder = data["action"]["result"]["folder"]
    assert folder.endswith("/Seamanship/Knots")
    (stored,) = rig.mcp.data("get_saved", kind="bookmark", folder="Seamanship")["items"]
    assert (stored["url"], stored["folder"], stored["browser_id"]) == (url, folder, node["id"])
    again = rig.mcp.data("save_bookmark", url=url, folder="knots")
    assert again["already_bookmarked"] is True
    assert len(rig.worker.evaluate(f"chrome.bookmarks.search({{url: {url!r}}})")) == 1
