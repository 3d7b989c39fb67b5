// Shared by the extension's pages: ask the background (the only owner of state) and
// small DOM helpers. Pages never write storage or talk to the host themselves.

import { ext } from "../ext.js";

/** Send {what, ...args} to the background; resolves to its answer or throws its error. */
export async function ask(what, args = {}) {
  const response = await ext.sendToBackground({ what, ...args });
  if (!response || !response.ok) {
    const error = new Error(response?.error?.message ?? "the background did not answer");
    error.code = response?.error?.code;
    throw error;
  }
  return response;
}

export { $, el } from "./dom.js";

export function formatTime(ms) {
  if (!Number.isFinite(ms)) return "";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export const STATUS_TEXT = {
  idle: "Starting…",
  connecting: "Connecting…",
  connected: "Connected",
  not_installed: "Not set up",
  forbidden: "Not allowed",
  disconnected: "Reconnecting…",
};

/** What to do when the host cannot be reached at all (shown once, with the setup link). */
export const SETUP_TEXT = {
  not_installed:
    "The Backtrail program is not set up on this computer, so nothing is saved or searched yet. " +
    "Install it, run backtrail install, then restart the browser.",
  forbidden:
    "The Backtrail program on this computer does not accept this copy of the extension. " +
    "Run backtrail install again (with --extension-id if the extensions page shows another ID), then restart the browser.",
};

export function flash(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("error", isError);
}
