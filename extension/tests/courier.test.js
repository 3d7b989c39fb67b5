import test from "node:test";
import assert from "node:assert/strict";
import { Courier, statusFromDisconnect } from "../src/courier.js";
import { Queue } from "../src/queue.js";
import { FakeClock, FakeHost, FakeStorage, settle } from "./helpers/fake-ext.js";

async function setup(handler, { mode = "up", storage = new FakeStorage() } = {}) {
  const host = new FakeHost(handler);
  host.mode = mode;
  const clock = new FakeClock();
  const queue = new Queue(storage, { now: clock.now });
  await queue.load();
  const events = { results: [], rejected: [], pushes: [], states: [], connected: 0 };
  const courier = new Courier({
    connectNative: () => host.connect(),
    queue,
    timers: clock,
    random: () => 0.5,
    hello: () => ({ protocol: 1 }),
    onState: (state) => events.states.push(state.status),
    onConnected: () => { events.connected += 1; },
    onResult: (entry, message, result) => events.results.push([entry.id, result]),
    onRejected: (entry, message, error) => events.rejected.push([entry.id, error.code]),
    onPush: (message) => events.pushes.push(message),
  });
  const push = (id, type = "visit", tier = "low", bytes = 10) => queue.push({ id, type }, { tier, bytes });
  return { host, clock, queue, courier, events, push };
}

test("connect_sends_hello_first_and_becomes_connected", async () => {
  const { host, courier, events } = await setup();
  courier.connect();
  await settle();
  assert.equal(host.received[0].type, "hello");
  assert.equal(courier.state.status, "connected");
  assert.deepEqual(events.states, ["connecting", "connected"]);
  assert.equal(events.connected, 1);
});

test("queued_messages_are_delivered_one_at_a_time_in_order_and_acknowledged", async () => {
  const seen = [];
  let inflight = 0;
  const { host, courier, queue, events, push } = await setup((m) => {
    seen.push(m.id);
    inflight += 1;
    assert.equal(inflight, 1, "one queued message in flight");
    inflight -= 1;
    return { result: { n: m.id } };
  });
  await push("a");
  await push("b");
  await push("c");
  courier.connect();
  await settle(40);
  assert.deepEqual(seen, ["a", "b", "c"]);
  assert.equal(queue.length, 0);
  assert.deepEqual(events.results.map(([id]) => id), ["a", "b", "c"]);
  assert.equal(host.of("visit").length, 3);
});

test("busy_is_retried_with_the_same_id_after_the_backoff", async () => {
  let calls = 0;
  const { courier, clock, queue, host, push } = await setup((m) => (++calls === 1 ? { error: { code: 13, message: "locked", retry_after_ms: 2500 } } : { result: {} }));
  await push("a");
  courier.connect();
  await settle();
  assert.equal(queue.length, 1);
  await clock.advance(2400);
  assert.equal(host.of("visit").length, 1, "held until retry_after_ms");
  await clock.advance(200);
  await settle();
  assert.deepEqual(host.of("visit").map((m) => m.id), ["a", "a"]);
  assert.equal(queue.length, 0);
});

test("non_retryable_errors_remove_the_message_and_report_it", async () => {
  const { courier, queue, events, push } = await setup(() => ({ error: { code: 9, message: "excluded" } }));
  await push("a");
  await push("b");
  courier.connect();
  await settle(40);
  assert.equal(queue.length, 0);
  assert.deepEqual(events.rejected, [["a", 9], ["b", 9]]);
});

test("internal_errors_give_up_after_five_attempts", async () => {
  const { courier, clock, queue, events, host, push } = await setup(() => ({ error: { code: 14, message: "oops" } }));
  await push("a");
  courier.connect();
  for (let i = 0; i < 10; i += 1) await clock.advance(60_000);
  assert.equal(host.of("visit").length, 5);
  assert.equal(queue.length, 0);
  assert.deepEqual(events.rejected, [["a", 14]]);
});

test("hello_required_sends_hello_again_then_the_message", async () => {
  let first = true;
  const { courier, queue, host, push } = await setup(() => {
    if (first) {
      first = false;
      return { error: { code: 17, message: "hello first" } };
    }
    return { result: {} };
  });
  await push("a");
  courier.connect();
  await settle(40);
  assert.deepEqual(host.received.map((m) => m.type), ["hello", "visit", "hello", "visit"]);
  assert.equal(queue.length, 0);
});

test("an_error_with_a_null_id_applies_to_the_message_in_flight", async () => {
  const { courier, queue, events, push } = await setup(() => ({ frame: { id: null, ok: false, error: { code: 7, message: "too large" } } }));
  await push("a");
  courier.connect();
  await settle();
  assert.equal(queue.length, 0);
  assert.deepEqual(events.rejected, [["a", 7]]);
});

test("messages_larger_than_the_host_cap_are_rejected_without_sending", async () => {
  const { courier, events, host, push } = await setup();
  await push("big", "capture_page", "low", 17 * 1024 * 1024);
  courier.connect();
  await settle();
  assert.equal(host.of("capture_page").length, 0);
  assert.deepEqual(events.rejected, [["big", 7]]);
});

test("a_host_crash_keeps_the_message_and_resends_it_after_reconnect", async () => {
  let answer = false;
  const { courier, clock, queue, host, push } = await setup(() => (answer ? { result: {} } : null));
  await push("a");
  courier.connect();
  await settle();
  host.port.crash();
  await settle();
  assert.equal(courier.state.status, "disconnected");
  assert.equal(queue.length, 1);
  answer = true;
  await clock.advance(1000);
  await settle();
  assert.equal(courier.state.status, "connected");
  assert.deepEqual(host.of("visit").map((m) => m.id), ["a", "a"]);
  assert.equal(queue.length, 0);
});

test("a_silent_host_is_dropped_after_the_response_timeout", async () => {
  const { courier, clock, host, push } = await setup(() => null);
  await push("a");
  courier.connect();
  await settle();
  await clock.advance(120_000);
  assert.equal(host.ports[0].open, false);
  assert.equal(courier.state.status, "disconnected");
  assert.match(courier.state.lastError, /did not answer/);
});

test("a_missing_host_manifest_shows_as_not_installed_and_backs_off", async () => {
  const { courier, clock, host } = await setup(undefined, { mode: "not_installed" });
  courier.connect();
  await settle();
  assert.equal(courier.state.status, "not_installed");
  assert.equal(courier.state.attempt, 1);
  assert.equal(courier.state.nextRetryTime, clock.now() + 1000);
  await clock.advance(1000);
  await settle();
  assert.equal(host.ports.length, 2);
  assert.equal(courier.state.nextRetryTime, clock.now() + 2000);
  courier.close();
});

test("connect_waits_for_the_backoff_unless_forced", async () => {
  const { courier, host } = await setup(undefined, { mode: "not_installed" });
  courier.connect();
  await settle();
  courier.connect();
  assert.equal(host.ports.length, 1);
  courier.connect({ force: true });
  assert.equal(host.ports.length, 2);
  courier.close();
});

test("disconnect_messages_map_to_statuses", () => {
  assert.equal(statusFromDisconnect("Specified native messaging host not found."), "not_installed");
  assert.equal(statusFromDisconnect("Access to the specified native messaging host is forbidden."), "forbidden");
  assert.equal(statusFromDisconnect("Native host has exited."), "disconnected");
});

test("direct_requests_resolve_with_the_result_and_fail_fast_when_disconnected", async () => {
  const { courier } = await setup((m) => (m.type === "search" ? { result: { results: [1] } } : { error: { code: 16, message: "bad" } }));
  await assert.rejects(courier.request("status"), /not connected/);
  courier.connect();
  await settle();
  assert.deepEqual(await courier.request("search", { query: "x" }), { results: [1] });
  await assert.rejects(courier.request("status"), (error) => error.code === 16);
});

test("direct_requests_time_out", async () => {
  const { courier, clock } = await setup(() => null);
  courier.connect();
  await settle();
  const outcome = assert.rejects(courier.request("status", {}, 1000), /no answer/);
  await clock.advance(1000);
  await outcome;
});

test("push_frames_go_to_the_push_handler", async () => {
  const { courier, host, events } = await setup();
  courier.connect();
  await settle();
  host.port.push({ type: "action", action_id: "a1", action: "close_tabs" });
  assert.equal(events.pushes[0].action_id, "a1");
});

test("a_successful_hello_resets_the_backoff", async () => {
  const { courier, clock, host } = await setup();
  host.mode = "not_installed";
  courier.connect();
  await settle();
  host.mode = "up";
  await clock.advance(1000);
  await settle();
  assert.equal(courier.state.status, "connected");
  assert.equal(courier.state.attempt, 0);
});

test("a_restored_backoff_is_waited_out_then_retried", async () => {
  const { courier, clock, host } = await setup();
  courier.restore({ attempt: 3, nextRetryTime: clock.now() + 4000, status: "not_installed" });
  courier.connect();
  assert.equal(host.ports.length, 0, "still backing off");
  assert.equal(courier.state.status, "not_installed");
  await clock.advance(4000);
  await settle();
  assert.equal(courier.state.status, "connected");
});
