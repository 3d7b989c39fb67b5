// The one place that touches `chrome.*`. Everything else receives this object (or a fake
// of it in tests, tests/helpers/fake-ext.js) and stays testable under `node --test`.
// Keep this file thin: promise wrappers and event plumbing, no decisions.

/* global chrome */

function lastErrorMessage() {
  return chrome.runtime.lastError ? chrome.runtime.lastError.message : "";
}

/** A native port as the rest of the extension sees it. */
function wrapPort(port) {
  return {
    post(message) {
      port.postMessage(message); // throws synchronously when disconnected or too large
    },
    disconnect() {
      port.disconnect();
    },
    onMessage(listener) {
      port.onMessage.addListener(listener);
    },
    onDisconnect(listener) {
      port.onDisconnect.addListener(() => listener(lastErrorMessage() || "Disconnected."));
    },
  };
}

function storageArea(area) {
  return {
    get: (keys) => area.get(keys),
    set: (items) => area.set(items),
    remove: (keys) => area.remove(keys),
  };
}

export const ext = {
  get runtimeId() {
    return chrome.runtime.id;
  },
  get version() {
    return chrome.runtime.getManifest().version;
  },
  extensionUrl: (path) => chrome.runtime.getURL(path),
  storage: {
    local: storageArea(chrome.storage.local),
    session: chrome.storage.session ? storageArea(chrome.storage.session) : null,
  },
  connectNative: (name) => wrapPort(chrome.runtime.connectNative(name)),
  sendToBackground: (request) => chrome.runtime.sendMessage(request),

  tabs: {
    query: (query) => chrome.tabs.query(query),
    get: (tabId) => chrome.tabs.get(tabId),
    create: (props) => chrome.tabs.create(props),
    update: (tabId, props) => chrome.tabs.update(tabId, props),
    remove: (tabIds) => chrome.tabs.remove(tabIds),
    group: (options) => chrome.tabs.group(options),
    activeTab: async () => (await chrome.tabs.query({ active: true, lastFocusedWindow: true }))[0] ?? null,
  },
  tabGroups: {
    update: (groupId, props) => chrome.tabGroups.update(groupId, props),
  },
  windows: {
    create: (props) => chrome.windows.create(props),
    getAll: () => chrome.windows.getAll({ windowTypes: ["normal"] }),
  },
  scripting: {
    // Results of the main frame only; a failure (restricted page, tab gone) rejects.
    async runFile(tabId, file) {
      await chrome.scripting.executeScript({ target: { tabId }, files: [file] });
    },
    async runFunc(tabId, func, args = []) {
      const [first] = await chrome.scripting.executeScript({ target: { tabId }, func, args });
      return first ? first.result : undefined;
    },
  },
  bookmarks: {
    getTree: () => chrome.bookmarks.getTree(),
    getSubTree: (id) => chrome.bookmarks.getSubTree(id),
    get: (id) => chrome.bookmarks.get(id),
    create: (props) => chrome.bookmarks.create(props),
  },
  history: {
    search: (query) => chrome.history.search(query),
    getVisits: (url) => chrome.history.getVisits({ url }),
  },
  badge: {
    async set({ text, color, title }) {
      await chrome.action.setBadgeText({ text });
      await chrome.action.setBadgeBackgroundColor({ color });
      await chrome.action.setTitle({ title });
    },
  },
  contextMenus: {
    async reset(items) {
      await chrome.contextMenus.removeAll();
      for (const item of items) {
        chrome.contextMenus.create(item, () => void chrome.runtime.lastError);
      }
    },
  },
  alarms: {
    create: (name, whenMs) => chrome.alarms.create(name, { when: whenMs }),
    clear: (name) => chrome.alarms.clear(name),
  },
  openOptions: () => chrome.runtime.openOptionsPage(),
  omnibox: {
    setDefault: (description) => chrome.omnibox.setDefaultSuggestion({ description }),
  },
  /** navigator.userAgentData brands + whether Brave's API is present. */
  browserHints() {
    const data = globalThis.navigator?.userAgentData;
    return {
      brands: data?.brands ?? [],
      brave: typeof globalThis.navigator?.brave !== "undefined",
      userAgent: globalThis.navigator?.userAgent ?? "",
    };
  },

  // Events, for background.js to register at top level. `on(name, listener)`.
  events: {
    installed: (fn) => chrome.runtime.onInstalled.addListener(fn),
    startup: (fn) => chrome.runtime.onStartup.addListener(fn),
    message: (fn) =>
      chrome.runtime.onMessage.addListener((request, sender, sendResponse) => {
        fn(request, sender).then(sendResponse, (error) =>
          sendResponse({ ok: false, error: { message: String(error?.message ?? error) } }),
        );
        return true; // the response is sent asynchronously
      }),
    committed: (fn) => chrome.webNavigation.onCommitted.addListener(fn),
    domLoaded: (fn) => chrome.webNavigation.onDOMContentLoaded.addListener(fn),
    historyState: (fn) => chrome.webNavigation.onHistoryStateUpdated.addListener(fn),
    tabCreated: (fn) => chrome.tabs.onCreated.addListener(fn),
    tabRemoved: (fn) => chrome.tabs.onRemoved.addListener(fn),
    tabActivated: (fn) => chrome.tabs.onActivated.addListener(fn),
    tabUpdated: (fn) => chrome.tabs.onUpdated.addListener(fn),
    tabAttached: (fn) => chrome.tabs.onAttached.addListener(fn),
    tabMoved: (fn) => chrome.tabs.onMoved.addListener(fn),
    bookmarkCreated: (fn) => chrome.bookmarks.onCreated.addListener(fn),
    bookmarkChanged: (fn) => chrome.bookmarks.onChanged.addListener(fn),
    bookmarkMoved: (fn) => chrome.bookmarks.onMoved.addListener(fn),
    bookmarkRemoved: (fn) => chrome.bookmarks.onRemoved.addListener(fn),
    bookmarkImportEnded: (fn) => chrome.bookmarks.onImportEnded.addListener(fn),
    contextMenu: (fn) => chrome.contextMenus.onClicked.addListener(fn),
    alarm: (fn) => chrome.alarms.onAlarm.addListener(fn),
    command: (fn) => chrome.commands.onCommand.addListener(fn),
    omniboxChanged: (fn) => chrome.omnibox.onInputChanged.addListener(fn),
    omniboxEntered: (fn) => chrome.omnibox.onInputEntered.addListener(fn),
  },
};
