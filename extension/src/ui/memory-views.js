// The memory page's other views: the timeline (sessions by day and a chart of reading),
// the lists of highlights, notes and bookmarks, and one page with "forget this page".

import { $, ask, el } from "./ask.js";
import { announce, memoryRequest, pageHref, resultItem } from "./memory.js";
import { chartBars, clock, dayHeading, forgetSummary, presentation, relativeTime, siteOf, visitsText } from "./memory-format.js";

const SVG = "http://www.w3.org/2000/svg";
const SESSIONS_PER_PAGE = 10;
const SAVED_PER_PAGE = 30;
const TEXT_CHARS = 20_000;
const CHART_DAYS = 30;
let ticket = 0; // the newest view request; older answers are dropped

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) node.append(child);
  return node;
}

// ------------------------------------------------------------------- timeline

let timelineState = null;

export async function showTimeline(filters) {
  const mine = ++ticket;
  const { since_time = null, until_time = null } = filters;
  timelineState = { since_time, until_time, offset: 0, lastDay: null };
  $("#days").replaceChildren();
  announce("Loading the timeline…");
  await loadSessions(mine, false);
}

async function loadSessions(mine, append) {
  const state = timelineState;
  try {
    const result = await memoryRequest("timeline", {
      since_time: state.since_time, until_time: state.until_time, limit: SESSIONS_PER_PAGE,
      offset: state.offset, utc_offset_minutes: -new Date().getTimezoneOffset(),
    });
    if (mine !== ticket) return;
    if (!append) drawChart(result);
    renderSessions(result.sessions ?? [], state);
    state.offset = result.next_offset ?? 0;
    $("#more-sessions").hidden = result.next_offset === null || result.next_offset === undefined;
    const shown = $("#days").querySelectorAll(".session").length;
    announce(shown ? `${shown} of ${result.total_sessions} reading sessions.` : "Nothing found: no visits in this time range.");
  } catch (error) {
    if (mine === ticket) announce(`Could not load the timeline: ${error.message}`);
  }
}

$("#more-sessions").addEventListener("click", () => loadSessions(ticket, true));

function drawChart(result) {
  const width = 760;
  const height = 110;
  const end = result.chart_end_time;
  // Without a chosen range, the last 30 days: wide enough to see a habit, bars still readable.
  const start = timelineState.since_time === null ? Math.max(result.chart_start_time, end - CHART_DAYS * 86_400_000) : result.chart_start_time;
  const { bars, max, ticks } = chartBars(result.days ?? [], start, end, { width, height });
  const total = bars.reduce((sum, bar) => sum + bar.visits, 0);
  const busiest = bars.reduce((best, bar) => (bar.visits > (best?.visits ?? 0) ? bar : best), null);
  const label = `Pages visited per day, ${bars.length} days: ${total} visits in all` + (busiest ? `, most on ${dayHeading(busiest.time)} (${busiest.visits})` : "");
  const chart = svg("svg", { viewBox: `0 -8 ${width} ${height + 30}`, role: "img", "aria-label": label, class: "reading-chart" });
  chart.append(svg("line", { x1: 0, x2: width, y1: height + 0.5, y2: height + 0.5, class: "axis" }));
  for (const bar of bars) {
    if (!bar.visits) continue;
    const rect = svg("rect", { x: bar.x.toFixed(1), y: bar.y.toFixed(1), width: bar.width.toFixed(1), height: bar.height.toFixed(1), rx: 1.5, class: "bar" });
    rect.append(svg("title", {}, `${dayHeading(bar.time)}: ${visitsText(bar.visits)}`));
    chart.append(rect);
  }
  for (const tick of ticks) chart.append(svg("text", { x: tick.x.toFixed(1), y: height + 16, class: "tick" }, tick.label));
  chart.append(svg("text", { x: 0, y: 10, class: "tick max" }, `${max} ${max === 1 ? "visit" : "visits"} a day at most`));
  $("#chart").replaceChildren(chart);
  $("#chart-caption").textContent = label + ".";
}

function renderSessions(sessions, state) {
  const days = $("#days");
  for (const session of sessions) {
    const heading = dayHeading(session.end_time);
    if (heading !== state.lastDay) {
      state.lastDay = heading;
      days.append(el("h2", { className: "day" }, heading));
    }
    const span = session.start_time === session.end_time ? clock(session.end_time) : `${clock(session.start_time)} – ${clock(session.end_time)}`;
    const about = session.topics.length ? session.topics.join(", ") : session.domains.slice(0, 2).map(siteOf).join(", ");
    const count = session.page_count === 1 ? "1 page" : `${session.page_count} pages`;
    const pages = el("ol", { className: "results compact" }, ...session.pages.map((page) => resultItem({ ...page, kind: "page" })));
    const block = el("section", { className: "session", "aria-label": `${span}: ${about}` },
      el("div", { className: "session-head" }, el("span", { className: "when" }, span), el("span", { className: "about" }, about), el("span", { className: "muted" }, count)),
      pages);
    if (session.pages_omitted) block.append(el("p", { className: "muted omitted" }, `and ${session.pages_omitted} more`));
    days.append(block);
  }
}

// ---------------------------------------------------------------------- saved

let savedState = null;

export async function showSaved(kind, filters) {
  const mine = ++ticket;
  const title = { highlight: "Highlights", note: "Notes", bookmark: "Bookmarks" }[kind];
  $("#saved-heading").textContent = title;
  const { domain, since_time, until_time } = filters;
  const chosen = kind === "bookmark" ? { domain } : { domain, since_time, until_time };
  savedState = { kind, filters: Object.fromEntries(Object.entries(chosen).filter(([, v]) => v !== undefined)), offset: 0, count: 0 };
  $("#saved").replaceChildren();
  announce(`Loading ${title.toLowerCase()}…`);
  await loadSaved(mine);
}

async function loadSaved(mine) {
  const state = savedState;
  const focusAt = state.count;
  try {
    const result = await memoryRequest("saved_list", { kind: state.kind, limit: SAVED_PER_PAGE, offset: state.offset, filters: state.filters });
    if (mine !== ticket) return;
    const items = result.items ?? [];
    $("#saved").append(...items.map(savedItem));
    state.count += items.length;
    state.offset = result.next_offset ?? 0;
    $("#more-saved").hidden = result.next_offset === null || result.next_offset === undefined;
    if (focusAt) $("#saved").querySelectorAll(".result")[focusAt]?.focus();
    const noun = { highlight: ["highlight", "highlights"], note: ["note", "notes"], bookmark: ["bookmark", "bookmarks"] }[state.kind];
    announce(state.count ? `${state.count} ${state.count === 1 ? noun[0] : noun[1]}${$("#more-saved").hidden ? "" : " (more available)"}.` : `Nothing found: no ${noun[1]} yet.`);
  } catch (error) {
    if (mine === ticket) announce(`Could not load the list: ${error.message}`);
  }
}

$("#more-saved").addEventListener("click", () => loadSaved(ticket));

function savedItem(item) {
  if (item.kind === "bookmark") {
    return resultItem(item, { extra: item.folder ? [el("p", { className: "folder" }, item.folder)] : [] });
  }
  const body = item.kind === "highlight" ? el("blockquote", { className: "quote" }, item.text) : el("p", { className: "note-text" }, item.content);
  const extra = [body];
  if (item.kind === "highlight" && item.note) extra.push(el("p", { className: "note-text" }, item.note));
  if (!item.url) {
    const when = relativeTime(item.time);
    return el("li", { className: "item" }, el("span", { className: "result", tabindex: "0" }, "Note"), el("div", { className: "meta" }, el("span", {}, when)), ...extra);
  }
  const line = resultItem({ ...item, title: null, time: item.time }, { extra });
  const details = pageHref({ url: item.url });
  line.querySelector(".meta").append(el("a", { className: "details", href: details, tabindex: "-1" }, "Page details"));
  return line;
}

// ----------------------------------------------------------------------- page

export async function showPage(selector) {
  const mine = ++ticket;
  const box = $("#page");
  box.replaceChildren();
  $("#page-heading").textContent = "Page";
  announce("Loading the page…");
  try {
    const result = await memoryRequest("page_get", { ...selector, max_chars: TEXT_CHARS });
    if (mine !== ticket) return;
    renderPage(result);
    announce(`${presentation(result.page).title}: ${visitsText(result.page.visit_count) || "no visits"}, ${result.highlights.length} highlights.`);
  } catch (error) {
    if (mine !== ticket) return;
    const gone = error.code === 11;
    box.append(el("p", { className: gone ? "muted" : "error" }, gone ? "This page is not in your memory." : `Could not load the page: ${error.message}`));
    announce(gone ? "Nothing found: this page is not in your memory." : error.message);
  }
}

function renderPage(result) {
  const page = result.page;
  const shown = presentation(page);
  const box = $("#page");
  $("#page-heading").textContent = shown.title;
  const facts = [shown.site, visitsText(page.visit_count), `first seen ${relativeTime(page.first_seen_time)}`, `last seen ${relativeTime(page.last_seen_time)}`];
  box.append(
    el("p", { className: "page-url" }, el("a", { className: "result", href: page.url }, page.url)),
    el("p", { className: "meta" }, ...facts.filter(Boolean).map((fact) => el("span", {}, fact))),
  );
  const actions = el("div", { className: "page-actions" });
  const forget = el("button", { className: "danger", type: "button" }, "Forget this page…");
  forget.addEventListener("click", () => previewForget(page, actions, forget));
  actions.append(forget);
  box.append(actions);

  const text = el("div", { className: "page-text" });
  appendText(text, result.text);
  const textSection = el("section", { className: "block", "aria-labelledby": "stored-text" }, el("h2", { id: "stored-text" }, "Stored text"));
  if (!result.total_chars) textSection.append(el("p", { className: "muted" }, "Its text was never captured: only the visits are kept."));
  else textSection.append(text);
  if (result.next_offset !== null && result.next_offset !== undefined) {
    const more = el("button", { className: "more", type: "button" }, "Show more text");
    let offset = result.next_offset;
    more.addEventListener("click", async () => {
      const next = await memoryRequest("page_get", { page_id: page.id, offset, max_chars: TEXT_CHARS });
      appendText(text, next.text);
      offset = next.next_offset;
      more.hidden = offset === null || offset === undefined;
    });
    textSection.append(more);
  }

  const side = el("div", { className: "page-side" });
  side.append(listBlock("Highlights", result.highlights, (h) => el("li", {}, el("blockquote", { className: "quote" }, h.text), h.note ? el("p", { className: "note-text" }, h.note) : "", el("p", { className: "muted" }, relativeTime(h.time)))));
  side.append(listBlock("Notes", result.notes, (n) => el("li", {}, el("p", { className: "note-text" }, n.content), el("p", { className: "muted" }, relativeTime(n.time)))));
  side.append(listBlock(result.more_visits ? "Latest visits" : "Visits", result.visits, (v) => el("li", {}, new Date(v.time).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }), v.dwell_ms ? el("span", { className: "muted" }, ` · read ${Math.round(v.dwell_ms / 1000)} s`) : "")));
  box.append(el("div", { className: "page-body" }, textSection, side));
}

function appendText(box, text) {
  for (const paragraph of String(text ?? "").split(/\n{2,}/)) {
    if (paragraph.trim()) box.append(el("p", {}, paragraph.trim()));
  }
}

function listBlock(title, items, render) {
  const id = `block-${title.toLowerCase().replace(/\W+/g, "-")}`;
  const section = el("section", { className: "block", "aria-labelledby": id }, el("h2", { id }, `${title} (${items.length})`));
  section.append(items.length ? el("ul", { className: "plain" }, ...items.map(render)) : el("p", { className: "muted" }, "None."));
  return section;
}

async function previewForget(page, actions, button) {
  button.disabled = true;
  announce("Counting what would be forgotten…");
  try {
    const { counts } = await memoryRequest("forget_preview", { url: page.url });
    const summary = forgetSummary(counts);
    const confirm = el("button", { className: "danger", type: "button" }, "Forget it");
    const cancel = el("button", { type: "button" }, "Keep it");
    const panel = el("div", { className: "confirm", role: "alertdialog", "aria-labelledby": "forget-q", "aria-describedby": "forget-what" },
      el("p", { id: "forget-q" }, el("strong", {}, "Forget this page for good?")),
      el("p", { id: "forget-what" }, `This removes ${summary} from Backtrail. Your browser's own history and bookmarks are not touched.`),
      el("div", { className: "row" }, confirm, cancel));
    actions.append(panel);
    announce(`Forgetting would remove ${summary}. Confirm or cancel.`);
    cancel.focus();
    cancel.addEventListener("click", () => {
      panel.remove();
      button.disabled = false;
      button.focus();
      announce("Nothing was forgotten.");
    });
    confirm.addEventListener("click", async () => {
      confirm.disabled = cancel.disabled = true;
      announce("Forgetting…");
      try {
        const { outcome } = await ask("forget", { selector: { url: page.url } });
        if (outcome.done && !outcome.ok) throw new Error(outcome.error?.message ?? "the host refused");
        const said = outcome.done ? `Forgotten: ${forgetSummary(outcome.result?.counts ?? {})} removed.` : "Queued: the host will forget it as soon as it is connected.";
        panel.replaceChildren(el("p", { className: "done" }, said));
        announce(said);
        $(".page-body")?.remove();
      } catch (error) {
        panel.append(el("p", { className: "error" }, `Could not forget: ${error.message}`));
        announce(`Could not forget: ${error.message}`);
      }
    });
  } catch (error) {
    button.disabled = false;
    announce(`Could not count what would be forgotten: ${error.message}`);
  }
}
