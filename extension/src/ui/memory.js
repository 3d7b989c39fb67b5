// The full-page memory: search with filters, recent pages, a timeline, saved items and a
// page view. It asks only the background (ask.js), which asks the native host; every list
// comes a page at a time ("More"). Views are chosen by the hash: #/search?q=…,
// #/timeline, #/highlights, #/notes, #/bookmarks, #/page?id=… (or ?url=…).

import { $, ask, el } from "./ask.js";
import { snippetParts } from "./snippet.js";
import { filterFields, ordered, presentation, relativeTime, visitsText } from "./memory-format.js";
import { showPage, showSaved, showTimeline } from "./memory-views.js";

const PAGE_SIZE = 20;
const live = $("#live");
let searchState = null; // {query, filters, sort, cursor, offset, results}
let generation = 0; // a newer request makes an older answer stale

/** Say something to screen readers (and show it). */
export function announce(text) {
  live.textContent = "";
  // a changed text node is announced even when the words repeat
  requestAnimationFrame(() => {
    live.textContent = text;
  });
}

export function memoryRequest(type, fields) {
  return ask("memory", { type, fields }).then((answer) => answer.result);
}

export function currentFilters() {
  const form = $("#filters");
  return filterFields({
    site: form.site.value,
    since: form.since.value,
    until: form.until.value,
    kinds: [...form.querySelectorAll("input[name=kind]:checked")].map((box) => box.value),
  });
}

export function pageHref(item) {
  if (Number.isInteger(item.page_id ?? item.id) && (item.kind ?? "page") === "page") return `#/page?id=${item.page_id ?? item.id}`;
  return item.url ? `#/page?url=${encodeURIComponent(item.url)}` : null;
}

/** A result line: the title as a real link to the page, then site · time · visits. */
export function resultItem(hit, { snippet = null, extra = [] } = {}) {
  const shown = presentation(hit);
  const safe = shown.url && /^https?:\/\//i.test(shown.url) ? shown.url : null;
  const title = safe ? el("a", { className: "result", href: safe }, shown.title) : el("span", { className: "result", tabindex: "0" }, shown.title);
  const meta = el("div", { className: "meta" });
  const kind = hit.kind && hit.kind !== "page" ? el("span", { className: `kind kind-${hit.kind}` }, hit.kind) : null;
  const bits = [shown.site, shown.time ? relativeTime(shown.time) : "", visitsText(shown.visits)].filter(Boolean);
  if (kind) meta.append(kind);
  bits.forEach((bit, i) => {
    const span = el("span", i === 1 && shown.time ? { title: new Date(shown.time).toLocaleString() } : {}, bit);
    meta.append(span);
  });
  const details = pageHref(hit);
  if (details && (hit.kind ?? "page") === "page") meta.append(el("a", { className: "details", href: details, tabindex: "-1" }, "Details"));
  const item = el("li", { className: "item" }, title, meta);
  if (snippet) item.append(el("p", { className: "snippet" }, ...snippetParts(snippet).map((part) => (part.marked ? el("mark", {}, part.text) : part.text))));
  for (const node of extra) item.append(node);
  return item;
}

// ------------------------------------------------------------------ keyboard

/** Arrow keys move between the result links of `list`; Home/End go to the ends. */
function arrowKeys(list) {
  list.addEventListener("keydown", (event) => {
    const links = [...list.querySelectorAll(".result")];
    const at = links.indexOf(document.activeElement);
    if (at < 0) return;
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: links.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    if (to < 0) $("#query").focus();
    else links[Math.min(to, links.length - 1)].focus();
  });
}
for (const list of [$("#results"), $("#saved"), $("#days")]) arrowKeys(list);

$("#query").addEventListener("keydown", (event) => {
  if (event.key !== "ArrowDown") return;
  const visible = document.querySelector(".view:not([hidden]) .result");
  if (visible) {
    event.preventDefault();
    visible.focus();
  }
});

// -------------------------------------------------------------------- search

async function runSearch(append) {
  const mine = ++generation;
  const state = searchState;
  announce(append ? "Loading more…" : state.query ? "Searching…" : "Loading recent pages…");
  try {
    let fresh;
    let next;
    let notice = null;
    if (state.query) {
      const { kinds, ...range } = state.filters;
      const filters = { ...range, ...(kinds ? { kinds } : {}) };
      const result = (await ask("search", { query: state.query, limit: PAGE_SIZE, cursor: append ? state.cursor : null, filters })).result;
      fresh = result.results ?? [];
      next = result.next_cursor ?? null;
      state.cursor = next;
      notice = result.notice ?? null;
    } else {
      const { kinds, ...range } = state.filters;
      const result = await memoryRequest("recent", { limit: PAGE_SIZE, offset: append ? state.offset : 0, filters: range });
      fresh = (result.pages ?? []).map((page) => ({ ...page, kind: "page" }));
      next = result.next_offset;
      state.offset = next ?? 0;
      if (kinds && !kinds.includes("page")) fresh = [];
    }
    if (mine !== generation) return;
    state.results = append ? state.results.concat(fresh) : fresh;
    renderResults(state);
    $("#more").hidden = next === null || next === undefined;
    const count = state.results.length;
    const more = $("#more").hidden ? "" : " (more available)";
    const said = !count
      ? (state.query ? "Nothing found." : "No pages in your memory match these filters yet.")
      : `${count} ${state.query ? (count === 1 ? "result" : "results") : count === 1 ? "recent page" : "recent pages"}${more}.`;
    // Why the ranking used words only (another model's vectors, or a re-embedding under way).
    announce(notice ? `${said} ${notice.charAt(0).toUpperCase()}${notice.slice(1)}.` : said);
  } catch (error) {
    if (mine === generation) announce(`Could not ${state.query ? "search" : "load recent pages"}: ${error.message}`);
  }
}

function renderResults(state) {
  const list = $("#results");
  $("#search-heading").textContent = state.query ? `Results for “${state.query}”` : "Recent pages";
  const shown = ordered(state.results, state.query ? state.sort : "time");
  list.replaceChildren(...shown.map((hit) => resultItem(hit, { snippet: hit.snippet ?? null })));
}

function startSearch(query) {
  searchState = { query, filters: currentFilters(), sort: $("#f-sort").value, cursor: null, offset: 0, results: [] };
  return runSearch(false);
}

$("#more").addEventListener("click", () => {
  const focusAt = searchState.results.length;
  runSearch(true).then(() => {
    const links = $("#results").querySelectorAll(".result");
    if (links[focusAt]) links[focusAt].focus(); // keep the reader's place
  });
});

$("#search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = $("#query").value.trim();
  const target = `#/search${query ? `?q=${encodeURIComponent(query)}` : ""}`;
  if (location.hash === target) route();
  else location.hash = target;
});

$("#filters").addEventListener("submit", (event) => {
  event.preventDefault();
  route();
});
$("#filters").addEventListener("reset", () => setTimeout(route, 0));
$("#f-sort").addEventListener("change", () => {
  if (searchState && !$("#view-search").hidden) {
    searchState.sort = $("#f-sort").value;
    renderResults(searchState);
  }
});

// -------------------------------------------------------------------- routing

function show(view) {
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  for (const link of document.querySelectorAll("[data-view]")) {
    const current = link.dataset.view === view || (view === "saved" && link.dataset.view === savedKind);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

let savedKind = "highlights";

export function route() {
  const [path, search = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(search);
  const name = path.replace(/^\//, "") || "search";
  if (name === "timeline") {
    show("timeline");
    showTimeline(currentFilters());
  } else if (["highlights", "notes", "bookmarks"].includes(name)) {
    savedKind = name;
    show("saved");
    showSaved(name.slice(0, -1), currentFilters());
  } else if (name === "page") {
    show("page");
    const id = Number(params.get("id"));
    showPage(Number.isInteger(id) && id > 0 ? { page_id: id } : { url: params.get("url") ?? "" });
  } else {
    show("search");
    const query = params.get("q") ?? "";
    $("#query").value = query;
    startSearch(query);
  }
}

window.addEventListener("hashchange", route);

async function hostLine() {
  try {
    const { state } = await ask("getState");
    const line = $("#host");
    line.textContent = state.status === "connected" ? "" : "The Backtrail host is not connected: results cannot be shown.";
    line.classList.toggle("problem", state.status !== "connected");
  } catch {
    // the page still works once the background answers
  }
}

hostLine();
route();
if (!location.hash.includes("/page")) $("#query").focus();
