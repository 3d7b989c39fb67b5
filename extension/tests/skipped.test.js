import test from "node:test";
import assert from "node:assert/strict";
import { skippedText } from "../src/ui/skipped.js";

test("the_popup_counts_pages_not_captured_by_reason_most_first", () => {
  assert.equal(skippedText({}), "0 pages");
  assert.equal(skippedText(undefined), "0 pages");
  assert.equal(skippedText({ "*/login": 2, "password field": 3, "mail.google.com": 2, bad: "x" }),
    "7 pages: password field 3, excluded by */login 2, excluded by mail.google.com 2");
  assert.equal(skippedText({ "visit too short": 1 }), "1 page: visit too short 1");
  assert.equal(skippedText({ "not in view long enough": 2, "could not be read": 1 }),
    "3 pages: not in view long enough 2, could not be read 1");
});

test("the_popup_says_what_became_of_the_page_in_front", async () => {
  const { pageStatusText } = await import("../src/ui/skipped.js");
  assert.equal(pageStatusText({ state: "captured" }), "This page is saved: its words can be searched.");
  assert.equal(pageStatusText({ state: "waiting", visible_ms: 2400, min_dwell_ms: 5000 }), "This page is not saved yet: in view 2 s of the 5 s needed.");
  assert.equal(pageStatusText({ state: "not_captured", reason: "excluded", rule: "*/login" }), "This page is not saved: excluded by the rule */login.");
  assert.equal(pageStatusText({ state: "not_captured", reason: "password field" }), "This page is not saved: it has a password field.");
  assert.equal(pageStatusText({ state: "not_captured", reason: "scheme" }), "", "a browser page: nothing to say");
  assert.equal(pageStatusText({ state: "none" }), "");
});
