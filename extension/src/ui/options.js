// The options page: shows the background's settings and commands changes; every write
// goes through the background (setSettings, forget, runBackfill…). Settings are saved
// only by "Save settings", after every field was checked (settings-form.js); the
// buttons under "Do it now" act at once. Forgetting asks first, with the counts of what
// would go (the host's forget_preview).

import { $, ask, flash } from "./ask.js";
import { DEFAULT_EXCLUSIONS } from "../urls.js";
import { checkSettings, countsInWords, wholeNumber } from "./settings-form.js";
import { SETTING_BOUNDS } from "../config.js";

const FIELDS = ["dwell", "max-size", "days", "rules"];

function render(current) {
  $("#use-defaults").checked = current.exclusions.use_defaults;
  $("#skip-password").checked = current.capture.skip_password_pages;
  $("#rules").value = current.exclusions.rules.join("\n");
  $("#dwell").value = String(Math.round(current.capture.min_dwell_ms / 1000));
  $("#max-size").value = String(Math.round(current.capture.max_html_bytes / 1000));
  $("#days").value = String(current.history.backfill_days);
  for (const box of document.querySelectorAll("[data-action]")) box.checked = Boolean(current.actions[box.dataset.action]);
  showErrors({});
}

function raw() {
  return {
    dwell: $("#dwell").value, maxSize: $("#max-size").value, days: $("#days").value, rules: $("#rules").value,
    useDefaults: $("#use-defaults").checked, skipPassword: $("#skip-password").checked,
    actions: Object.fromEntries([...document.querySelectorAll("[data-action]")].map((box) => [box.dataset.action, box.checked])),
  };
}

/** A message under each field that is wrong; the others are cleared. */
function showErrors(errors) {
  for (const id of FIELDS) {
    const message = errors[id] ?? "";
    $(`#${id}-error`).textContent = message;
    if (message) $(`#${id}`).setAttribute("aria-invalid", "true");
    else $(`#${id}`).removeAttribute("aria-invalid");
  }
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

// ---------------------------------------------------------------- settings

$("#settings").addEventListener("input", () => flash($("#save-msg"), "Unsaved changes."));
$("#settings").addEventListener("submit", async (event) => {
  event.preventDefault();
  const { settings, errors } = checkSettings(raw());
  showErrors(errors);
  if (!settings) {
    flash($("#save-msg"), `Not saved: ${Object.keys(errors).length} field(s) need fixing.`, true);
    $(`#${FIELDS.find((id) => errors[id])}`).focus();
    return;
  }
  await run($("#save"), $("#save-msg"), async () => {
    const answer = await ask("setSettings", { settings });
    render(answer.settings);
    return "Saved.";
  });
});

// ---------------------------------------------------------------- do it now

$("#backfill").addEventListener("click", () =>
  run($("#backfill"), $("#backfill-msg"), async () => {
    const days = wholeNumber($("#days").value, SETTING_BOUNDS.backfill_days, "days");
    if (days.error) {
      showErrors({ days: days.error });
      throw new Error("Fix the number of days first.");
    }
    const { summary } = await ask("runBackfill", { days: days.value });
    return `Queued ${summary.items} address(es) from the last ${days.value} days in ${summary.batches} batch(es).`;
  }),
);

$("#bookmarks").addEventListener("click", () =>
  run($("#bookmarks"), $("#bookmarks-msg"), async () => {
    const { summary } = await ask("importBookmarks");
    return `Queued ${summary.bookmarks} bookmark(s).`;
  }),
);

// ---------------------------------------------------------------- forget

let pending = null; // {selector, what} waiting for "Forget for good"

function forgetText(outcome) {
  if (!outcome.queued) return "Nothing was sent.";
  if (!outcome.done) return "Queued: the host will forget it as soon as it is connected.";
  if (!outcome.ok) return `The host refused: ${outcome.error.message}`;
  const words = countsInWords(outcome.result.counts);
  return words ? `Forgotten: ${words}.` : "Forgotten (nothing was stored).";
}

/** What forgetting `selector` would remove: the host's forget_preview for a page or a
 * site; everything it holds (its status counts) for everything. */
async function previewCounts(selector) {
  if (selector.everything) return (await ask("hostStatus")).result.counts;
  return (await ask("memory", { type: "forget_preview", fields: selector })).result.counts;
}

/** Show what forgetting `selector` would remove and wait for the user's answer. */
async function confirmForget(selector, what) {
  $("#confirm").hidden = true;
  flash($("#forget-msg"), "Counting what would be forgotten…");
  let text;
  try {
    const words = countsInWords(await previewCounts(selector));
    if (!words) {
      flash($("#forget-msg"), `Nothing is stored from ${what}.`);
      return;
    }
    text = `Forget ${what}? This permanently removes ${words}.`;
  } catch (error) {
    if (error.code === 16 || /domain|public suffix/i.test(error.message)) throw error;
    text = `Backtrail cannot count what is stored right now (${error.message}). Forget ${what} anyway? It is removed for good once the host is connected.`;
  }
  flash($("#forget-msg"), "");
  pending = { selector, what };
  $("#confirm-text").textContent = text;
  $("#confirm").hidden = false;
  $("#confirm-yes").focus();
}

function siteSelector(site) {
  if (!site.includes("/")) return { domain: site };
  return { url: site.includes("://") ? site : `https://${site}` };
}

$("#forget").addEventListener("click", async () => {
  const site = $("#forget-site").value.trim();
  $("#forget-site-error").textContent = site ? "" : "Type a site (example.com) or a page's address first.";
  if (!site) {
    $("#forget-site").setAttribute("aria-invalid", "true");
    $("#forget-site").focus();
    return;
  }
  $("#forget-site").removeAttribute("aria-invalid");
  await confirmForget(siteSelector(site), site).catch((error) => flash($("#forget-msg"), error.message, true));
});

$("#forget-all").addEventListener("click", () =>
  confirmForget({ everything: true }, "everything Backtrail has stored").catch((error) => flash($("#forget-msg"), error.message, true)),
);

$("#confirm-no").addEventListener("click", () => {
  pending = null;
  $("#confirm").hidden = true;
  flash($("#forget-msg"), "Cancelled: nothing was forgotten.");
});

$("#confirm-yes").addEventListener("click", () =>
  run($("#confirm-yes"), $("#forget-msg"), async () => {
    const chosen = pending;
    pending = null;
    $("#confirm").hidden = true;
    if (!chosen) return "Nothing to forget.";
    const { outcome } = await ask("forget", { selector: chosen.selector });
    return forgetText(outcome);
  }),
);

// ---------------------------------------------------------------- export

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
ask("getSettings").then(({ settings }) => render(settings));
