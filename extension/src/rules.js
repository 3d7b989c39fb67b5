// Capture rules: what may ever leave the browser, and when a page is ready to capture.
// Order of the gate: incognito, paused, scheme, exclusions. A page that fails is never
// captured, visited, snapshotted with its URL, highlighted, or bookmarked in Backtrail.

import { DEFAULT_SETTINGS, SETTING_BOUNDS } from "./config.js";
import { matchRule, scrubUrl, isCapturableUrl } from "./urls.js";

/**
 * May something about `url` be sent? `context`: {incognito, paused, rules} where `rules`
 * is the compiled exclusion list (urls.effectiveRules). Returns {ok: true, url: scrubbed}
 * or {ok: false, reason: "incognito"|"paused"|"scheme"|"excluded", rule?}.
 */
export function gate(url, { incognito = false, paused = false, rules }) {
  if (incognito) return { ok: false, reason: "incognito" };
  if (paused) return { ok: false, reason: "paused" };
  if (!isCapturableUrl(url)) return { ok: false, reason: "scheme" };
  const rule = matchRule(url, rules);
  if (rule !== null) return { ok: false, reason: "excluded", rule };
  return { ok: true, url: scrubUrl(url) };
}

/** Is this dwell report the moment to capture the visit? */
export function readyToCapture(visit, settings) {
  if (!visit || visit.captured) return false;
  return visit.visible_ms >= settings.capture.min_dwell_ms;
}

/** Caps passed to the page's extraction script. */
export function extractionCaps(settings) {
  return {
    maxHtmlBytes: settings.capture.max_html_bytes,
    maxTextBytes: settings.capture.max_text_bytes,
    skipPasswordPages: settings.capture.skip_password_pages !== false,
    // A checkout page is recognised by what it holds, as a sign-in page is: the same
    // setting skips a page whose DOM holds a payment-card field.
    skipPaymentPages: settings.capture.skip_password_pages !== false,
  };
}

/** The name skipped pages are counted under when their DOM holds a password (or a
 * payment-card) field. */
export const PASSWORD_RULE = "password field";

function clampInt(value, [low, high], fallback) {
  const number = Number(value);
  if (!Number.isFinite(number)) return fallback;
  return Math.min(high, Math.max(low, Math.round(number)));
}

/**
 * A complete, valid settings document from anything (stored, or sent by the options page):
 * unknown keys dropped, numbers clamped to SETTING_BOUNDS, missing values defaulted.
 */
export function normalizeSettings(input) {
  const raw = input && typeof input === "object" ? input : {};
  const d = DEFAULT_SETTINGS;
  const exclusions = raw.exclusions ?? {};
  const capture = raw.capture ?? {};
  const history = raw.history ?? {};
  const actions = raw.actions ?? {};
  const rules = Array.isArray(exclusions.rules) ? exclusions.rules : [];
  return {
    exclusions: {
      use_defaults: typeof exclusions.use_defaults === "boolean" ? exclusions.use_defaults : d.exclusions.use_defaults,
      rules: rules
        .filter((rule) => typeof rule === "string" && rule.trim())
        .map((rule) => rule.trim().slice(0, SETTING_BOUNDS.max_rule_chars))
        .slice(0, SETTING_BOUNDS.max_rules),
    },
    capture: {
      min_dwell_ms: clampInt(capture.min_dwell_ms, SETTING_BOUNDS.min_dwell_ms, d.capture.min_dwell_ms),
      max_html_bytes: clampInt(capture.max_html_bytes, SETTING_BOUNDS.max_html_bytes, d.capture.max_html_bytes),
      max_text_bytes: clampInt(capture.max_text_bytes, SETTING_BOUNDS.max_text_bytes, d.capture.max_text_bytes),
      skip_password_pages: typeof capture.skip_password_pages === "boolean" ? capture.skip_password_pages : d.capture.skip_password_pages,
    },
    history: {
      backfill_days: clampInt(history.backfill_days, SETTING_BOUNDS.backfill_days, d.history.backfill_days),
    },
    actions: Object.fromEntries(
      Object.entries(d.actions).map(([name, fallback]) => [
        name,
        typeof actions[name] === "boolean" ? actions[name] : fallback,
      ]),
    ),
  };
}

/** Apply a partial settings document (sections merged one level deep) to `current`. */
export function mergeSettings(current, patch) {
  const out = { ...current };
  if (patch && typeof patch === "object") {
    for (const [section, value] of Object.entries(patch)) {
      const base = current[section];
      out[section] = value && typeof value === "object" && !Array.isArray(value) && base ? { ...base, ...value } : value;
    }
  }
  return normalizeSettings(out);
}
