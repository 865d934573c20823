// Building the page: every value from the server becomes a text node (textContent), never
// markup, so a memory titled `<img onerror=…>` shows as those characters. Nothing here
// parses HTML.

const SVG = "http://www.w3.org/2000/svg";

// h("button", {class: "primary", onclick: fn, type: "button"}, "Save") → an element.
// Attributes are set with setAttribute (never `on…` strings); children are nodes or text.
export function h(tag, props = {}, ...children) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "text") {
      el.textContent = String(value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key.startsWith("on")) {
      throw new Error(`inline handler ${key} refused`);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

// A short message in the status region (read out by screen readers).
export function toast(message, kind = "info") {
  const box = $("#toast");
  const item = h("div", {class: `toast ${kind}`, role: kind === "error" ? "alert" : "status"},
    message);
  box.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 8000 : 3500);
}

export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

export function number(n, digits = 0) {
  return typeof n === "number" ? n.toLocaleString(undefined, {maximumFractionDigits: digits}) : "—";
}

// Any JSON value as nested definition lists: how responses of routes this page does not know
// in detail (links, graph, contradictions, savings) are shown, still as text only.
export function value(v, depth = 0) {
  if (v === null || v === undefined) return h("span", {class: "muted"}, "—");
  if (Array.isArray(v)) {
    if (!v.length) return h("span", {class: "muted"}, "none");
    if (v.every((x) => typeof x !== "object" || x === null)) return v.join(", ");
    return h("ol", {class: "values"}, v.map((x) => h("li", {}, value(x, depth + 1))));
  }
  if (typeof v === "object") {
    if (depth > 4) return JSON.stringify(v);
    return h("dl", {class: "values"}, Object.entries(v).map(([k, x]) => [
      h("dt", {}, k), h("dd", {}, value(x, depth + 1))]));
  }
  return String(v);
}

// A labelled form field; `input` is the control element.
export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h("div", {class: "field"}, h("label", {for: id}, label), input,
    hint ? h("small", {class: "muted"}, hint) : null);
}

export function select(name, options, current) {
  return h("select", {name}, options.map(([v, label]) =>
    h("option", {value: v, selected: v === current}, label)));
}

// Run `work` for `control` (a form or a button) one at a time: its buttons are disabled
// meanwhile, so a double click or a second Enter never sends the request twice.
export async function once(control, work) {
  if (control.dataset.busy) return undefined;
  control.dataset.busy = "1";
  const buttons = (control.matches("button") ? [control] : [...control.querySelectorAll("button")])
    .filter((b) => !b.disabled);
  const focused = document.activeElement;  // a button disabled under it drops it to the body
  for (const b of buttons) b.disabled = true;
  try {
    return await work();
  } finally {
    delete control.dataset.busy;
    for (const b of buttons) b.disabled = false;
    if (document.activeElement === document.body && focused?.isConnected) {
      focused.focus({preventScroll: true});
    }
  }
}

// An onclick handler that runs `work(event)` through once() on the clicked button.
export const action = (work) => (e) => once(e.currentTarget, () => work(e));

// The first press of a destructive button only arms it (its text asks again); a later press
// confirms — not a slip of a key, nor the second click of a double click.
export function armed(e, question) {
  const button = e.currentTarget;
  if (button.dataset.armed === "1" && e.detail < 2) return true;
  button.dataset.armed = "1";
  button.textContent = question;
  return false;
}

export function plural(n, one, many = `${one}s`) {
  return `${number(n)} ${n === 1 ? one : many}`;
}

export function spinner(text = "Loading…") {
  return h("p", {class: "muted", role: "status"}, text);
}

// `work()` fills `box`, a spinner shown meanwhile; when it fails the box says why, in the
// server's words (which field, what limit), rather than leaving the spinner turning.
export async function filling(box, work) {
  clear(box, spinner());
  try {
    await work();
  } catch (error) {
    clear(box, h("p", {class: "error", role: "alert"}, error.message));
  }
}
