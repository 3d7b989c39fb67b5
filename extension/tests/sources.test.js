// Tabs, bookmarks and history converted to protocol objects.
import test from "node:test";
import assert from "node:assert/strict";
import { snapshotTabs, tabChanged, toTab } from "../src/tabs.js";
import { chunk, flattenTree, folderPath, idsUnder, importBatches } from "../src/bookmarks.js";
import { HistoryBatcher, backfillRange, historyItem } from "../src/history.js";
import { gate } from "../src/rules.js";
import { effectiveRules } from "../src/urls.js";

const rules = effectiveRules({ use_defaults: true, rules: [] });
const gateFor = (url, incognito = false) => gate(url, { incognito, rules });

test("a_tab_on_an_allowed_page_carries_its_scrubbed_url_and_title", () => {
  const tab = toTab({ id: 4, windowId: 2, index: 1, url: "https://e.com/?token=x", title: "E", active: true, pinned: false, groupId: -1, lastAccessed: 1700000000000.5 }, gateFor);
  assert.deepEqual(tab, { tab_id: 4, window_id: 2, index: 1, url: "https://e.com/", title: "E", active: true, pinned: false, group_id: null, last_accessed_time: 1700000000000 });
});

test("a_tab_on_an_excluded_or_internal_page_has_no_url_or_title", () => {
  for (const url of ["https://mail.google.com/mail/u/0/", "chrome://settings/"]) {
    const tab = toTab({ id: 1, windowId: 1, url, title: "Inbox (3)" }, gateFor);
    assert.equal(tab.url, null);
    assert.equal(tab.title, null);
  }
});

test("snapshots_leave_out_incognito_tabs", () => {
  const tabs = snapshotTabs([{ id: 1, windowId: 1, url: "https://a.com/" }, { id: 2, windowId: 9, url: "https://b.com/", incognito: true }], gateFor, 100);
  assert.deepEqual(tabs.map((t) => t.tab_id), [1]);
});

test("tab_changes_count_only_for_fields_the_host_keeps", () => {
  const tab = toTab({ id: 1, windowId: 1, url: "https://a.com/", title: "A", lastAccessed: 1 }, gateFor);
  assert.equal(tabChanged(tab, { ...tab, last_accessed_time: 99 }), false);
  assert.equal(tabChanged(tab, { ...tab, title: "B" }), true);
  assert.equal(tabChanged(null, tab), true);
});

const tree = [{
  id: "0", title: "", children: [
    { id: "1", parentId: "0", title: "Bookmarks bar", children: [
      { id: "10", parentId: "1", index: 0, title: "Rust", url: "https://rust-lang.org/", dateAdded: 1600000000000 },
      { id: "11", parentId: "1", index: 1, title: "Reading", children: [
        { id: "12", parentId: "11", index: 0, title: "Paper", url: "https://arxiv.org/abs/1?session=abc" },
        { id: "13", parentId: "11", index: 1, title: "Bookmarklet", url: "javascript:alert(1)" },
        { id: "14", parentId: "11", index: 2, title: "Bank", url: "https://accounts.google.com/" },
      ] },
    ] },
    { id: "2", parentId: "0", title: "Other bookmarks", children: [] },
  ],
}];

test("bookmark_trees_flatten_to_allowed_bookmarks_with_folder_paths", () => {
  const { bookmarks, skipped } = flattenTree(tree, gateFor);
  assert.equal(skipped, 2);
  assert.deepEqual(bookmarks, [
    { browser_id: "10", parent_id: "1", index: 0, url: "https://rust-lang.org/", title: "Rust", folder: "Bookmarks bar", added_time: 1600000000000 },
    { browser_id: "12", parent_id: "11", index: 0, url: "https://arxiv.org/abs/1", title: "Paper", folder: "Bookmarks bar/Reading", added_time: null },
  ]);
});

test("folder_paths_skip_the_root", () => {
  assert.equal(folderPath([{ id: "0", title: "" }, { id: "1", parentId: "0", title: "Bookmarks bar" }, { id: "11", parentId: "1", title: "Reading" }]), "Bookmarks bar/Reading");
});

test("removing_a_folder_lists_every_bookmark_under_it", () => {
  assert.deepEqual(idsUnder(tree[0].children[0]).sort(), ["10", "12", "13", "14"]);
  assert.deepEqual(idsUnder({ id: "5", url: "https://a.com/" }), ["5"]);
  assert.deepEqual(idsUnder({ id: "6" }), []);
});

test("bookmark_imports_are_batched_with_a_final_batch_and_total", () => {
  const items = Array.from({ length: 2500 }, (_, i) => ({ browser_id: String(i) }));
  const batches = importBatches(items, "imp", 1000);
  assert.deepEqual(batches.map((b) => [b.batch, b.bookmarks.length, b.final, b.total]), [[0, 1000, false, undefined], [1, 1000, false, undefined], [2, 500, true, 2500]]);
  assert.deepEqual(importBatches([], "imp", 1000), [{ import_id: "imp", batch: 0, final: true, bookmarks: [], total: 0 }]);
  assert.deepEqual(chunk([1, 2, 3], 2), [[1, 2], [3]]);
});

test("the_backfill_range_ends_where_live_recording_began", () => {
  const day = 86_400_000;
  assert.deepEqual(backfillRange(100 * day, 40 * day, 30), { start_time: 10 * day, end_time: 40 * day });
  assert.deepEqual(backfillRange(100 * day, undefined, 90), { start_time: 10 * day, end_time: 100 * day });
});

test("history_items_keep_visits_in_range_newest_first", () => {
  const range = { start_time: 1000, end_time: 5000 };
  const item = historyItem(
    { url: "https://a.com/?sid=1", title: "A", visitCount: 7, typedCount: 2, lastVisitTime: 4500 },
    [{ visitId: "1", visitTime: 500, transition: "link" }, { visitId: "2", visitTime: 2000, transition: "typed", referringVisitId: "0" }, { visitId: "3", visitTime: 4500, transition: "link", referringVisitId: "2" }, { visitId: "4", visitTime: 5000 }],
    range, gateFor,
  );
  assert.deepEqual(item, {
    url: "https://a.com/", title: "A", visit_count: 7, typed_count: 2, last_visit_time: 4500,
    visits: [
      { visit_id: "3", time: 4500, transition: "link", referring_visit_id: "2" },
      { visit_id: "2", time: 2000, transition: "typed", referring_visit_id: null },
    ],
  });
});

test("history_items_of_excluded_pages_or_without_visits_in_range_are_skipped", () => {
  const range = { start_time: 1000, end_time: 5000 };
  assert.equal(historyItem({ url: "https://mail.google.com/" }, [{ visitId: "1", visitTime: 2000 }], range, gateFor), null);
  assert.equal(historyItem({ url: "https://a.com/" }, [{ visitId: "1", visitTime: 9000 }], range, gateFor), null);
});

test("history_batches_stay_under_the_item_limit_and_end_with_a_final_batch", () => {
  const batcher = new HistoryBatcher("imp", { start_time: 0, end_time: 1 });
  const out = [];
  for (let i = 0; i < 1200; i += 1) {
    const full = batcher.add({ url: `https://a.com/${i}`, visits: [{}] });
    if (full) out.push(full);
  }
  out.push(batcher.finish());
  assert.deepEqual(out.map((b) => [b.batch, b.items.length, b.final]), [[0, 500, false], [1, 500, false], [2, 200, true]]);
});

test("history_batches_stay_under_the_visit_limit", () => {
  const batcher = new HistoryBatcher("imp", { start_time: 0, end_time: 1 });
  const visits = Array.from({ length: 200 }, () => ({}));
  let first = null;
  for (let i = 0; i < 30 && !first; i += 1) first = batcher.add({ url: `https://a.com/${i}`, visits });
  assert.equal(first.items.length, 25); // 25 × 200 = 5,000 visits
});
