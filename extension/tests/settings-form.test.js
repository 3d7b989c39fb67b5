import test from "node:test";
import assert from "node:assert/strict";
import { checkSettings, countsInWords, wholeNumber } from "../src/ui/settings-form.js";

const GOOD = { dwell: "5", maxSize: "2000", days: "90", rules: "example.com\n\n */private/* ", useDefaults: true, skipPassword: true,
  actions: { group_tabs: true, close_tabs: false, capture_tab: false, create_bookmark: false } };

test("a_valid_form_becomes_the_settings_document", () => {
  const { settings, errors } = checkSettings(GOOD);
  assert.deepEqual(errors, {});
  assert.deepEqual(settings.capture, { min_dwell_ms: 5000, max_html_bytes: 2_000_000, max_text_bytes: 2_000_000, skip_password_pages: true });
  assert.deepEqual(settings.exclusions, { use_defaults: true, rules: ["example.com", "*/private/*"] });
  assert.equal(settings.history.backfill_days, 90);
  assert.equal(checkSettings({ ...GOOD, dwell: "0" }).settings.capture.min_dwell_ms, 0, "0 s is allowed");
});

test("bad_values_are_refused_with_a_message_for_their_field_never_clamped", () => {
  const { settings, errors } = checkSettings({ ...GOOD, dwell: "-3", maxSize: "", days: "2.5", rules: "example.com\nhttp://[bad" });
  assert.equal(settings, null);
  assert.equal(errors.dwell, "-3 is out of range: enter a number from 0 to 600 seconds.");
  assert.equal(errors["max-size"], "Enter a number from 10 to 15000 KB.");
  assert.equal(errors.days, "“2.5” is not a whole number: enter one from 1 to 3650 days.");
  assert.match(errors.rules, /^Not saved, these lines are not rules: “http:\/\/\[bad”/);
  assert.equal(wholeNumber("601", [0, 600], "seconds").error, "601 is out of range: enter a number from 0 to 600 seconds.");
  assert.equal(wholeNumber(" 12 ", [0, 600], "seconds").value, 12);
});

test("forget_counts_read_in_plain_words", () => {
  assert.equal(countsInWords({ pages: 3, visits: 5, page_versions: 4, highlights: 1, notes: 0, referrers_cleared: 2 }), "3 pages, 5 visits, 1 highlight");
  assert.equal(countsInWords({ pages: 1, visits: 1, tabs: 2 }), "1 page, 1 visit, 2 open tabs");
  assert.equal(countsInWords({ pages: 0 }), "");
});
