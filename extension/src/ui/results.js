// How a search result (or a recent page) reads to a person, for every extension page:
// its title without a repeated site suffix, its site, when it was last read, how often,
// and its snippet. The host gives display_title, site, visits and last_visit_ms when it
// knows them; older hosts give only title, url and visit_time, and this falls back.

import { el } from "./dom.js";
import { relativeTime, visitsText } from "./memory-format.js";
import { snippetParts } from "./snippet.js";

function hostOf(url) {
  try {
    return new URL(url).hostname.replace(/^www\./, "");
  } catch {
    return "";
  }
}

/** The plain facts shown for one hit: {title, site, when, visits, kind}. */
export function hitFacts(hit, now = Date.now()) {
  const site = hit.site || hit.domain || hostOf(hit.url);
  const title = hit.display_title || hit.title || hit.url || "(untitled)";
  const time = [hit.last_visit_ms, hit.visit_time, hit.last_seen_time].find(Number.isFinite);
  const visits = visitsText(Number.isInteger(hit.visits) ? hit.visits : hit.visit_count);
  const kind = hit.kind && hit.kind !== "page" ? hit.kind : "";
  // A recent page whose text never arrived says so (it cannot be found by its words).
  const missing = hit.captured_time === null ? "text not captured" : "";
  return { title, site, when: relativeTime(time, now), visits, kind, missing };
}

/** One result as an <li> holding a real link (or plain text for a note without a page). */
export function resultItem(hit, now = Date.now()) {
  const facts = hitFacts(hit, now);
  const meta = [facts.kind, facts.site, facts.when, facts.visits, facts.missing].filter(Boolean).join(" · ");
  const snippet = snippetParts(hit.snippet).map((part) => (part.marked ? el("mark", {}, part.text) : part.text));
  const body = [
    el("span", { className: "title" }, facts.title),
    el("span", { className: "meta" }, meta),
    ...(snippet.length ? [el("span", { className: "snippet" }, ...snippet)] : []),
  ];
  const link = /^https?:\/\//i.test(hit.url ?? "");
  const inner = link ? el("a", { className: "hit", href: hit.url }, ...body) : el("div", { className: "hit" }, ...body);
  return el("li", {}, inner);
}
