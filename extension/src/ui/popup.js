// The popup: search, pause, a note for the current page, and status. It only asks the
// background (ask.js); it keeps no state of its own beyond what is on screen.

import { $, ask, el, flash, formatTime, STATUS_TEXT } from "./ask.js";
import { ext } from "../ext.js";
import { snippetParts } from "./snippet.js";
import { skippedText } from "./skipped.js";

let cursor = null;
let lastQuery = "";

function renderState(state) {
  $("#dot").className = `status-dot ${state.status}`;
  const retry = state.status !== "connected" && state.nextRetryTime ? ` (next try ${formatTime(state.nextRetryTime)})` : "";
  $("#status").textContent = (STATUS_TEXT[state.status] ?? state.status) + retry;
  $("#paused").checked = state.paused;
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
    ["Host", STATUS_TEXT[state.status] ?? state.status],
    ["Pages captured", String(state.stats.captured)],
    ["Last capture", formatTime(state.stats.lastCaptureTime) || "never"],
    ["Queue", `${state.queue.length} waiting`],
    ["Dropped", String(state.queue.dropped)],
    ["Skipped", skippedText(state.stats.skipped)],
  ];
  if (state.stats.lastRejection) rows.push(["Last refusal", `${state.stats.lastRejection.type}: ${state.stats.lastRejection.message}`]);
  if (state.lastLocalError) rows.push(["Last problem", state.lastLocalError.message]);
  if (state.lastError && state.status !== "connected") rows.push(["Host error", state.lastError]);
  $("#stats").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

async function refresh() {
  const { state } = await ask("getState");
  renderState(state);
  if (state.status === "connected") {
    try {
      const { result } = await ask("hostStatus");
      const dl = $("#stats");
      dl.append(el("dt", {}, "Stored pages"), el("dd", {}, String(result.counts?.pages ?? "?")));
      if (Number.isFinite(result.index_lag)) dl.append(el("dt", {}, "Index lag"), el("dd", {}, `${result.index_lag} change(s)`));
    } catch {
      // the host answers status when it can; the local figures stand
    }
  }
}

function renderResults(results, append) {
  const list = $("#results");
  if (!append) list.replaceChildren();
  for (const hit of results) {
    const item = el(
      "li",
      { title: hit.url ?? "" },
      el("div", { className: "title" }, hit.title || hit.url || "(untitled)"),
      el("div", { className: "url" }, hit.url ?? ""),
      el("div", { className: "snippet" }, ...snippetParts(hit.snippet).map((part) => (part.marked ? el("mark", {}, part.text) : part.text))),
      el("div", { className: "when" }, [hit.kind, formatTime(hit.visit_time)].filter(Boolean).join(" · ")),
    );
    if (hit.url) item.addEventListener("click", () => ask("openUrl", { url: hit.url }).then(() => window.close()));
    list.append(item);
  }
}

async function search(append) {
  const msg = $("#search-msg");
  try {
    flash(msg, "Searching…");
    const { result } = await ask("search", { query: lastQuery, cursor: append ? cursor : null });
    cursor = result.next_cursor ?? null;
    renderResults(result.results ?? [], append);
    $("#more").hidden = !cursor;
    flash(msg, result.results?.length || append ? "" : "Nothing found.");
  } catch (error) {
    flash(msg, error.message, true);
  }
}

$("#search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  lastQuery = $("#query").value;
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

refresh();
