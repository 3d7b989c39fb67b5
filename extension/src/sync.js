// Open tabs, bookmarks and the history backfill. Part of the background (app.js).

import { LIMITS } from "./config.js";
import { newId } from "./protocol.js";
import { snapshotTabs, tabChanged, toTab } from "./tabs.js";
import { flattenTree, folderPath, idsUnder, importBatches, chunk } from "./bookmarks.js";
import { HistoryBatcher, backfillRange, historyItem } from "./history.js";

export class Sync {
  constructor(app) {
    this.app = app;
    this.lastTabs = new Map(); // tab id → last Tab sent (memory only; a snapshot rebuilds it)
    this.backfillState = { running: false, lastRun: null };
  }

  get ext() {
    return this.app.ext;
  }

  _gate() {
    return (url, incognito) => this.app.gateFor(url, incognito);
  }

  forgetTabs() {
    this.lastTabs.clear();
  }

  // ------------------------------------------------------------------ tabs

  async sendSnapshot() {
    if (this.app.paused) return;
    const tabs = snapshotTabs(await this.ext.tabs.query({}), this._gate(), LIMITS.maxSnapshotTabs);
    this.lastTabs = new Map(tabs.map((tab) => [tab.tab_id, tab]));
    await this.app.send("tab_snapshot", { tabs, time: this.app.now() });
  }

  async _event(event, tab) {
    if (this.app.paused || tab.incognito) return;
    const item = toTab(tab, this._gate());
    if (event === "updated" && !tabChanged(this.lastTabs.get(item.tab_id), item)) return;
    this.lastTabs.set(item.tab_id, item);
    await this.app.send("tab_event", { event, tab: item, time: this.app.now() });
  }

  onTabCreated(tab) {
    return this._event("opened", tab);
  }

  async onTabRemoved(tabId, info) {
    if (this.app.paused) return;
    this.lastTabs.delete(tabId);
    const tab = { tab_id: tabId, window_id: info?.windowId ?? null, index: null, url: null, title: null, active: false, pinned: false, group_id: null, last_accessed_time: null };
    await this.app.send("tab_event", { event: "closed", tab, time: this.app.now() });
  }

  async onTabActivated({ tabId }) {
    try {
      await this._event("activated", await this.ext.tabs.get(tabId));
    } catch {
      // closed meanwhile
    }
  }

  async onTabUpdated(tabId, change, tab) {
    if (change.status !== undefined && change.status !== "complete" && change.url === undefined) return;
    await this._event("updated", tab);
  }

  async onTabMoved(tabId) {
    try {
      await this._event("updated", await this.ext.tabs.get(tabId));
    } catch {
      // closed meanwhile
    }
  }

  // ------------------------------------------------------------------ bookmarks

  async importBookmarks() {
    if (this.app.paused) return { bookmarks: 0 };
    const { bookmarks, skipped } = flattenTree(await this.ext.bookmarks.getTree(), this._gate());
    for (const fields of importBatches(bookmarks, newId(), LIMITS.bookmarkBatch)) {
      await this.app.send("bookmark_import", fields);
    }
    return { bookmarks: bookmarks.length, skipped };
  }

  async _folderOf(parentId) {
    const chain = [];
    let id = parentId;
    for (let depth = 0; id != null && depth < 64; depth += 1) {
      const [node] = await this.ext.bookmarks.get(String(id));
      if (!node) break;
      chain.unshift(node);
      id = node.parentId;
    }
    return folderPath(chain);
  }

  /** Upsert every bookmark under node `id` (itself included), with fresh folder paths. */
  async _upsertUnder(id) {
    if (this.app.paused) return;
    let subtree;
    try {
      [subtree] = await this.ext.bookmarks.getSubTree(String(id));
    } catch {
      return; // removed meanwhile
    }
    const folder = subtree.parentId != null ? await this._folderOf(subtree.parentId) : "";
    const { bookmarks } = flattenTree([subtree], this._gate(), folder);
    for (const batch of chunk(bookmarks, LIMITS.bookmarkBatch)) {
      if (batch.length) await this.app.send("bookmark_upsert", { bookmarks: batch });
    }
  }

  onBookmarkCreated(id) {
    return this._upsertUnder(id);
  }

  onBookmarkChanged(id) {
    return this._upsertUnder(id); // a renamed folder changes the folder path of its children
  }

  onBookmarkMoved(id) {
    return this._upsertUnder(id);
  }

  async onBookmarkRemoved(id, info) {
    if (this.app.paused) return;
    const ids = info?.node ? idsUnder(info.node) : [String(id)];
    for (const batch of chunk(ids.length ? ids : [String(id)], 10_000)) {
      await this.app.send("bookmark_remove", { browser_ids: batch });
    }
  }

  // ------------------------------------------------------------------ history

  /** Import history before live recording began; `days` from the settings unless given. */
  async backfillHistory(days = this.app.settings.history.backfill_days) {
    if (this.backfillState.running) throw new Error("a history import is already running");
    if (this.app.paused) throw new Error("Backtrail is paused: resume it to import history");
    this.backfillState = { running: true, lastRun: this.backfillState.lastRun, items: 0, batches: 0 };
    try {
      const range = backfillRange(this.app.now(), this.app.profile.live_since, days);
      const found = await this.ext.history.search({
        text: "", startTime: range.start_time, endTime: range.end_time, maxResults: LIMITS.historyMaxResults,
      });
      const batcher = new HistoryBatcher(newId(), range);
      const gateFor = this._gate();
      const send = async (fields) => {
        await this.app.send("history_import", fields);
        this.backfillState.batches += 1;
      };
      for (const item of found) {
        if (!gateFor(item.url).ok) continue;
        const converted = historyItem(item, await this.ext.history.getVisits(item.url), range, gateFor);
        if (!converted) continue;
        this.backfillState.items += 1;
        const full = batcher.add(converted);
        if (full) await send(full);
      }
      await send(batcher.finish());
      const summary = { items: this.backfillState.items, batches: this.backfillState.batches, range, time: this.app.now() };
      this.backfillState = { running: false, lastRun: summary };
      return summary;
    } catch (error) {
      this.backfillState = { running: false, lastRun: this.backfillState.lastRun, error: String(error.message) };
      throw error;
    }
  }
}
