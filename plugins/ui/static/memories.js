// Memories: the list with the API's filters and paging, search in three modes with scores, one
// record with its history as diffs, and the writes the token's role allows. Links, the graph
// and contradictions appear when the server's OpenAPI lists their routes.

import {api, download} from "./api.js";
import {changes} from "./diff.js";
import {action, armed, clear, field, filling, h, number, once, plural, select, spinner, toast, value,
  when} from "./dom.js";
import {graph} from "./graph.js";

const TYPES = ["ARCHITECTURE", "DEPENDENCY", "TEST", "REFACTOR", "BUGFIX", "CONFIG"];
const KINDS = ["decision", "fact", "preference", "procedure", "episode"];
const STATUSES = ["ACTIVE", "STALE", "INVALIDATED", "ARCHIVED", "SUPERSEDED", "MERGED", "ALL"];
const PAGE = 25;
const HISTORY = 200;  // events a page of history holds; "Later events" reads the next
const BASE = "/v1/projects/{project_id}/memories";
const LINKS = `${BASE}/{memory_id}/links`;
const GRAPH = `${BASE}/{memory_id}/graph`;
const CONTRADICTIONS = "/v1/projects/{project_id}/contradictions";
// the filters the API takes as lists (any of them): comma-separated here
const LISTED = new Set(["tag", "file", "kind"]);

const csv = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);
const lines = (text) => text.split("\n").map((x) => x.trim()).filter(Boolean);

// `rest`: [memory id] opens that record beside the list; the list keeps its search, filters
// and page when a record opens or closes (route())
export function render(root, ctx, [first]) {
  root.append(h("h1", {}, "Memories"));
  if (!ctx.project) {
    root.append(h("p", {class: "muted"}, "Select or register a project first."));
    return null;
  }
  const base = `/v1/projects/${ctx.project}/memories`;
  const writer = ctx.can("memories.write");
  const state = {cursors: [null], at: 0, search: null};
  let openId = first;
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
    kind: select("kind", [["", "any kind"], ...KINDS.map((k) => [k, k])], ""),
    tag: h("input", {name: "tag", placeholder: "tag"}),
    file: h("input", {name: "file", placeholder: "path/in/repo.py"}),
    author: h("input", {name: "author", placeholder: "author"})};
  const filterForm = h("form", {class: "inline filters"},
    field("Status", filters.status), field("Type", filters.type), field("Kind", filters.kind),
    field("Tag", filters.tag),
    field("File", filters.file), field("Author", filters.author),
    h("button", {type: "submit"}, "Filter"));
  filterForm.addEventListener("submit", (e) => { e.preventDefault(); state.cursors = [null]; state.at = 0; load(); });
  const chosen = () => Object.fromEntries(Object.entries(filters)
    .map(([k, el]) => [k, LISTED.has(k) ? csv(el.value) : el.value.trim()])
    .filter(([, v]) => v.length));

  const creating = writer ? h("button", {type: "button", class: "primary", onclick: () => create()},
    "New memory") : null;
  root.append(h("div", {class: "actions"}, creating,
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
          `${plural(out.results.length, "result")}, ${out.mode} search`));
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
        h("td", {}, h("a", {href: `#/memories/${encodeURIComponent(m.id)}`, dataset: {id: m.id}},
          m.title)),
        h("td", {}, h("span", {class: `badge ${(m.effective_status || m.status).toLowerCase()}`},
          m.effective_status || m.status)),
        h("td", {}, m.decision_type || "—"),
        h("td", {class: "num"}, scored ? Number(m.score).toPrecision(3) : when(m.updated_at)))))));
  }

  // -- one record ------------------------------------------------------------------------
  // a form being filled in, or an action armed (its question awaits the second click): a
  // live refresh drawing the record again would throw either away under the user's hand
  const editing = () => detailBox.querySelector("form, button[data-armed='1']") !== null;

  // the record's button labelled `label`: the record may have been drawn again since
  const button = (label) => [...detailBox.querySelectorAll(".actions button")]
    .find((b) => b.textContent === label);

  function placeholder() {
    clear(detailBox, h("p", {class: "muted"}, "Pick a memory to see it with its history."));
  }

  // the list's row of the open record is marked; the list itself is not drawn again
  function mark() {
    for (const link of listBox.querySelectorAll("tbody a[data-id]")) {
      link.closest("tr").classList.toggle("current", link.dataset.id === openId);
    }
  }

  // `refresh`: redrawn because an event said it changed — never under a form being filled in,
  // and the keyboard stays where it was; otherwise focus goes to the button labelled `focus`,
  // else to the record's heading, scrolled into view (on a phone the record is below the list).
  // The record drawn, or null.
  async function open(id, {refresh = false, focus = null} = {}) {
    const kept = refresh && detailBox.contains(document.activeElement)
      ? document.activeElement.textContent : null;
    if (!refresh) clear(detailBox, spinner());
    const url = `${base}/${encodeURIComponent(id)}`;
    let m;
    let events;
    try {
      [m, events] = await Promise.all([api("GET", url),
        api("GET", `${url}/history`, {params: {limit: HISTORY}})]);
    } catch (error) {
      if (!(refresh && editing())) clear(detailBox, h("p", {class: "error"}, error.message));
      return null;
    }
    if (stopped || id !== openId || (refresh && editing())) return null;
    const status = m.effective_status || m.status;
    const facts = [["Id", m.id], ["Status", status], ["Kind", m.kind], ["Type", m.decision_type],
      ["Confidence", number(m.confidence, 2)], ["Importance", number(m.importance, 2)],
      ["Pinned", m.pinned ? "yes" : "no"], ["Strength", number(m.strength, 2)],
      ["Author", m.author], ["Agent", m.agent], ["Session", m.session_id],
      ["Commit", m.commit_sha ? m.commit_sha.slice(0, 12) : null], ["Review by", m.review_by],
      ["Created", when(m.created_at)], ["Updated", when(m.updated_at)],
      ["Recalled", `${plural(m.access_count, "time")}${m.last_accessed_at
        ? `, last ${when(m.last_accessed_at)}` : ""}`]];
    const listed = [["Files", m.files_affected], ["Tags", m.tags], ["Evidence", m.evidence],
      ["Rejected alternatives", m.rejected_alternatives], ["Constraints", m.dependency_constraints]];
    const deleting = h("button", {type: "button", class: "danger", onclick: action(async (e) => {
      if (!armed(e, "Really delete?")) return;
      await api("DELETE", url);
      toast(`Deleted ${m.id}`);
      ctx.go("#/memories");
    })}, "Delete");
    const actions = h("div", {class: "actions"},
      writer ? h("button", {type: "button", onclick: () => edit(m, url)}, "Edit") : null,
      writer && m.status !== "INVALIDATED" ? h("button", {type: "button",
        onclick: () => invalidate(m, url)}, "Invalidate") : null,
      writer && status !== "ACTIVE" ? h("button", {type: "button", onclick: action(async () => {
        await api("POST", `${url}/restore`, {body: {}});
        toast(`${m.id} is ACTIVE again`);
        await open(id, {focus: "Invalidate"});
      })}, "Restore") : null,
      writer ? h("button", {type: "button", onclick: action(() => feedback(url, true))}, "Helpful") : null,
      writer ? h("button", {type: "button", onclick: action(() => feedback(url, false))},
        "Not helpful") : null,
      ctx.can("memories.delete") ? deleting : null);
    const heading = h("h2", {tabindex: "-1"}, m.title);
    clear(detailBox,
      h("div", {class: "detail-head"}, heading, h("a", {href: "#/memories", class: "close"}, "Close")),
      actions, h("div", {class: "form-slot"}),
      h("dl", {class: "facts"}, facts.filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("p", {class: "rationale"}, m.rationale),
      listed.filter(([, v]) => v && v.length).map(([k, v]) => [h("h3", {}, k),
        h("ul", {}, v.map((x) => h("li", {}, x)))]),
      h("h3", {}, "History"), history(url, events),
      extras(m));
    if (refresh) button(kept)?.focus({preventScroll: true});
    else (button(focus) || heading).focus();  // scrolled into view when it is not
    return m;
  }

  // oldest first, a page at a time: "Later events" reads on until the newest
  function history(url, first) {
    if (!first.items.length) return h("p", {class: "muted"}, "No events recorded.");
    const list = h("ol", {class: "history"});
    let cursor = null;
    const more = h("button", {type: "button", onclick: action(async () => {
      add(await api("GET", `${url}/history`, {params: {limit: HISTORY, cursor}}));
    })}, "Later events");
    function add(page) {
      list.append(...page.items.map((ev) => h("li", {},
        h("div", {}, h("strong", {}, ev.kind), ` ${when(ev.at)} by ${ev.actor || "?"}`,
          ev.note ? h("span", {class: "muted"}, ` — ${ev.note}`) : null),
        Object.keys(ev.changes || {}).length ? changes(ev.changes) : null)));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    }
    add(first);
    return [list, more];
  }

  function extras(m) {
    const box = h("div");
    const id = encodeURIComponent(m.id);
    const parts = [];
    if (ctx.has(LINKS)) parts.push(["Links", `${base}/${id}/links`, {}, value]);
    if (ctx.has(GRAPH)) parts.push(["Graph", `${base}/${id}/graph`, {}, graph]);
    if (ctx.has(CONTRADICTIONS)) {  // this record's, not the project's
      parts.push(["Contradictions", CONTRADICTIONS.replace("{project_id}", ctx.project),
        {memory_id: m.id}, (out) => value(out.items)]);
    }
    for (const [title, url, params, show] of parts) {
      const slot = h("div", {}, spinner());
      box.append(h("h3", {}, title), slot);
      api("GET", url, {params}).then((out) => clear(slot, show(out)))
        .catch((error) => clear(slot, h("p", {class: "muted"}, error.message)));
    }
    return box;
  }

  function slot() {
    return clear(detailBox.querySelector(".form-slot") || detailBox);
  }

  // A form sends once at a time (a double click or a second Enter sends nothing twice).
  // Cancel or Escape closes it and `closed()` puts the keyboard back where it was.
  function form(title, fields, submit, label, closed) {
    const close = () => {
      f.remove();
      closed();
    };
    const f = h("form", {class: "card"}, h("h3", {}, title), fields,
      h("div", {class: "actions"}, h("button", {type: "submit", class: "primary"}, label),
        h("button", {type: "button", onclick: close}, "Cancel")));
    f.addEventListener("keydown", (e) => {
      if (e.key === "Escape") close();
    });
    f.addEventListener("submit", (e) => {
      e.preventDefault();
      once(f, async () => {
        try {
          await submit();
          f.remove();
        } catch (error) {
          toast(error.message, "error");  // the fields refused are named in it already
        }
      });
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
    }, "Create", () => {  // the panel shows again what it showed before
      if (openId) open(openId, {refresh: true});
      else placeholder();
      creating.focus();
    });
    clear(detailBox, f);
    el.title.focus();
  }

  // `typed`: the fields a refused save had changed (values by name), filled in again over the
  // record as it is now, so nothing typed is lost, nothing of the other write is undone by the
  // fields left alone, and saving again is a decision
  function edit(m, url, typed = null) {
    // required: an emptied field was sent as Number("") — a confidence of 0, saved unasked;
    // any step: a confidence set through the API (0.87) must not block saving other fields
    const el = {rationale: h("textarea", {rows: 5}), confidence: h("input", {type: "number",
      min: 0, max: 1, step: "any", value: m.confidence, required: true}),
    tags: h("input", {value: m.tags.join(", ")}),
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
      const body = {rationale: el.rationale.value, tags: csv(el.tags.value),
        files_affected: csv(el.files.value), evidence_append: lines(el.evidence.value)};
      if (el.confidence.value !== shown.confidence) body.confidence = Number(el.confidence.value);
      // only a changed date: the one shown may have passed (the record reads STALE), and the
      // server takes it back only as the record's own; an emptied field clears it
      if (el.review.value !== shown.review) body.review_by = el.review.value || null;
      try {
        await api("PATCH", url, {body, headers: {"If-Match": m.updated_at}});
      } catch (error) {
        if (error.status !== 412) throw error;
        const kept = Object.fromEntries(Object.entries(values()).filter(([name, text]) =>
          text !== shown[name]));
        const now = await open(m.id, {focus: "Edit"});  // null: it could not be read again
        if (now) edit(now, url, kept);
        toast(now ? "Someone changed it meanwhile: shown as it is now, your edit kept to save again."
          : "Someone changed it meanwhile, and it could not be read again.", "error");
        return;
      }
      toast(`Saved ${m.id}`);
      await open(m.id, {focus: "Edit"});
    }, "Save", () => button("Edit")?.focus()));
    el.rationale.focus();
  }

  function invalidate(m, url) {
    const reason = h("input", {required: true, placeholder: "why it no longer holds"});
    slot().append(form(`Invalidate ${m.id}`, [field("Reason", reason)], async () => {
      await api("POST", `${url}/invalidate`, {body: {reason: reason.value}});
      toast(`${m.id} is INVALIDATED`);
      await open(m.id, {focus: "Restore"});
    }, "Invalidate", () => button("Invalidate")?.focus()));
    reason.focus();
  }

  async function feedback(url, helpful) {
    const m = await api("POST", `${url}/feedback`, {body: {helpful}});
    toast(`Confidence now ${number(m.confidence, 2)}`);
    await open(m.id, {focus: helpful ? "Helpful" : "Not helpful"});
  }

  // a new address within the page: open or close a record, the list left as it is
  function route([id]) {
    const was = openId;
    openId = id;
    mark();
    if (id) return open(id);
    placeholder();
    listBox.querySelector(`a[data-id="${CSS.escape(was || "")}"]`)?.focus();
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
      if (openId && !editing() && (ev.data?.id === openId || !ev.data?.id)) {
        open(openId, {refresh: true});
      }
    }, 250);
  };
  ctx.bus.addEventListener("event", onEvent);
  load();
  if (openId) open(openId);
  else placeholder();
  return {
    route,
    leave() {
      stopped = true;
      clearTimeout(timer);
      ctx.bus.removeEventListener("event", onEvent);
    },
  };
}
