// The background's state and wiring. background.js registers the browser's listeners and
// forwards each event here; this file (with capture.js and sync.js) decides what to do.
// It is given `ext` (ext.js, or a fake in tests), so the whole background runs under
// `node --test`. The background owns all state and every write; pages only ask.

import { DEFAULT_SETTINGS, KEYS, LIMITS } from "./config.js";
import { Queue } from "./queue.js";
import { Courier } from "./courier.js";
import { VisitBook } from "./visits.js";
import { gate, mergeSettings, normalizeSettings } from "./rules.js";
import { effectiveRules, canonicalUrl, normalizeDomain, domainMatches } from "./urls.js";
import { badgeFor } from "./badge.js";
import { MEMORY_READS, TYPES, byteSize, detectBrowser, forgetFields, frame, helloFields, newId, queueOptions, searchFields } from "./protocol.js";
import { validateAction, performAction } from "./actions.js";
import { Capture } from "./capture.js";
import { Sync } from "./sync.js";

function emptyStats() {
  return { captured: 0, lastCaptureTime: null, delivered: 0, rejected: 0, lastRejection: null, refused: 0, skipped: {} };
}

export class App {
  constructor(ext, { now = Date.now, timers, random = Math.random, queueLimits = {} } = {}) {
    this.ext = ext;
    this.now = now;
    this.timers = timers ?? { now, setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (t) => clearTimeout(t) };
    this.random = random;
    this.settings = normalizeSettings(DEFAULT_SETTINGS);
    this.rules = effectiveRules(this.settings.exclusions);
    this.paused = false;
    this.profile = null;
    this.stats = emptyStats();
    this.deadLetters = [];
    this.visits = new VisitBook();
    this.queue = new Queue(ext.storage.local, { ...queueLimits, now });
    this.waiters = new Map(); // queued message id → resolve, for commands that wait for the host
    this.tabChains = new Map(); // tab id → tail of that tab's event chain
    this.capture = new Capture(this);
    this.sync = new Sync(this);
    this.courier = new Courier({
      connectNative: (name) => ext.connectNative(name),
      queue: this.queue,
      timers: this.timers,
      random,
      hello: () => this.helloFields(),
      onState: (state) => this.onConnectionState(state),
      onConnected: (result) => this.onConnected(result),
      onResult: (entry, message, result) => this.onResult(entry, message, result),
      onRejected: (entry, message, error) => this.onRejected(entry, message, error),
      onPush: (message) => this.onPush(message),
    });
    this.ready = this.init();
  }

  async init() {
    const local = this.ext.storage.local;
    const stored = await local.get([KEYS.settings, KEYS.paused, KEYS.profile, KEYS.stats, KEYS.visits, KEYS.deadLetters]);
    this.settings = normalizeSettings(stored[KEYS.settings] ?? DEFAULT_SETTINGS);
    this.rules = effectiveRules(this.settings.exclusions);
    this.paused = stored[KEYS.paused] === true;
    this.stats = { ...emptyStats(), ...(stored[KEYS.stats] ?? {}) };
    if (!this.stats.skipped || typeof this.stats.skipped !== "object") this.stats.skipped = {};
    this.visits = new VisitBook(stored[KEYS.visits] ?? {});
    this.deadLetters = Array.isArray(stored[KEYS.deadLetters]) ? stored[KEYS.deadLetters] : [];
    this.profile = stored[KEYS.profile];
    if (!this.profile?.profile_id) {
      this.profile = { profile_id: newId("p-").slice(0, 40), live_since: this.now() };
      await local.set({ [KEYS.profile]: this.profile });
    }
    await this.queue.load();
    const session = this.ext.storage.session ? await this.ext.storage.session.get(KEYS.backoff) : {};
    const backoff = session[KEYS.backoff];
    if (backoff && Number.isFinite(backoff.nextRetryTime)) this.courier.restore(backoff);
    this.updateBadge();
    this.courier.connect();
  }

  // ------------------------------------------------------------------ basics

  /**
   * Run `fn` after the earlier work of the same tab. Navigation events arrive in order but
   * their handlers are async; without this a fast page's onCompleted could overtake its
   * onCommitted and track the previous visit.
   */
  inTab(tabId, fn) {
    const previous = this.tabChains.get(tabId) ?? this.ready;
    const run = previous.then(fn, fn);
    const tail = run.catch(() => {});
    this.tabChains.set(tabId, tail);
    tail.then(() => {
      if (this.tabChains.get(tabId) === tail) this.tabChains.delete(tabId);
    });
    return run;
  }

  gateFor(url, incognito = false) {
    return gate(url, { incognito, paused: this.paused, rules: this.rules });
  }

  helloFields() {
    return helloFields({
      version: this.ext.version,
      extensionId: this.ext.runtimeId,
      browser: detectBrowser(this.ext.browserHints()),
      profileId: this.profile.profile_id,
      paused: this.paused,
    });
  }

  /** A page was not captured because of `rule` (an exclusion rule, or PASSWORD_RULE):
   * counted here for the popup, and at the host for `backtrail stats`. No URL is kept. */
  async countSkip(rule) {
    const name = String(rule).slice(0, 1024);
    this.stats.skipped = { ...this.stats.skipped, [name]: (this.stats.skipped?.[name] ?? 0) + 1 };
    await this.persist(KEYS.stats, this.stats);
    await this.send("skipped", { rule: name, time: Math.floor(this.now()) });
  }

  persist(key, value) {
    return this.ext.storage.local.set({ [key]: value }).catch(() => {});
  }

  saveVisits() {
    return this.persist(KEYS.visits, this.visits.toJSON());
  }

  /**
   * Queue a request. Capture-type messages are refused while paused (returns null).
   * Returns the queue entry, or null if it was not queued (paused, or dropped at once).
   */
  async send(type, fields) {
    if (this.paused && TYPES[type].capture) return null;
    const message = frame(newId(), type, fields);
    const options = queueOptions(type, fields);
    const { entry, dropped } = await this.queue.push(message, { ...options, bytes: byteSize(message) });
    if (dropped.length) this.updateBadge();
    this.courier.connect();
    this.courier.pump();
    return entry;
  }

  /** Queue a request and wait (up to timeoutMs) for the host's answer. */
  async sendAndWait(type, fields, timeoutMs = 5000) {
    const entry = await this.send(type, fields);
    if (!entry) return { queued: false };
    return new Promise((resolve) => {
      const timer = this.timers.setTimeout(() => {
        this.waiters.delete(entry.id);
        resolve({ queued: true, done: false });
      }, timeoutMs);
      this.waiters.set(entry.id, (outcome) => {
        this.timers.clearTimeout(timer);
        resolve({ queued: true, done: true, ...outcome });
      });
    });
  }

  _settleWaiter(id, outcome) {
    const waiter = this.waiters.get(id);
    if (waiter) {
      this.waiters.delete(id);
      waiter(outcome);
    }
  }

  updateBadge() {
    const state = this.courier?.state ?? { status: "idle" };
    const badge = badgeFor({ status: state.status, paused: this.paused, dropped: this.queue.stats.dropped, lastError: state.lastError });
    return this.ext.badge.set(badge).catch(() => {});
  }

  // ------------------------------------------------------------------ host events

  onConnectionState(state) {
    this.updateBadge();
    if (this.ext.storage.session) {
      this.ext.storage.session
        .set({ [KEYS.backoff]: { attempt: state.attempt, nextRetryTime: state.nextRetryTime, status: state.status } })
        .catch(() => {});
    }
    if (state.nextRetryTime) this.ext.alarms.create("reconnect", Math.max(state.nextRetryTime, this.now() + 30_000));
  }

  async onConnected(hello) {
    const pauseQueued = this.queue.entries().some((entry) => entry.type === "pause" || entry.type === "resume");
    if (typeof hello?.paused === "boolean" && hello.paused !== this.paused && !pauseQueued) {
      await this.applyPaused(hello.paused, { tellHost: false });
    }
    await this.send("settings_set", { settings: this.settings });
    await this.sync.sendSnapshot();
  }

  onResult(entry, message, result) {
    this.stats.delivered += 1;
    if (entry.type === "capture_page") {
      this.stats.captured += 1;
      this.stats.lastCaptureTime = this.now();
    }
    this.persist(KEYS.stats, this.stats);
    this._settleWaiter(entry.id, { ok: true, result });
    this.updateBadge();
  }

  onRejected(entry, message, error) {
    if (error.code === 10) this.stats.refused += 1;
    else this.stats.rejected += 1;
    this.stats.lastRejection = { type: entry.type, code: error.code, message: error.message, time: this.now() };
    this.persist(KEYS.stats, this.stats);
    if (message && (entry.type === "highlight" || entry.type === "note")) {
      this.deadLetters = [...this.deadLetters, { type: entry.type, message, error, time: this.now() }].slice(-LIMITS.deadLetterMax);
      this.persist(KEYS.deadLetters, this.deadLetters);
    }
    this._settleWaiter(entry.id, { ok: false, error });
  }

  async onPush(message) {
    if (message.type === "notify") {
      if (message.event === "paused" || message.event === "resumed") {
        await this.applyPaused(message.event === "paused", { tellHost: false });
      }
      return;
    }
    if (message.type !== "action" || typeof message.action_id !== "string") return;
    const fields = { action_id: message.action_id.slice(0, 64), ok: false, result: null, error: null };
    const checked = validateAction(message, this.settings);
    if (!checked.ok) {
      fields.error = checked.error;
    } else {
      try {
        fields.result = await performAction(checked.action, {
          tabs: this.ext.tabs,
          tabGroups: this.ext.tabGroups,
          bookmarks: this.ext.bookmarks,
          gateFor: (url, incognito) => this.gateFor(url, incognito),
          captureTab: (tabId) => this.capture.captureTab(tabId),
        });
        fields.ok = true;
      } catch (error) {
        fields.error = { code: Number.isInteger(error.code) ? error.code : 14, name: "action_failed", message: String(error.message) };
      }
    }
    await this.send("action_result", fields);
  }

  // ------------------------------------------------------------------ commands

  async applyPaused(paused, { tellHost = true } = {}) {
    if (paused === this.paused) return;
    if (paused) {
      await this.capture.endAllVisits(); // sent before the pause: they were allowed
      this.paused = true;
    } else {
      this.paused = false;
    }
    this.sync.forgetTabs();
    await this.persist(KEYS.paused, this.paused);
    if (tellHost) await this.send(paused ? "pause" : "resume", paused ? { until_time: null } : {});
    if (!paused) {
      await this.sync.sendSnapshot();
      await this.sync.importBookmarks(); // events were not sent while paused
    }
    this.updateBadge();
  }

  /** Change settings: `input` may be partial ({capture: {min_dwell_ms: 500}}). */
  async setSettings(input) {
    this.settings = mergeSettings(this.settings, input);
    this.rules = effectiveRules(this.settings.exclusions);
    await this.persist(KEYS.settings, this.settings);
    await this.send("settings_set", { settings: this.settings });
    return { settings: this.settings, invalidRules: this.rules.invalid };
  }

  /** Forget locally (queue, open visits) and at the host. */
  async forget(selector) {
    const fields = forgetFields(selector);
    let match;
    if (fields.url) {
      const target = canonicalUrl(fields.url);
      match = (url) => url !== null && url === target;
    } else if (fields.domain) {
      const domain = normalizeDomain(fields.domain);
      if (!domain) throw new Error(`"${fields.domain}" is not a domain name`);
      fields.domain = domain;
      match = (url, host) => host !== null && domainMatches(host, domain);
    } else if (fields.everything) {
      match = () => true;
    } else {
      const since = fields.since_time ?? 0;
      const until = fields.until_time ?? Infinity;
      match = (url, host, time) => Number.isFinite(time) && time >= since && time < until;
    }
    const purged = await this.queue.removeWhere(
      (entry) => TYPES[entry.type]?.capture && match(entry.meta.url ?? null, entry.meta.host ?? null, entry.meta.time),
    );
    const visits = this.visits.discardWhere((visit) => match(canonicalUrl(visit.url), new URL(visit.url).hostname, visit.time));
    await this.saveVisits();
    const outcome = await this.sendAndWait("forget", fields);
    return { purgedQueued: purged, discardedVisits: visits, ...outcome };
  }

  search(request) {
    return this.courier.request("search", searchFields(request));
  }

  hostStatus() {
    return this.courier.request("status", {});
  }

  /** One of the memory page's read-only requests (recent, timeline, page_get, ...). */
  memoryRead(type, fields) {
    if (!MEMORY_READS.includes(type)) return Promise.reject(new Error(`${JSON.stringify(type)} is not a memory request`));
    return this.courier.request(type, fields && typeof fields === "object" ? fields : {});
  }

  exportPage(cursor) {
    return this.courier.request("export", { cursor: cursor ?? null, kinds: null, limit: null });
  }

  async retryDeadLetters() {
    const letters = this.deadLetters;
    this.deadLetters = [];
    await this.persist(KEYS.deadLetters, this.deadLetters);
    for (const letter of letters) {
      const { id, type, ...fields } = letter.message;
      await this.send(type, fields); // same dedupe_key: a replay cannot duplicate
    }
    return { resent: letters.length };
  }

  /** A failure with no page to show it on (context menu): kept for the popup. */
  noteLocalError(error) {
    this.lastLocalError = { message: String(error?.message ?? error), time: this.now() };
  }

  async clearDrops() {
    await this.queue.clearDrops();
    this.updateBadge();
  }

  state() {
    const connection = this.courier.state;
    return {
      status: connection.status,
      lastError: connection.lastError,
      nextRetryTime: connection.nextRetryTime,
      host: connection.host,
      paused: this.paused,
      profile: this.profile,
      queue: { length: this.queue.length, bytes: this.queue.bytes, ...this.queue.stats },
      stats: this.stats,
      deadLetters: this.deadLetters.map((letter) => ({
        type: letter.type,
        time: letter.time,
        error: letter.error,
        text: letter.message.text ?? letter.message.content ?? "",
        url: letter.message.url ?? null,
      })),
      openVisits: this.visits.all().length,
      lastLocalError: this.lastLocalError ?? null,
      backfill: this.sync.backfillState,
      settings: this.settings,
    };
  }

  /** Connect now and wait until the queue is empty (tests); returns what is left. */
  async flush(timeoutMs = 10_000) {
    this.courier.connect({ force: true });
    const deadline = this.now() + timeoutMs;
    while (this.queue.length && this.now() < deadline) {
      this.courier.pump();
      await new Promise((resolve) => this.timers.setTimeout(resolve, 20));
    }
    return this.queue.length;
  }

  onAlarm(alarm) {
    if (alarm?.name === "reconnect") this.courier.connect();
  }
}
