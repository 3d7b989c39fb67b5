// The small window opened by "Save selection to Backtrail with a note…". The selection is
// held by the background; this page shows it, takes the note, and commands the save.

import { $, ask, flash } from "./ask.js";

const id = new URLSearchParams(location.search).get("id") ?? "";

async function load() {
  try {
    const { pending } = await ask("pendingSelection", { id });
    if (!pending) throw new Error("This selection is no longer waiting to be saved.");
    $("#text").textContent = pending.text || "(the selection will be read from the page)";
  } catch (error) {
    flash($("#msg"), error.message, true);
    $("#save").disabled = true;
  }
}

$("#save").addEventListener("click", async () => {
  try {
    await ask("savePendingSelection", { id, note: $("#note").value });
    flash($("#msg"), "Saved.");
    setTimeout(() => window.close(), 400);
  } catch (error) {
    flash($("#msg"), error.message, true);
  }
});

$("#cancel").addEventListener("click", async () => {
  await ask("cancelPendingSelection", { id }).catch(() => {});
  window.close();
});

load();
