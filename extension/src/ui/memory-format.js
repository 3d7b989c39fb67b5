// Pure helpers of the memory page: how a result reads (title, site, relative time,
// visits), the filters as the host's fields, and the reading chart as SVG markup parts.
// No DOM and no chrome.*: unit-tested under node --test (tests/memory-format.test.js).

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** What a search result, recent page or saved item shows (the host's presentation
 * fields when it sends them: display_title, site, visits, last_visit_ms). */
export function presentation(hit) {
  const url = typeof hit.url === "string" ? hit.url : null;
  const site = hit.site ?? siteOf(hit.domain ?? (url ? hostOf(url) : null));
  return {
    title: hit.display_title || hit.title || (url ? shortUrl(url) : "(untitled)"),
    site,
    url,
    visits: hit.visits ?? hit.visit_count ?? null,
    time: hit.last_visit_ms ?? hit.visit_time ?? hit.last_seen_time ?? hit.time ?? null,
  };
}

export function siteOf(domain) {
  return domain ? String(domain).replace(/^www\./, "") : "";
}

function hostOf(url) {
  try {
    return new URL(url).hostname;
  } catch {
    return null;
  }
}

function shortUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.hostname.replace(/^www\./, "") + (parsed.pathname === "/" ? "" : parsed.pathname);
  } catch {
    return url;
  }
}

/** "just now", "5 minutes ago", "yesterday", "3 days ago", then a date ("Nov 2", "Nov 2, 2024"). */
export function relativeTime(ms, now = Date.now(), locale = undefined) {
  if (!Number.isFinite(ms)) return "";
  const ago = now - ms;
  const words = new Intl.RelativeTimeFormat(locale, { numeric: "auto" });
  if (ago < MINUTE) return "just now";
  if (ago < HOUR) return words.format(-Math.floor(ago / MINUTE), "minute");
  const days = calendarDays(ms, now);
  if (days === 0) return words.format(-Math.floor(ago / HOUR), "hour");
  if (days < 7) return words.format(-days, "day");
  const sameYear = new Date(ms).getFullYear() === new Date(now).getFullYear();
  const style = sameYear ? { month: "short", day: "numeric" } : { year: "numeric", month: "short", day: "numeric" };
  return new Date(ms).toLocaleDateString(locale, style);
}

function calendarDays(ms, now) {
  const a = new Date(ms);
  const b = new Date(now);
  const start = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  return Math.round((start(b) - start(a)) / DAY);
}

export function visitsText(count) {
  if (!Number.isFinite(count) || count <= 0) return "";
  return count === 1 ? "1 visit" : `${count.toLocaleString()} visits`;
}

/** "Saturday, Dec 5" (this year) or "Saturday, Dec 5, 2025": a timeline day heading. */
export function dayHeading(ms, now = Date.now(), locale = undefined) {
  const days = calendarDays(ms, now);
  if (days === 0) return "Today";
  if (days === 1) return "Yesterday";
  const sameYear = new Date(ms).getFullYear() === new Date(now).getFullYear();
  const style = { weekday: "long", month: "short", day: "numeric", ...(sameYear ? {} : { year: "numeric" }) };
  return new Date(ms).toLocaleDateString(locale, style);
}

export function clock(ms, locale = undefined) {
  return new Date(ms).toLocaleTimeString(locale, { hour: "numeric", minute: "2-digit" });
}

/** A local calendar date "2026-12-01" as the ms of its local midnight (null if empty). */
export function dateStart(value) {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(String(value ?? ""));
  if (!match) return null;
  return new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3])).getTime();
}

/**
 * The filter form as the host's fields: {domain, since_time, until_time} for every
 * request and `kinds` for search ("To" is inclusive: until the next midnight).
 */
export function filterFields({ site = "", since = "", until = "", kinds = [] } = {}) {
  const out = {};
  const domain = String(site).trim().toLowerCase().replace(/^https?:\/\//, "").replace(/\/.*$/, "");
  if (domain) out.domain = domain;
  const start = dateStart(since);
  const end = dateStart(until);
  if (start !== null) out.since_time = start;
  if (end !== null) out.until_time = new Date(end).setDate(new Date(end).getDate() + 1);
  const all = ["page", "highlight", "note", "bookmark"];
  const chosen = all.filter((kind) => kinds.includes(kind));
  return { ...out, kinds: chosen.length && chosen.length < all.length ? chosen : null };
}

/** Results in the chosen order: as the host ranked them, or newest first. */
export function ordered(results, sort) {
  if (sort !== "time") return results;
  return [...results].sort((a, b) => (presentation(b).time ?? 0) - (presentation(a).time ?? 0));
}

/**
 * The bars of the reading chart: one per day from `start` to `end` (ms, local days),
 * `days` [{time, visits}] from the host. Returns {bars: [{x, y, width, height, time,
 * visits}], max, ticks: [{x, label}]} in a `width` × `height` box.
 */
export function chartBars(days, start, end, { width = 720, height = 120, locale = undefined } = {}) {
  const counts = new Map(days.map((d) => [localDay(d.time), d.visits]));
  const slots = [];
  for (let t = localDay(start); t < end; t = nextDay(t)) slots.push(t);
  const max = Math.max(1, ...slots.map((t) => counts.get(t) ?? 0));
  const step = width / Math.max(1, slots.length);
  const bars = slots.map((time, i) => {
    const visits = counts.get(time) ?? 0;
    const h = visits ? Math.max(2, (visits / max) * height) : 0;
    return { x: i * step, y: height - h, width: Math.max(1, step - 1), height: h, time, visits };
  });
  const ticks = bars
    .filter((bar) => bar.x < width - 48) // a label at the right edge would be cut off
    .filter((bar) => (slots.length > 45 ? new Date(bar.time).getDate() === 1 : new Date(bar.time).getDay() === 1))
    .map((bar) => ({ x: bar.x, label: new Date(bar.time).toLocaleDateString(locale, { month: "short", ...(slots.length > 45 ? {} : { day: "numeric" }) }) }));
  return { bars, max, ticks };
}

function localDay(ms) {
  const d = new Date(ms);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
}

function nextDay(ms) {
  const d = new Date(ms);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).getTime();
}

/** "1 page, 2 versions, 5 visits, 2 highlights, 1 note and 1 bookmark" from forget_preview counts. */
export function forgetSummary(counts) {
  const names = [
    ["pages", "page", "pages"],
    ["page_versions", "stored version of its text", "stored versions of its text"],
    ["visits", "visit", "visits"],
    ["highlights", "highlight", "highlights"],
    ["notes", "note", "notes"],
    ["bookmarks", "bookmark record", "bookmark records"],
  ];
  const parts = names
    .filter(([key]) => counts?.[key] > 0)
    .map(([key, one, many]) => `${counts[key].toLocaleString()} ${counts[key] === 1 ? one : many}`);
  if (!parts.length) return "nothing";
  return parts.length === 1 ? parts[0] : `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}`;
}
