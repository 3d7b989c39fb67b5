// The connection to the native host and delivery of the queue over it.
//
// States: "idle" (never tried) → "connecting" (port open, hello sent) → "connected";
// a disconnect leads to "not_installed" (the browser found no host manifest),
// "forbidden" (the manifest does not allow this extension), or "disconnected" (the host
// exited, crashed or timed out), each followed by a reconnect after a backoff delay.
//
// Delivery: one queued message in flight at a time, in queue order, resent with the same
// id after reconnects; direct requests (hello, search, status, settings_get, export) go
// alongside. See PROTOCOL.md section 4.

import { HOST_NAME, LIMITS } from "./config.js";
import { backoffDelay } from "./backoff.js";
import { classifyFrame, frame, makeError, newId, retryPolicy, CODE } from "./protocol.js";

/** An error from the host or from the connection, with the protocol's code. */
export class HostError extends Error {
  constructor(error) {
    super(error.message);
    this.code = error.code;
    this.error = error;
  }
}

export function statusFromDisconnect(message) {
  if (/not found/i.test(message)) return "not_installed";
  if (/forbidden/i.test(message)) return "forbidden";
  return "disconnected";
}

export class Courier {
  /**
   * deps: {connectNative(name) → port, queue, hello() → fields, timers: {now, setTimeout,
   * clearTimeout}, random, onState(state), onResult(entry, message, result),
   * onRejected(entry, message, error), onPush(message), onConnected(result)}
   */
  constructor(deps) {
    this.deps = deps;
    this.queue = deps.queue;
    this.timers = deps.timers ?? { now: Date.now, setTimeout, clearTimeout };
    this.port = null;
    this.state = { status: "idle", lastError: null, attempt: 0, nextRetryTime: null, host: null, connectedTime: null };
    this.pending = new Map(); // direct request id → {resolve, reject, timer}
    this.inflight = null; // {entry, timer}
    this.holdUntil = 0; // retry hold after busy / internal errors
    this._retryTimer = null;
    this._holdTimer = null;
    this._pumping = false;
    this.maxRequestBytes = LIMITS.hostDefaultMaxRequestBytes;
  }

  /**
   * Resume the backoff of a previous service-worker life (from storage.session), so a
   * woken worker neither hammers a missing host nor waits longer than planned.
   */
  restore({ attempt = 0, nextRetryTime = null, status = "idle" } = {}) {
    this.state = { ...this.state, attempt, nextRetryTime, status: this.port ? this.state.status : status };
    const delay = Number.isFinite(nextRetryTime) ? nextRetryTime - this.timers.now() : 0;
    if (delay > 0 && !this.port) {
      this._clearRetry();
      this._retryTimer = this.timers.setTimeout(() => {
        this._retryTimer = null;
        this.connect();
      }, delay);
    }
  }

  _setState(patch) {
    this.state = { ...this.state, ...patch };
    this.deps.onState?.(this.state);
  }

  get connected() {
    return this.state.status === "connected";
  }

  /** Connect unless connected, connecting, or waiting for a backoff delay (unless forced). */
  connect({ force = false } = {}) {
    if (this.port) return;
    const now = this.timers.now();
    if (!force && this.state.nextRetryTime && now < this.state.nextRetryTime) return;
    this._clearRetry();
    let port;
    try {
      port = this.deps.connectNative(HOST_NAME);
    } catch (error) {
      this._onDisconnect(null, String(error?.message ?? error));
      return;
    }
    this.port = port;
    this._setState({ status: "connecting", nextRetryTime: null });
    port.onMessage((message) => this._onFrame(port, message));
    port.onDisconnect((message) => this._onDisconnect(port, message));
    this._hello(port);
  }

  async _hello(port) {
    try {
      const result = await this._direct(port, "hello", this.deps.hello(), LIMITS.helloTimeoutMs);
      if (port !== this.port) return;
      const limit = result?.limits?.max_request_bytes;
      if (Number.isInteger(limit) && limit > 0) this.maxRequestBytes = Math.min(limit, LIMITS.maxFrameBytes);
      this._setState({ status: "connected", attempt: 0, lastError: null, host: result, connectedTime: this.timers.now() });
      await this.deps.onConnected?.(result);
      this.pump();
    } catch (error) {
      if (port !== this.port) return;
      this._setState({ lastError: error.message });
      this._drop(port, `hello failed: ${error.message}`);
    }
  }

  /** Close the port on purpose (timeout, failed hello) and schedule a reconnect. */
  _drop(port, reason) {
    try {
      port.disconnect();
    } catch {
      // already gone
    }
    this._onDisconnect(port, reason);
  }

  _onDisconnect(port, message) {
    if (port !== null && port !== this.port) return; // an old port
    this.port = null;
    for (const [, waiter] of this.pending) {
      this.timers.clearTimeout(waiter.timer);
      waiter.reject(new HostError(makeError(CODE.busy, `not connected: ${message}`)));
    }
    this.pending.clear();
    if (this.inflight) this.timers.clearTimeout(this.inflight.timer);
    this.inflight = null;
    this.queue.inflightId = null;
    const attempt = this.state.attempt + 1;
    const delay = backoffDelay(attempt, {}, this.deps.random ?? Math.random);
    const nextRetryTime = this.timers.now() + delay;
    this._setState({ status: statusFromDisconnect(message), lastError: message, attempt, nextRetryTime, host: null });
    this._retryTimer = this.timers.setTimeout(() => {
      this._retryTimer = null;
      this.connect();
    }, delay);
  }

  _clearRetry() {
    if (this._retryTimer) this.timers.clearTimeout(this._retryTimer);
    this._retryTimer = null;
  }

  /** Send a direct request and wait for its result (rejects with HostError). */
  request(type, fields = {}, timeoutMs = LIMITS.directTimeoutMs) {
    if (!this.connected) {
      const why = this.state.status === "not_installed" ? "the Backtrail host is not installed" : "the Backtrail host is not connected";
      return Promise.reject(new HostError(makeError(CODE.busy, why)));
    }
    return this._direct(this.port, type, fields, timeoutMs);
  }

  _direct(port, type, fields, timeoutMs) {
    const id = newId("d-");
    return new Promise((resolve, reject) => {
      const timer = this.timers.setTimeout(() => {
        this.pending.delete(id);
        reject(new HostError(makeError(CODE.busy, `no answer to ${type} within ${timeoutMs} ms`)));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      try {
        port.post(frame(id, type, fields));
      } catch (error) {
        this.timers.clearTimeout(timer);
        this.pending.delete(id);
        reject(new HostError(makeError(CODE.busy, `could not send: ${error.message}`)));
      }
    });
  }

  /** Send the head of the queue if nothing is in flight. Safe to call any time. */
  async pump() {
    if (this._pumping) return;
    this._pumping = true;
    try {
      while (this.connected && !this.inflight && this.queue.length) {
        const now = this.timers.now();
        if (now < this.holdUntil) {
          this._armHold();
          return;
        }
        await this.queue.settle();
        const entry = this.queue.head();
        if (!entry) return;
        if (entry.bytes > this.maxRequestBytes) {
          const error = makeError(CODE.message_too_large, `message is ${entry.bytes} bytes; the host accepts ${this.maxRequestBytes}`);
          await this._reject(entry, await this.queue.read(entry), error);
          continue;
        }
        const message = await this.queue.read(entry);
        if (!message) {
          await this.queue.remove(entry.id);
          continue;
        }
        if (!this.connected || this.inflight) return;
        const timer = this.timers.setTimeout(() => {
          if (this.inflight?.entry.id === entry.id && this.port) this._drop(this.port, "the host did not answer in time");
        }, LIMITS.responseTimeoutMs);
        this.inflight = { entry, message, timer };
        this.queue.inflightId = entry.id;
        try {
          this.port.post(message);
        } catch (error) {
          this._drop(this.port, `could not send: ${error.message}`);
          return;
        }
      }
    } finally {
      this._pumping = false;
    }
  }

  _armHold() {
    if (this._holdTimer) return;
    const delay = Math.max(0, this.holdUntil - this.timers.now());
    this._holdTimer = this.timers.setTimeout(() => {
      this._holdTimer = null;
      this.pump();
    }, delay);
  }

  _onFrame(port, raw) {
    if (port !== this.port) return;
    const frameInfo = classifyFrame(raw);
    if (frameInfo.kind === "push") {
      this.deps.onPush?.(frameInfo.message);
      return;
    }
    if (frameInfo.kind !== "response") return;
    const waiter = frameInfo.id !== null ? this.pending.get(frameInfo.id) : undefined;
    if (waiter) {
      this.pending.delete(frameInfo.id);
      this.timers.clearTimeout(waiter.timer);
      if (frameInfo.ok) waiter.resolve(frameInfo.result);
      else waiter.reject(new HostError(frameInfo.error));
      return;
    }
    const inflight = this.inflight;
    if (!inflight || (frameInfo.id !== null && frameInfo.id !== inflight.entry.id)) return;
    this.timers.clearTimeout(inflight.timer);
    this._settle(inflight, frameInfo).finally(() => this.pump());
  }

  async _settle(inflight, response) {
    const { entry, message } = inflight;
    if (response.ok) {
      await this.queue.remove(entry.id);
      this.inflight = null;
      this.deps.onResult?.(entry, message, response.result);
      return;
    }
    const attempts = await this.queue.bumpAttempts(entry.id);
    const policy = retryPolicy(response.error, attempts);
    this.inflight = null;
    this.queue.inflightId = null;
    if (policy === "retry") {
      const delay = Math.max(response.error.retry_after_ms ?? 0, backoffDelay(attempts, {}, this.deps.random ?? Math.random));
      this.holdUntil = this.timers.now() + delay;
    } else if (policy === "hello" && this.port) {
      await this._hello(this.port);
    } else {
      await this._reject(entry, message, response.error);
    }
  }

  async _reject(entry, message, error) {
    await this.queue.remove(entry.id);
    this.deps.onRejected?.(entry, message, error);
  }

  /** Close everything (tests). */
  close() {
    this._clearRetry();
    if (this._holdTimer) this.timers.clearTimeout(this._holdTimer);
    if (this.port) {
      const port = this.port;
      this.port = null;
      try {
        port.disconnect();
      } catch {
        // ignore
      }
    }
  }
}
