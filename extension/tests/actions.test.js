import test from "node:test";
import assert from "node:assert/strict";
import { performAction, validateAction } from "../src/actions.js";
import { normalizeSettings } from "../src/rules.js";
import { fakeExt, addTab } from "./helpers/fake-ext.js";

const defaults = normalizeSettings({});
const everything = normalizeSettings({ actions: { close_tabs: true } });

test("close_tabs_is_refused_with_the_default_settings", () => {
  const checked = validateAction({ action: "close_tabs", tab_ids: [1] }, defaults);
  assert.equal(checked.ok, false);
  assert.equal(checked.error.code, 18);
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
