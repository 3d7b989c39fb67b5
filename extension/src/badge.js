// The toolbar badge: host state at a glance. One badge, so states are ranked:
// not installed > forbidden > disconnected > paused > drops > connecting > connected.

const RED = "#c62828";
const AMBER = "#ef6c00";
const GREY = "#616161";
const GREEN = "#2e7d32";

/** {status, paused, dropped} → {text, color, title}. */
export function badgeFor({ status, paused, dropped = 0, lastError = null }) {
  const why = lastError ? ` (${lastError})` : "";
  if (status === "not_installed") {
    return { text: "?", color: RED, title: "Backtrail: the host is not installed. Run `backtrail install`, then restart the browser." };
  }
  if (status === "forbidden") {
    return { text: "!", color: RED, title: "Backtrail: the host does not allow this extension's ID. Re-run `backtrail install`." };
  }
  if (status === "disconnected") {
    return { text: "!", color: RED, title: `Backtrail: host error${why}; reconnecting.` };
  }
  if (paused) return { text: "off", color: GREY, title: "Backtrail: paused; nothing is captured." };
  if (dropped > 0) {
    return { text: "drop", color: AMBER, title: `Backtrail: ${dropped} queued item(s) were dropped because the queue was full. Open the popup.` };
  }
  if (status === "connected") return { text: "on", color: GREEN, title: "Backtrail: connected." };
  return { text: "…", color: GREY, title: "Backtrail: connecting to the host…" };
}
