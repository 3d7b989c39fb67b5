// A small fake of the ext.js surface, for running the background's logic under node --test.
// Storage is in memory; the native host is a function from request to response; tabs,
// pages, bookmarks and history are plain data the test sets up.

export class FakeStorage {
  constructor() {
    this.data = new Map();
    this.calls = { get: 0, set: 0, remove: 0 };
  }

  async get(keys) {
    this.calls.get += 1;
    const out = {};
    const list = keys === null || keys === undefined ? [...this.data.keys()] : Array.isArray(keys) ? keys : [keys];
    for (const key of list) if (this.data.has(key)) out[key] = structuredClone(this.data.get(key));
    return out;
  }

  async set(items) {
    this.calls.set += 1;
    for (const [key, value] of Object.entries(items)) this.data.set(key, structuredClone(value));
  }

  async remove(keys) {
    this.calls.remove += 1;
    for (const key of Array.isArray(keys) ? keys : [keys]) this.data.delete(key);
  }

  keys() {
    return [...this.data.keys()].sort();
  }
}

/** Manual clock: timers fire only when the test advances time. */
export class FakeClock {
  constructor(start = 1_700_000_000_000) {
    this.time = start;
    this.timers = new Map();
    this.nextId = 1;
    this.now = () => this.time;
    this.setTimeout = (fn, ms) => {
      const id = this.nextId++;
      this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
      return id;
    };
    this.clearTimeout = (id) => {
      this.timers.delete(id);
    };
  }

  /** Move time forward, firing due timers in order. */
  async advance(ms) {
    const end = this.time + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      const [id, timer] = due;
      this.timers.delete(id);
      this.time = Math.max(this.time, timer.at);
      timer.fn();
      await settle();
    }
    this.time = end;
    await settle();
  }
}

/** Let pending promise chains run (several macrotask turns). */
export async function settle(turns = 20) {
  for (let i = 0; i < turns; i += 1) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * A native host. `handler(request)` returns the response body: {result} | {error} | a
 * full frame via {frame}, or null to stay silent. Default: ok with an empty result.
 */
export class FakeHost {
  constructor(handler = () => ({ result: {} })) {
    this.handler = handler;
    this.received = [];
    this.mode = "up"; // "up" | "not_installed" | "forbidden"
    this.ports = [];
  }

  connect() {
    const host = this;
    const listeners = { message: [], disconnect: [] };
    const port = {
      open: true,
      post(message) {
        if (!port.open) throw new Error("Attempting to use a disconnected port object");
        const copy = structuredClone(message);
        host.received.push(copy);
        setImmediate(() => host._answer(port, copy));
      },
      disconnect() {
        port.open = false;
      },
      onMessage(fn) {
        listeners.message.push(fn);
      },
      onDisconnect(fn) {
        listeners.disconnect.push(fn);
      },
      // test side
      push(frame) {
        for (const fn of listeners.message) fn(structuredClone(frame));
      },
      crash(reason = "Native host has exited.") {
        if (!port.open) return;
        port.open = false;
        for (const fn of listeners.disconnect) fn(reason);
      },
    };
    this.ports.push(port);
    if (this.mode !== "up") {
      const reason = this.mode === "not_installed" ? "Specified native messaging host not found." : "Access to the specified native messaging host is forbidden.";
      setImmediate(() => port.crash(reason));
    }
    return port;
  }

  get port() {
    return this.ports[this.ports.length - 1];
  }

  _answer(port, message) {
    if (!port.open) return;
    let reply;
    if (message.type === "hello") reply = { result: { protocol: 1, host_version: "test", capabilities: [], limits: { max_request_bytes: 16 * 1024 * 1024, max_response_bytes: 1048576 }, paused: this.paused ?? false } };
    else reply = this.handler(message);
    if (reply === null || reply === undefined) return;
    if (reply.frame) port.push(reply.frame);
    else if (reply.error) port.push({ id: message.id, ok: false, error: reply.error });
    else port.push({ id: message.id, ok: true, result: reply.result ?? {} });
  }

  of(type) {
    return this.received.filter((message) => message.type === type);
  }
}

/** The ext.js surface, faked. `world` holds tabs, pages, bookmarks and history. */
export function fakeExt({ host = new FakeHost(), local = new FakeStorage(), session = new FakeStorage() } = {}) {
  const world = {
    tabs: new Map(), // id → tab
    pages: new Map(), // tab id → {content, selection, tracked: [visitIds], fail}
    bookmarkTree: [{ id: "0", title: "", children: [] }],
    history: [], // {url, title, visitCount, typedCount, lastVisitTime, visits: [VisitItem]}
    badge: null,
    windows: [],
    menus: [],
    alarms: [],
    removedTabs: [],
    groups: [],
    nextTabId: 100,
  };
  const findNode = (id, nodes = world.bookmarkTree, parent = null) => {
    for (const node of nodes) {
      if (node.id === id) return { node, parent };
      const hit = node.children ? findNode(id, node.children, node) : null;
      if (hit) return hit;
    }
    return null;
  };
  const ext = {
    world,
    host,
    runtimeId: "eeihccjhkpjgahjachnggfamlbdoeaio",
    version: "0.1.0",
    extensionUrl: (path) => `chrome-extension://eeihccjhkpjgahjachnggfamlbdoeaio/${path}`,
    storage: { local, session },
    connectNative: () => host.connect(),
    tabs: {
      async query() {
        return [...world.tabs.values()].map((tab) => ({ ...tab }));
      },
      async get(id) {
        const tab = world.tabs.get(id);
        if (!tab) throw new Error(`No tab with id: ${id}.`);
        return { ...tab };
      },
      async create(props) {
        const tab = { id: world.nextTabId++, windowId: 1, index: world.tabs.size, active: true, pinned: false, groupId: -1, incognito: false, ...props };
        world.tabs.set(tab.id, tab);
        return tab;
      },
      async remove(ids) {
        for (const id of [].concat(ids)) {
          world.tabs.delete(id);
          world.removedTabs.push(id);
        }
      },
      async group({ tabIds }) {
        world.groups.push(tabIds);
        return 7;
      },
      async activeTab() {
        return [...world.tabs.values()].find((tab) => tab.active) ?? null;
      },
    },
    tabGroups: { update: async (id, props) => world.groups.push({ id, props }) },
    windows: { create: async (props) => world.windows.push(props), getAll: async () => [] },
    scripting: {
      async runFile(tabId) {
        const page = world.pages.get(tabId);
        if (!page || page.fail) throw new Error("Cannot access contents of the page.");
      },
      async runFunc(tabId, func, args) {
        const page = world.pages.get(tabId);
        if (func.name === "runTrack") {
          const previous = page.current ?? null;
          page.tracked = [...(page.tracked ?? []), args[0]];
          page.current = args[0];
          return previous ? { visit_id: previous, visible_ms: page.visible_ms ?? 0, active_ms: page.active_ms ?? 0 } : null;
        }
        if (func.name === "runExtract") {
          page.caps = args[0];
          return structuredClone(page.content);
        }
        if (func.name === "runSelection") return structuredClone(page.selection ?? { text: "", context: null });
        throw new Error(`unexpected func ${func.name}`);
      },
    },
    bookmarks: {
      getTree: async () => structuredClone(world.bookmarkTree),
      getSubTree: async (id) => {
        const hit = findNode(id);
        if (!hit) throw new Error("Can't find bookmark for id.");
        return [structuredClone(hit.node)];
      },
      get: async (id) => {
        const hit = findNode(id);
        if (!hit) throw new Error("Can't find bookmark for id.");
        const { children, ...node } = hit.node;
        return [structuredClone(node)];
      },
      create: async (props) => ({ id: "999", ...props }),
    },
    history: {
      search: async () => world.history.map(({ visits, ...item }) => ({ ...item })),
      getVisits: async (url) => structuredClone(world.history.find((item) => item.url === url)?.visits ?? []),
    },
    badge: {
      async set(badge) {
        world.badge = badge;
      },
    },
    contextMenus: { reset: async (items) => (world.menus = items) },
    alarms: { create: (name, when) => world.alarms.push({ name, when }), clear: async () => true },
    openOptions: () => {},
    browserHints: () => ({ brands: [{ brand: "Chromium", version: "156" }], brave: false, userAgent: "" }),
  };
  return ext;
}

/** Add a tab with a page to the fake world. */
export function addTab(ext, { id, url, title = "A page", windowId = 1, incognito = false, content, selection } = {}) {
  const tab = { id, url, title, windowId, index: ext.world.tabs.size, active: true, pinned: false, groupId: -1, incognito, status: "complete" };
  ext.world.tabs.set(id, tab);
  ext.world.pages.set(id, {
    content: content ?? { content_type: "html", html: `<html><body><p>${title}</p></body></html>`, truncated: false, title, language: "en" },
    selection,
  });
  return tab;
}
