// The history backfill: chrome.history items and visits → history_import batches
// (PROTOCOL.md 3.9). The range ends where live recording began, so imported and live
// visits never overlap.

import { LIMITS } from "./config.js";
import { cutTitle } from "./protocol.js";

export function backfillRange(now, liveSince, days) {
  const end = Math.min(now, liveSince ?? now);
  return { start_time: Math.max(0, end - days * 86_400_000), end_time: end };
}

/**
 * One protocol item, or null when the URL is not allowed or no visit lies in the range.
 * `item`: chrome.history.HistoryItem; `visits`: chrome.history.VisitItem[].
 */
export function historyItem(item, visits, range, gateFor) {
  const verdict = gateFor(item.url);
  if (!verdict.ok) return null;
  const inRange = visits
    .filter((v) => Number.isFinite(v.visitTime) && v.visitTime >= range.start_time && v.visitTime < range.end_time)
    .sort((a, b) => b.visitTime - a.visitTime)
    .slice(0, LIMITS.historyVisitsPerUrl)
    .map((v) => ({
      visit_id: String(v.visitId),
      time: Math.floor(v.visitTime),
      transition: v.transition ?? null,
      referring_visit_id: v.referringVisitId && v.referringVisitId !== "0" ? String(v.referringVisitId) : null,
    }));
  if (!inRange.length) return null;
  return {
    url: verdict.url,
    title: cutTitle(item.title),
    visit_count: Number.isInteger(item.visitCount) ? item.visitCount : inRange.length,
    typed_count: Number.isInteger(item.typedCount) ? item.typedCount : 0,
    last_visit_time: Number.isFinite(item.lastVisitTime) ? Math.floor(item.lastVisitTime) : inRange[0].time,
    visits: inRange,
  };
}

/** Groups items into batches of ≤ historyBatchItems items and ≤ historyBatchVisits visits. */
export class HistoryBatcher {
  constructor(importId, range) {
    this.importId = importId;
    this.range = range;
    this.batch = 0;
    this.items = [];
    this.visits = 0;
  }

  /** Add an item; returns a full batch's fields to send, or null. */
  add(item) {
    const full = this.items.length >= LIMITS.historyBatchItems || this.visits + item.visits.length > LIMITS.historyBatchVisits;
    const out = full && this.items.length ? this._take(false) : null;
    this.items.push(item);
    this.visits += item.visits.length;
    return out;
  }

  /** The last batch (final: true), possibly empty. */
  finish() {
    return this._take(true);
  }

  _take(final) {
    const fields = { import_id: this.importId, batch: this.batch, final, range: this.range, items: this.items };
    this.batch += 1;
    this.items = [];
    this.visits = 0;
    return fields;
  }
}
