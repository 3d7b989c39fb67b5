// The popup: recent pages, search, pause, a note for the current page, and status behind
// a "Details" row. It only asks the background (ask.js); it keeps no state of its own
// beyond what is on screen. Every result is a link: Tab or the arrow keys reach it,
// Enter opens it; the live region (#search-msg) announces searching, counts and misses.

import { $, ask, el, flash, formatTime, SETUP_TEXT, STATUS_TEXT } from "./ask.js";
import { ext } from "../ext.js";
import { resultItem } from "./results.js";
import { pageStatusText, skippedText } from "./skipped.js";

const RECENT_LIMIT = 8;
let cursor = null;
let lastQuery = "";
let hostUsable = true;

function renderState(state) {
  $("#dot").className = `status-dot ${state.status}`;
  const setup = SETUP_TEXT[state.status];
  const retry = state.status !== "connected" && !setup && state.nextRetryTime ? ` (next try ${formatTime(state.nextRetryTime)})` : "";
  $("#status").textContent = (STATUS_TEXT[state.status] ?? state.status) + retry;
  $("#paused").checked = state.paused;
  hostUsable = !setup;
  $("#setup").hidden = !setup;
  $("#setup-text").textContent = setup ?? "";
  $("#query").disabled = !hostUsable;
  $("#search-button").disabled = !hostUsable;
  $("#query").setAttribute("aria-describedby", setup ? "setup-text" : "search-msg");
  if (setup) $("#results-heading").parentElement.hidden = true;

  const dropped = state.queue.dropped;
  $("#drops").hidden = !dropped;
  if (dropped) {
    const kinds = Object.entries(state.queue.droppedByType).map(([type, n]) => `${n} ${type}`).join(", ");
    $("#drops-text").textContent = `${dropped} queued item(s) were dropped because the queue was full (${kinds}).`;
  }
  $("#dead").hidden = !state.deadLetters.length;
  if (state.deadLetters.length) {
    const last = state.deadLetters[state.deadLetters.length - 1];
    $("#dead-text").textContent = `${state.deadLetters.length} highlight(s)/note(s) were refused by the host (last: ${last.error?.message ?? "?"}).`;
  }
  const rows = [
    ["Pages captured", String(state.stats.captured)],
    ["Last capture", formatTime(state.stats.lastCaptureTime) || "never"],
    ["Not captured", skippedText(state.stats.skipped)],
    ["Queue", `${state.queue.length} waiting`],
    ["Dropped", String(state.queue.dropped)],
  ];
  if (state.stats.lastRejection) rows.push(["Last refusal", `${state.stats.lastRejection.type}: ${state.stats.lastRejection.message}`]);
  if (state.lastLocalError) rows.push(["Last problem", state.lastLocalError.message]);
  if (state.lastError && state.status !== "connected") rows.push(["Host error", state.lastError]);
  $("#stats").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const missed = Object.values(state.stats.skipped ?? {}).reduce((sum, n) => sum + (Number.isInteger(n) ? n : 0), 0);
  $("#details-summary").textContent = `Details: ${state.stats.captured} captured, ${missed} not captured, ${state.queue.length} waiting`;
}

function lagText(result) {
  const parts = [];
  if (Number.isFinite(result.index_lag)) parts.push(`${result.index_lag} change(s) not yet searchable`);
  if (Number.isFinite(result.vector_lag)) parts.push(`${result.vector_lag} passage(s) not yet embedded`);
  return parts.join(", ");
}

async function refresh() {
  const { state } = await ask("getState");
  renderState(state);
  if (hostUsable) {
    const { status } = await ask("pageStatus").catch(() => ({ status: null }));
    $("#page-status").textContent = pageStatusText(status);
  }
  if (state.status === "connected") {
    try {
      const { result } = await ask("hostStatus");
      const dl = $("#stats");
      dl.append(el("dt", {}, "Stored pages"), el("dd", {}, String(result.counts?.pages ?? "?")));
      const lag = lagText(result);
      if (lag) dl.append(el("dt", {}, "Index lag"), el("dd", {}, lag));
    } catch {
      // the host answers status when it can; the local figures stand
    }
  }
  return state;
}

function renderResults(results, append) {
  const list = $("#results");
  if (!append) list.replaceChildren();
  const now = Date.now();
  for (const hit of results) list.append(resultItem(hit, now));
}

/** Recent pages before any search (the host's `recent`); an older host that does not
 * know it answers an error, and the popup shows none. */
async function showRecent(tries = 4) {
  try {
    const { result } = await ask("memory", { type: "recent", fields: { limit: RECENT_LIMIT } });
    const items = result.pages ?? [];
    if (lastQuery) return; // a search started meanwhile
    renderResults(items, false);
    $("#results-heading").textContent = "Recent pages";
    $("#results-heading").parentElement.hidden = !items.length;
  } catch (error) {
    $("#results-heading").parentElement.hidden = true;
    // still connecting when the popup opened: ask again shortly
    if (/not connected/.test(error.message) && tries > 1) setTimeout(() => showRecent(tries - 1), 700);
  }
}

async function search(append) {
  const msg = $("#search-msg");
  try {
    flash(msg, "Searching…");
    const { result } = await ask("search", { query: lastQuery, cursor: append ? cursor : null });
    cursor = result.next_cursor ?? null;
    const results = result.results ?? [];
    renderResults(results, append);
    $("#results-heading").textContent = "Results";
    $("#results-heading").parentElement.hidden = false;
    $("#more").hidden = !cursor;
    const shown = $("#results").children.length;
    const more = cursor ? ", more below" : "";
    const found = shown ? `${shown} result${shown === 1 ? "" : "s"}${more}.` : "Nothing found.";
    // Why the ranking used words only (the index's vectors belong to another model, or are
    // being made again for a new one), in the host's words.
    flash(msg, result.notice ? `${found} ${capitalised(result.notice)}.` : found);
  } catch (error) {
    flash(msg, error.message, true);
  }
}

function capitalised(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function links() {
  return [...document.querySelectorAll("#results a.hit")];
}

/** Arrow keys move between results (and from the search box to the first one). */
function onArrow(event) {
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  const all = links();
  if (!all.length) return;
  const at = all.indexOf(document.activeElement);
  if (event.target === $("#query")) {
    if (event.key !== "ArrowDown") return;
    all[0].focus();
  } else if (at >= 0) {
    if (event.key === "ArrowUp" && at === 0) $("#query").focus();
    else all[Math.min(all.length - 1, Math.max(0, at + (event.key === "ArrowDown" ? 1 : -1)))].focus();
  } else {
    return;
  }
  event.preventDefault();
}

$("#query").addEventListener("keydown", onArrow);
$("#results").addEventListener("keydown", onArrow);
$("#results").addEventListener("click", (event) => {
  const link = event.target.closest("a.hit");
  if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault(); // open in a new tab and close the popup
  ask("openUrl", { url: link.href }).then(() => window.close(), (error) => flash($("#search-msg"), error.message, true));
});

$("#search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (!hostUsable) return;
  lastQuery = $("#query").value.trim();
  if (!lastQuery) {
    flash($("#search-msg"), "Type what you are looking for.");
    return;
  }
  search(false);
});
$("#more").addEventListener("click", () => search(true));

$("#paused").addEventListener("change", async (event) => {
  await ask("setPaused", { paused: event.target.checked });
  refresh();
});

$("#save-note").addEventListener("click", async () => {
  const msg = $("#note-msg");
  try {
    const { saved } = await ask("saveNote", { content: $("#note").value });
    $("#note").value = "";
    flash(msg, saved.url ? "Saved." : "Saved (without this page's address: it is not captured).");
    refresh();
  } catch (error) {
    flash(msg, error.message, true);
  }
});

$("#drops-clear").addEventListener("click", () => ask("clearDrops").then(refresh));
$("#dead-retry").addEventListener("click", () => ask("retryDeadLetters").then(refresh));
$("#reconnect").addEventListener("click", () => ask("reconnect").then(() => setTimeout(refresh, 500)));
$("#open-memory").addEventListener("click", (event) => {
  event.preventDefault();
  const query = $("#query").value.trim();
  ext.tabs.create({ url: ext.extensionUrl(`src/ui/memory.html#/search${query ? `?q=${encodeURIComponent(query)}` : ""}`) }).then(() => window.close());
});
$("#open-options").addEventListener("click", (event) => {
  event.preventDefault();
  ext.openOptions();
});
$("#setup-link").addEventListener("click", (event) => {
  event.preventDefault();
  ext.tabs.create({ url: ext.extensionUrl("src/ui/setup.html") }).then(() => window.close());
});

refresh().then(() => {
  if (hostUsable) showRecent();
});
