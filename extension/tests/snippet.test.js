import { test } from "node:test";
import assert from "node:assert/strict";

import { snippetParts } from "../src/ui/snippet.js";

test("matched terms wrapped in ** become marked runs", () => {
  assert.deepEqual(snippetParts("the **sqlite** wal **checkpoint** runs"), [
    { text: "the ", marked: false },
    { text: "sqlite", marked: true },
    { text: " wal ", marked: false },
    { text: "checkpoint", marked: true },
    { text: " runs", marked: false },
  ]);
});

test("an unpaired marker stays literal and nothing is lost", () => {
  const parts = snippetParts("a **b** c ** d");
  assert.deepEqual(parts, [
    { text: "a ", marked: false },
    { text: "b", marked: true },
    { text: " c ** d", marked: false },
  ]);
  assert.equal(parts.map((p) => p.text).join(""), "a b c ** d");
});

test("markup in a snippet is plain text, never HTML", () => {
  assert.deepEqual(snippetParts("<img src=x onerror=alert(1)> **<b>**"), [
    { text: "<img src=x onerror=alert(1)> ", marked: false },
    { text: "<b>", marked: true },
  ]);
});

test("missing or empty snippets give no runs", () => {
  assert.deepEqual(snippetParts(undefined), []);
  assert.deepEqual(snippetParts(""), []);
  assert.deepEqual(snippetParts("****"), []);
});
