// A memory's history shown as diffs: changed text word by word, changed lists item by item.
// History events carry `changes: {field: [before, after]}` (docs/memory.md).

import {h} from "./dom.js";

const MAX_CELLS = 250000;  // beyond this the LCS table costs too much: show before and after

// Word-level diff of two strings: [["=", text] | ["-", text] | ["+", text]].
export function words(before, after) {
  const a = String(before ?? "").split(/(\s+)/);
  const b = String(after ?? "").split(/(\s+)/);
  if (a.length * b.length > MAX_CELLS) return [["-", a.join("")], ["+", b.join("")]];
  const lcs = Array.from({length: a.length + 1}, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  const push = (op, text) => {
    if (out.length && out[out.length - 1][0] === op) out[out.length - 1][1] += text;
    else out.push([op, text]);
  };
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) { push("=", a[i]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) push("-", a[i++]);
    else push("+", b[j++]);
  }
  while (i < a.length) push("-", a[i++]);
  while (j < b.length) push("+", b[j++]);
  return out;
}

function textDiff(before, after) {
  return h("div", {class: "diff"}, words(before, after).map(([op, text]) =>
    op === "=" ? text : h(op === "-" ? "del" : "ins", {}, text)));
}

function listDiff(before, after) {
  const was = new Set(before || []);
  const now = new Set(after || []);
  const rows = [...now].filter((x) => !was.has(x)).map((x) => h("li", {}, h("ins", {}, `+ ${x}`)))
    .concat([...was].filter((x) => !now.has(x)).map((x) => h("li", {}, h("del", {}, `− ${x}`))));
  return h("ul", {class: "diff"}, rows.length ? rows : h("li", {class: "muted"}, "reordered"));
}

// One history event's changes, field by field.
export function changes(changed) {
  return h("dl", {class: "changes"}, Object.entries(changed || {}).map(([name, pair]) => {
    const [before, after] = Array.isArray(pair) && pair.length === 2 ? pair : [null, pair];
    const view = Array.isArray(before) || Array.isArray(after) ? listDiff(before, after)
      : textDiff(before, after);
    return [h("dt", {}, name), h("dd", {}, view)];
  }));
}
