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

export function $(selector) {
  return document.querySelector(selector);
}

/** Create an element: el("a", {href, className}, "text", child…). Text is never parsed as HTML. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "className") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

export function formatTime(ms) {
  if (!Number.isFinite(ms)) return "";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export const STATUS_TEXT = {
  idle: "Starting…",
  connecting: "Connecting to the host…",
  connected: "Connected to the Backtrail host",
  not_installed: "Host not installed: run `backtrail install`, then restart the browser",
  forbidden: "The host does not allow this extension: re-run `backtrail install`",
  disconnected: "Host disconnected: reconnecting",
};

export function flash(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("error", isError);
}
