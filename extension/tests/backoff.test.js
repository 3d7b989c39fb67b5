import test from "node:test";
import assert from "node:assert/strict";
import { backoffDelay } from "../src/backoff.js";

const mid = () => 0.5; // no jitter

test("backoff_doubles_from_one_second", () => {
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => backoffDelay(n, {}, mid)), [1000, 2000, 4000, 8000, 16000]);
});

test("backoff_is_capped_at_five_minutes", () => {
  assert.equal(backoffDelay(30, {}, mid), 300_000);
  assert.equal(backoffDelay(10_000, {}, mid), 300_000);
});

test("backoff_jitter_stays_within_twenty_percent", () => {
  assert.equal(backoffDelay(3, {}, () => 0), 3200);
  assert.equal(backoffDelay(3, {}, () => 0.999999), 4800);
});

test("backoff_treats_attempt_zero_or_garbage_as_the_first", () => {
  assert.equal(backoffDelay(0, {}, mid), 1000);
  assert.equal(backoffDelay(-3, {}, mid), 1000);
});
