// The service worker. Every listener is registered synchronously, here at the top level,
// so an event that wakes the worker is never missed; each one waits for the App to load
// its state (app.ready) and hands over. Decisions live in app.js, capture.js, sync.js.

import { ext } from "./ext.js";
import { App } from "./app.js";
import { createRouter } from "./router.js";
import { routes } from "./routes.js";
import { memoryUrl, registerLaunchers } from "./launchers.js";

const app = new App(ext);
const route = createRouter(routes(app), {
  extensionId: ext.runtimeId,
  extensionOrigin: ext.extensionUrl(""),
});

const launchers = registerLaunchers(app, ext); // the keyboard shortcut and the omnibox keyword `bt`

const MENU_SAVE = "backtrail-save-selection";
const MENU_SAVE_NOTE = "backtrail-save-selection-note";

function after(fn) {
  return (...args) => {
    app.ready.then(() => fn(...args)).catch((error) => console.warn("Backtrail:", error));
  };
}

function onTab(tabIdOf, fn) {
  return (...args) => {
    app.inTab(tabIdOf(...args), () => fn(...args)).catch((error) => console.warn("Backtrail:", error));
  };
}

ext.events.message(async (request, sender) => {
  await app.ready;
  return route(request, sender);
});

ext.events.installed(
  after(async (details) => {
    await ext.contextMenus.reset([
      { id: MENU_SAVE, title: "Save selection to Backtrail", contexts: ["selection"], documentUrlPatterns: ["http://*/*", "https://*/*"] },
      { id: MENU_SAVE_NOTE, title: "Save selection to Backtrail with a note…", contexts: ["selection"], documentUrlPatterns: ["http://*/*", "https://*/*"] },
    ]);
    if (details.reason === "install") {
      await app.sync.importBookmarks();
      await app.sync.backfillHistory().catch((error) => console.warn("Backtrail: history import:", error));
    }
  }),
);
ext.events.startup(after(() => app.capture.onStartup()));
ext.events.alarm(after((alarm) => app.onAlarm(alarm)));

ext.events.committed(onTab((d) => d.tabId, (d) => app.capture.onCommitted(d)));
ext.events.domLoaded(onTab((d) => d.tabId, (d) => app.capture.onLoaded(d)));
ext.events.historyState(onTab((d) => d.tabId, (d) => app.capture.onHistoryState(d)));

ext.events.tabCreated(after((tab) => app.sync.onTabCreated(tab)));
ext.events.tabRemoved(
  onTab(
    (tabId) => tabId,
    async (tabId, info) => {
      await app.capture.onTabRemoved(tabId);
      await app.sync.onTabRemoved(tabId, info);
    },
  ),
);
ext.events.tabActivated(after((info) => app.sync.onTabActivated(info)));
ext.events.tabUpdated(after((tabId, change, tab) => app.sync.onTabUpdated(tabId, change, tab)));
ext.events.tabAttached(after((tabId) => app.sync.onTabMoved(tabId)));
ext.events.tabMoved(after((tabId) => app.sync.onTabMoved(tabId)));

ext.events.bookmarkCreated(after((id) => app.sync.onBookmarkCreated(id)));
ext.events.bookmarkChanged(after((id) => app.sync.onBookmarkChanged(id)));
ext.events.bookmarkMoved(after((id) => app.sync.onBookmarkMoved(id)));
ext.events.bookmarkRemoved(after((id, info) => app.sync.onBookmarkRemoved(id, info)));
ext.events.bookmarkImportEnded(after(() => app.sync.importBookmarks()));

ext.events.contextMenu(
  after(async (info, tab) => {
    if (!tab || !Number.isInteger(tab.id)) return;
    if (info.menuItemId === MENU_SAVE) {
      await app.capture.saveSelection(tab.id, info.selectionText ?? null).catch((error) => app.noteLocalError(error));
    } else if (info.menuItemId === MENU_SAVE_NOTE) {
      const id = await app.capture.holdSelection(tab.id, info.selectionText ?? "");
      await ext.windows.create({ url: ext.extensionUrl(`src/ui/note.html?id=${encodeURIComponent(id)}`), type: "popup", width: 480, height: 440 });
    }
  }),
);

// Test hook for end-to-end tests driving Chromium over CDP: poll `__backtrail.ready`.
app.ready.then(() => {
  globalThis.__backtrail = {
    ready: true,
    state: () => app.state(),
    queueLength: () => app.queue.length,
    queueEntries: () => app.queue.entries(),
    flush: (timeoutMs) => app.flush(timeoutMs),
    saveSelection: (tabId, text, note = null) => app.capture.saveSelection(tabId, text, note),
    saveNote: (content, tabId = null) => app.capture.saveNote(content, tabId),
    captureTab: (tabId) => app.capture.captureTab(tabId),
    setPaused: (paused) => app.applyPaused(Boolean(paused)),
    setSettings: (settings) => app.setSettings(settings),
    backfillHistory: (days) => app.sync.backfillHistory(days),
    importBookmarks: () => app.sync.importBookmarks(),
    reconnect: () => app.courier.connect({ force: true }),
    memoryUrl: (options) => memoryUrl(ext, options),
    // The listeners of chrome.commands / chrome.omnibox, which DevTools cannot fire.
    command: (name) => launchers.command(name).then(() => null),
    omniboxInput: (text) => launchers.inputChanged(text, () => {}),
    omniboxEnter: (text, disposition) => launchers.inputEntered(text, disposition).then(() => null),
  };
});
