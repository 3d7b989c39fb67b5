import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { chartBars, filterFields, forgetSummary, ordered, presentation, relativeTime, visitsText } from "../src/ui/memory-format.js";
import { memoryUrl, suggestionsFor, xmlText } from "../src/launchers.js";

const NOW = new Date(2026, 11, 5, 15, 0).getTime();
const fakeExt = { extensionUrl: (path) => `chrome-extension://id/${path}` };

test("presentation_prefers_the_hosts_display_fields_and_falls_back_to_title_and_url", () => {
  const hit = { title: "WAL — SQLite", url: "https://www.sqlite.org/wal.html", domain: "www.sqlite.org", visit_count: 3, visit_time: 5 };
  assert.deepEqual(presentation(hit), { title: "WAL — SQLite", site: "sqlite.org", url: hit.url, visits: 3, time: 5 });
  const shown = presentation({ ...hit, display_title: "WAL", site: "SQLite", visits: 4, last_visit_ms: 9 });
  assert.deepEqual([shown.title, shown.site, shown.visits, shown.time], ["WAL", "SQLite", 4, 9]);
  assert.equal(presentation({ url: "https://example.com/a/b", title: null }).title, "example.com/a/b");
});

test("relative_times_read_like_a_person_would_say_them", () => {
  assert.equal(relativeTime(NOW - 20_000, NOW, "en"), "just now");
  assert.equal(relativeTime(NOW - 5 * 60_000, NOW, "en"), "5 minutes ago");
  assert.equal(relativeTime(NOW - 3 * 3_600_000, NOW, "en"), "3 hours ago");
  assert.equal(relativeTime(new Date(2026, 11, 4, 23, 0).getTime(), NOW, "en"), "yesterday");
  assert.equal(relativeTime(new Date(2026, 11, 1, 9, 0).getTime(), NOW, "en"), "4 days ago");
  assert.equal(relativeTime(new Date(2026, 10, 2, 9, 0).getTime(), NOW, "en"), "Nov 2");
  assert.equal(relativeTime(new Date(2025, 10, 2, 9, 0).getTime(), NOW, "en"), "Nov 2, 2025");
  assert.equal(visitsText(1), "1 visit");
  assert.equal(visitsText(0), "");
});

test("filters_become_the_hosts_fields_with_an_inclusive_end_date", () => {
  const fields = filterFields({ site: " https://Docs.Python.org/3/ ", since: "2026-12-01", until: "2026-12-03", kinds: ["page", "note"] });
  assert.deepEqual(fields, { domain: "docs.python.org", since_time: new Date(2026, 11, 1).getTime(), until_time: new Date(2026, 11, 4).getTime(), kinds: ["page", "note"] });
  assert.deepEqual(filterFields({ kinds: ["page", "highlight", "note", "bookmark"] }), { kinds: null });
});

test("time_order_sorts_newest_first_and_relevance_keeps_the_hosts_order", () => {
  const hits = [{ visit_time: 1 }, { visit_time: 3 }, { visit_time: 2 }];
  assert.deepEqual(ordered(hits, "time").map((h) => h.visit_time), [3, 2, 1]);
  assert.equal(ordered(hits, "relevance"), hits);
});

test("the_chart_has_one_bar_per_day_scaled_to_the_busiest", () => {
  const start = new Date(2026, 10, 28).getTime();
  const end = new Date(2026, 11, 5).getTime();
  const { bars, max } = chartBars([{ time: new Date(2026, 11, 1).getTime(), visits: 8 }, { time: new Date(2026, 11, 4).getTime(), visits: 2 }], start, end, { width: 700, height: 100 });
  assert.equal(bars.length, 7);
  assert.equal(max, 8);
  assert.deepEqual(bars.map((b) => b.visits), [0, 0, 0, 8, 0, 0, 2]);
  assert.equal(bars[3].height, 100);
  assert.equal(bars[6].height, 25);
});

test("the_forget_preview_is_said_in_plain_words", () => {
  assert.equal(forgetSummary({ pages: 1, page_versions: 2, visits: 3, highlights: 0, notes: 1, bookmarks: 0 }), "1 page, 2 stored versions of its text, 3 visits and 1 note");
  assert.equal(forgetSummary({ pages: 0 }), "nothing");
});

test("omnibox_suggestions_escape_page_text_and_carry_the_url", () => {
  const [first, ...rest] = suggestionsFor([
    { title: "<b>Tom & Jerry</b>", url: "https://example.com/?a=1&b=2", domain: "www.example.com" },
    { title: "Same", url: "https://example.com/?a=1&b=2" },
    { title: "A note", url: null },
    { title: "Script", url: "javascript:alert(1)" },
  ]);
  assert.equal(rest.length, 0);
  assert.equal(first.content, "https://example.com/?a=1&b=2");
  assert.equal(first.description, "&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; <dim>— example.com</dim> <url>https://example.com/?a=1&amp;b=2</url>");
  assert.equal(xmlText(`"'`), "&quot;&apos;");
});

test("the_memory_page_opens_at_a_search_or_at_a_page", () => {
  assert.equal(memoryUrl(fakeExt), "chrome-extension://id/src/ui/memory.html#/search");
  assert.equal(memoryUrl(fakeExt, { query: " wal mode " }), "chrome-extension://id/src/ui/memory.html#/search?q=wal%20mode");
  assert.equal(memoryUrl(fakeExt, { url: "https://a.example/x?y=1" }), "chrome-extension://id/src/ui/memory.html#/page?url=https%3A%2F%2Fa.example%2Fx%3Fy%3D1");
});

test("the_manifest_binds_alt_shift_m_and_the_omnibox_keyword_bt", () => {
  const manifest = JSON.parse(readFileSync(new URL("../manifest.json", import.meta.url), "utf8"));
  assert.equal(manifest.commands["open-memory"].suggested_key.default, "Alt+Shift+M");
  assert.equal(manifest.omnibox.keyword, "bt");
});
