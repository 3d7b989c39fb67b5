// What the popup, options and note pages (and the dwell script) may ask the background.
// One router (router.js) switches on `request.what`; answers are plain JSON.

import { KEYS } from "./config.js";
import { HostError } from "./courier.js";

function hostCall(promise) {
  return promise.catch((error) => {
    if (error instanceof HostError) throw Object.assign(new Error(error.message), { code: error.code });
    throw error;
  });
}

async function activeTabId(app) {
  const tab = await app.ext.tabs.activeTab();
  return tab ? tab.id : null;
}

export function routes(app) {
  const page = (run) => ({ from: "page", run });
  return {
    // From the dwell script in web pages: the only thing a page may send.
    dwell: {
      from: "content",
      run: (request, sender) => app.inTab(sender.tab.id, () => app.capture.onDwell(request, sender)),
    },
    getState: page(() => ({ state: app.state() })),
    pageStatus: page(async () => ({ status: app.capture.pageStatus(await app.ext.tabs.activeTab()) })),
    search: page(async (request) => ({ result: await hostCall(app.search(request)) })),
    hostStatus: page(async () => ({ result: await hostCall(app.hostStatus()) })),
    memory: page(async (request) => ({ result: await hostCall(app.memoryRead(request.type, request.fields)) })),
    exportPage: page(async (request) => ({ result: await hostCall(app.exportPage(request.cursor)) })),
    setPaused: page(async (request) => {
      await app.applyPaused(Boolean(request.paused));
      return { paused: app.paused };
    }),
    saveNote: page(async (request) => {
      const tabId = Number.isInteger(request.tabId) ? request.tabId : await activeTabId(app);
      return { saved: await app.capture.saveNote(request.content, tabId) };
    }),
    getSettings: page(() => ({ settings: app.settings, invalidRules: app.rules.invalid })),
    setSettings: page((request) => app.setSettings(request.settings)),
    forget: page(async (request) => ({ outcome: await app.forget(request.selector ?? {}) })),
    runBackfill: page(async (request) => ({ summary: await app.sync.backfillHistory(request.days) })),
    importBookmarks: page(async () => ({ summary: await app.sync.importBookmarks() })),
    clearDrops: page(async () => {
      await app.clearDrops();
      return {};
    }),
    retryDeadLetters: page(() => app.retryDeadLetters()),
    reconnect: page(() => {
      app.courier.connect({ force: true });
      return {};
    }),
    openUrl: page(async (request) => {
      if (!/^https?:\/\//i.test(String(request.url))) throw new Error("only http(s) links are opened");
      await app.ext.tabs.create({ url: String(request.url) });
      return {};
    }),
    pendingSelection: page(async (request) => ({ pending: await app.capture.pendingSelection(String(request.id)) })),
    savePendingSelection: page(async (request) => ({
      saved: await app.capture.savePendingSelection(String(request.id), request.note ?? null),
    })),
    cancelPendingSelection: page(async (request) => {
      await app.ext.storage.session.remove(KEYS.pending + String(request.id));
      return {};
    }),
  };
}
