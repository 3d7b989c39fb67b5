import test from "node:test";
import assert from "node:assert/strict";
import { badgeFor } from "../src/badge.js";

test("badge_shows_each_host_state", () => {
  assert.equal(badgeFor({ status: "connected" }).text, "on");
  assert.equal(badgeFor({ status: "not_installed" }).text, "?");
  assert.match(badgeFor({ status: "not_installed" }).title, /not installed/);
  assert.equal(badgeFor({ status: "disconnected", lastError: "Native host has exited." }).text, "!");
  assert.match(badgeFor({ status: "disconnected", lastError: "Native host has exited." }).title, /exited/);
  assert.equal(badgeFor({ status: "connecting" }).text, "…");
});

test("paused_shows_off_unless_the_host_is_missing", () => {
  assert.equal(badgeFor({ status: "connected", paused: true }).text, "off");
  assert.equal(badgeFor({ status: "not_installed", paused: true }).text, "?");
});

test("drops_show_until_cleared", () => {
  const badge = badgeFor({ status: "connected", dropped: 3 });
  assert.equal(badge.text, "drop");
  assert.match(badge.title, /3 queued item/);
  assert.equal(badgeFor({ status: "connected", dropped: 3, paused: true }).text, "off");
});
