import test from "node:test";
import assert from "node:assert/strict";
import { Queue } from "../src/queue.js";
import { FakeStorage } from "./helpers/fake-ext.js";

function msg(id, type = "visit", extra = {}) {
  return { id, type, ...extra };
}

async function filled(storage, specs, limits = {}) {
  const queue = new Queue(storage, limits);
  await queue.load();
  for (const [id, type, tier, bytes = 10, opts = {}] of specs) {
    await queue.push(msg(id, type), { tier, bytes, ...opts });
  }
  return queue;
}

test("queue_keeps_messages_in_push_order", async () => {
  const queue = await filled(new FakeStorage(), [["a", "visit", "low"], ["b", "note", "keep"], ["c", "visit", "low"]]);
  assert.deepEqual(queue.entries().map((e) => e.id), ["a", "b", "c"]);
  assert.equal(queue.head().id, "a");
});

test("queue_survives_a_restart_with_contents_and_order", async () => {
  const storage = new FakeStorage();
  await filled(storage, [["a", "visit", "low"], ["b", "highlight", "keep"]]);
  const reopened = new Queue(storage);
  await reopened.load();
  assert.deepEqual(reopened.entries().map((e) => e.id), ["a", "b"]);
  assert.deepEqual(await reopened.read(reopened.head()), { id: "a", type: "visit" });
});

test("acknowledged_messages_leave_storage", async () => {
  const storage = new FakeStorage();
  const queue = await filled(storage, [["a", "visit", "low"], ["b", "visit", "low"]]);
  await queue.remove("a");
  assert.deepEqual(queue.entries().map((e) => e.id), ["b"]);
  assert.deepEqual(storage.keys(), ["q:index", "q:item:2"]);
  const reopened = new Queue(storage);
  await reopened.load();
  assert.deepEqual(reopened.entries().map((e) => e.id), ["b"]);
});

test("a_push_writes_message_and_index_in_one_storage_call", async () => {
  const storage = new FakeStorage();
  const queue = new Queue(storage);
  await queue.load();
  const before = storage.calls.set;
  await queue.push(msg("a"), { tier: "low", bytes: 5 });
  assert.equal(storage.calls.set - before, 1);
});

test("garbage_left_by_a_crash_between_index_write_and_delete_is_collected_on_load", async () => {
  const storage = new FakeStorage();
  const queue = await filled(storage, [["a", "visit", "low"]]);
  // Simulate a crash after the index write of a removal but before the delete.
  queue._unlink([queue.head()]);
  await queue._writeIndex();
  assert.ok(storage.keys().includes("q:item:1"));
  const reopened = new Queue(storage);
  await reopened.load();
  assert.equal(reopened.length, 0);
  assert.deepEqual(storage.keys(), ["q:index"]);
});

test("an_entry_whose_data_is_missing_reads_as_null", async () => {
  const storage = new FakeStorage();
  const queue = await filled(storage, [["a", "visit", "low"]]);
  await storage.remove("q:item:1");
  assert.equal(await queue.read(queue.head()), null);
});

test("overflow_drops_the_oldest_visit_first_and_counts_it", async () => {
  const queue = await filled(new FakeStorage(), [
    ["n1", "note", "keep"], ["v1", "visit", "low"], ["b1", "bookmark_upsert", "normal"], ["v2", "capture_page", "low"],
  ], { maxItems: 3 });
  assert.deepEqual(queue.entries().map((e) => e.id), ["n1", "b1", "v2"]);
  assert.equal(queue.stats.dropped, 1);
  assert.deepEqual(queue.stats.droppedByType, { visit: 1 });
  assert.ok(Number.isFinite(queue.stats.lastDropTime));
});

test("overflow_drops_normal_messages_only_when_no_low_ones_are_left", async () => {
  const queue = await filled(new FakeStorage(), [["b1", "bookmark_upsert", "normal"], ["h1", "highlight", "keep"], ["b2", "bookmark_upsert", "normal"]], { maxItems: 2 });
  assert.deepEqual(queue.entries().map((e) => e.id), ["h1", "b2"]);
});

test("overflow_never_drops_highlights_or_notes_even_past_the_bound", async () => {
  const queue = await filled(new FakeStorage(), [["h1", "highlight", "keep"], ["n1", "note", "keep"], ["h2", "highlight", "keep"], ["v1", "visit", "low"]], { maxItems: 2 });
  assert.deepEqual(queue.entries().map((e) => e.id), ["h1", "n1", "h2"]);
  assert.deepEqual(queue.stats.droppedByType, { visit: 1 });
});

test("a_new_low_message_is_itself_dropped_when_only_keep_messages_fill_the_queue", async () => {
  const storage = new FakeStorage();
  const queue = await filled(storage, [["h1", "highlight", "keep"], ["h2", "highlight", "keep"]], { maxItems: 2 });
  const { entry, dropped } = await queue.push(msg("v1"), { tier: "low", bytes: 1 });
  assert.equal(entry, null);
  assert.equal(dropped[0].id, "v1");
  assert.equal(storage.keys().some((k) => k === "q:item:3"), false);
});

test("overflow_by_bytes_drops_oldest_captures", async () => {
  const queue = await filled(new FakeStorage(), [["c1", "capture_page", "low", 600], ["c2", "capture_page", "low", 600]], { maxBytes: 1000 });
  assert.deepEqual(queue.entries().map((e) => e.id), ["c2"]);
  assert.equal(queue.bytes, 600);
});

test("a_message_larger_than_the_whole_queue_is_dropped_instead_of_everything_before_it", async () => {
  const queue = await filled(new FakeStorage(), [["c1", "capture_page", "low", 100], ["c2", "capture_page", "low", 5000]], { maxBytes: 1000 });
  assert.deepEqual(queue.entries().map((e) => e.id), ["c1"]);
  assert.deepEqual(queue.stats.droppedByType, { capture_page: 1 });
});

test("the_in_flight_message_is_never_dropped_or_superseded", async () => {
  const queue = await filled(new FakeStorage(), [["s1", "tab_snapshot", "low", 10, { keys: ["tabs"] }]], { maxItems: 1 });
  queue.inflightId = "s1";
  await queue.push(msg("s2", "tab_snapshot"), { tier: "low", bytes: 10, keys: ["tabs"], supersedes: ["tabs"] });
  assert.deepEqual(queue.entries().map((e) => e.id), ["s1"]);
  assert.equal(queue.stats.dropped, 1);
});

test("superseded_messages_are_removed_without_counting_as_drops", async () => {
  const queue = await filled(new FakeStorage(), [
    ["e1", "tab_event", "low", 10, { keys: ["tabs"] }],
    ["n1", "note", "keep"],
    ["s1", "tab_snapshot", "low", 10, { keys: ["tabs"] }],
  ]);
  await queue.push(msg("s2", "tab_snapshot"), { tier: "low", bytes: 10, keys: ["tabs"], supersedes: ["tabs"] });
  assert.deepEqual(queue.entries().map((e) => e.id), ["n1", "s2"]);
  assert.equal(queue.stats.dropped, 0);
  assert.equal(queue.stats.superseded, 2);
});

test("attempts_are_counted_and_persisted", async () => {
  const storage = new FakeStorage();
  const queue = await filled(storage, [["a", "visit", "low"]]);
  assert.equal(await queue.bumpAttempts("a"), 1);
  assert.equal(await queue.bumpAttempts("a"), 2);
  const reopened = new Queue(storage);
  await reopened.load();
  assert.equal(reopened.head().attempts, 2);
});

test("remove_where_purges_matching_unsent_entries", async () => {
  const queue = await filled(new FakeStorage(), [["a", "visit", "low", 1, { meta: { host: "x.com" } }], ["b", "visit", "low", 1, { meta: { host: "y.com" } }]]);
  assert.equal(await queue.removeWhere((e) => e.meta.host === "x.com"), 1);
  assert.deepEqual(queue.entries().map((e) => e.id), ["b"]);
});

test("clear_drops_resets_the_counters", async () => {
  const queue = await filled(new FakeStorage(), [["v1", "visit", "low"], ["v2", "visit", "low"]], { maxItems: 1 });
  await queue.clearDrops();
  assert.equal(queue.stats.dropped, 0);
  assert.deepEqual(queue.stats.droppedByType, {});
});

test("concurrent_pushes_are_serialised_without_losing_any", async () => {
  const storage = new FakeStorage();
  const queue = new Queue(storage);
  await queue.load();
  await Promise.all(Array.from({ length: 50 }, (_, i) => queue.push(msg(`m${i}`), { tier: "low", bytes: 1 })));
  assert.equal(queue.length, 50);
  const reopened = new Queue(storage);
  await reopened.load();
  assert.deepEqual(reopened.entries().map((e) => e.id), Array.from({ length: 50 }, (_, i) => `m${i}`));
});
