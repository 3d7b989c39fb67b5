import test from "node:test";
import assert from "node:assert/strict";
import { performAction, validateAction } from "../src/actions.js";
import { resolveFolder } from "../src/bookmarks.js";
import { normalizeSettings } from "../src/rules.js";
import { fakeExt, addTab } from "./helpers/fake-ext.js";

const defaults = normalizeSettings({});
const everything = normalizeSettings({ actions: { close_tabs: true, capture_tab: true, create_bookmark: true } });

test("only_grouping_is_allowed_with_the_default_settings", () => {
  for (const request of [{ action: "close_tabs", tab_ids: [1] }, { action: "capture_tab", tab_id: 1 }, { action: "create_bookmark", url: "https://b.com/" }]) {
    const checked = validateAction(request, defaults);
    assert.deepEqual([checked.ok, checked.error?.code], [false, 18], request.action);
  }
  assert.equal(validateAction({ action: "group_tabs", tab_ids: [1] }, defaults).ok, true);
});

test("unknown_actions_are_unsupported", () => {
  assert.equal(validateAction({ action: "format_disk" }, everything).error.code, 19);
});

test("action_arguments_are_validated", () => {
  assert.equal(validateAction({ action: "group_tabs", tab_ids: [] }, everything).error.code, 16);
  assert.equal(validateAction({ action: "group_tabs", tab_ids: [1], color: "mauve" }, everything).error.code, 16);
  assert.equal(validateAction({ action: "capture_tab", tab_id: "3" }, everything).error.code, 16);
  assert.equal(validateAction({ action: "create_bookmark" }, everything).error.code, 16);
  assert.deepEqual(validateAction({ action: "group_tabs", tab_ids: [1, 2], title: "Research", color: "blue" }, everything).action, { name: "group_tabs", tab_ids: [1, 2], title: "Research", color: "blue" });
});

function deps(ext, extra = {}) {
  return { tabs: ext.tabs, tabGroups: ext.tabGroups, bookmarks: ext.bookmarks, gateFor: (url) => ({ ok: url.startsWith("https://"), url, reason: "scheme" }), ...extra };
}

test("group_tabs_groups_the_existing_tabs_and_names_the_group", async () => {
  const ext = fakeExt();
  addTab(ext, { id: 1, url: "https://a.com/" });
  addTab(ext, { id: 2, url: "https://b.com/" });
  const result = await performAction({ name: "group_tabs", tab_ids: [1, 2, 99], title: "Research", color: "blue" }, deps(ext));
  assert.deepEqual(result, { group_id: 7 });
  assert.deepEqual(ext.world.groups, [[1, 2], { id: 7, props: { title: "Research", color: "blue" } }]);
});

test("close_tabs_closes_only_tabs_that_exist", async () => {
  const ext = fakeExt();
  addTab(ext, { id: 1, url: "https://a.com/" });
  assert.deepEqual(await performAction({ name: "close_tabs", tab_ids: [1, 5] }, deps(ext)), { closed: 1 });
  await assert.rejects(performAction({ name: "close_tabs", tab_ids: [5] }, deps(ext)), (error) => error.code === 11);
});

test("create_bookmark_refuses_urls_that_fail_the_gate", async () => {
  const ext = fakeExt();
  await assert.rejects(performAction({ name: "create_bookmark", url: "javascript:x", title: null, parent_id: null }, deps(ext)), (error) => error.code === 8);
  assert.deepEqual(await performAction({ name: "create_bookmark", url: "https://a.com/", title: "A", parent_id: "1" }, deps(ext)), { browser_id: "999" });
});

const TREE = [
  {
    id: "0",
    title: "",
    children: [
      { id: "1", title: "Bookmarks bar", parentId: "0", children: [
        { id: "10", title: "Research", parentId: "1", children: [{ id: "11", title: "Rust", parentId: "10", children: [] }] },
        { id: "12", title: "A page", parentId: "1", url: "https://a.com/" },
      ] },
      { id: "2", title: "Other bookmarks", parentId: "0", folderType: "other", children: [] },
    ],
  },
];

test("a_folder_name_finds_the_shallowest_existing_folder_of_that_name_in_any_case", () => {
  assert.deepEqual(resolveFolder(TREE, "research"), { parentId: "10", path: "Bookmarks bar/Research", missing: [] });
  assert.deepEqual(resolveFolder(TREE, "Research/Rust"), { parentId: "11", path: "Bookmarks bar/Research/Rust", missing: [] });
});

test("missing_folders_are_created_under_the_deepest_existing_part_or_other_bookmarks", () => {
  assert.deepEqual(resolveFolder(TREE, "Bookmarks bar/Research/Go/Tools"), { parentId: "10", path: "Bookmarks bar/Research", missing: ["Go", "Tools"] });
  assert.deepEqual(resolveFolder(TREE, "bookmarks bar/Kitchen"), { parentId: "1", path: "Bookmarks bar", missing: ["Kitchen"] });
  assert.deepEqual(resolveFolder(TREE, "Reading"), { parentId: "2", path: "Other bookmarks", missing: ["Reading"] });
  assert.deepEqual(resolveFolder(TREE, " / "), { parentId: "2", path: "Other bookmarks", missing: [] });
});

test("create_bookmark_in_a_folder_path_creates_the_missing_folders_and_reports_the_path", async () => {
  const ext = fakeExt();
  ext.world.bookmarkTree = structuredClone(TREE);
  const created = [];
  let next = 500;
  const bookmarks = { ...ext.bookmarks, create: async (props) => (created.push(props), { id: String(next++), ...props }) };
  const checked = validateAction({ action: "create_bookmark", url: "https://b.com/", title: "B", parent_id: null, folder: "Research/Async" }, everything);
  assert.equal(checked.ok, true);
  const result = await performAction(checked.action, deps(ext, { bookmarks }));
  assert.deepEqual(result, { browser_id: "501", folder: "Bookmarks bar/Research/Async" });
  assert.deepEqual(created, [{ parentId: "10", title: "Async" }, { url: "https://b.com/", title: "B", parentId: "500" }]);
  assert.equal(validateAction({ action: "create_bookmark", url: "https://b.com/", folder: 7 }, everything).error.code, 16);
});
