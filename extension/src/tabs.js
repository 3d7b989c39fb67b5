// Browser tabs as protocol Tab objects (PROTOCOL.md section 2). A tab whose page fails the
// capture gate keeps its place in the snapshot (so tab counts stay true) but with url and
// title null. Incognito tabs never appear at all.

import { cutTitle } from "./protocol.js";

function intOrNull(value) {
  return Number.isInteger(value) && value >= 0 ? value : null;
}

/** `gateFor(url, incognito)` → rules.gate result. */
export function toTab(tab, gateFor) {
  const verdict = gateFor(tab.url ?? tab.pendingUrl ?? "", tab.incognito);
  return {
    tab_id: tab.id,
    window_id: tab.windowId,
    index: intOrNull(tab.index),
    url: verdict.ok ? verdict.url : null,
    title: verdict.ok ? cutTitle(tab.title) : null,
    active: Boolean(tab.active),
    pinned: Boolean(tab.pinned),
    group_id: Number.isInteger(tab.groupId) && tab.groupId >= 0 ? tab.groupId : null,
    last_accessed_time: Number.isFinite(tab.lastAccessed) ? Math.floor(tab.lastAccessed) : null,
  };
}

export function snapshotTabs(tabs, gateFor, max) {
  return tabs.filter((tab) => !tab.incognito && Number.isInteger(tab.id) && tab.id >= 0).slice(0, max).map((tab) => toTab(tab, gateFor));
}

const WATCHED = ["url", "title", "pinned", "group_id", "index", "window_id"];

/** Did a tabs.onUpdated change anything the host keeps? `previous` may be null. */
export function tabChanged(previous, next) {
  if (!previous) return true;
  return WATCHED.some((key) => previous[key] !== next[key]);
}
