import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  CODE, ERRORS, TYPES, byteSize, captureFields, classifyFrame, cutTitle, detectBrowser, forgetFields, frame,
  helloFields, highlightFields, noteFields, queueOptions, retryPolicy, searchFields, visitFields,
} from "../src/protocol.js";

const PROTOCOL = readFileSync(new URL("../../native-host/PROTOCOL.md", import.meta.url), "utf8");

const visit = { visit_id: "v-1", url: "https://example.com/a", title: "  A   title ", time: 1700000000123.7, tab_id: 4, window_id: 1, transition: "link", referrer: null, dwell_ms: 5230.9 };

test("error_codes_match_the_frozen_table_in_protocol_md", () => {
  const rows = [...PROTOCOL.matchAll(/^\| (\d+) \| `([a-z0-9_]+)` \|/gm)].map((m) => [Number(m[1]), m[2]]);
  assert.deepEqual(rows, Object.entries(ERRORS).map(([code, e]) => [Number(code), e.name]));
  assert.deepEqual(rows.map(([code]) => code), rows.map((_, i) => i + 1), "codes are dense from 1");
});

test("every_message_type_is_documented_in_protocol_md", () => {
  for (const type of Object.keys(TYPES)) assert.match(PROTOCOL, new RegExp("`" + type + "`"), type);
});

test("only_busy_internal_and_hello_required_are_retried", () => {
  const retried = Object.keys(ERRORS).map(Number).filter((code) => retryPolicy({ code }, 1) !== "reject");
  assert.deepEqual(retried, [13, 14, 17]);
  assert.equal(retryPolicy({ code: 13 }, 50), "retry");
  assert.equal(retryPolicy({ code: 17 }, 1), "hello");
});

test("internal_errors_are_retried_at_most_five_times", () => {
  assert.equal(retryPolicy({ code: 14 }, 4), "retry");
  assert.equal(retryPolicy({ code: 14 }, 5), "reject");
});

test("unknown_future_error_codes_are_not_retried", () => {
  assert.equal(retryPolicy({ code: 99 }, 1), "reject");
});

test("frames_serialise_id_first_and_type_second", () => {
  const json = JSON.stringify(frame("abc-1", "visit", { type: "evil", id: "x", url: "u" }));
  assert.ok(json.startsWith('{"id":"abc-1","type":"visit",'));
  assert.match(json.slice(0, 100), /^\{"id":"([A-Za-z0-9._:-]{1,64})"/);
});

test("frames_refuse_bad_ids_and_unknown_types", () => {
  assert.throws(() => frame("has space", "visit"), /invalid message id/);
  assert.throws(() => frame("x".repeat(65), "visit"), /invalid message id/);
  assert.throws(() => frame("ok", "launch"), /unknown message type/);
});

test("byte_size_counts_utf8_bytes", () => {
  assert.equal(byteSize({ a: "é" }), '{"a":"é"}'.length + 1);
});

test("visit_fields_round_times_and_collapse_titles", () => {
  assert.deepEqual(visitFields(visit), {
    url: "https://example.com/a",
    title: "A title",
    visit: { visit_id: "v-1", time: 1700000000123, tab_id: 4, window_id: 1, transition: "link", referrer: null, dwell_ms: 5230 },
  });
});

test("capture_fields_carry_exactly_one_body_and_a_dedupe_key_per_visit", () => {
  const html = captureFields(visit, { content_type: "html", html: "<p>x</p>", truncated: false, title: "T", language: "en" }, 1700000005000);
  assert.equal(html.html, "<p>x</p>");
  assert.equal("text" in html, false);
  assert.equal(html.dedupe_key, "capture:v-1");
  assert.equal(html.visit.visit_id, "v-1");
  const text = captureFields(visit, { content_type: "text", text: "x", truncated: true }, 1700000005000);
  assert.equal("html" in text, false);
  assert.equal(text.truncated, true);
  assert.equal(text.title, "A title");
});

test("titles_are_cut_to_1000_characters", () => {
  assert.equal(cutTitle("x".repeat(1500)).length, 1000);
  assert.equal(cutTitle("   "), null);
  assert.equal(cutTitle(undefined), null);
});

test("highlight_fields_need_text_and_get_a_fresh_dedupe_key", () => {
  const a = highlightFields({ url: "https://e.com/", title: "E", text: "quote", context: "", note: "  ", time: 5 });
  const b = highlightFields({ url: "https://e.com/", title: "E", text: "quote", time: 5 });
  assert.match(a.dedupe_key, /^highlight:[0-9a-f-]{36}$/);
  assert.notEqual(a.dedupe_key, b.dedupe_key);
  assert.equal(a.context, null);
  assert.equal(a.note, null);
  assert.throws(() => highlightFields({ url: "https://e.com/", text: " " }), /empty/);
  assert.throws(() => highlightFields({ url: "https://e.com/", text: "x".repeat(20_001) }), /longer/);
});

test("note_fields_drop_the_title_when_there_is_no_url", () => {
  const note = noteFields({ content: "remember this", url: null, title: "Secret page", time: 1 });
  assert.equal(note.url, null);
  assert.equal(note.title, null);
  assert.match(note.dedupe_key, /^note:/);
  assert.throws(() => noteFields({ content: "" }), /empty/);
});

test("forget_fields_need_exactly_one_selector", () => {
  assert.deepEqual(forgetFields({ domain: "e.com" }), { domain: "e.com" });
  assert.deepEqual(forgetFields({ everything: true }), { everything: true });
  assert.deepEqual(forgetFields({ since_time: 5 }), { since_time: 5, until_time: null });
  assert.throws(() => forgetFields({}), /exactly one/);
  assert.throws(() => forgetFields({ domain: "e.com", url: "https://e.com/" }), /exactly one/);
});

test("search_fields_trim_and_clamp", () => {
  assert.deepEqual(searchFields({ query: "  rust  ", limit: 500 }), { query: "rust", limit: 50, cursor: null });
  assert.throws(() => searchFields({ query: " " }), /search for/);
});

test("hello_fields_name_protocol_profile_and_capabilities", () => {
  const hello = helloFields({ version: "0.1.0", extensionId: "id", browser: { name: "chromium", version: "156" }, profileId: "p-1", paused: false });
  assert.deepEqual(hello, { protocol: 1, extension_version: "0.1.0", extension_id: "id", browser: { name: "chromium", version: "156" }, profile_id: "p-1", capabilities: ["actions", "notify"], paused: false });
});

test("browser_detection_tells_chrome_edge_brave_and_chromium_apart", () => {
  const b = (brand, version = "120") => [{ brand: "Not_A Brand", version: "8" }, { brand: "Chromium", version }, ...(brand ? [{ brand, version }] : [])];
  assert.deepEqual(detectBrowser({ brands: b("Google Chrome") }), { name: "chrome", version: "120" });
  assert.deepEqual(detectBrowser({ brands: b("Microsoft Edge") }), { name: "edge", version: "120" });
  assert.equal(detectBrowser({ brands: b(null), brave: true }).name, "brave");
  assert.deepEqual(detectBrowser({ brands: b(null, "156") }), { name: "chromium", version: "156" });
  assert.deepEqual(detectBrowser({ userAgent: "Mozilla/5.0 Chrome/119.0.1 Safari" }), { name: "chromium", version: "119.0.1" });
});

test("queue_options_give_tiers_and_supersede_keys", () => {
  assert.equal(queueOptions("highlight", { url: "https://e.com/" }).tier, "keep");
  assert.equal(queueOptions("note", {}).tier, "keep");
  assert.equal(queueOptions("capture_page", visitFields(visit)).tier, "low");
  assert.equal(queueOptions("bookmark_upsert", { bookmarks: [] }).tier, "normal");
  assert.deepEqual(queueOptions("visit", visitFields(visit)).supersedes, ["visit:v-1"]);
  assert.deepEqual(queueOptions("tab_snapshot", { tabs: [] }).supersedes, ["tabs"]);
  const updated = queueOptions("tab_event", { event: "updated", tab: { tab_id: 3, url: "https://e.com/x" } });
  assert.deepEqual(updated.keys, ["tabs", "tab-updated:3"]);
  assert.equal(updated.meta.host, "e.com");
  assert.deepEqual(queueOptions("pause", {}).supersedes, ["pause"]);
});

test("queue_options_record_host_url_and_time_for_forget", () => {
  const meta = queueOptions("capture_page", visitFields(visit)).meta;
  assert.deepEqual(meta, { host: "example.com", url: "https://example.com/a", time: 1700000000123 });
});

test("classify_frame_tells_responses_pushes_and_junk", () => {
  assert.deepEqual(classifyFrame({ id: "a", ok: true, result: { x: 1 } }), { kind: "response", id: "a", ok: true, result: { x: 1 } });
  const error = classifyFrame({ id: null, ok: false, error: { code: 7, message: "too big" } });
  assert.equal(error.error.name, "message_too_large");
  assert.equal(error.id, null);
  assert.equal(classifyFrame({ id: "a", ok: false }).error.code, 14);
  assert.equal(classifyFrame({ type: "action", action: "close_tabs" }).kind, "push");
  for (const junk of [null, 5, "x", [], {}]) assert.equal(classifyFrame(junk).kind, "junk");
});

test("code_names_resolve_to_numbers", () => {
  assert.equal(CODE.busy, 13);
  assert.equal(CODE.hello_required, 17);
});
