// The background as a whole (app.js, capture.js, sync.js) over the fake browser and a
// fake native host: what reaches the host for each thing the user does.
import test from "node:test";
import assert from "node:assert/strict";
import { App } from "../src/app.js";
import { FakeClock, FakeHost, FakeStorage, addTab, fakeExt, settle } from "./helpers/fake-ext.js";

async function makeApp({ handler, mode = "up", local = new FakeStorage(), session = new FakeStorage(), queueLimits, clock = new FakeClock(), setup } = {}) {
  const host = new FakeHost(handler);
  host.mode = mode;
  const ext = fakeExt({ host, local, session });
  if (setup) setup(ext);
  const app = new App(ext, { now: clock.now, timers: clock, random: () => 0.5, queueLimits });
  await app.ready;
  await settle();
  return { app, ext, host, clock, local, session };
}

/** Simulate a page load in a tab: commit, load, then `visibleMs` of visible dwell. */
async function visitPage(app, ext, { tabId = 1, url, title = "Page", visibleMs = 5000, activeMs = visibleMs, transition = "link", content = null }) {
  if (!ext.world.tabs.has(tabId)) addTab(ext, { id: tabId, url, title });
  const tab = ext.world.tabs.get(tabId);
  tab.url = url;
  tab.title = title;
  ext.world.pages.get(tabId).content = content ?? { content_type: "html", html: `<html><body><p>${title}</p></body></html>`, truncated: false, title, language: "en" };
  await app.inTab(tabId, () => app.capture.onCommitted({ tabId, frameId: 0, url, transitionType: transition, timeStamp: app.now() }));
  await app.inTab(tabId, () => app.capture.onLoaded({ tabId, frameId: 0, url }));
  const visit = app.visits.get(tabId);
  if (visit && visibleMs > 0) {
    await app.inTab(tabId, () => app.capture.onDwell({ what: "dwell", visit_id: visit.visit_id, visible_ms: visibleMs, active_ms: activeMs, reached: true }, { tab: { ...tab } }));
  }
  await settle();
  return visit;
}

test("on_connect_the_host_gets_hello_then_settings_and_a_tab_snapshot", async () => {
  const { host, app } = await makeApp({ setup: (ext) => addTab(ext, { id: 1, url: "https://example.com/?token=s" }) });
  assert.deepEqual(host.received.map((m) => m.type), ["hello", "settings_set", "tab_snapshot"]);
  const hello = host.received[0];
  assert.equal(hello.profile_id, app.profile.profile_id);
  assert.equal(hello.extension_id, "eeihccjhkpjgahjachnggfamlbdoeaio");
  assert.deepEqual(host.of("tab_snapshot")[0].tabs.map((t) => t.url), ["https://example.com/"]);
  assert.equal(app.state().status, "connected");
});

test("a_page_visible_for_the_dwell_is_captured_with_its_visit", async () => {
  const { app, ext, host } = await makeApp();
  const visit = await visitPage(app, ext, { url: "http://127.0.0.1:8000/article.html?api_key=zz", title: "Article" });
  assert.deepEqual(ext.world.pages.get(1).tracked, [visit.visit_id]);
  const [capture] = host.of("capture_page");
  assert.equal(capture.url, "http://127.0.0.1:8000/article.html");
  assert.equal(capture.content_type, "html");
  assert.match(capture.html, /Article/);
  assert.equal(capture.dedupe_key, `capture:${visit.visit_id}`);
  assert.equal(capture.visit.visit_id, visit.visit_id);
  assert.equal(capture.visit.transition, "link");
  assert.deepEqual(ext.world.pages.get(1).caps, { maxHtmlBytes: 2_000_000, maxTextBytes: 2_000_000, skipPasswordPages: true, skipPaymentPages: true });
  assert.equal(app.queue.length, 0);
  assert.equal(app.stats.captured, 1);
});

test("a_page_is_not_captured_before_the_dwell_nor_twice", async () => {
  const { app, ext, host } = await makeApp();
  const visit = await visitPage(app, ext, { url: "https://example.com/a", visibleMs: 0 });
  const tab = ext.world.tabs.get(1);
  await app.capture.onDwell({ visit_id: visit.visit_id, visible_ms: 4000, active_ms: 4000, reached: true }, { tab });
  assert.equal(host.of("capture_page").length, 0);
  await app.capture.onDwell({ visit_id: visit.visit_id, visible_ms: 5000, active_ms: 5000, reached: true }, { tab });
  await app.capture.onDwell({ visit_id: visit.visit_id, visible_ms: 9000, active_ms: 9000, reached: true }, { tab });
  await settle();
  assert.equal(host.of("capture_page").length, 1);
});

test("closing_the_tab_sends_the_visit_with_its_final_dwell", async () => {
  const { app, ext, host } = await makeApp();
  const visit = await visitPage(app, ext, { url: "https://example.com/a", visibleMs: 7000, activeMs: 6500 });
  await app.capture.onTabRemoved(1);
  await settle();
  const [ended] = host.of("visit");
  assert.equal(ended.visit.visit_id, visit.visit_id);
  assert.equal(ended.visit.dwell_ms, 6500);
  assert.equal(app.visits.get(1), null);
});

test("navigating_on_ends_the_visit_and_records_the_referrer", async () => {
  const { app, ext, host } = await makeApp();
  await visitPage(app, ext, { url: "https://example.com/a" });
  await visitPage(app, ext, { url: "https://example.com/b" });
  assert.equal(host.of("visit")[0].url, "https://example.com/a");
  assert.equal(host.of("capture_page")[1].visit.referrer, "https://example.com/a");
});

test("excluded_and_internal_pages_are_never_visited_scripted_or_captured", async () => {
  const { app, ext, host } = await makeApp();
  for (const url of ["https://mail.google.com/mail/u/0/#inbox", "https://example.com/login?next=/", "chrome://settings/", "https://bank.example/checkout/pay"]) {
    await visitPage(app, ext, { url });
    assert.equal(app.visits.get(1), null, url);
  }
  assert.equal(ext.world.pages.get(1).tracked, undefined);
  assert.equal(host.of("capture_page").length + host.of("visit").length, 0);
  const skipped = { "mail.google.com": 1, "*/login": 1, "*/checkout/pay*": 1 }; // not chrome:
  assert.deepEqual(app.stats.skipped, skipped);
  assert.deepEqual(host.of("skipped").map((m) => m.rule), Object.keys(skipped));
  assert.ok(host.of("skipped").every((m) => Object.keys(m).sort().join() === "id,rule,time,type"));
});

test("a_page_whose_dom_holds_a_password_field_is_neither_captured_nor_visited_and_is_counted", async () => {
  const { app, ext, host } = await makeApp();
  await visitPage(app, ext, { url: "https://intranet.example/portal", content: { content_type: null, password_field: true } });
  assert.equal(app.visits.get(1), null);
  await app.capture.endAllVisits();
  await settle();
  assert.equal(host.of("capture_page").length + host.of("visit").length, 0);
  assert.deepEqual(app.stats.skipped, { "password field": 1 });
  assert.deepEqual(host.of("skipped").map((m) => m.rule), ["password field"]);
  await assert.rejects(app.capture.captureTab(1), { code: 9 });
});

test("the_password_field_rule_can_be_turned_off", async () => {
  const { app, ext, host } = await makeApp();
  await app.setSettings({ capture: { skip_password_pages: false } });
  await visitPage(app, ext, { url: "https://intranet.example/portal" });
  assert.equal(ext.world.pages.get(1).caps.skipPasswordPages, false);
  assert.equal(host.of("capture_page").length, 1);
});

test("user_exclusions_apply_at_once", async () => {
  const { app, ext, host } = await makeApp();
  await app.setSettings({ exclusions: { use_defaults: true, rules: ["example.org"] } });
  await visitPage(app, ext, { url: "https://docs.example.org/x" });
  assert.equal(host.of("capture_page").length, 0);
  assert.deepEqual(host.of("settings_set").at(-1).settings.exclusions.rules, ["example.org"]);
});

test("an_spa_navigation_is_a_new_visit_and_ends_the_old_one_with_its_final_clocks", async () => {
  const { app, ext, host } = await makeApp();
  const first = await visitPage(app, ext, { url: "https://app.example.com/inbox" });
  const page = ext.world.pages.get(1);
  page.visible_ms = 8000;
  page.active_ms = 7000;
  ext.world.tabs.get(1).url = "https://app.example.com/item/42";
  await app.capture.onHistoryState({ tabId: 1, frameId: 0, url: "https://app.example.com/item/42", timeStamp: app.now() });
  await settle();
  const second = app.visits.get(1);
  assert.notEqual(second.visit_id, first.visit_id);
  assert.equal(second.transition, "history_state");
  assert.equal(second.referrer, "https://app.example.com/inbox");
  const [ended] = host.of("visit");
  assert.equal(ended.visit.visit_id, first.visit_id);
  assert.equal(ended.visit.dwell_ms, 7000);
  assert.equal(page.current, second.visit_id);
});

test("a_replace_state_to_the_same_page_is_not_a_new_visit", async () => {
  const { app, ext } = await makeApp();
  const first = await visitPage(app, ext, { url: "https://app.example.com/doc" });
  await app.capture.onHistoryState({ tabId: 1, frameId: 0, url: "https://app.example.com/doc#part-2", timeStamp: app.now() });
  assert.equal(app.visits.get(1).visit_id, first.visit_id);
});

test("pausing_stops_everything_and_tells_the_host", async () => {
  const { app, ext, host } = await makeApp({ setup: (ext) => addTab(ext, { id: 2, url: "https://example.com/" }) });
  await app.applyPaused(true);
  await settle();
  assert.equal(host.of("pause").length, 1);
  await visitPage(app, ext, { url: "https://example.com/after-pause" });
  await app.sync.onTabCreated({ id: 5, windowId: 1, url: "https://example.com/new" });
  await assert.rejects(app.capture.saveSelection(2, "quote"), /paused/);
  await assert.rejects(app.capture.saveNote("note", 2), /paused/);
  await settle();
  assert.equal(host.of("capture_page").length, 0);
  assert.equal(host.of("tab_event").length, 0);
  assert.equal(ext.world.badge.text, "off");
});

test("resuming_sends_resume_a_fresh_snapshot_and_the_bookmarks", async () => {
  const { app, host } = await makeApp();
  await app.applyPaused(true);
  await app.applyPaused(false);
  await settle();
  const types = host.received.map((m) => m.type);
  assert.deepEqual(types.slice(types.indexOf("pause")), ["pause", "resume", "tab_snapshot", "bookmark_import"]);
  assert.equal(app.state().paused, false);
});

test("the_host_pause_state_is_adopted_on_connect", async () => {
  const host = new FakeHost();
  host.paused = true;
  const ext = fakeExt({ host });
  const clock = new FakeClock();
  const app = new App(ext, { now: clock.now, timers: clock, random: () => 0.5 });
  await app.ready;
  await settle();
  assert.equal(app.paused, true);
  assert.equal(host.of("pause").length, 0, "adopted, not echoed");
});

test("a_missing_host_shows_not_installed_and_nothing_is_lost", async () => {
  const local = new FakeStorage();
  const { app, ext, host, clock } = await makeApp({ mode: "not_installed", local });
  await visitPage(app, ext, { url: "https://example.com/a" });
  assert.equal(app.state().status, "not_installed");
  assert.equal(ext.world.badge.text, "?");
  assert.equal(app.queue.length, 1);
  host.mode = "up";
  await clock.advance(1000);
  await settle();
  assert.equal(app.state().status, "connected");
  assert.equal(host.of("capture_page").length, 1);
  assert.equal(app.queue.length, 0);
});

test("the_queue_survives_a_service_worker_restart", async () => {
  const local = new FakeStorage();
  const first = await makeApp({ mode: "not_installed", local });
  await visitPage(first.app, first.ext, { url: "https://example.com/a" });
  await first.app.capture.saveNote("keep me", 1);
  first.app.courier.close();
  const second = await makeApp({ local });
  assert.deepEqual(second.host.received.map((m) => m.type), ["hello", "capture_page", "note", "settings_set", "tab_snapshot"]);
  assert.equal(second.app.profile.profile_id, first.app.profile.profile_id);
});

test("a_highlight_carries_text_context_note_and_a_dedupe_key", async () => {
  const { app, ext, host } = await makeApp({ setup: (ext) => addTab(ext, { id: 3, url: "https://example.com/post", title: "Post", selection: { text: "from page", context: "The paragraph around the quote." } }) });
  const saved = await app.capture.saveSelection(3, "the quote", "my thought");
  await settle();
  const [highlight] = host.of("highlight");
  assert.deepEqual(
    { url: highlight.url, title: highlight.title, text: highlight.text, context: highlight.context, note: highlight.note, dedupe_key: highlight.dedupe_key },
    { url: "https://example.com/post", title: "Post", text: "the quote", context: "The paragraph around the quote.", note: "my thought", dedupe_key: saved.dedupe_key },
  );
  assert.equal(ext.world.tabs.size, 1);
});

test("a_highlight_uses_the_page_selection_when_no_text_is_given", async () => {
  const { app, host } = await makeApp({ setup: (ext) => addTab(ext, { id: 3, url: "https://example.com/post", selection: { text: "from page", context: null } }) });
  await app.capture.saveSelection(3);
  await settle();
  assert.equal(host.of("highlight")[0].text, "from page");
});

test("highlights_on_excluded_pages_are_refused", async () => {
  const { app } = await makeApp({ setup: (ext) => addTab(ext, { id: 3, url: "https://accounts.google.com/" }) });
  await assert.rejects(app.capture.saveSelection(3, "secret"), /excluded/);
  assert.equal(app.queue.length, 0);
});

test("a_note_on_an_excluded_page_is_kept_without_its_address", async () => {
  const { app, host } = await makeApp({ setup: (ext) => { addTab(ext, { id: 1, url: "https://mail.google.com/x", title: "Inbox" }); addTab(ext, { id: 2, url: "https://example.com/p", title: "P" }); } });
  await app.capture.saveNote("call Bob", 1);
  await app.capture.saveNote("good read", 2);
  await settle();
  const notes = host.of("note");
  assert.deepEqual(notes.map((n) => [n.content, n.url, n.title]), [["call Bob", null, null], ["good read", "https://example.com/p", "P"]]);
});

test("rejected_highlights_are_kept_as_dead_letters_and_can_be_resent", async () => {
  let refuse = true;
  const { app, host } = await makeApp({ handler: (m) => (m.type === "highlight" && refuse ? { error: { code: 16, message: "text too long" } } : { result: {} }), setup: (ext) => addTab(ext, { id: 3, url: "https://example.com/" }) });
  await app.capture.saveSelection(3, "quote");
  await settle();
  assert.equal(app.state().deadLetters.length, 1);
  assert.equal(app.state().deadLetters[0].text, "quote");
  refuse = false;
  await app.retryDeadLetters();
  await settle();
  const [first, second] = host.of("highlight");
  assert.equal(second.dedupe_key, first.dedupe_key);
  assert.notEqual(second.id, first.id);
  assert.equal(app.state().deadLetters.length, 0);
});

test("captures_refused_because_the_host_is_paused_are_counted_apart", async () => {
  const { app, ext } = await makeApp({ handler: (m) => (m.type === "capture_page" ? { error: { code: 10, message: "paused" } } : { result: {} }) });
  await visitPage(app, ext, { url: "https://example.com/a" });
  assert.equal(app.stats.refused, 1);
  assert.equal(app.stats.rejected, 0);
  assert.equal(app.state().deadLetters.length, 0);
});

test("overflow_drops_visits_first_and_shows_it_on_the_badge", async () => {
  const { app, ext } = await makeApp({ mode: "not_installed", queueLimits: { maxItems: 3 }, setup: (ext) => addTab(ext, { id: 9, url: "https://example.com/h" }) });
  await app.capture.saveSelection(9, "quote");
  for (const path of ["a", "b", "c"]) await visitPage(app, ext, { url: `https://example.com/${path}`, visibleMs: 5000 });
  const types = app.queue.entries().map((e) => e.type);
  assert.equal(types[0], "highlight");
  assert.equal(app.queue.length, 3);
  assert.ok(app.state().queue.dropped >= 1);
  assert.equal(ext.world.badge.text, "?", "not installed outranks drops");
  ext.host.mode = "up";
  await app.courier.connect({ force: true });
  await settle();
  assert.equal(ext.world.badge.text, "drop");
  await app.clearDrops();
  assert.equal(ext.world.badge.text, "on");
});

test("forget_purges_queued_items_and_open_visits_of_the_site_then_tells_the_host", async () => {
  const { app, ext, host, clock } = await makeApp({ mode: "not_installed" });
  await visitPage(app, ext, { tabId: 1, url: "https://news.example.com/a" });
  await visitPage(app, ext, { tabId: 2, url: "https://other.org/b" });
  const forgetting = app.forget({ domain: "example.com" });
  await settle();
  await clock.advance(5000);
  const outcome = await forgetting;
  assert.equal(outcome.purgedQueued, 1);
  assert.equal(outcome.discardedVisits, 1);
  assert.equal(outcome.done, false, "queued until the host connects");
  assert.deepEqual(app.queue.entries().map((e) => e.type), ["capture_page", "forget"]);
  ext.host.mode = "up";
  app.courier.connect({ force: true });
  await settle();
  assert.deepEqual(host.of("forget").map((m) => m.domain), ["example.com"]);
});

test("forget_waits_for_the_host_answer_when_connected", async () => {
  const { app } = await makeApp({ handler: (m) => (m.type === "forget" ? { result: { selector: "everything", counts: { pages: 3 }, purged: true } } : { result: {} }) });
  const outcome = await app.forget({ everything: true });
  assert.deepEqual(outcome.result.counts, { pages: 3 });
  assert.equal(outcome.ok, true);
});

test("tab_events_are_sent_for_real_changes_only", async () => {
  const { app, host } = await makeApp();
  const tab = { id: 4, windowId: 1, index: 0, url: "https://example.com/", title: "E", active: true, pinned: false, groupId: -1 };
  await app.sync.onTabCreated(tab);
  await app.sync.onTabUpdated(4, { favIconUrl: "x" }, { ...tab });
  await app.sync.onTabUpdated(4, { status: "loading" }, { ...tab });
  await app.sync.onTabUpdated(4, { title: "New" }, { ...tab, title: "New" });
  await app.sync.onTabRemoved(4, { windowId: 1 });
  await settle();
  assert.deepEqual(host.of("tab_event").map((m) => [m.event, m.tab.title]), [["opened", "E"], ["updated", "New"], ["closed", null]]);
});

test("a_title_that_is_the_raw_url_loses_its_secrets_before_anything_is_queued_or_stored", async () => {
  const raw = "127.0.0.1:8000/live/untitled.html?token=SECRETB3live&q=ok";
  const url = `http://${raw}`;
  for (const mode of ["not_installed", "up"]) {
    const { app, ext, host, local } = await makeApp({ mode });
    const tab = { id: 4, windowId: 1, index: 0, url, title: raw, active: true, pinned: false, groupId: -1 };
    await app.sync.onTabCreated(tab);
    await app.sync.onTabUpdated(4, { title: raw }, { ...tab });
    await visitPage(app, ext, { tabId: 5, url, title: raw, content: { content_type: "text", text: "body", truncated: false, title: null } });
    await app.capture.endAllVisits();
    await settle();
    const stored = JSON.stringify(await local.get(null));
    assert.ok(!stored.includes("SECRETB3live"), "the queue and the visits on disk hold no secret");
    if (mode === "not_installed") {
      assert.match(stored, /untitled\.html\?q=ok/); // the queued messages are there
      continue;
    }
    assert.ok(!JSON.stringify(host.received).includes("SECRETB3live"));
    const scrubbed = "127.0.0.1:8000/live/untitled.html?q=ok";
    assert.ok(host.of("tab_event").length >= 1 && host.of("tab_event").every((m) => m.tab.title === scrubbed));
    assert.equal(host.of("capture_page")[0].title, scrubbed);
    assert.equal(host.of("visit")[0].title, scrubbed);
  }
});

test("bookmarks_are_imported_in_batches_and_kept_in_sync", async () => {
  const { app, ext, host } = await makeApp({
    setup: (ext) => {
      ext.world.bookmarkTree = [{ id: "0", title: "", children: [{ id: "1", parentId: "0", title: "Bookmarks bar", children: [
        { id: "10", parentId: "1", title: "Rust", url: "https://rust-lang.org/" },
        { id: "11", parentId: "1", title: "Folder", children: [{ id: "12", parentId: "11", title: "Deep", url: "https://deep.example/" }] },
      ] }] }];
    },
  });
  const summary = await app.sync.importBookmarks();
  assert.equal(summary.bookmarks, 2);
  await app.sync.onBookmarkChanged("11");
  await app.sync.onBookmarkRemoved("11", { node: ext.world.bookmarkTree[0].children[0].children[1] });
  await settle();
  const [batch] = host.of("bookmark_import");
  assert.equal(batch.final, true);
  assert.equal(batch.total, 2);
  assert.deepEqual(host.of("bookmark_upsert")[0].bookmarks.map((b) => [b.browser_id, b.folder]), [["12", "Bookmarks bar/Folder"]]);
  assert.deepEqual(host.of("bookmark_remove")[0].browser_ids, ["12"]);
});

test("the_history_backfill_imports_only_before_live_recording_began", async () => {
  const day = 86_400_000;
  const { app, host } = await makeApp({
    setup: (ext) => {
      const now = 1_700_000_000_000;
      ext.world.history = [
        { url: "https://old.example/a", title: "A", visitCount: 2, typedCount: 0, lastVisitTime: now - day, visits: [{ visitId: "1", visitTime: now - 2 * day, transition: "link" }, { visitId: "2", visitTime: now - day, transition: "typed" }] },
        { url: "https://mail.google.com/", title: "Mail", visitCount: 9, visits: [{ visitId: "3", visitTime: now - day }] },
        { url: "https://live.example/", title: "Live", visitCount: 1, visits: [{ visitId: "4", visitTime: now + 1000 }] },
      ];
    },
  });
  const summary = await app.sync.backfillHistory(30);
  await settle();
  assert.equal(summary.items, 1);
  const [batch] = host.of("history_import");
  assert.equal(batch.final, true);
  assert.equal(batch.range.end_time, app.profile.live_since);
  assert.equal(batch.range.start_time, app.profile.live_since - 30 * day);
  assert.deepEqual(batch.items.map((i) => [i.url, i.visits.map((v) => v.visit_id)]), [["https://old.example/a", ["2", "1"]]]);
});

test("an_action_the_user_did_not_allow_is_answered_with_error_18", async () => {
  const { app, host } = await makeApp({ setup: (ext) => addTab(ext, { id: 1, url: "https://example.com/" }) });
  host.port.push({ type: "action", action_id: "a-1", action: "close_tabs", tab_ids: [1] });
  await settle();
  const [result] = host.of("action_result");
  assert.deepEqual([result.action_id, result.ok, result.error.code], ["a-1", false, 18]);
  assert.equal(app.ext.world.tabs.size, 1);
});

test("an_allowed_action_is_performed_and_answered", async () => {
  const { host, ext } = await makeApp({ setup: (ext) => { addTab(ext, { id: 1, url: "https://a.com/" }); addTab(ext, { id: 2, url: "https://b.com/" }); } });
  host.port.push({ type: "action", action_id: "a-2", action: "group_tabs", tab_ids: [1, 2], title: "Reading" });
  await settle();
  const [result] = host.of("action_result");
  assert.deepEqual([result.ok, result.result], [true, { group_id: 7 }]);
  assert.deepEqual(ext.world.groups[0], [1, 2]);
});

test("a_capture_tab_action_is_off_by_default_and_once_allowed_captures_at_once", async () => {
  const { app, host } = await makeApp({ setup: (ext) => addTab(ext, { id: 1, url: "https://a.com/x", title: "X" }) });
  host.port.push({ type: "action", action_id: "a-0", action: "capture_tab", tab_id: 1 });
  await settle();
  assert.deepEqual([host.of("action_result")[0].ok, host.of("action_result")[0].error.code], [false, 18]);
  await app.setSettings({ actions: { capture_tab: true } });
  host.received.length = 0;
  host.port.push({ type: "action", action_id: "a-3", action: "capture_tab", tab_id: 1 });
  await settle();
  assert.equal(host.of("capture_page").length, 1);
  assert.equal(host.of("action_result")[0].ok, true);
});

test("browser_start_up_ends_visits_left_open_by_the_last_session", async () => {
  const local = new FakeStorage();
  const first = await makeApp({ mode: "not_installed", local });
  await visitPage(first.app, first.ext, { url: "https://example.com/a", visibleMs: 0 });
  first.app.courier.close();
  const second = await makeApp({ mode: "not_installed", local });
  assert.equal(second.app.visits.all().length, 1, "a worker restart keeps open visits");
  await second.app.capture.onStartup();
  assert.equal(second.app.visits.all().length, 0);
  assert.ok(second.app.queue.entries().some((e) => e.type === "visit"));
  second.app.courier.close();
});

test("state_reports_what_the_popup_shows", async () => {
  const { app, ext } = await makeApp();
  await visitPage(app, ext, { url: "https://example.com/a" });
  const state = app.state();
  assert.equal(state.status, "connected");
  assert.equal(state.stats.captured, 1);
  assert.equal(state.queue.length, 0);
  assert.equal(state.queue.dropped, 0);
  assert.equal(state.paused, false);
  assert.equal(state.openVisits, 1);
});

test("a_visit_that_ends_uncaptured_is_counted_with_its_reason", async () => {
  const { app, ext, host, clock } = await makeApp();
  // Left after 2 s: shorter than the 5 s dwell.
  await visitPage(app, ext, { tabId: 1, url: "https://example.com/short", visibleMs: 0 });
  await clock.advance(2000);
  await app.capture.onTabRemoved(1);
  // Open for a minute but only 1 s of it in view (a background tab).
  const hidden = await visitPage(app, ext, { tabId: 2, url: "https://example.com/hidden", visibleMs: 0 });
  await app.capture.onDwell({ visit_id: hidden.visit_id, visible_ms: 1000, active_ms: 0, reached: false }, { tab: ext.world.tabs.get(2) });
  await clock.advance(60_000);
  await app.capture.onTabRemoved(2);
  // A page the dwell script cannot run in (error page, PDF viewer).
  addTab(ext, { id: 3, url: "https://example.com/broken.pdf", title: "PDF" });
  ext.world.pages.get(3).fail = true;
  await visitPage(app, ext, { tabId: 3, url: "https://example.com/broken.pdf", visibleMs: 0 });
  await clock.advance(30_000);
  await app.capture.onTabRemoved(3);
  // A captured page and a paused one are not counted.
  await visitPage(app, ext, { tabId: 4, url: "https://example.com/read" });
  await app.capture.onTabRemoved(4);
  await visitPage(app, ext, { tabId: 5, url: "https://example.com/paused", visibleMs: 0 });
  await app.applyPaused(true);
  await settle();
  assert.deepEqual(app.stats.skipped, { "visit too short": 1, "not in view long enough": 1, "could not be read": 1 });
  assert.deepEqual(host.of("skipped").map((m) => m.rule), ["visit too short", "not in view long enough", "could not be read"]);
  assert.ok(host.of("skipped").every((m) => !JSON.stringify(m).includes("example.com")));
  assert.equal(host.of("capture_page").length, 1);
});

test("a_page_that_cannot_be_extracted_is_counted_as_unreadable", async () => {
  const { app, ext, host } = await makeApp();
  await visitPage(app, ext, { url: "https://example.com/odd", content: { content_type: null } });
  assert.equal(host.of("capture_page").length, 0);
  assert.deepEqual(app.stats.skipped, { "could not be read": 1 });
  await app.capture.onTabRemoved(1);
  await settle();
  assert.deepEqual(app.stats.skipped, { "could not be read": 1 }, "counted once, not again when it ends");
});

test("the_page_in_front_is_reported_as_saved_waiting_or_not_saved_with_why", async () => {
  const { app, ext } = await makeApp();
  await visitPage(app, ext, { tabId: 1, url: "https://example.com/waiting", visibleMs: 0 });
  await app.capture.onDwell({ visit_id: app.visits.get(1).visit_id, visible_ms: 2000, active_ms: 2000, reached: false }, { tab: ext.world.tabs.get(1) });
  assert.deepEqual(app.capture.pageStatus(ext.world.tabs.get(1)), { state: "waiting", visible_ms: 2000, min_dwell_ms: 5000 });
  await visitPage(app, ext, { tabId: 2, url: "https://example.com/read" });
  assert.deepEqual(app.capture.pageStatus(ext.world.tabs.get(2)), { state: "captured" });
  await visitPage(app, ext, { tabId: 3, url: "https://example.com/signin-form", content: { content_type: null, password_field: true } });
  assert.deepEqual(app.capture.pageStatus(ext.world.tabs.get(3)), { state: "not_captured", reason: "password field" });
  addTab(ext, { id: 4, url: "https://accounts.google.com/x" });
  assert.equal(app.capture.pageStatus(ext.world.tabs.get(4)).reason, "excluded");
  assert.deepEqual(app.capture.pageStatus(null), { state: "none" });
});
