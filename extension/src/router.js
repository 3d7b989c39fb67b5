// The one onMessage router: every request is {what, ...args}; every answer is
// {ok: true, ...result} or {ok: false, error: {message, code?}}. Each route says who may
// call it: "page" (the extension's own popup/options/note pages) or "content" (the dwell
// script in a web page, which may only report dwell).

export function senderKind(sender, extensionId, extensionOrigin) {
  if (!sender || sender.id !== extensionId) return "stranger";
  if (sender.tab && !(sender.url ?? "").startsWith(extensionOrigin)) return "content";
  if ((sender.url ?? "").startsWith(extensionOrigin)) return "page";
  return sender.tab ? "content" : "page";
}

/** routes: {what: {from: "page"|"content", run(request, sender) → result object}}. */
export function createRouter(routes, { extensionId, extensionOrigin }) {
  return async function route(request, sender) {
    const what = request && typeof request === "object" ? request.what : undefined;
    const entry = typeof what === "string" && Object.hasOwn(routes, what) ? routes[what] : null;
    if (!entry) return { ok: false, error: { message: `unknown request ${JSON.stringify(what)}` } };
    const kind = senderKind(sender, extensionId, extensionOrigin);
    if (kind !== entry.from) return { ok: false, error: { message: `${what} is not allowed from ${kind}` } };
    try {
      const result = await entry.run(request, sender);
      return { ok: true, ...(result ?? {}) };
    } catch (error) {
      const out = { message: String(error?.message ?? error) };
      if (Number.isInteger(error?.code)) out.code = error.code;
      return { ok: false, error: out };
    }
  };
}
