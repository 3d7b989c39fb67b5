// Ways into the memory page besides the popup: the keyboard shortcut (manifest
// "commands": open-memory) and the omnibox keyword `bt`, which suggests pages from the
// host's search as the person types; Enter opens the memory page with the query, or
// the page view of the suggestion they chose. background.js registers these at top level.

export const MEMORY_PAGE = "src/ui/memory.html";
export const OPEN_MEMORY_COMMAND = "open-memory";
const MIN_CHARS = 2;
const SUGGESTIONS = 6;

/** The memory page's address: the search view (with `query`) or the page view of `url`. */
export function memoryUrl(ext, { query = "", url = null } = {}) {
  const base = ext.extensionUrl(MEMORY_PAGE);
  if (url) return `${base}#/page?url=${encodeURIComponent(url)}`;
  const text = String(query).trim();
  return text ? `${base}#/search?q=${encodeURIComponent(text)}` : `${base}#/search`;
}

/** Omnibox descriptions are XML: text must have &, < and > (and quotes) escaped. */
export function xmlText(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]);
}

/** One suggestion per result that has an http(s) URL: title and site, the URL as content. */
export function suggestionsFor(results) {
  const out = [];
  for (const hit of results) {
    if (typeof hit.url !== "string" || !/^https?:\/\//i.test(hit.url) || out.some((s) => s.content === hit.url)) continue;
    const title = hit.display_title || hit.title || hit.url;
    const site = hit.site ?? String(hit.domain ?? "").replace(/^www\./, "");
    out.push({ content: hit.url, description: `${xmlText(title)} <dim>— ${xmlText(site)}</dim> <url>${xmlText(hit.url)}</url>` });
    if (out.length >= SUGGESTIONS) break;
  }
  return out;
}

export function registerLaunchers(app, ext) {
  let latest = 0; // only the newest input's results are suggested

  const open = async (target, disposition = "currentTab") => {
    if (disposition === "currentTab") {
      const tab = await ext.tabs.activeTab();
      if (tab) return ext.tabs.update(tab.id, { url: target });
    }
    return ext.tabs.create({ url: target, active: disposition !== "newBackgroundTab" });
  };

  const handlers = {
    command(command) {
      if (command !== OPEN_MEMORY_COMMAND) return Promise.resolve(null);
      return open(memoryUrl(ext), "newForegroundTab");
    },
    /** Resolves to the suggestions given to `suggest` (none for a stale or short input). */
    inputChanged(text, suggest) {
      const mine = ++latest;
      const query = String(text).trim();
      ext.omnibox.setDefault(query ? `Search your Backtrail memory for <match>${xmlText(query)}</match>` : "Open your Backtrail memory");
      if (query.length < MIN_CHARS) return Promise.resolve([]);
      return app.ready
        .then(() => app.search({ query, limit: SUGGESTIONS * 2 }))
        .then((result) => suggestionsFor(result.results ?? []))
        .catch(() => []) // no host: the default line still opens the page
        .then((found) => {
          if (mine !== latest) return [];
          suggest(found);
          return found;
        });
    },
    inputEntered(text, disposition) {
      const chosen = String(text).trim();
      const target = /^https?:\/\//i.test(chosen) ? memoryUrl(ext, { url: chosen }) : memoryUrl(ext, { query: chosen });
      return open(target, disposition);
    },
  };
  const warn = (error) => console.warn("Backtrail:", error);
  ext.events.command((command) => void handlers.command(command).catch(warn));
  ext.events.omniboxChanged((text, suggest) => void handlers.inputChanged(text, suggest));
  ext.events.omniboxEntered((text, disposition) => void handlers.inputEntered(text, disposition).catch(warn));
  return handlers;
}
