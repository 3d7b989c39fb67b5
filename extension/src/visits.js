// Open visits, one per tab, and their dwell. A visit starts when a main-frame navigation
// commits (or an SPA navigation changes the URL) on an allowed page, and ends when the
// tab navigates again, closes, capture is paused, or the browser restarts. The page's
// dwell script (content/page.js) reports two clocks for the current visit:
//   visible_ms — the document was visible (drives the capture: min_dwell_ms);
//   active_ms  — visible AND focused (the visit's dwell_ms sent to the host).
// The book is a plain object so it can be persisted (chrome.storage.local) as JSON.

import { cutTitle, newId } from "./protocol.js";

export class VisitBook {
  constructor(byTab = {}) {
    this.byTab = { ...byTab };
  }

  toJSON() {
    return this.byTab;
  }

  get(tabId) {
    return this.byTab[tabId] ?? null;
  }

  all() {
    return Object.values(this.byTab);
  }

  /**
   * Start a visit in `tabId`; returns {visit, ended} where `ended` is the previous visit
   * of that tab (to be sent) or null. `page`: {url, title, time, window_id, transition,
   * referrer, visit_id?}.
   */
  start(tabId, page) {
    const ended = this.end(tabId);
    const visit = {
      visit_id: page.visit_id ?? newId(),
      url: page.url,
      title: cutTitle(page.title),
      time: page.time,
      tab_id: tabId,
      window_id: page.window_id ?? null,
      transition: page.transition ?? null,
      referrer: page.referrer ?? null,
      dwell_ms: 0,
      visible_ms: 0,
      captured: false,
    };
    this.byTab[tabId] = visit;
    return { visit, ended };
  }

  /** Apply a dwell report; clocks only move forward. Returns the visit or null (stale). */
  report(tabId, visitId, { visible_ms, active_ms }) {
    const visit = this.get(tabId);
    if (!visit || visit.visit_id !== visitId) return null;
    if (Number.isFinite(visible_ms)) visit.visible_ms = Math.max(visit.visible_ms, Math.floor(visible_ms));
    if (Number.isFinite(active_ms)) visit.dwell_ms = Math.max(visit.dwell_ms, Math.floor(active_ms));
    return visit;
  }

  setTitle(tabId, title) {
    const visit = this.get(tabId);
    const clean = cutTitle(title);
    if (visit && clean) visit.title = clean;
  }

  markCaptured(tabId, visitId) {
    const visit = this.get(tabId);
    if (visit && visit.visit_id === visitId) visit.captured = true;
  }

  /** End the visit of a tab; returns it, or null if there was none. */
  end(tabId) {
    const visit = this.get(tabId);
    if (visit) delete this.byTab[tabId];
    return visit;
  }

  /** End every visit (pause, browser restart); returns them. */
  endAll() {
    const visits = this.all();
    this.byTab = {};
    return visits;
  }

  /** End visits matching a predicate (forget); returns how many. */
  discardWhere(predicate) {
    let count = 0;
    for (const [tabId, visit] of Object.entries(this.byTab)) {
      if (predicate(visit)) {
        delete this.byTab[tabId];
        count += 1;
      }
    }
    return count;
  }
}

/** The referrer recorded for a new visit: the tab's previous page, for link-like moves. */
export function referrerFor(previous, transition) {
  if (!previous) return null;
  return ["link", "form_submit", "history_state"].includes(transition) ? previous.url : null;
}
