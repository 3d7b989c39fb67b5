// DOM helpers for the extension's pages (no browser APIs, so Node tests can import them).

export function $(selector) {
  return document.querySelector(selector);
}

/** Create an element: el("a", {href, className}, "text", child…). Text is never parsed as HTML. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "className") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}
