import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { hitFacts } from "../src/ui/results.js";
import { relativeTime } from "../src/ui/memory-format.js";

const NOW = Date.UTC(2026, 11, 6, 12, 0, 0);

test("times_read_as_people_say_them", () => {
  assert.equal(relativeTime(NOW - 10_000, NOW), "just now");
  assert.equal(relativeTime(NOW - 5 * 60_000, NOW), "5 minutes ago");
  assert.equal(relativeTime(NOW - 3 * 3_600_000, NOW), "3 hours ago");
  assert.equal(relativeTime(NOW - 86_400_000, NOW), "yesterday");
  assert.equal(relativeTime(NOW - 9 * 86_400_000, NOW, "en"), "Nov 27");
  assert.equal(relativeTime(null, NOW), "");
});

test("a_hit_uses_the_hosts_display_fields_when_it_gives_them", () => {
  const hit = { kind: "page", title: "Sundials — Gnomon docs", display_title: "Sundials", site: "gnomon.example",
    url: "https://www.gnomon.example/s", visits: 3, last_visit_ms: NOW - 2 * 3_600_000, visit_time: NOW - 9e9 };
  assert.deepEqual(hitFacts(hit, NOW), { title: "Sundials", site: "gnomon.example", when: "2 hours ago", visits: "3 visits", kind: "", missing: "" });
});

test("a_hit_from_an_older_host_falls_back_to_title_url_and_visit_time", () => {
  const hit = { kind: "highlight", title: null, url: "https://www.example.org/a/b", visit_time: NOW - 120_000 };
  assert.deepEqual(hitFacts(hit, NOW), { title: "https://www.example.org/a/b", site: "example.org", when: "2 minutes ago", visits: "", kind: "highlight", missing: "" });
  assert.equal(hitFacts({ kind: "page", title: "T", url: "https://a.example/", visit_count: 1 }, NOW).visits, "1 visit");
});

test("a_recent_page_reads_like_a_result_and_says_when_its_text_never_arrived", () => {
  const page = { id: 4, url: "https://docs.example/x", title: "X", domain: "docs.example", last_seen_time: NOW - 3_600_000, visit_count: 2, captured_time: null };
  assert.deepEqual(hitFacts(page, NOW), { title: "X", site: "docs.example", when: "1 hour ago", visits: "2 visits", kind: "", missing: "text not captured" });
  assert.equal(hitFacts({ ...page, captured_time: NOW }, NOW).missing, "");
});

test("the_setup_page_names_the_extensions_real_id", () => {
  const id = readFileSync(new URL("../EXTENSION_ID", import.meta.url), "utf8").trim();
  const page = readFileSync(new URL("../src/ui/setup.html", import.meta.url), "utf8");
  assert.ok(page.includes(`<code>${id}</code>`));
  assert.ok(!page.includes("`"), "no literal backticks");
});
