import test from "node:test";
import assert from "node:assert/strict";
import { skippedText } from "../src/ui/skipped.js";

test("the_popup_counts_skipped_pages_by_rule_most_first", () => {
  assert.equal(skippedText({}), "0 pages");
  assert.equal(skippedText(undefined), "0 pages");
  assert.equal(skippedText({ "*/login": 2, "password field": 3, "mail.google.com": 2, bad: "x" }),
    "7 page(s) by rule: password field 3, */login 2, mail.google.com 2");
});
