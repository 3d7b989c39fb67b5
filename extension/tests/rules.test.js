import test from "node:test";
import assert from "node:assert/strict";
import { gate, readyToCapture, normalizeSettings, extractionCaps, mergeSettings } from "../src/rules.js";
import { effectiveRules } from "../src/urls.js";
import { DEFAULT_SETTINGS } from "../src/config.js";

const rules = effectiveRules({ use_defaults: true, rules: ["blocked.example"] });

test("gate_allows_an_ordinary_page_and_returns_it_scrubbed", () => {
  assert.deepEqual(gate("https://example.com/a?token=1&q=2", { rules }), { ok: true, url: "https://example.com/a?q=2" });
});

test("gate_refuses_incognito_before_anything_else", () => {
  assert.deepEqual(gate("https://example.com/", { incognito: true, paused: true, rules }), { ok: false, reason: "incognito" });
});

test("gate_refuses_everything_while_paused", () => {
  assert.deepEqual(gate("https://example.com/", { paused: true, rules }), { ok: false, reason: "paused" });
});

test("gate_refuses_non_http_schemes", () => {
  for (const url of ["chrome://newtab/", "edge://settings", "brave://rewards", "about:blank", "file:///tmp/x.html", "view-source:https://e.com"]) {
    assert.equal(gate(url, { rules }).reason, "scheme", url);
  }
});

test("gate_refuses_excluded_pages_naming_the_rule", () => {
  assert.deepEqual(gate("https://www.blocked.example/x", { rules }), { ok: false, reason: "excluded", rule: "blocked.example" });
  assert.equal(gate("https://example.com/login", { rules }).rule, "*/login");
});

test("gate_allows_localhost_test_servers", () => {
  assert.equal(gate("http://127.0.0.1:8765/article.html", { rules }).ok, true);
});

test("a_visit_is_ready_once_visible_for_the_minimum_dwell", () => {
  const settings = normalizeSettings({ capture: { min_dwell_ms: 5000 } });
  assert.equal(readyToCapture({ visible_ms: 4999, captured: false }, settings), false);
  assert.equal(readyToCapture({ visible_ms: 5000, captured: false }, settings), true);
});

test("a_captured_visit_is_never_ready_again", () => {
  assert.equal(readyToCapture({ visible_ms: 60_000, captured: true }, normalizeSettings({})), false);
  assert.equal(readyToCapture(null, normalizeSettings({})), false);
});

test("normalize_settings_fills_defaults_from_nothing", () => {
  assert.deepEqual(normalizeSettings(undefined), JSON.parse(JSON.stringify(DEFAULT_SETTINGS)));
});

test("normalize_settings_clamps_sizes_and_dwell_to_bounds", () => {
  const s = normalizeSettings({ capture: { min_dwell_ms: -5, max_html_bytes: 10 ** 12, max_text_bytes: "abc" }, history: { backfill_days: 0 } });
  assert.equal(s.capture.min_dwell_ms, 0);
  assert.equal(s.capture.max_html_bytes, 15 * 1024 * 1024);
  assert.equal(s.capture.max_text_bytes, DEFAULT_SETTINGS.capture.max_text_bytes);
  assert.equal(s.history.backfill_days, 1);
});

test("close_tabs_is_off_by_default_and_other_actions_on", () => {
  assert.deepEqual(normalizeSettings({}).actions, { group_tabs: true, close_tabs: false, capture_tab: false, create_bookmark: false });
});

test("normalize_settings_drops_unknown_keys_and_non_string_rules", () => {
  const s = normalizeSettings({ evil: 1, exclusions: { rules: [" a.com ", 5, "", null], use_defaults: "yes" }, actions: { close_tabs: "true", launch_missiles: true } });
  assert.equal("evil" in s, false);
  assert.deepEqual(s.exclusions, { use_defaults: true, rules: ["a.com"] });
  assert.equal(s.actions.close_tabs, false);
  assert.equal("launch_missiles" in s.actions, false);
});

test("extraction_caps_follow_the_settings", () => {
  assert.deepEqual(extractionCaps(normalizeSettings({ capture: { max_html_bytes: 50_000, max_text_bytes: 20_000 } })), { maxHtmlBytes: 50_000, maxTextBytes: 20_000, skipPasswordPages: true, skipPaymentPages: true });
  const off = extractionCaps(normalizeSettings({ capture: { skip_password_pages: false } }));
  assert.equal(off.skipPasswordPages, false);
  assert.equal(off.skipPaymentPages, false);
  assert.equal(normalizeSettings({ capture: { skip_password_pages: "no" } }).capture.skip_password_pages, true);
});

test("a_partial_settings_change_keeps_the_other_values", () => {
  const current = normalizeSettings({ exclusions: { rules: ["a.com"] }, actions: { close_tabs: true } });
  const merged = mergeSettings(current, { capture: { min_dwell_ms: 500 } });
  assert.equal(merged.capture.min_dwell_ms, 500);
  assert.equal(merged.capture.max_html_bytes, DEFAULT_SETTINGS.capture.max_html_bytes);
  assert.deepEqual(merged.exclusions.rules, ["a.com"]);
  assert.equal(merged.actions.close_tabs, true);
  assert.deepEqual(mergeSettings(current, { exclusions: { rules: [] } }).exclusions, { use_defaults: true, rules: [] });
});
