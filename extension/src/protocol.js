// The wire protocol (native-host/PROTOCOL.md) as code: frozen error codes, the message
// table (queued or direct, overflow tier, supersede keys) and builders that turn browser
// data into request bodies. Builders never see `chrome.*`; callers pass plain objects.

import { LIMITS, PROTOCOL_VERSION } from "./config.js";
import { canonicalUrl, hostOf, scrubTitle } from "./urls.js";

/** Frozen error codes: only ever appended to. `retry`: "yes" | "bounded" | "hello" | "no". */
export const ERRORS = Object.freeze({
  1: { name: "malformed_frame", retry: "no" },
  2: { name: "invalid_utf8", retry: "no" },
  3: { name: "invalid_json", retry: "no" },
  4: { name: "unknown_type", retry: "no" },
  5: { name: "missing_field", retry: "no" },
  6: { name: "wrong_field_type", retry: "no" },
  7: { name: "message_too_large", retry: "no" },
  8: { name: "forbidden_scheme", retry: "no" },
  9: { name: "excluded", retry: "no" },
  10: { name: "paused", retry: "no" },
  11: { name: "not_found", retry: "no" },
  12: { name: "conflict", retry: "no" },
  13: { name: "busy", retry: "yes" },
  14: { name: "internal_error", retry: "bounded" },
  15: { name: "unsupported_protocol", retry: "no" },
  16: { name: "invalid_value", retry: "no" },
  17: { name: "hello_required", retry: "hello" },
  18: { name: "action_not_allowed", retry: "no" },
  19: { name: "unsupported_action", retry: "no" },
});

export const CODE = Object.freeze(
  Object.fromEntries(Object.entries(ERRORS).map(([code, { name }]) => [name, Number(code)])),
);

/** What to do with a queued message answered by `error`: "retry" | "hello" | "reject". */
export function retryPolicy(error, attempts) {
  const entry = ERRORS[error?.code];
  if (!entry) return "reject"; // a code this version does not know
  if (entry.retry === "yes") return "retry";
  if (entry.retry === "hello") return "hello";
  if (entry.retry === "bounded") {
    return attempts < LIMITS.internalErrorMaxAttempts ? "retry" : "reject";
  }
  return "reject";
}

/** A local error object shaped like the protocol's. */
export function makeError(code, message, details) {
  const error = { code, name: ERRORS[code]?.name ?? "unknown", message };
  if (details) error.details = details;
  return error;
}

/** Message types: queued (Q) with a tier, or direct (D). Host pause refuses `capture`. */
export const TYPES = Object.freeze({
  hello: { queued: false },
  capture_page: { queued: true, tier: "low", capture: true },
  visit: { queued: true, tier: "low", capture: true },
  tab_snapshot: { queued: true, tier: "low", capture: true },
  tab_event: { queued: true, tier: "low", capture: true },
  history_import: { queued: true, tier: "low", capture: true },
  bookmark_upsert: { queued: true, tier: "normal", capture: true },
  bookmark_remove: { queued: true, tier: "normal", capture: true },
  bookmark_import: { queued: true, tier: "normal", capture: true },
  settings_set: { queued: true, tier: "normal" },
  action_result: { queued: true, tier: "normal" },
  highlight: { queued: true, tier: "keep", capture: true },
  note: { queued: true, tier: "keep", capture: true },
  pause: { queued: true, tier: "keep" },
  resume: { queued: true, tier: "keep" },
  forget: { queued: true, tier: "keep" },
  skipped: { queued: true, tier: "low", capture: true },
  search: { queued: false },
  status: { queued: false },
  settings_get: { queued: false },
  export: { queued: false },
  recent: { queued: false },
  timeline: { queued: false },
  page_get: { queued: false },
  saved_list: { queued: false },
  forget_preview: { queued: false },
});

/** The read-only requests the memory page may send through the background (PROTOCOL.md 3.18-3.22). */
export const MEMORY_READS = Object.freeze(["recent", "timeline", "page_get", "saved_list", "forget_preview"]);

export const TIERS = Object.freeze(["low", "normal", "keep"]);

const ID_RE = /^[A-Za-z0-9._:-]{1,64}$/;

export function isValidId(id) {
  return typeof id === "string" && ID_RE.test(id);
}

export function newId(prefix = "") {
  return `${prefix}${globalThis.crypto.randomUUID()}`;
}

/**
 * A request frame: `id` first and `type` second (PROTOCOL.md section 2 promises this order
 * so a host can recover the id of a frame it refuses unparsed).
 */
export function frame(id, type, fields = {}) {
  if (!isValidId(id)) throw new Error(`invalid message id ${JSON.stringify(id)}`);
  if (!TYPES[type]) throw new Error(`unknown message type ${JSON.stringify(type)}`);
  const out = { id, type };
  for (const [key, value] of Object.entries(fields)) {
    if (key !== "id" && key !== "type") out[key] = value;
  }
  return out;
}

/** UTF-8 size of the JSON a message serialises to. */
export function byteSize(message) {
  return new TextEncoder().encode(JSON.stringify(message)).length;
}

/**
 * Queue options for a request body: tier, the keys that identify it for superseding, the
 * keys it supersedes, and metadata (host, time) used to purge on `forget`.
 */
export function queueOptions(type, fields) {
  const tier = TYPES[type]?.tier ?? "normal";
  const url = fields.url ?? fields.tab?.url ?? null;
  const meta = {
    host: url ? hostOf(url) : null,
    url: url ? canonicalUrl(url) : null,
    time: fields.visit?.time ?? fields.time ?? null,
  };
  let keys = [];
  let supersedes = [];
  if (type === "tab_snapshot") {
    keys = ["tabs"];
    supersedes = ["tabs"];
  } else if (type === "tab_event") {
    keys = ["tabs"];
    if (fields.event === "updated") {
      keys.push(`tab-updated:${fields.tab.tab_id}`);
      supersedes = [`tab-updated:${fields.tab.tab_id}`];
    }
  } else if (type === "settings_set") {
    keys = supersedes = ["settings"];
  } else if (type === "pause" || type === "resume") {
    keys = supersedes = ["pause"];
  } else if (type === "visit") {
    keys = supersedes = [`visit:${fields.visit.visit_id}`];
  }
  return { tier, keys, supersedes, meta };
}

// ------------------------------------------------------------------------- builders

/**
 * A title as it may leave the page: URLs in it scrubbed (a page without <title> is titled
 * with its raw URL), whitespace collapsed, cut to maxTitleChars; null when empty. Every
 * title the background keeps or queues goes through here.
 */
export function cutTitle(title) {
  if (typeof title !== "string") return null;
  const clean = scrubTitle(title).replace(/\s+/g, " ").trim();
  if (!clean) return null;
  return clean.length > LIMITS.maxTitleChars ? clean.slice(0, LIMITS.maxTitleChars) : clean;
}

function int(value) {
  return Number.isFinite(value) ? Math.floor(value) : null;
}

export function helloFields({ version, extensionId, browser, profileId, paused }) {
  return {
    protocol: PROTOCOL_VERSION,
    extension_version: version,
    extension_id: extensionId,
    browser,
    profile_id: profileId,
    capabilities: ["actions", "notify"],
    paused: Boolean(paused),
  };
}

/** Browser name/version from navigator.userAgentData brands (Brave via navigator.brave). */
export function detectBrowser({ brands = [], brave = false, userAgent = "" } = {}) {
  const find = (re) => brands.find((b) => re.test(b.brand));
  let hit = null;
  let name = "unknown";
  if (brave || find(/^Brave/)) {
    name = "brave";
    hit = find(/^Brave/) ?? find(/^Chromium$/);
  } else if ((hit = find(/Edge/))) name = "edge";
  else if ((hit = find(/^Google Chrome$/))) name = "chrome";
  else if ((hit = find(/^Chromium$/))) name = "chromium";
  else if (/Edg\//.test(userAgent)) name = "edge";
  else if (/Chrome\//.test(userAgent)) name = "chromium";
  const fromUa = /(?:Chrome|Chromium)\/([\d.]+)/.exec(userAgent);
  return { name, version: hit?.version ?? (fromUa ? fromUa[1] : null) };
}

export function visitObject(visit) {
  return {
    visit_id: visit.visit_id,
    time: int(visit.time),
    tab_id: int(visit.tab_id),
    window_id: int(visit.window_id),
    transition: visit.transition ?? null,
    referrer: visit.referrer ?? null,
    dwell_ms: Math.max(0, int(visit.dwell_ms) ?? 0),
  };
}

export function visitFields(visit) {
  return { url: visit.url, title: cutTitle(visit.title), visit: visitObject(visit) };
}

/** `content`: what the page script returned ({content_type, html|text, truncated, title, language}). */
export function captureFields(visit, content, capturedTime) {
  const fields = {
    url: visit.url,
    title: cutTitle(content.title ?? visit.title),
    language: typeof content.language === "string" && content.language ? content.language.slice(0, 64) : null,
    content_type: content.content_type,
  };
  if (content.content_type === "html") fields.html = content.html;
  else fields.text = content.text;
  fields.truncated = Boolean(content.truncated);
  fields.dedupe_key = `capture:${visit.visit_id}`;
  fields.captured_time = int(capturedTime);
  fields.visit = visitObject(visit);
  return fields;
}

function checkedText(value, max, what) {
  if (typeof value !== "string" || !value.trim()) throw new Error(`${what} is empty`);
  if (value.length > max) throw new Error(`${what} is longer than ${max} characters`);
  return value;
}

export function highlightFields({ url, title, text, context, note, time }) {
  const body = checkedText(text, LIMITS.maxHighlightChars, "the selection");
  return {
    dedupe_key: newId("highlight:"),
    url,
    title: cutTitle(title),
    text: body,
    context: typeof context === "string" && context.trim() ? context.slice(0, LIMITS.maxHighlightChars) : null,
    note: typeof note === "string" && note.trim() ? checkedText(note, LIMITS.maxNoteChars, "the note") : null,
    time: int(time),
  };
}

export function noteFields({ content, url, title, time }) {
  return {
    dedupe_key: newId("note:"),
    content: checkedText(content, LIMITS.maxNoteChars, "the note"),
    url: url ?? null,
    title: url ? cutTitle(title) : null,
    time: int(time),
  };
}

/** `selector`: {url} | {domain} | {since_time, until_time} | {everything: true}. */
export function forgetFields(selector) {
  const given = ["url", "domain", "everything"].filter((k) => selector[k] != null && selector[k] !== false);
  const range = selector.since_time != null || selector.until_time != null;
  if (given.length + (range ? 1 : 0) !== 1) {
    throw new Error("forget needs exactly one of url, domain, a time range, or everything");
  }
  if (range) return { since_time: int(selector.since_time), until_time: int(selector.until_time) };
  if (given[0] === "everything") return { everything: true };
  return { [given[0]]: selector[given[0]] };
}

export function searchFields({ query, limit = LIMITS.searchLimit, cursor = null }) {
  const text = typeof query === "string" ? query.trim() : "";
  if (!text) throw new Error("type something to search for");
  return {
    query: text.slice(0, LIMITS.maxQueryChars),
    limit: Math.min(50, Math.max(1, int(limit) ?? LIMITS.searchLimit)),
    cursor: cursor ?? null,
  };
}

/** Classify a frame from the host: {kind: "response"|"push"|"junk", ...}. */
export function classifyFrame(message) {
  if (message === null || typeof message !== "object" || Array.isArray(message)) {
    return { kind: "junk" };
  }
  if (typeof message.ok === "boolean") {
    if (message.ok) return { kind: "response", id: message.id ?? null, ok: true, result: message.result ?? {} };
    const error = message.error && typeof message.error === "object" ? message.error : {};
    return {
      kind: "response",
      id: message.id ?? null,
      ok: false,
      error: {
        code: Number.isInteger(error.code) ? error.code : 14,
        name: typeof error.name === "string" ? error.name : ERRORS[error.code]?.name ?? "unknown",
        message: typeof error.message === "string" ? error.message.slice(0, 1000) : "error without a message",
        retry_after_ms: Number.isInteger(error.retry_after_ms) ? error.retry_after_ms : null,
        details: error.details ?? null,
      },
    };
  }
  if (typeof message.type === "string") return { kind: "push", type: message.type, message };
  return { kind: "junk" };
}
