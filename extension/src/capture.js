// Visits, dwell and page capture; highlights and notes. Part of the background (app.js).
//
// A main-frame navigation that commits on an allowed page starts a visit. Once its
// document is parsed (DOMContentLoaded, not the end of loading: a slow image or font
// must not stop the clock), the dwell script (content/page.js) is injected; it counts
// visible time from the navigation's start, and once the page has been visible for
// min_dwell_ms it reports `reached` and the page is extracted and queued as
// capture_page. The visit itself is queued as `visit` when it ends. A visit that ends
// without a capture is counted with its reason (NOT_CAPTURED, like skipped pages).

import { KEYS, LIMITS, NOT_CAPTURED } from "./config.js";
import { cutTitle, highlightFields, newId, noteFields, visitFields, captureFields } from "./protocol.js";
import { PASSWORD_RULE, extractionCaps, readyToCapture } from "./rules.js";
import { referrerFor } from "./visits.js";
import { canonicalUrl } from "./urls.js";

const PAGE_SCRIPT = "src/content/page.js";

// Injected with chrome.scripting `func`: each must be self-contained (no outer scope).
function runTrack(visitId, minDwellMs, reportMs) {
  return globalThis.__backtrailPage.track(visitId, minDwellMs, reportMs);
}
function runExtract(caps) {
  return globalThis.__backtrailPage.extract(caps);
}
function runSelection() {
  return globalThis.__backtrailPage.selection();
}

export class Capture {
  constructor(app) {
    this.app = app;
    this.outcomes = new Map(); // tab id → {url, reason}: why its last page was not captured
  }

  /** What became of the page in front of `tab`, for the popup: {state, reason?, ...}. */
  pageStatus(tab) {
    if (!tab) return { state: "none" };
    const verdict = this.app.gateFor(tab.url, tab.incognito);
    if (!verdict.ok) return { state: "not_captured", reason: verdict.reason, rule: verdict.rule ?? null };
    const outcome = this.outcomes.get(tab.id);
    if (outcome && outcome.url === verdict.url) return { state: "not_captured", reason: outcome.reason };
    const visit = this.app.visits.get(tab.id);
    if (!visit || visit.url !== verdict.url) return { state: "waiting", visible_ms: 0, min_dwell_ms: this.app.settings.capture.min_dwell_ms };
    if (visit.captured) return { state: "captured" };
    if (visit.unreadable) return { state: "not_captured", reason: NOT_CAPTURED.unreadable };
    return { state: "waiting", visible_ms: visit.visible_ms, min_dwell_ms: this.app.settings.capture.min_dwell_ms };
  }

  get ext() {
    return this.app.ext;
  }

  async _tab(tabId) {
    try {
      return await this.ext.tabs.get(tabId);
    } catch {
      return null; // closed, or not a real tab (prerender)
    }
  }

  async _inject(tabId, func, args) {
    await this.ext.scripting.runFile(tabId, PAGE_SCRIPT);
    return this.ext.scripting.runFunc(tabId, func, args);
  }

  /** Queue the end of a visit (its final dwell); with `count`, one that was never
   * captured is counted with the reason why (a pause or a restart is not counted). */
  async _sendVisitEnd(visit, { count = true } = {}) {
    if (!visit) return;
    await this.app.send("visit", visitFields(visit));
    if (count && !visit.captured && !this.app.paused) await this.app.countSkip(this.missedReason(visit));
  }

  /** Why a visit ended without a capture. */
  missedReason(visit) {
    if (visit.unreadable) return NOT_CAPTURED.unreadable;
    const lasted = this.app.now() - visit.time;
    return lasted < this.app.settings.capture.min_dwell_ms ? NOT_CAPTURED.short : NOT_CAPTURED.hidden;
  }

  async endAllVisits() {
    for (const visit of this.app.visits.endAll()) await this._sendVisitEnd(visit, { count: false });
    await this.app.saveVisits();
  }

  // ------------------------------------------------------------------ navigation

  async onCommitted(details) {
    if (details.frameId !== 0) return;
    const tab = await this._tab(details.tabId);
    if (!tab) return;
    const previous = this.app.visits.get(details.tabId);
    const verdict = this.app.gateFor(details.url, tab.incognito);
    if (!verdict.ok) {
      await this._sendVisitEnd(this.app.visits.end(details.tabId));
      await this.app.saveVisits();
      if (verdict.reason === "excluded") await this.app.countSkip(verdict.rule);
      return;
    }
    const { ended } = this.app.visits.start(details.tabId, {
      url: verdict.url,
      title: null,
      time: Math.floor(details.timeStamp ?? this.app.now()),
      window_id: tab.windowId,
      transition: details.transitionType ?? null,
      referrer: referrerFor(previous, details.transitionType),
    });
    await this._sendVisitEnd(ended);
    await this.app.saveVisits();
  }

  /** The main frame's document is parsed (webNavigation.onDOMContentLoaded). */
  async onLoaded(details) {
    if (details.frameId !== 0) return;
    const visit = this.app.visits.get(details.tabId);
    if (!visit || visit.captured) return;
    const tracked = await this._track(details.tabId, visit.visit_id);
    if (tracked === false && this.app.visits.get(details.tabId) === visit) {
      visit.unreadable = true; // error page, PDF viewer: the page cannot be read
      await this.app.saveVisits();
    }
  }

  /** Start the dwell clocks of `visitId`; the final clocks of the SPA visit it replaces,
   * null, or false when the page cannot be scripted. */
  async _track(tabId, visitId) {
    const { min_dwell_ms: minDwell } = this.app.settings.capture;
    try {
      return await this._inject(tabId, runTrack, [visitId, minDwell, LIMITS.dwellReportMs]);
    } catch {
      return false; // error page, PDF viewer, tab gone: nothing to track
    }
  }

  /** An SPA navigation (history.pushState/replaceState) to a new URL is a new visit. */
  async onHistoryState(details) {
    if (details.frameId !== 0) return;
    const tab = await this._tab(details.tabId);
    if (!tab) return;
    const previous = this.app.visits.get(details.tabId);
    const verdict = this.app.gateFor(details.url, tab.incognito);
    if (previous && verdict.ok && canonicalUrl(previous.url) === canonicalUrl(verdict.url)) return; // same page
    if (!verdict.ok) {
      await this._sendVisitEnd(this.app.visits.end(details.tabId));
      await this.app.saveVisits();
      if (verdict.reason === "excluded") await this.app.countSkip(verdict.rule);
      return;
    }
    const visitId = newId();
    const last = await this._track(details.tabId, visitId); // final clocks of the old visit
    if (previous && last && last.visit_id === previous.visit_id) {
      this.app.visits.report(details.tabId, previous.visit_id, last);
    }
    const { ended } = this.app.visits.start(details.tabId, {
      visit_id: visitId,
      url: verdict.url,
      title: tab.title ?? null,
      time: Math.floor(details.timeStamp ?? this.app.now()),
      window_id: tab.windowId,
      transition: "history_state",
      referrer: previous ? previous.url : null,
    });
    await this._sendVisitEnd(ended);
    await this.app.saveVisits();
  }

  async onTabRemoved(tabId) {
    this.outcomes.delete(tabId);
    const visit = this.app.visits.end(tabId);
    if (visit) {
      await this._sendVisitEnd(visit);
      await this.app.saveVisits();
    }
  }

  /** Browser start-up: visits left open by the last session are over. */
  async onStartup() {
    await this.endAllVisits();
  }

  // ------------------------------------------------------------------ dwell, capture

  async onDwell(request, sender) {
    const tabId = sender.tab?.id;
    if (!Number.isInteger(tabId) || typeof request.visit_id !== "string") return {};
    const visit = this.app.visits.report(tabId, request.visit_id, request);
    if (!visit) return {};
    if (sender.tab.title) this.app.visits.setTitle(tabId, sender.tab.title);
    await this.app.saveVisits();
    if (request.reached && readyToCapture(visit, this.app.settings)) await this.captureVisit(tabId);
    return {};
  }

  /** Extract the page of a tab's current visit and queue capture_page. */
  async captureVisit(tabId) {
    const visit = this.app.visits.get(tabId);
    const tab = await this._tab(tabId);
    if (!visit || !tab || visit.captured) return null;
    const verdict = this.app.gateFor(tab.url, tab.incognito);
    if (!verdict.ok || verdict.url !== visit.url) return null; // paused, excluded or moved on
    visit.captured = true; // one attempt per visit, even if extraction fails
    await this.app.saveVisits();
    let content;
    try {
      content = await this._inject(tabId, runExtract, [extractionCaps(this.app.settings)]);
    } catch {
      content = null;
    }
    if (this.app.visits.get(tabId)?.visit_id !== visit.visit_id) return null; // navigated meanwhile
    if (content?.password_field) {
      // A sign-in form no exclusion rule knows: neither the page nor the visit is kept.
      this.outcomes.set(tabId, { url: visit.url, reason: PASSWORD_RULE });
      this.app.visits.end(tabId);
      await this.app.saveVisits();
      await this.app.countSkip(PASSWORD_RULE);
      return { skipped: PASSWORD_RULE };
    }
    if (!content || (content.content_type !== "html" && content.content_type !== "text")) {
      this.outcomes.set(tabId, { url: visit.url, reason: NOT_CAPTURED.unreadable });
      await this.app.countSkip(NOT_CAPTURED.unreadable);
      return null;
    }
    if (content.title) this.app.visits.setTitle(tabId, content.title);
    const fields = captureFields(visit, content, this.app.now());
    const entry = await this.app.send("capture_page", fields);
    return entry ? { dedupe_key: fields.dedupe_key } : null;
  }

  /** capture_tab action and test hook: capture now, starting a visit if there is none. */
  async captureTab(tabId) {
    const tab = await this._tab(tabId);
    if (!tab) throw Object.assign(new Error(`no tab ${tabId}`), { code: 11 });
    const verdict = this.app.gateFor(tab.url, tab.incognito);
    if (!verdict.ok) {
      const code = { paused: 10, excluded: 9, scheme: 8, incognito: 9 }[verdict.reason];
      throw Object.assign(new Error(`this tab cannot be captured (${verdict.reason})`), { code });
    }
    let visit = this.app.visits.get(tabId);
    if (!visit || visit.url !== verdict.url || visit.captured) {
      ({ visit } = this.app.visits.start(tabId, {
        url: verdict.url, title: tab.title, time: this.app.now(), window_id: tab.windowId, transition: null,
      }));
    }
    const done = await this.captureVisit(tabId);
    if (done?.skipped) throw Object.assign(new Error(`this tab cannot be captured (${done.skipped})`), { code: 9 });
    if (!done) throw Object.assign(new Error("the page could not be read"), { code: 14 });
    return done;
  }

  // ------------------------------------------------------------------ highlights, notes

  /** Save a selection of a tab as a highlight. `text` given (context menu, tests) or read. */
  async saveSelection(tabId, text = null, note = null) {
    const tab = await this._tab(tabId);
    if (!tab) throw new Error(`no tab ${tabId}`);
    const verdict = this.app.gateFor(tab.url, tab.incognito);
    if (!verdict.ok) {
      throw new Error(verdict.reason === "paused" ? "Backtrail is paused: resume it to save highlights" : `highlights are not saved on this page (${verdict.reason})`);
    }
    let picked = null;
    try {
      picked = await this._inject(tabId, runSelection, []);
    } catch {
      picked = null; // the page cannot be scripted: keep the text we were given
    }
    const body = typeof text === "string" && text.trim() ? text : picked?.text;
    const fields = highlightFields({
      url: verdict.url,
      title: tab.title,
      text: body,
      context: picked?.context ?? null,
      note,
      time: this.app.now(),
    });
    const entry = await this.app.send("highlight", fields);
    if (!entry) throw new Error("the highlight was not queued");
    return { dedupe_key: fields.dedupe_key, id: entry.id };
  }

  /** Keep a selection aside while the user writes a note for it (note.html). */
  async holdSelection(tabId, text) {
    const id = newId("h-");
    const tab = await this._tab(tabId);
    const pending = { tabId, text: text ?? "", title: cutTitle(tab?.title) };
    await this.ext.storage.session.set({ [KEYS.pending + id]: pending });
    return id;
  }

  async pendingSelection(id) {
    const key = KEYS.pending + id;
    return (await this.ext.storage.session.get(key))[key] ?? null;
  }

  async savePendingSelection(id, note) {
    const pending = await this.pendingSelection(id);
    if (!pending) throw new Error("this selection is no longer waiting (was it already saved?)");
    const saved = await this.saveSelection(pending.tabId, pending.text, note);
    await this.ext.storage.session.remove(KEYS.pending + id);
    return saved;
  }

  /** A note from the popup about the current page (or about nothing). */
  async saveNote(content, tabId = null) {
    if (this.app.paused) throw new Error("Backtrail is paused: resume it to save notes");
    const tab = Number.isInteger(tabId) ? await this._tab(tabId) : null;
    const verdict = tab ? this.app.gateFor(tab.url, tab.incognito) : { ok: false };
    const fields = noteFields({
      content,
      url: verdict.ok ? verdict.url : null, // the note is kept; an excluded URL is not
      title: verdict.ok ? tab.title : null,
      time: this.app.now(),
    });
    const entry = await this.app.send("note", fields);
    if (!entry) throw new Error("the note was not queued");
    return { dedupe_key: fields.dedupe_key, id: entry.id, url: fields.url };
  }
}
