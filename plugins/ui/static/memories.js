// Memories: the list with the API's filters and paging, search in three modes with scores, one
// record with its history as diffs, and the writes the token's role allows. Links, the graph
// and contradictions appear when the server's OpenAPI lists their routes.

import {api, download} from "./api.js";
import {changes} from "./diff.js";
import {clear, field, filling, h, number, select, spinner, toast, value, when} from "./dom.js";
import {graph} from "./graph.js";

const TYPES = ["ARCHITECTURE", "DEPENDENCY", "TEST", "REFACTOR", "BUGFIX", "CONFIG"];
const STATUSES = ["ACTIVE", "STALE", "INVALIDATED", "ARCHIVED", "SUPERSEDED", "MERGED", "ALL"];
const PAGE = 25;
const BASE = "/v1/projects/{project_id}/memories";
const LINKS = `${BASE}/{memory_id}/links`;
const GRAPH = `${BASE}/{memory_id}/graph`;
const CONTRADICTIONS = ["/v1/projects/{project_id}/contradictions", `${BASE}/contradictions`];

const csv = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);
const lines = (text) => text.split("\n").map((x) => x.trim()).filter(Boolean);

export function render(root, ctx, [openId]) {
  root.append(h("h1", {}, "Memories"));
  if (!ctx.project) {
    root.append(h("p", {class: "muted"}, "Select or register a project first."));
    return null;
  }
  const base = `/v1/projects/${ctx.project}/memories`;
  const writer = ctx.can("memories.write");
  const state = {cursors: [null], at: 0, search: null};
  const listBox = h("div", {class: "list", "aria-live": "polite"});
  const detailBox = h("aside", {class: "detail", "aria-label": "Memory"});
  let stopped = false;

  // -- toolbar, search and filters -----------------------------------------------------
  const q = h("input", {type: "search", name: "query", placeholder: "Search memories…",
    "aria-label": "Search memories"});
  const modes = h("fieldset", {class: "modes"}, h("legend", {}, "Mode"),
    ["hybrid", "keyword", "semantic"].map((m, i) => h("label", {},
      h("input", {type: "radio", name: "mode", value: m, checked: i === 0}), ` ${m}`)));
  const searchForm = h("form", {class: "inline", role: "search"}, q, modes,
    h("button", {type: "submit", class: "primary"}, "Search"),
    h("button", {type: "button", onclick: () => { q.value = ""; state.search = null; load(); }},
      "Clear"));
  searchForm.addEventListener("submit", (e) => {
    e.preventDefault();
    state.search = q.value.trim() ? {query: q.value.trim(),
      mode: searchForm.querySelector("input[name=mode]:checked").value} : null;
    load();
  });
  const filters = {status: select("status", STATUSES.map((s) => [s, s]), "ACTIVE"),
    type: select("type", [["", "any type"], ...TYPES.map((t) => [t, t])], ""),
    tag: h("input", {name: "tag", placeholder: "tag"}),
    file: h("input", {name: "file", placeholder: "path/in/repo.py"}),
    author: h("input", {name: "author", placeholder: "author"})};
  const filterForm = h("form", {class: "inline filters"},
    field("Status", filters.status), field("Type", filters.type), field("Tag", filters.tag),
    field("File", filters.file), field("Author", filters.author),
    h("button", {type: "submit"}, "Filter"));
  filterForm.addEventListener("submit", (e) => { e.preventDefault(); state.cursors = [null]; state.at = 0; load(); });
  const chosen = () => Object.fromEntries(Object.entries(filters)
    .map(([k, el]) => [k, el.value.trim()]).filter(([, v]) => v));

  root.append(h("div", {class: "actions"},
    writer ? h("button", {type: "button", class: "primary", onclick: () => create()}, "New memory") : null,
    h("button", {type: "button", onclick: () => download(`${base}/export`,
      `${ctx.project}-memories.jsonl`)}, "Export JSONL")),
  searchForm, h("details", {class: "filters", open: matchMedia("(min-width: 761px)").matches},
    h("summary", {}, "Filters"), filterForm),
  h("div", {class: "split"}, listBox, detailBox));

  // -- the list --------------------------------------------------------------------------
  function load() {
    return filling(listBox, list);
  }

  async function list() {
    if (state.search) {
      const out = await api("POST", `${base}/search`, {body: {...state.search, ...chosen(), limit: PAGE}});
      if (stopped) return;
      return clear(listBox, out.notice ? h("p", {class: "notice"}, out.notice) : null,
        rows(out.results, true), h("p", {class: "muted small"},
          `${out.results.length} results, ${out.mode} search`));
    }
    const page = await api("GET", base, {params: {...chosen(), limit: PAGE, cursor: state.cursors[state.at]}});
    if (stopped) return;
    const pager = h("div", {class: "pager"},
      h("button", {type: "button", disabled: state.at === 0,
        onclick: () => { state.at -= 1; load(); }}, "← Newer"),
      h("span", {class: "muted"}, `page ${state.at + 1}`),
      h("button", {type: "button", disabled: !page.next_cursor, onclick: () => {
        state.cursors[state.at + 1] = page.next_cursor; state.at += 1; load();
      }}, "Older →"));
    clear(listBox, rows(page.items, false), pager);
  }

  function rows(items, scored) {
    if (!items.length) return h("p", {class: "muted"}, "No memories match.");
    const cols = ["Title", "Status", "Type", scored ? "Score" : "Updated"];
    return h("div", {class: "scroll"}, h("table", {class: "memories"},
      h("thead", {}, h("tr", {}, cols.map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, items.map((m) => h("tr", {class: m.id === openId ? "current" : ""},
        h("td", {}, h("a", {href: `#/memories/${encodeURIComponent(m.id)}`}, m.title)),
        h("td", {}, h("span", {class: `badge ${(m.effective_status || m.status).toLowerCase()}`},
          m.effective_status || m.status)),
        h("td", {}, m.decision_type || "—"),
        h("td", {class: "num"}, scored ? Number(m.score).toPrecision(3) : when(m.updated_at)))))));
  }

  // -- one record ------------------------------------------------------------------------
  const editing = () => detailBox.querySelector("form") !== null;  // a form being filled in

  // `refresh`: redrawn because an event said it changed — never under a form being filled in;
  // the record drawn, or null
  async function open(id, refresh = false) {
    if (!refresh) clear(detailBox, spinner());
    const url = `${base}/${encodeURIComponent(id)}`;
    let m;
    let history;
    try {
      [m, history] = await Promise.all([api("GET", url), api("GET", `${url}/history`, {params: {limit: 200}})]);
    } catch (error) {
      if (!(refresh && editing())) clear(detailBox, h("p", {class: "error"}, error.message));
      return null;
    }
    if (stopped || (refresh && editing())) return null;
    const status = m.effective_status || m.status;
    const facts = [["Id", m.id], ["Status", status], ["Type", m.decision_type],
      ["Confidence", number(m.confidence, 2)], ["Author", m.author], ["Agent", m.agent],
      ["Commit", m.commit_sha ? m.commit_sha.slice(0, 12) : null], ["Review by", m.review_by],
      ["Created", when(m.created_at)], ["Updated", when(m.updated_at)]];
    const listed = [["Files", m.files_affected], ["Tags", m.tags], ["Evidence", m.evidence],
      ["Rejected alternatives", m.rejected_alternatives], ["Constraints", m.dependency_constraints]];
    const deleting = h("button", {type: "button", class: "danger", onclick: async (e) => {
      if (e.target.dataset.armed !== "1") {  // two steps: a slip of a key never deletes
        e.target.dataset.armed = "1";
        e.target.textContent = "Really delete?";
        return;
      }
      await api("DELETE", url);
      toast(`Deleted ${m.id}`);
      ctx.go("#/memories");
    }}, "Delete");
    const actions = h("div", {class: "actions"},
      writer ? h("button", {type: "button", onclick: () => edit(m, url)}, "Edit") : null,
      writer && m.status !== "INVALIDATED" ? h("button", {type: "button",
        onclick: () => invalidate(m, url)}, "Invalidate") : null,
      writer && status !== "ACTIVE" ? h("button", {type: "button", onclick: async () => {
        await api("POST", `${url}/restore`, {body: {}});
        toast(`${m.id} is ACTIVE again`);
        open(id);
      }}, "Restore") : null,
      writer ? h("button", {type: "button", onclick: () => feedback(url, true)}, "Helpful") : null,
      writer ? h("button", {type: "button", onclick: () => feedback(url, false)}, "Not helpful") : null,
      ctx.can("memories.delete") ? deleting : null);
    clear(detailBox,
      h("div", {class: "detail-head"}, h("h2", {}, m.title),
        h("a", {href: "#/memories", class: "close"}, "Close")),
      actions, h("div", {class: "form-slot"}),
      h("dl", {class: "facts"}, facts.filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("p", {class: "rationale"}, m.rationale),
      listed.filter(([, v]) => v && v.length).map(([k, v]) => [h("h3", {}, k),
        h("ul", {}, v.map((x) => h("li", {}, x)))]),
      h("h3", {}, "History"),
      h("ol", {class: "history"}, history.items.map((ev) => h("li", {},
        h("div", {}, h("strong", {}, ev.kind), ` ${when(ev.at)} by ${ev.actor || "?"}`,
          ev.note ? h("span", {class: "muted"}, ` — ${ev.note}`) : null),
        Object.keys(ev.changes || {}).length ? changes(ev.changes) : null))),
      extras(m));
    return m;
  }

  function extras(m) {
    const box = h("div");
    const id = encodeURIComponent(m.id);
    const parts = [];
    if (ctx.has(LINKS)) parts.push(["Links", `${base}/${id}/links`, value]);
    if (ctx.has(GRAPH)) parts.push(["Graph", `${base}/${id}/graph`, graph]);
    const contra = CONTRADICTIONS.find((p) => ctx.has(p));
    if (contra) parts.push(["Contradictions", contra.replace("{project_id}", ctx.project), value]);
    for (const [title, url, show] of parts) {
      const slot = h("div", {}, spinner());
      box.append(h("h3", {}, title), slot);
      api("GET", url).then((out) => clear(slot, show(out)))
        .catch((error) => clear(slot, h("p", {class: "muted"}, error.message)));
    }
    return box;
  }

  function slot() {
    return clear(detailBox.querySelector(".form-slot") || detailBox);
  }

  function form(title, fields, submit, label) {
    const f = h("form", {class: "card"}, h("h3", {}, title), fields,
      h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, label),
        h("button", {type: "button", onclick: () => f.remove()}, "Cancel")));
    f.addEventListener("keydown", (e) => {  // Escape cancels, as the Cancel button does
      if (e.key === "Escape") f.remove();
    });
    f.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        await submit();
        f.remove();
      } catch (error) {
        const where = (error.details?.errors || []).map((x) => `${x.loc.slice(1).join(".")}: ${x.msg}`);
        toast([error.message, ...where].join(" — "), "error");
      }
    });
    return f;
  }

  function create() {
    const el = {title: h("input", {required: true, maxlength: 300}),
      rationale: h("textarea", {required: true, rows: 4}),
      type: select("decision_type", TYPES.map((t) => [t, t]), "ARCHITECTURE"),
      tags: h("input", {placeholder: "sqlite, storage"}),
      files: h("input", {placeholder: "src/store.py, src/db.py"})};
    const f = form("New memory", [field("Title", el.title), field("Rationale", el.rationale),
      field("Type", el.type), field("Tags", el.tags, "comma-separated"),
      field("Files affected", el.files, "comma-separated")], async () => {
      const made = await api("POST", base, {body: {title: el.title.value, rationale: el.rationale.value,
        decision_type: el.type.value, tags: csv(el.tags.value), files_affected: csv(el.files.value)}});
      toast(`Remembered ${made.id}`);
      ctx.go(`#/memories/${encodeURIComponent(made.id)}`);
    }, "Create");
    clear(detailBox, f);
    el.title.focus();
  }

  // `typed`: the fields a refused save had changed (values by name), filled in again over the
  // record as it is now, so nothing typed is lost, nothing of the other write is undone by the
  // fields left alone, and saving again is a decision
  function edit(m, url, typed = null) {
    // required: an emptied field was sent as Number("") — a confidence of 0, saved unasked
    const el = {rationale: h("textarea", {rows: 5}), confidence: h("input", {type: "number",
      min: 0, max: 1, step: 0.05, value: m.confidence, required: true}), tags: h("input", {value: m.tags.join(", ")}),
    files: h("input", {value: m.files_affected.join(", ")}),
    review: h("input", {type: "date", value: m.review_by || ""}),
    evidence: h("textarea", {rows: 2, placeholder: "one per line"})};
    el.rationale.value = m.rationale;
    const values = () => Object.fromEntries(Object.entries(el).map(([name, e]) => [name, e.value]));
    const shown = values();
    for (const [name, text] of Object.entries(typed || {})) el[name].value = text;
    slot().append(form(`Edit ${m.id}`, [field("Rationale", el.rationale),
      field("Confidence", el.confidence), field("Tags", el.tags, "comma-separated"),
      field("Files affected", el.files, "comma-separated"), field("Review by", el.review),
      field("Add evidence", el.evidence)], async () => {
      const body = {rationale: el.rationale.value, confidence: Number(el.confidence.value),
        tags: csv(el.tags.value), files_affected: csv(el.files.value),
        evidence_append: lines(el.evidence.value)};
      // only a changed date: the one shown may have passed (the record reads STALE), and the
      // server takes it back only as the record's own; an emptied field clears it
      if (el.review.value !== shown.review) body.review_by = el.review.value || null;
      try {
        await api("PATCH", url, {body, headers: {"If-Match": m.updated_at}});
      } catch (error) {
        if (error.status !== 412) throw error;
        const kept = Object.fromEntries(Object.entries(values()).filter(([name, text]) =>
          text !== shown[name]));
        const now = await open(m.id);  // null: it could not be read again (its error shown)
        if (now) edit(now, url, kept);
        toast(now ? "Someone changed it meanwhile: shown as it is now, your edit kept to save again."
          : "Someone changed it meanwhile, and it could not be read again.", "error");
        return;
      }
      toast(`Saved ${m.id}`);
      open(m.id);
    }, "Save"));
    el.rationale.focus();
  }

  function invalidate(m, url) {
    const reason = h("input", {required: true, placeholder: "why it no longer holds"});
    slot().append(form(`Invalidate ${m.id}`, [field("Reason", reason)], async () => {
      await api("POST", `${url}/invalidate`, {body: {reason: reason.value}});
      toast(`${m.id} is INVALIDATED`);
      open(m.id);
    }, "Invalidate"));
    reason.focus();
  }

  async function feedback(url, helpful) {
    const m = await api("POST", `${url}/feedback`, {body: {helpful}});
    toast(`Confidence now ${number(m.confidence, 2)}`);
    open(m.id);
  }

  // -- live ------------------------------------------------------------------------------
  let timer = null;
  const onEvent = (e) => {
    const ev = e.detail;
    if (!ev.kind.startsWith("memory.") || ev.project_id !== ctx.project) return;
    clearTimeout(timer);
    timer = setTimeout(() => {  // a batch is many events: reload once
      if (stopped) return;
      load();
      if (openId && !editing() && (ev.data?.id === openId || !ev.data?.id)) open(openId, true);
    }, 250);
  };
  ctx.bus.addEventListener("event", onEvent);
  load();
  if (openId) open(openId);
  else detailBox.append(h("p", {class: "muted"}, "Pick a memory to see it with its history."));
  return () => {
    stopped = true;
    clearTimeout(timer);
    ctx.bus.removeEventListener("event", onEvent);
  };
}
