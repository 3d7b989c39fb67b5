// The options page's form, checked before anything is saved: a value out of range, empty
// or not a whole number is refused with a message for its field, never clamped. Pure
// functions, so Node tests check them; options.js shows the messages.

import { SETTING_BOUNDS } from "../config.js";
import { compileRules } from "../urls.js";

/** A whole number within [low, high] from what was typed: {value} or {error}. */
export function wholeNumber(raw, [low, high], unit) {
  const text = String(raw ?? "").trim();
  const range = `from ${low} to ${high} ${unit}`;
  if (!text) return { error: `Enter a number ${range}.` };
  if (!/^[+-]?\d+$/.test(text)) return { error: `“${text}” is not a whole number: enter one ${range}.` };
  const value = Number(text);
  if (value < low || value > high) return { error: `${value} is out of range: enter a number ${range}.` };
  return { value };
}

/** The user's rules (one per line) or an error naming every line that is not a rule. */
export function userRules(text) {
  const lines = String(text ?? "").split("\n").map((line) => line.trim()).filter(Boolean);
  if (lines.length > SETTING_BOUNDS.max_rules) return { error: `At most ${SETTING_BOUNDS.max_rules} rules (there are ${lines.length}).` };
  const long = lines.find((line) => line.length > SETTING_BOUNDS.max_rule_chars);
  if (long) return { error: `A rule is at most ${SETTING_BOUNDS.max_rule_chars} characters (“${long.slice(0, 40)}…” is longer).` };
  const { invalid } = compileRules(lines);
  if (invalid.length) {
    return { error: `Not saved, these lines are not rules: ${invalid.map((i) => `“${i.rule}” (${i.reason})`).join("; ")}.` };
  }
  return { value: lines };
}

/**
 * Check the form's raw values ({dwell, maxSize, days: strings; rules: text; useDefaults,
 * skipPassword: booleans; actions: {name: bool}}). Returns {settings, errors} where
 * errors maps field ids ("dwell", "max-size", "days", "rules") to messages; settings is
 * null when there is any error.
 */
export function checkSettings(raw) {
  const seconds = SETTING_BOUNDS.min_dwell_ms.map((ms) => ms / 1000);
  const kb = SETTING_BOUNDS.max_html_bytes.map((bytes, i) => (i === 0 ? Math.ceil(bytes / 1000) : Math.min(15_000, Math.floor(bytes / 1000))));
  const checked = {
    dwell: wholeNumber(raw.dwell, seconds, "seconds"),
    "max-size": wholeNumber(raw.maxSize, kb, "KB"),
    days: wholeNumber(raw.days, SETTING_BOUNDS.backfill_days, "days"),
    rules: userRules(raw.rules),
  };
  const errors = Object.fromEntries(Object.entries(checked).filter(([, c]) => c.error).map(([id, c]) => [id, c.error]));
  if (Object.keys(errors).length) return { settings: null, errors };
  const bytes = checked["max-size"].value * 1000;
  return {
    errors,
    settings: {
      exclusions: { use_defaults: Boolean(raw.useDefaults), rules: checked.rules.value },
      capture: {
        min_dwell_ms: checked.dwell.value * 1000, max_html_bytes: bytes, max_text_bytes: bytes,
        skip_password_pages: Boolean(raw.skipPassword),
      },
      history: { backfill_days: checked.days.value },
      actions: { ...raw.actions },
    },
  };
}

const WORDS = [
  ["pages", "page"], ["visits", "visit"], ["highlights", "highlight"], ["notes", "note"],
  ["bookmarks", "bookmark"], ["tabs", "open tab"], ["actions", "assistant action"],
];

/** "3 pages, 5 visits, 1 highlight" from a forget result's counts (internal tables left out). */
export function countsInWords(counts) {
  const parts = WORDS.filter(([table]) => counts?.[table] > 0).map(([table, word]) => {
    const n = counts[table];
    return `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`;
  });
  return parts.join(", ");
}
