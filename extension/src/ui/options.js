// The options page: shows the background's settings and commands changes; every write
// goes through the background (setSettings, forget, runBackfill…).

import { $, ask, flash } from "./ask.js";
import { DEFAULT_EXCLUSIONS } from "../urls.js";

function render(current, invalid = []) {
  $("#use-defaults").checked = current.exclusions.use_defaults;
  $("#skip-password").checked = current.capture.skip_password_pages;
  $("#rules").value = current.exclusions.rules.join("\n");
  $("#dwell").value = Math.round(current.capture.min_dwell_ms / 1000);
  $("#max-size").value = Math.round(current.capture.max_html_bytes / 1000);
  $("#days").value = current.history.backfill_days;
  for (const box of document.querySelectorAll("[data-action]")) box.checked = Boolean(current.actions[box.dataset.action]);
  $("#invalid-rules").textContent = invalid.length ? `Ignored: ${invalid.map((i) => `${i.rule} (${i.reason})`).join("; ")}` : "";
}

function collect() {
  const kb = Number($("#max-size").value) * 1000;
  return {
    exclusions: {
      use_defaults: $("#use-defaults").checked,
      rules: $("#rules").value.split("\n").map((line) => line.trim()).filter(Boolean),
    },
    capture: {
      min_dwell_ms: Number($("#dwell").value) * 1000, max_html_bytes: kb, max_text_bytes: kb,
      skip_password_pages: $("#skip-password").checked,
    },
    history: { backfill_days: Number($("#days").value) },
    actions: Object.fromEntries([...document.querySelectorAll("[data-action]")].map((box) => [box.dataset.action, box.checked])),
  };
}

async function run(button, msg, work) {
  button.disabled = true;
  try {
    flash(msg, "Working…");
    flash(msg, await work());
  } catch (error) {
    flash(msg, error.message, true);
  } finally {
    button.disabled = false;
  }
}

function forgetText(outcome) {
  if (!outcome.queued) return "Nothing was sent.";
  if (!outcome.done) return "Queued: the host will forget it as soon as it is connected.";
  if (!outcome.ok) return `The host refused: ${outcome.error.message}`;
  const counts = Object.entries(outcome.result.counts ?? {}).filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(", ");
  return `Forgotten${counts ? `: ${counts}` : " (nothing was stored)"}.`;
}

$("#save").addEventListener("click", () =>
  run($("#save"), $("#save-msg"), async () => {
    const answer = await ask("setSettings", { settings: collect() });
    render(answer.settings, answer.invalidRules);
    return "Saved.";
  }),
);

$("#backfill").addEventListener("click", () =>
  run($("#backfill"), $("#backfill-msg"), async () => {
    const { summary } = await ask("runBackfill", { days: Number($("#days").value) });
    return `Queued ${summary.items} address(es) in ${summary.batches} batch(es).`;
  }),
);

$("#bookmarks").addEventListener("click", () =>
  run($("#bookmarks"), $("#bookmarks-msg"), async () => {
    const { summary } = await ask("importBookmarks");
    return `Queued ${summary.bookmarks} bookmark(s).`;
  }),
);

$("#forget").addEventListener("click", () =>
  run($("#forget"), $("#forget-msg"), async () => {
    const site = $("#forget-site").value.trim();
    if (!site) throw new Error("Type a site first.");
    const selector = site.includes("/") ? { url: site.includes("://") ? site : `https://${site}` } : { domain: site };
    const { outcome } = await ask("forget", { selector });
    return forgetText(outcome);
  }),
);

$("#forget-all").addEventListener("click", () =>
  run($("#forget-all"), $("#forget-msg"), async () => {
    if (!window.confirm("Forget every page, visit, highlight, note, bookmark and tab Backtrail has stored?")) return "Cancelled.";
    const { outcome } = await ask("forget", { selector: { everything: true } });
    return forgetText(outcome);
  }),
);

$("#export").addEventListener("click", () =>
  run($("#export"), $("#export-msg"), async () => {
    const { state } = await ask("getState");
    const items = [];
    let cursor = null;
    do {
      const { result } = await ask("exportPage", { cursor });
      items.push(...(result.items ?? []));
      cursor = result.next_cursor ?? null;
      flash($("#export-msg"), `${items.length} item(s)…`);
    } while (cursor);
    const doc = { format: "backtrail-export", version: 1, exported_time: Date.now(), profile_id: state.profile?.profile_id ?? null, items };
    const url = URL.createObjectURL(new Blob([JSON.stringify(doc)], { type: "application/json" }));
    const link = Object.assign(document.createElement("a"), { href: url, download: `backtrail-export-${new Date().toISOString().slice(0, 10)}.json` });
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    return `Saved ${items.length} item(s).`;
  }),
);

$("#default-rules").textContent = DEFAULT_EXCLUSIONS.join("\n");
ask("getSettings").then(({ settings, invalidRules }) => render(settings, invalidRules));
