// content/page.js is a classic script injected into web pages; here it runs in a vm
// context against a tiny fake DOM, so its privacy clean-up and dwell clocks are tested.
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import vm from "node:vm";

const SOURCE = readFileSync(new URL("../src/content/page.js", import.meta.url), "utf8");

class FakeNode {
  constructor(tag, attrs = {}, children = []) {
    this.nodeType = 1;
    this.tagName = tag.toUpperCase();
    this.attrs = new Map(Object.entries(attrs));
    this.childNodes = [];
    this.parentNode = null;
    for (const child of children) this.append(typeof child === "string" ? new FakeText(child) : child);
  }
  append(child) {
    child.parentNode = this;
    this.childNodes.push(child);
  }
  get children() {
    return this.childNodes.filter((n) => n.nodeType === 1);
  }
  getAttribute(name) {
    return this.attrs.has(name) ? this.attrs.get(name) : null;
  }
  removeAttribute(name) {
    this.attrs.delete(name);
  }
  remove() {
    const siblings = this.parentNode.childNodes;
    siblings.splice(siblings.indexOf(this), 1);
    this.parentNode = null;
  }
  set textContent(value) {
    this.childNodes = value ? [new FakeText(value)] : [];
  }
  get outerHTML() {
    const attrs = [...this.attrs].map(([k, v]) => ` ${k}="${v}"`).join("");
    const tag = this.tagName.toLowerCase();
    return `<${tag}${attrs}>${this.childNodes.map((n) => n.outerHTML).join("")}</${tag}>`;
  }
}
class FakeText {
  constructor(text) {
    this.nodeType = 3;
    this.nodeValue = text;
  }
  get outerHTML() {
    return this.nodeValue;
  }
}
const h = (tag, attrs, ...children) => new FakeNode(tag, attrs ?? {}, children);

function loadPage(extra = {}) {
  const sent = [];
  const listeners = {};
  const context = {
    TextEncoder, TextDecoder, Array, String,
    chrome: { runtime: { sendMessage: (m) => { sent.push(m); return Promise.resolve(); } } },
    setInterval: () => 1,
    clearInterval: () => {},
    addEventListener: (name, fn) => { listeners[name] = fn; },
    ...extra,
  };
  vm.createContext(context);
  vm.runInContext(SOURCE, context);
  return { page: context.__backtrailPage, sent, listeners, context };
}

function formPage() {
  return h("html", { lang: "en" },
    h("head", null, h("title", null, "Form"), h("meta", { name: "csrf-token", content: "SECRET1" }), h("script", null, "var token='SECRET2'"), h("style", null, "p{}")),
    h("body", null,
      h("p", null, "Visible article text."),
      h("form", null,
        h("input", { type: "password", value: "SECRET3" }),
        h("input", { type: "hidden", name: "csrf", value: "SECRET4" }),
        h("input", { type: "text", value: "SECRET5", checked: "" }),
        h("input", { type: "submit", value: "Send" }),
        h("textarea", null, "SECRET6"),
        h("select", null, h("option", { selected: "", value: "a" }, "Option A"))),
      h("div", { contenteditable: "true" }, "SECRET7 draft"),
      h("div", { contenteditable: "false" }, "Kept text"),
      h("iframe", { src: "https://ads.example/" })));
}

test("clean_tree_removes_scripts_styles_frames_password_and_hidden_inputs", () => {
  const { page } = loadPage();
  const html = page.cleanTree(formPage()).outerHTML;
  for (const secret of ["SECRET1", "SECRET2", "SECRET3", "SECRET4", "SECRET5", "SECRET6", "SECRET7"]) {
    assert.equal(html.includes(secret), false, secret);
  }
  assert.equal(html.includes("<script"), false);
  assert.equal(html.includes("<iframe"), false);
});

test("clean_tree_keeps_page_text_and_button_labels", () => {
  const { page } = loadPage();
  const html = page.cleanTree(formPage()).outerHTML;
  assert.ok(html.includes("Visible article text."));
  assert.ok(html.includes('value="Send"'));
  assert.ok(html.includes("Kept text"));
  assert.ok(html.includes("Option A"));
  assert.equal(html.includes("selected"), false);
});

test("text_of_separates_blocks_by_blank_lines", () => {
  const { page } = loadPage();
  const tree = h("body", null, h("h1", null, "Title"), h("p", null, "One ", h("b", null, "bold"), " line."), h("p", null, "Two"));
  assert.equal(page.textOf(tree), "Title\n\nOne bold line.\n\nTwo");
});

test("truncate_utf8_cuts_on_a_character_boundary", () => {
  const { page } = loadPage();
  assert.deepEqual({ ...page.truncateUtf8("héllo", 100) }, { text: "héllo", truncated: false });
  const cut = page.truncateUtf8("aé€", 4); // a(1) é(2) €(3): 4 bytes cannot hold the €
  assert.equal(cut.text, "aé");
  assert.equal(cut.truncated, true);
});

test("small_pages_are_sent_as_html_and_huge_ones_as_text", () => {
  const { page } = loadPage();
  const small = page.choosePayload("<p>hi</p>", () => "hi", { maxHtmlBytes: 100, maxTextBytes: 100 });
  assert.equal(small.content_type, "html");
  const big = page.choosePayload("<p>" + "x".repeat(500) + "</p>", () => "y".repeat(300), { maxHtmlBytes: 100, maxTextBytes: 200 });
  assert.equal(big.content_type, "text");
  assert.equal(big.text.length, 200);
  assert.equal(big.truncated, true);
  assert.equal("html" in big, false);
});

test("extract_reads_title_and_language_from_a_cleaned_clone", () => {
  const { page } = loadPage();
  const root = formPage();
  const doc = { title: "Form", documentElement: { cloneNode: () => formPage(), getAttribute: (n) => root.getAttribute(n) } };
  const out = page.extract({ maxHtmlBytes: 100_000, maxTextBytes: 100_000 }, doc);
  assert.equal(out.content_type, "html");
  assert.equal(out.title, "Form");
  assert.equal(out.language, "en");
  assert.equal(out.html.includes("SECRET"), false);
});

function trackerWorld(visibility = []) {
  let now = 0;
  const doc = { visibilityState: "visible", focused: true, hasFocus() { return this.focused; }, addEventListener(name, fn) { this[`on${name}`] = fn; } };
  let tick = null;
  // The browser's record of the document's visibility since the navigation began.
  const performance = { getEntriesByType: (type) => (type === "visibility-state" ? visibility : []) };
  const loaded = loadPage({ setInterval: (fn) => { tick = fn; return 1; }, performance });
  const advance = (ms) => {
    for (let i = 0; i < ms / 1000; i += 1) {
      now += 1000;
      tick();
    }
  };
  return { ...loaded, doc, advance, clock: () => now, setNow: (t) => { now = t; } };
}

test("the_tracker_reports_reached_once_after_the_visible_dwell", () => {
  const world = trackerWorld();
  world.page.track("v1", 5000, 30_000, world.doc, world.clock);
  world.advance(6000);
  const reached = world.sent.filter((m) => m.reached);
  assert.equal(reached.length, 1);
  assert.equal(reached[0].visit_id, "v1");
  assert.equal(reached[0].visible_ms, 5000);
  world.advance(10_000);
  assert.equal(world.sent.filter((m) => m.reached).length, 1);
});

test("hidden_time_does_not_count_toward_the_dwell", () => {
  const world = trackerWorld();
  world.doc.visibilityState = "hidden";
  world.page.track("v1", 5000, 30_000, world.doc, world.clock);
  world.advance(20_000);
  assert.equal(world.sent.some((m) => m.reached), false);
  world.doc.visibilityState = "visible";
  world.doc.onvisibilitychange();
  world.advance(5000);
  assert.equal(world.sent.filter((m) => m.reached).length, 1);
});

test("visible_time_while_the_page_was_loading_counts_toward_the_dwell", () => {
  // Visible from the start, the script injected 4 s later (a slow stylesheet held the
  // parse): the 8.4 s in front are 8.4 s visible, not 4.4 s.
  const world = trackerWorld([{ name: "visible", startTime: 0 }]);
  world.setNow(4000);
  world.page.track("v1", 5000, 30_000, world.doc, world.clock);
  assert.equal(world.sent[0].visible_ms, 4000);
  assert.equal(world.sent[0].active_ms, 0, "focus before the script ran is not known");
  world.advance(1000);
  assert.equal(world.sent.filter((m) => m.reached).length, 1);
});

test("time_hidden_before_the_script_ran_does_not_count", () => {
  const visibility = [{ name: "hidden", startTime: 0 }, { name: "visible", startTime: 3000 }, { name: "hidden", startTime: 3500 }, { name: "visible", startTime: 6000 }];
  const world = trackerWorld(visibility);
  world.setNow(7000);
  world.page.track("v1", 5000, 30_000, world.doc, world.clock);
  assert.equal(world.sent[0].visible_ms, 1500);
  const { page } = world;
  assert.equal(page.visibleSinceStart({ getEntriesByType: () => visibility }, 3200), 200);
  assert.equal(page.visibleSinceStart({}, 5000), 0, "no record: nothing assumed");
});

test("an_spa_visit_counts_from_its_own_start", () => {
  const world = trackerWorld([{ name: "visible", startTime: 0 }]);
  world.page.track("v1", 60_000, 30_000, world.doc, world.clock);
  world.advance(10_000);
  world.page.track("v2", 60_000, 30_000, world.doc, world.clock);
  world.listeners.pagehide();
  assert.equal(world.sent[world.sent.length - 1].visible_ms, 0);
});

test("active_time_counts_only_visible_and_focused_time", () => {
  const world = trackerWorld();
  world.page.track("v1", 1000, 30_000, world.doc, world.clock);
  world.advance(3000);
  world.doc.focused = false;
  world.listeners.blur();
  world.advance(4000);
  world.listeners.pagehide();
  const last = world.sent[world.sent.length - 1];
  assert.equal(last.visible_ms, 7000);
  assert.equal(last.active_ms, 3000);
});

test("a_new_visit_returns_the_final_clocks_of_the_previous_one", () => {
  const world = trackerWorld();
  world.page.track("v1", 1000, 30_000, world.doc, world.clock);
  world.advance(2000);
  const previous = world.page.track("v2", 1000, 30_000, world.doc, world.clock);
  assert.deepEqual({ ...previous }, { visit_id: "v1", visible_ms: 2000, active_ms: 2000 });
  assert.equal(world.page.track("v2", 1000, 30_000, world.doc, world.clock), null, "same visit: no reset");
});

test("the_page_script_installs_itself_once", () => {
  const { context } = loadPage();
  const first = context.__backtrailPage;
  vm.runInContext(SOURCE, context);
  assert.equal(context.__backtrailPage, first);
});

// ------------------------------------------------------------ checkout pages

/** A document over a fake tree, with the two selectors extract() asks for. */
function docOf(tree) {
  const all = [];
  const walk = (node) => {
    if (node.nodeType !== 1) return;
    all.push(node);
    for (const child of node.children) walk(child);
  };
  walk(tree);
  const inputs = () => all.filter((n) => n.tagName === "INPUT");
  return {
    title: "Page",
    documentElement: { cloneNode: () => tree, getAttribute: (n) => tree.getAttribute(n) },
    querySelector(selector) {
      assert.equal(selector, 'input[type="password" i]');
      return inputs().find((n) => String(n.getAttribute("type") || "").toLowerCase() === "password") ?? null;
    },
    querySelectorAll(selector) {
      assert.equal(selector, "input");
      return inputs();
    },
  };
}

const CAPS = { maxHtmlBytes: 100_000, maxTextBytes: 100_000, skipPasswordPages: true, skipPaymentPages: true };
const pageWith = (...fields) => h("html", { lang: "en" }, h("body", null,
  h("h1", null, "Checkout"), h("p", null, "Pay for your order."), h("form", null, ...fields)));

test("a_page_holding_a_payment_card_field_is_not_extracted", () => {
  const { page } = loadPage();
  const cards = [
    [h("input", { autocomplete: "cc-number", name: "number" })],
    [h("input", { autocomplete: "billing cc-number" })],
    [h("input", { autocomplete: "CC-CSC", name: "x" })],
    [h("input", { autocomplete: "cc-exp" })],
    [h("input", { autocomplete: "cc-exp-month" }), h("input", { autocomplete: "cc-exp-year" })],
    [h("input", { inputmode: "numeric", name: "cardnumber" })],
    [h("input", { inputmode: "numeric", id: "card-number" })],
    [h("input", { inputmode: "numeric", name: "card_no" })],
    [h("input", { inputmode: "numeric", name: "ccNum" })],
    [h("input", { inputmode: "numeric", name: "cvv" })],
    [h("input", { inputmode: "NUMERIC", "aria-label": "Security code" })],
    [h("input", { inputmode: "numeric", placeholder: "Credit card" })],
  ];
  for (const fields of cards) {
    const doc = docOf(pageWith(h("input", { name: "email" }), ...fields));
    assert.equal(page.hasPaymentCardField(doc), true, JSON.stringify([...fields[0].attrs]));
    const out = JSON.parse(JSON.stringify(page.extract(CAPS, doc))); // from the vm's realm
    assert.deepEqual(out, { content_type: null, password_field: true, payment_card_field: true });
  }
});

test("documentation_and_forms_without_card_fields_are_extracted", () => {
  const { page } = loadPage();
  const kept = [
    // Documentation about checkout: the words, and example markup as text, but no field.
    [h("pre", null, '<input autocomplete="cc-number" inputmode="numeric" name="cardnumber">')],
    [h("input", { name: "q", type: "search" })],
    [h("input", { inputmode: "numeric", name: "quantity" })],
    [h("input", { inputmode: "numeric", name: "zip", autocomplete: "postal-code" })],
    [h("input", { name: "cardnumber" })], // not numeric: a name alone is no card field
    [h("input", { autocomplete: "cc-name" }), h("input", { autocomplete: "cc-type" })],
    [h("input", { inputmode: "numeric", name: "discount" })],
  ];
  for (const fields of kept) {
    const doc = docOf(pageWith(...fields));
    assert.equal(page.hasPaymentCardField(doc), false);
    const out = page.extract(CAPS, doc);
    assert.equal(out.content_type, "html");
    assert.ok(out.html.includes("Pay for your order."));
  }
});

test("the_password_setting_off_lets_a_card_page_be_extracted_without_its_values", () => {
  const { page } = loadPage();
  const doc = docOf(pageWith(h("input", { autocomplete: "cc-number", value: "4242424242424242" })));
  const out = page.extract({ ...CAPS, skipPasswordPages: false, skipPaymentPages: false }, doc);
  assert.equal(out.content_type, "html");
  assert.equal(out.html.includes("4242"), false);
});
