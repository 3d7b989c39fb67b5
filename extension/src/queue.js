// The outbound queue: every queued protocol message waits here, persisted, until the host
// acknowledges it. Layout in storage (chrome.storage.local, or a fake in tests):
//   "q:index"      {v, seq, items: [entry], stats, gc: [keys]}   small, rewritten per change
//   "q:item:<seq>" the message itself                             written once
// An entry is {id, seq, type, tier, bytes, attempts, keys, meta, time}. A push writes the
// message and the new index in ONE storage call (atomic in Chrome); removals rewrite the
// index first, listing the removed data keys in `gc`, then delete them, so a crash can
// leave garbage that the next load deletes but never an index entry pointing at nothing
// that was acknowledged. An entry whose data is missing on read is discarded.
//
// Overflow (more than maxItems entries or maxBytes): drop the oldest entry of the lowest
// tier first ("low": visits, captures, tabs, history; then "normal"); "keep" entries
// (highlights, notes, forget, pause/resume) are never dropped, even past the bounds.

import { KEYS, LIMITS } from "./config.js";

const TIER_ORDER = ["low", "normal"];

function emptyStats() {
  return { dropped: 0, droppedByType: {}, lastDropTime: null, superseded: 0 };
}

export class Queue {
  constructor(storage, { maxItems = LIMITS.queueMaxItems, maxBytes = LIMITS.queueMaxBytes, now = Date.now } = {}) {
    this.storage = storage;
    this.maxItems = maxItems;
    this.maxBytes = maxBytes;
    this.now = now;
    this.index = { v: 1, seq: 0, items: [], stats: emptyStats(), gc: [] };
    this.inflightId = null; // not persisted: after a restart everything is unsent
    this._chain = Promise.resolve();
  }

  /** Run `fn` after every earlier operation: one mutation at a time. */
  _serial(fn) {
    const run = this._chain.then(fn, fn);
    this._chain = run.catch(() => {});
    return run;
  }

  load() {
    return this._serial(async () => {
      const stored = (await this.storage.get(KEYS.queueIndex))[KEYS.queueIndex];
      if (stored && stored.v === 1 && Array.isArray(stored.items)) {
        this.index = { ...stored, stats: { ...emptyStats(), ...stored.stats }, gc: stored.gc ?? [] };
      }
      if (this.index.gc.length) {
        await this.storage.remove(this.index.gc);
        this.index.gc = [];
        await this._writeIndex();
      }
    });
  }

  get length() {
    return this.index.items.length;
  }

  get bytes() {
    return this.index.items.reduce((sum, entry) => sum + entry.bytes, 0);
  }

  get stats() {
    return this.index.stats;
  }

  entries() {
    return this.index.items.slice();
  }

  head() {
    return this.index.items[0] ?? null;
  }

  find(id) {
    return this.index.items.find((entry) => entry.id === id) ?? null;
  }

  static itemKey(seq) {
    return `${KEYS.queueItemPrefix}${seq}`;
  }

  async _writeIndex(extra = {}) {
    await this.storage.set({ ...extra, [KEYS.queueIndex]: this.index });
  }

  /** Remove entries from the index (not yet from storage); returns their data keys. */
  _unlink(victims) {
    const ids = new Set(victims.map((entry) => entry.id));
    this.index.items = this.index.items.filter((entry) => !ids.has(entry.id));
    const keys = victims.map((entry) => Queue.itemKey(entry.seq));
    this.index.gc.push(...keys);
    return keys;
  }

  async _collect() {
    if (!this.index.gc.length) return;
    const keys = this.index.gc;
    await this.storage.remove(keys);
    // The index still lists them in gc until its next write; removing twice is harmless.
    this.index.gc = this.index.gc.filter((key) => !keys.includes(key));
  }

  /**
   * Add a message ({id, type, ...}). `options`: {tier, bytes, keys, supersedes, meta}.
   * Returns {entry, dropped: [entries], superseded: n}; `entry` is null when the new
   * message itself was the overflow victim.
   */
  push(message, options) {
    return this._serial(async () => {
      const { tier = "normal", bytes, keys = [], supersedes = [], meta = {} } = options;
      const entry = {
        id: message.id,
        seq: ++this.index.seq,
        type: message.type,
        tier,
        bytes,
        attempts: 0,
        keys,
        meta,
        time: this.now(),
      };
      const stale = supersedes.length
        ? this.index.items.filter(
            (old) => old.id !== this.inflightId && old.keys.some((key) => supersedes.includes(key)),
          )
        : [];
      this._unlink(stale);
      this.index.stats.superseded += stale.length;
      this.index.items.push(entry);
      const dropped = this._overflow();
      for (const victim of dropped) {
        const stats = this.index.stats;
        stats.dropped += 1;
        stats.droppedByType[victim.type] = (stats.droppedByType[victim.type] ?? 0) + 1;
        stats.lastDropTime = this.now();
      }
      const kept = !dropped.includes(entry);
      await this._writeIndex(kept ? { [Queue.itemKey(entry.seq)]: message } : {});
      await this._collect();
      return { entry: kept ? entry : null, dropped, superseded: stale.length };
    });
  }

  _overflow() {
    const victims = [];
    const over = () => this.index.items.length > this.maxItems || this.bytes > this.maxBytes;
    const newest = this.index.items[this.index.items.length - 1];
    if (newest && newest.tier !== "keep" && newest.bytes > this.maxBytes) {
      // Larger than the whole queue may be: drop it rather than everything before it.
      this._unlink([newest]);
      victims.push(newest);
    }
    for (const tier of TIER_ORDER) {
      while (over()) {
        const victim = this.index.items.find((entry) => entry.tier === tier && entry.id !== this.inflightId);
        if (!victim) break;
        victims.push(victim);
        this._unlink([victim]);
      }
    }
    // The new entry may be a victim; it was never written, so nothing to collect for it.
    return victims;
  }

  /** The stored message of an entry, or null if its data is gone. */
  async read(entry) {
    const key = Queue.itemKey(entry.seq);
    const found = (await this.storage.get(key))[key];
    return found ?? null;
  }

  /** Remove an entry (acknowledged, rejected or unreadable). */
  remove(id) {
    return this._serial(async () => {
      const entry = this.find(id);
      if (!entry) return false;
      if (this.inflightId === id) this.inflightId = null;
      this._unlink([entry]);
      await this._writeIndex();
      await this._collect();
      return true;
    });
  }

  /** Count one more failed attempt of an entry; returns the new count. */
  bumpAttempts(id) {
    return this._serial(async () => {
      const entry = this.find(id);
      if (!entry) return 0;
      entry.attempts += 1;
      await this._writeIndex();
      return entry.attempts;
    });
  }

  /** Remove every unsent entry for which `predicate(entry)` holds; returns how many. */
  removeWhere(predicate) {
    return this._serial(async () => {
      const victims = this.index.items.filter((entry) => entry.id !== this.inflightId && predicate(entry));
      if (!victims.length) return 0;
      this._unlink(victims);
      await this._writeIndex();
      await this._collect();
      return victims.length;
    });
  }

  /** Forget the drop counters (the user has seen them). */
  clearDrops() {
    return this._serial(async () => {
      this.index.stats = { ...this.index.stats, dropped: 0, droppedByType: {}, lastDropTime: null };
      await this._writeIndex();
    });
  }

  /** Wait until every queued operation has finished (tests, flush). */
  settle() {
    return this._serial(async () => {});
  }
}
