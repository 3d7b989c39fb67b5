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
