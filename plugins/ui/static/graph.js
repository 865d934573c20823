// A memory's graph (nodes and typed edges) drawn as SVG: nodes on a circle, the record asked
// for in the middle. Labels are SVG text nodes. A shape this does not know is shown as values.

import {h, value} from "./dom.js";

const SIZE = 320;
const end = (e, names) => names.map((n) => e[n]).find((x) => x !== undefined && x !== null);

export function graph(out) {
  const nodes = Array.isArray(out?.nodes) ? out.nodes : null;
  const edges = Array.isArray(out?.edges) ? out.edges : null;
  if (!nodes || !edges || !nodes.length) return value(out);
  const centre = SIZE / 2;
  const ring = SIZE / 2 - 50;
  const at = new Map();
  nodes.forEach((n, i) => {
    const id = String(n.id ?? i);
    const angle = (2 * Math.PI * (i - 1)) / Math.max(1, nodes.length - 1);
    at.set(id, i === 0 ? [centre, centre]
      : [centre + ring * Math.cos(angle), centre + ring * Math.sin(angle)]);
  });
  const svg = h("svg:svg", {viewBox: `0 0 ${SIZE} ${SIZE}`, class: "graph", role: "img",
    "aria-label": `${nodes.length} records, ${edges.length} links`});
  for (const e of edges) {
    const a = at.get(String(end(e, ["source", "from", "src"])));
    const b = at.get(String(end(e, ["target", "to", "dst"])));
    if (!a || !b) continue;
    svg.append(h("svg:line", {x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: "edge"}),
      h("svg:text", {x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2 - 3, class: "edge-label"},
        String(end(e, ["type", "kind", "label"]) ?? "")));
  }
  nodes.forEach((n, i) => {
    const [x, y] = at.get(String(n.id ?? i));
    const label = String(n.title ?? n.label ?? n.id ?? "");
    svg.append(h("svg:circle", {cx: x, cy: y, r: i === 0 ? 9 : 6, class: i === 0 ? "node root" : "node"}),
      h("svg:text", {x, y: y + 20, class: "node-label"},
        label.length > 28 ? `${label.slice(0, 27)}…` : label));
  });
  return h("figure", {class: "graph"}, svg, h("figcaption", {}, h("details", {},
    h("summary", {}, "As data"), value(out))));
}
