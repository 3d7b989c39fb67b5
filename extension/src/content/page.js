// Injected by the background (chrome.scripting, isolated world) into pages that passed the
// capture gate — never into excluded, incognito or non-http(s) pages. A classic script:
// it defines globalThis.__backtrailPage once; the background then calls its functions.
//   track(visitId, minDwellMs, reportMs)  count visible / visible+focused time and report
//                                         {what: "dwell", ...} to the background; returns
//                                         the final clocks of the visit it replaces
//   extract(caps)                         the cleaned page for capture_page, or
//                                         {password_field: true} and nothing else when
//                                         caps.skipPasswordPages and the page has one
//                                         (and payment_card_field: true too, when
//                                         caps.skipPaymentPages and the page holds a
//                                         payment-card field: a checkout page)
//   selection()                           the selected text and its surrounding block
// Privacy (PROTOCOL.md 3.2): live form values are never read; password and hidden inputs,
// scripts, styles and frames are removed; value attributes, textarea contents, selected
// options and contenteditable regions are emptied before anything is serialised.

(function install(root) {
  "use strict";
  if (root.__backtrailPage) return;

  const REMOVE = new Set(["script", "style", "noscript", "template", "iframe", "frame", "frameset", "object", "embed", "applet"]);
  const BUTTON_INPUTS = new Set(["button", "submit", "reset", "image"]);
  const BLOCKS = new Set([
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
    "td", "th", "body", "html",
  ]);
  const SECRET_META = /csrf|xsrf|token|nonce/i;

  function tagOf(el) {
    return String(el.tagName || "").toLowerCase();
  }

  function attr(el, name) {
    return el.getAttribute ? el.getAttribute(name) : null;
  }

  /** "remove" | "empty" | "keep" for one element of the cloned tree. */
  function classify(el) {
    const tag = tagOf(el);
    if (REMOVE.has(tag)) return "remove";
    if (tag === "input") {
      const type = String(attr(el, "type") || "text").toLowerCase();
      if (type === "password" || type === "hidden") return "remove";
      if (!BUTTON_INPUTS.has(type)) el.removeAttribute("value");
      el.removeAttribute("checked");
      return "keep";
    }
    if (tag === "textarea") return "empty";
    if (tag === "option") {
      el.removeAttribute("selected");
      return "keep";
    }
    if (tag === "meta") {
      const name = `${attr(el, "name") || ""} ${attr(el, "http-equiv") || ""} ${attr(el, "property") || ""}`;
      if (SECRET_META.test(name)) return "remove";
    }
    const editable = attr(el, "contenteditable");
    if (editable !== null && String(editable).toLowerCase() !== "false") return "empty";
    return "keep";
  }

  /** Strip a detached tree in place (see the privacy note above). */
  function cleanTree(top) {
    const stack = [top];
    while (stack.length) {
      const el = stack.pop();
      for (const child of Array.from(el.children || [])) {
        const action = classify(child);
        if (action === "remove") child.remove();
        else if (action === "empty") child.textContent = "";
        else stack.push(child);
      }
    }
    return top;
  }

  /** Visible-ish text of a (cleaned) tree: block elements on their own lines. */
  function textOf(top) {
    const out = [];
    const walk = (node) => {
      if (node.nodeType === 3) {
        out.push(node.nodeValue || "");
        return;
      }
      if (node.nodeType !== 1 && node.nodeType !== 9 && node.nodeType !== 11) return;
      const block = BLOCKS.has(tagOf(node));
      if (block) out.push("\n");
      for (const child of Array.from(node.childNodes || [])) walk(child);
      if (block) out.push("\n");
    };
    walk(top);
    return out
      .join("")
      .replace(/[^\S\n]+/g, " ")
      .replace(/ *\n */g, "\n")
      .replace(/\n{3,}/g, "\n\n")
      .trim();
  }

  function utf8Length(text) {
    return new TextEncoder().encode(text).length;
  }

  /** Cut to at most maxBytes of UTF-8 on a character boundary. */
  function truncateUtf8(text, maxBytes) {
    const bytes = new TextEncoder().encode(text);
    if (bytes.length <= maxBytes) return { text, truncated: false };
    let end = maxBytes;
    while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1; // not inside a sequence
    return { text: new TextDecoder().decode(bytes.subarray(0, end)), truncated: true };
  }

  /** html if the cleaned HTML fits, else the text cut to maxTextBytes. */
  function choosePayload(html, textOfTree, caps) {
    if (utf8Length(html) <= caps.maxHtmlBytes) {
      return { content_type: "html", html, truncated: false };
    }
    const cut = truncateUtf8(textOfTree(), caps.maxTextBytes);
    return { content_type: "text", text: cut.text, truncated: cut.truncated };
  }

  function hasPasswordField(doc) {
    return Boolean(doc.querySelector && doc.querySelector('input[type="password" i]'));
  }

  // A payment-card field: what checkout pages hold (documentation about checkout holds
  // none, only words). Browsers and card forms mark the fields with autocomplete tokens
  // (cc-number, cc-csc, cc-exp...; "billing cc-number" too); a card form without them
  // still asks for digits (inputmode=numeric) in a field named for the card number or
  // its security code.
  const CARD_AUTOCOMPLETE = /(^|\s)cc-(number|csc|exp|exp-month|exp-year)(\s|$)/i;
  const CARD_NAME = /card.?(number|num|no\b)|cc.?(number|num)|credit.?card|\bc[cv]v\d?\b|\bcvc\b|\bcsc\b|security.?code/i;

  function hasPaymentCardField(doc) {
    if (!doc.querySelectorAll) return false;
    for (const field of Array.from(doc.querySelectorAll("input"))) {
      if (CARD_AUTOCOMPLETE.test(String(attr(field, "autocomplete") || ""))) return true;
      if (String(attr(field, "inputmode") || "").toLowerCase() !== "numeric") continue;
      const names = ["name", "id", "aria-label", "placeholder", "data-elements-stable-field-name"]
        .map((name) => attr(field, name) || "").join(" ");
      if (CARD_NAME.test(names)) return true;
    }
    return false;
  }

  function extract(caps, doc = root.document) {
    if (caps.skipPasswordPages && hasPasswordField(doc)) return { content_type: null, password_field: true };
    if (caps.skipPaymentPages && hasPaymentCardField(doc)) {
      return { content_type: null, password_field: true, payment_card_field: true };
    }
    const clone = cleanTree(doc.documentElement.cloneNode(true));
    const html = `<!DOCTYPE html>\n${clone.outerHTML}`;
    const payload = choosePayload(html, () => textOf(clone), caps);
    payload.title = doc.title || null;
    payload.language = doc.documentElement.getAttribute("lang") || null;
    return payload;
  }

  function selection(doc = root.document) {
    const sel = root.getSelection ? root.getSelection() : null;
    const text = sel ? sel.toString() : "";
    let context = null;
    const active = doc.activeElement;
    const inForm = active && (["input", "textarea"].includes(tagOf(active)) || active.isContentEditable);
    if (sel && sel.rangeCount && !inForm) {
      let node = sel.getRangeAt(0).commonAncestorContainer;
      if (node && node.nodeType === 3) node = node.parentNode;
      while (node && node.parentNode && !BLOCKS.has(tagOf(node))) node = node.parentNode;
      const around = node ? String(node.innerText || node.textContent || "").trim() : "";
      context = around ? around.slice(0, 4000) : null;
    }
    return { text: inForm ? "" : text, context, title: doc.title || null, url: root.location ? root.location.href : null };
  }

  // ------------------------------------------------------------------ dwell tracking

  let tracker = null;

  function send(message) {
    try {
      const sent = root.chrome.runtime.sendMessage(message);
      if (sent && sent.catch) sent.catch(() => {});
    } catch {
      // the extension was reloaded: this page's script is orphaned
    }
  }

  /**
   * Visible time of this document before the script ran (ms), from the browser's own
   * record of its visibility since the navigation began (VisibilityStateEntry, Chrome
   * 115+): the script only runs once the document is parsed, and time spent reading a
   * page while it was still loading counts too. 0 when the browser keeps no record.
   */
  function visibleSinceStart(perf, at) {
    const entries = perf && perf.getEntriesByType ? perf.getEntriesByType("visibility-state") : [];
    let total = 0;
    entries.forEach((entry, i) => {
      if (entry.name !== "visible") return;
      const end = i + 1 < entries.length ? entries[i + 1].startTime : at;
      total += Math.max(0, Math.min(end, at) - entry.startTime);
    });
    return total;
  }

  function makeTracker(visitId, minDwellMs, reportMs, doc, now, visibleBefore = 0) {
    const t = {
      visitId, visible: visibleBefore, active: 0, last: now(), reached: false, reported: -1,
      isVisible: () => doc.visibilityState === "visible",
      isFocused: () => (doc.hasFocus ? doc.hasFocus() : false),
    };
    t.tick = () => {
      const at = now();
      const dt = Math.max(0, at - t.last);
      t.last = at;
      if (t.wasVisible) t.visible += dt;
      if (t.wasVisible && t.wasFocused) t.active += dt;
      t.wasVisible = t.isVisible();
      t.wasFocused = t.isFocused();
    };
    t.wasVisible = t.isVisible();
    t.wasFocused = t.isFocused();
    t.report = (force) => {
      t.tick();
      const reached = !t.reached && t.visible >= minDwellMs;
      if (reached) t.reached = true;
      const due = now() - t.lastReport >= reportMs && t.active !== t.reported;
      if (!reached && !force && !due) return;
      t.reported = t.active;
      t.lastReport = now();
      send({ what: "dwell", visit_id: t.visitId, visible_ms: Math.round(t.visible), active_ms: Math.round(t.active), reached });
    };
    t.lastReport = now();
    return t;
  }

  function track(visitId, minDwellMs, reportMs, doc = root.document, now = () => root.performance.now()) {
    let previous = null;
    if (tracker) {
      if (tracker.visitId === visitId) return null;
      tracker.tick(); // the previous (SPA) visit ends: its final clocks go back as the result
      previous = { visit_id: tracker.visitId, visible_ms: Math.round(tracker.visible), active_ms: Math.round(tracker.active) };
      root.clearInterval(tracker.timer);
    }
    // A new document's first visit counts from the navigation's start; an SPA visit from now.
    const before = previous ? 0 : visibleSinceStart(root.performance, now());
    tracker = makeTracker(visitId, minDwellMs, reportMs, doc, now, before);
    const current = tracker;
    current.timer = root.setInterval(() => {
      if (tracker === current) current.report(false);
    }, 1000);
    if (!listening) {
      listening = true;
      const flush = () => tracker && tracker.report(true);
      doc.addEventListener("visibilitychange", flush);
      root.addEventListener("focus", () => tracker && tracker.tick());
      root.addEventListener("blur", flush);
      root.addEventListener("pagehide", flush);
    }
    current.report(true); // tells the background the script runs
    return previous;
  }
  let listening = false;

  root.__backtrailPage = {
    track, extract, selection, cleanTree, textOf, truncateUtf8, choosePayload, classify, hasPasswordField,
    hasPaymentCardField, visibleSinceStart,
  };
})(globalThis);
