// Browser actions an assistant may ask for through the host (PROTOCOL.md section 5,
// reserved). Each runs only when the user's switch for it is on (settings.actions).
// validateAction is pure; performAction gets the browser through `deps`.

import { CODE, makeError } from "./protocol.js";
import { resolveFolder } from "./bookmarks.js";

export const ACTION_NAMES = Object.freeze(["group_tabs", "close_tabs", "capture_tab", "create_bookmark"]);
export const GROUP_COLORS = Object.freeze(["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"]);

function tabIds(value) {
  if (!Array.isArray(value) || value.length < 1 || value.length > 500) return null;
  return value.every((id) => Number.isInteger(id) && id >= 0) ? value : null;
}

/** {ok: true, action} or {ok: false, error} for an `action` push. */
export function validateAction(message, settings) {
  const name = message.action;
  if (!ACTION_NAMES.includes(name)) return { ok: false, error: makeError(CODE.unsupported_action, `unknown action ${JSON.stringify(name)}`) };
  if (!settings.actions?.[name]) {
    return { ok: false, error: makeError(CODE.action_not_allowed, `the user has not allowed "${name}" in Backtrail's options`) };
  }
  const bad = (field, why) => ({ ok: false, error: makeError(CODE.invalid_value, `${field} ${why}`, { field }) });
  if (name === "group_tabs" || name === "close_tabs") {
    const ids = tabIds(message.tab_ids);
    if (!ids) return bad("tab_ids", "must be 1-500 tab ids");
    if (name === "close_tabs") return { ok: true, action: { name, tab_ids: ids } };
    const color = message.color ?? null;
    if (color !== null && !GROUP_COLORS.includes(color)) return bad("color", `must be one of ${GROUP_COLORS.join(", ")}`);
    const title = typeof message.title === "string" ? message.title.slice(0, 200) : null;
    return { ok: true, action: { name, tab_ids: ids, title, color } };
  }
  if (name === "capture_tab") {
    if (!Number.isInteger(message.tab_id) || message.tab_id < 0) return bad("tab_id", "must be a tab id");
    return { ok: true, action: { name, tab_id: message.tab_id } };
  }
  if (typeof message.url !== "string") return bad("url", "must be an http(s) URL");
  const parent = message.parent_id == null ? null : String(message.parent_id);
  const title = typeof message.title === "string" ? message.title.slice(0, 1000) : null;
  if (message.folder != null && typeof message.folder !== "string") return bad("folder", "must be a folder path");
  const folder = message.folder ? message.folder.slice(0, 4096) : null;
  return { ok: true, action: { name, url: message.url, title, parent_id: parent, folder } };
}

/**
 * Perform a validated action. deps: {tabs: {get, remove, group}, tabGroups: {update},
 * bookmarks: {create, getTree}, captureTab(tabId) → {dedupe_key}, gateFor(url, incognito)}.
 * Returns the action's result object; throws an Error with `.code` on failure.
 */
export async function performAction(action, deps) {
  const fail = (code, message) => Object.assign(new Error(message), { code });
  const existing = async (ids) => {
    const tabs = [];
    for (const id of ids) {
      try {
        const tab = await deps.tabs.get(id);
        if (!tab.incognito) tabs.push(tab);
      } catch {
        // closed meanwhile
      }
    }
    if (!tabs.length) throw fail(CODE.not_found, "none of these tabs exist");
    return tabs;
  };
  if (action.name === "group_tabs") {
    const tabs = await existing(action.tab_ids);
    const groupId = await deps.tabs.group({ tabIds: tabs.map((tab) => tab.id) });
    const props = {};
    if (action.title) props.title = action.title;
    if (action.color) props.color = action.color;
    if (Object.keys(props).length) await deps.tabGroups.update(groupId, props);
    return { group_id: groupId };
  }
  if (action.name === "close_tabs") {
    const tabs = await existing(action.tab_ids);
    await deps.tabs.remove(tabs.map((tab) => tab.id));
    return { closed: tabs.length };
  }
  if (action.name === "capture_tab") {
    return deps.captureTab(action.tab_id);
  }
  const verdict = deps.gateFor(action.url, false);
  if (!verdict.ok) {
    const code = verdict.reason === "scheme" ? CODE.forbidden_scheme : verdict.reason === "paused" ? CODE.paused : CODE.excluded;
    throw fail(code, `cannot bookmark this URL (${verdict.reason})`);
  }
  const props = { url: verdict.url, title: action.title ?? verdict.url };
  let folder = null;
  if (action.parent_id) {
    props.parentId = action.parent_id;
  } else if (action.folder) {
    // A folder named by path: use the existing one, create what is missing.
    const place = resolveFolder(await deps.bookmarks.getTree(), action.folder);
    let parentId = place.parentId;
    folder = place.path;
    for (const title of place.missing) {
      parentId = String((await deps.bookmarks.create({ parentId, title })).id);
      folder = folder ? `${folder}/${title}` : title;
    }
    props.parentId = parentId;
  }
  const node = await deps.bookmarks.create(props);
  return folder === null ? { browser_id: String(node.id) } : { browser_id: String(node.id), folder };
}
