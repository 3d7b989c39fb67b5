// How the popup tells what was not captured and why (no URLs): an exclusion rule, a
// password field, a visit too short or out of view, a page that could not be read.

import { NOT_CAPTURED } from "../config.js";

const REASONS = new Set(["password field", ...Object.values(NOT_CAPTURED)]);

/** "3 pages: visit too short 2, excluded by mail.google.com 1", most first. */
export function skippedText(skipped) {
  const counts = Object.entries(skipped ?? {}).filter(([, n]) => Number.isInteger(n) && n > 0);
  const total = counts.reduce((sum, [, n]) => sum + n, 0);
  if (!total) return "0 pages";
  const named = counts
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([reason, n]) => `${REASONS.has(reason) ? reason : `excluded by ${reason}`} ${n}`);
  return `${total} page${total === 1 ? "" : "s"}: ${named.join(", ")}`;
}

/** One line on the page in front: captured, waiting for its dwell, or why it is not. */
export function pageStatusText(status) {
  // Nothing to say about no tab, or a browser or extension page (never a web page).
  if (!status || status.state === "none" || status.reason === "scheme") return "";
  if (status.state === "captured") return "This page is saved: its words can be searched.";
  if (status.state === "waiting") {
    const seen = Math.floor((status.visible_ms ?? 0) / 1000);
    const needed = Math.ceil((status.min_dwell_ms ?? 0) / 1000);
    return `This page is not saved yet: in view ${seen} s of the ${needed} s needed.`;
  }
  const why = {
    excluded: `excluded by the rule ${status.rule}`,
    incognito: "incognito pages are never captured",
    paused: "capture is paused",
    "password field": "it has a password field",
    [NOT_CAPTURED.unreadable]: "it could not be read",
  }[status.reason] ?? String(status.reason);
  return `This page is not saved: ${why}.`;
}
