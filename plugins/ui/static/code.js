// Code: search the index, ask it for a question's context with the L0–L3 layers and their
// token counts, and open a hit at its file and line.

import {api} from "./api.js";
import {clear, field, filling, h, number, once, select} from "./dom.js";

// `rest`: ["open", file, line] shows that file; the results stay above it, also after Back
export function render(root, ctx, rest) {
  root.append(h("h1", {}, "Code"));
  if (!ctx.project) {
    root.append(h("p", {class: "muted"}, "Select or register a project first."));
    return null;
  }
  const base = `/v1/projects/${ctx.project}`;
  const results = h("div", {"aria-live": "polite"});
  const viewer = h("section", {class: "viewer"});

  const query = h("input", {type: "search", required: true, placeholder: "open the database"});
  const mode = select("mode", [["hybrid", "hybrid"], ["keyword", "keyword"], ["semantic", "semantic"]], "hybrid");
  const kind = select("file_type", [["", "any file"], ["code", "code"], ["docs", "docs"], ["config", "config"]], "");
  const searchForm = h("form", {class: "inline", role: "search"}, field("Search symbols", query),
    field("Mode", mode), field("Files", kind), h("button", {type: "submit", class: "primary"}, "Search"));
  searchForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = {query: query.value, mode: mode.value, n: 20};
    if (kind.value) body.file_type = kind.value;
    return once(searchForm, () => filling(results, async () => {
      const out = await api("POST", `${base}/search`, {body});
      clear(results, out.notice ? h("p", {class: "notice"}, out.notice) : null, hits(out.results));
    }));
  });

  const question = h("input", {required: true, placeholder: "how are prices rounded?"});
  const budget = h("input", {type: "number", min: 256, max: 200000, step: 1, value: 4000});
  const queryForm = h("form", {class: "inline"}, field("Context for a question", question),
    field("Budget (tokens)", budget), h("button", {type: "submit", class: "primary"}, "Query"));
  queryForm.addEventListener("submit", (e) => {
    e.preventDefault();
    return once(queryForm, () => filling(results, async () => {
      const out = await api("POST", `${base}/query`, {body: {question: question.value,
        context_budget: Number(budget.value), trace: true}});
      clear(results, context(out));
    }));
  });

  function hits(items) {
    if (!items.length) return h("p", {class: "muted"}, "No symbols match.");
    return h("div", {class: "scroll"}, h("table", {},
      h("thead", {}, h("tr", {}, ["Score", "Where", "Symbol", "Kind"].map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, items.map((hit) => h("tr", {},
        h("td", {class: "num"}, number(hit.score, 3)),
        h("td", {}, h("a", {href: codeLink(hit.source_file, hit.line)}, `${hit.source_file}:${hit.line}`)),
        h("td", {}, h("code", {}, hit.label)), h("td", {}, hit.kind))))));
  }

  function context(out) {
    const t = out.tokens;
    const layers = [["L0", "project", t.l0], ["L1", "layout", t.l1], ["L2", "related", t.l2],
      ["L3", "search results", t.l3]];
    return [h("div", {class: "scroll"}, h("table", {class: "tokens"},
      h("caption", {}, `${number(t.total)} tokens (reduction ${number(out.reduction_ratio, 1)}×), `
        + `${out.search_hits} hits`),
      h("thead", {}, h("tr", {}, ["Layer", "", "Tokens", "Used"].map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, layers.map(([name, about, n]) => h("tr", {},
        h("th", {scope: "row"}, name), h("td", {}, about), h("td", {class: "num"}, number(n)),
        h("td", {}, out.layers_used.includes(name) ? "yes" : "—")))))),
    (out.trace?.hits || []).length ? h("p", {class: "small"}, "Hits: ", out.trace.hits.map((hit, i) =>
      [i ? ", " : "", h("a", {href: codeLink(hit.source_file, hit.line)}, `${hit.source_file}:${hit.line}`)])) : null,
    h("pre", {class: "context"}, out.context)];
  }

  function show(file, at) {
    return filling(viewer, async () => draw(await api("GET", `${base}/documents`,
      {params: {path: file}}), Number(at) || 1));
  }

  function draw(doc, target) {
    const lines = doc.text.split("\n");
    const list = h("ol", {class: "source", "aria-label": `${doc.path}, ${lines.length} lines`},
      lines.map((text, i) => h("li", {id: `L${i + 1}`, class: i + 1 === target ? "target" : "",
        tabindex: i + 1 === target ? "-1" : null}, text || " ")));
    clear(viewer, h("h2", {}, `${doc.path}:${target}`),
      h("p", {class: "muted small"}, `${doc.language}, ${number(doc.lines)} lines`
        + (doc.stale ? " — changed on disk since it was indexed" : "")), list);
    const shown = list.querySelector(".target");
    if (shown) {
      shown.scrollIntoView({block: "center"});
      shown.focus({preventScroll: true});
    }
  }

  function route([action, path, line]) {
    if (action === "open" && path) show(path, line);
    else clear(viewer);
  }

  root.append(searchForm, queryForm, results, viewer);
  route(rest);
  return {route};
}

// The hash that opens `file` at `line` on this page.
export function codeLink(file, line) {
  return `#/code/open/${encodeURIComponent(file)}/${line}`;
}
