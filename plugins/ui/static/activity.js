// Activity: the live event stream; for admins, the tokens, the seats and the audit trail,
// whose hash chain this page can verify itself (sha256 over each record, as the server's
// `neuralmind audit verify` does; docs/tier2.md).

import {api} from "./api.js";
import {action, armed, clear, field, filling, h, spinner, toast, value, when} from "./dom.js";

const SHOWN = 200;
const GENESIS = "0".repeat(64);
const FIELDS = ["seq", "at", "actor", "action", "project", "target", "request_id"];

export function render(root, ctx) {
  root.append(h("h1", {}, "Activity"));
  const filter = h("input", {type: "search", placeholder: "memory.  index.built  ask.", "aria-label":
    "Show only kinds starting with"});
  const pause = h("button", {type: "button", "aria-pressed": "false"}, "Pause");
  const body = h("tbody");
  let paused = false;
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "Resume" : "Pause";
    if (!paused) draw();
  });
  filter.addEventListener("input", draw);

  function row(ev) {
    const data = ev.data ? JSON.stringify(ev.data) : "";
    return h("tr", {}, h("td", {}, when(ev.at)), h("td", {}, h("code", {}, ev.kind)),
      h("td", {}, ev.project_id || "—"), h("td", {}, ev.actor || "—"),
      h("td", {class: "small"}, data.length > 160 ? `${data.slice(0, 159)}…` : data));
  }

  function draw() {
    const prefix = filter.value.trim();
    clear(body, ctx.recent.filter((ev) => !prefix || ev.kind.startsWith(prefix)).slice(0, SHOWN).map(row));
  }

  const onEvent = () => { if (!paused) draw(); };
  ctx.bus.addEventListener("event", onEvent);
  root.append(h("section", {"aria-labelledby": "live-title"},
    h("h2", {id: "live-title"}, "Live events"),
    h("div", {class: "inline"}, filter, pause),
    h("div", {class: "scroll"}, h("table", {class: "events"},
      h("thead", {}, h("tr", {}, ["When", "Kind", "Project", "Actor", "Data"].map((c) => h("th", {scope: "col"}, c)))),
      body)),
    h("p", {class: "muted small"}, "Events since this page was opened, newest first.")));
  draw();

  if (ctx.can("tokens.manage") && ctx.has("/v1/auth/tokens")) root.append(tokens());
  if (ctx.can("seats.read") && ctx.has("/v1/admin/seats")) root.append(seats());
  if (ctx.can("audit.read") && ctx.has("/v1/admin/audit")) root.append(audit());
  return {leave: () => ctx.bus.removeEventListener("event", onEvent)};
}

function tokens() {
  const box = h("div", {}, spinner());
  async function load() {
    const out = await api("GET", "/v1/auth/tokens");
    if (!out.items.length) return clear(box, h("p", {class: "muted"}, "No server-mode tokens."));
    clear(box, h("div", {class: "scroll"}, h("table", {},
      h("thead", {}, h("tr", {}, ["Id", "Actor", "Role", "Projects", "Created", "Expires", ""].map((c) =>
        h("th", {scope: "col"}, c)))),
      h("tbody", {}, out.items.map((t) => h("tr", {class: t.expired ? "muted" : ""},
        h("td", {}, h("code", {}, t.id)), h("td", {}, t.actor), h("td", {}, t.role),
        h("td", {}, Array.isArray(t.projects) ? t.projects.join(", ") : t.projects),
        h("td", {}, when(t.created_at)), h("td", {}, t.expired ? "expired" : when(t.expires_at)),
        h("td", {}, h("button", {type: "button", class: "danger", onclick: action(async (e) => {
          if (!armed(e, "Really revoke?")) return;
          await api("DELETE", `/v1/auth/tokens/${encodeURIComponent(t.id)}`);
          toast(`Revoked ${t.id} (${t.actor})`);
          load();
        })}, "Revoke"))))))));
  }
  load().catch((error) => clear(box, h("p", {class: "error"}, error.message)));
  return h("section", {}, h("h2", {}, "Tokens"), box);
}

function seats() {
  const box = h("div", {}, spinner());
  api("GET", "/v1/admin/seats").then((out) => clear(box, value(out)))
    .catch((error) => clear(box, h("p", {class: "error"}, error.message)));
  return h("section", {}, h("h2", {}, "Seats"), box);
}

function audit() {
  const inputs = {actor: h("input", {name: "actor"}), action: h("input", {name: "action",
    placeholder: "api.call or memory.*"}), project: h("input", {name: "project"})};
  const list = h("div");
  const verdict = h("p", {role: "status"});
  const cursors = [null];
  let at = 0;
  const form = h("form", {class: "inline"}, field("Actor", inputs.actor), field("Action", inputs.action),
    field("Project", inputs.project), h("button", {type: "submit"}, "Filter"),
    h("button", {type: "button", class: "primary", onclick: action(() => verify(verdict))}, "Verify chain"));
  form.addEventListener("submit", (e) => { e.preventDefault(); cursors.length = 1; at = 0; show(); });

  // a refused filter or page says why in the table's place; the old table does not stay
  const show = () => filling(list, load);

  async function load() {
    const params = {limit: 50, cursor: cursors[at]};
    for (const [k, el] of Object.entries(inputs)) if (el.value.trim()) params[k] = el.value.trim();
    const page = await api("GET", "/v1/admin/audit", {params});
    if (!page.items.length && at === 0) return clear(list, h("p", {class: "muted"}, "No records match."));
    clear(list, h("div", {class: "scroll"}, h("table", {class: "audit"},
      h("thead", {}, h("tr", {}, ["Seq", "When", "Actor", "Action", "Project", "Target", "Hash"].map((c) =>
        h("th", {scope: "col"}, c)))),
      h("tbody", {}, page.items.map((r) => h("tr", {}, h("td", {class: "num"}, r.seq),
        h("td", {}, when(r.at)), h("td", {}, r.actor || "—"), h("td", {}, h("code", {}, r.action)),
        h("td", {}, r.project || "—"), h("td", {class: "small"}, r.target || "—"),
        h("td", {}, h("code", {title: r.hash}, r.hash.slice(0, 12)))))))),
    h("div", {class: "pager"},
      h("button", {type: "button", disabled: at === 0, onclick: () => { at -= 1; show(); }}, "← Earlier"),
      h("button", {type: "button", disabled: !page.next_cursor, onclick: () => {
        cursors[at + 1] = page.next_cursor; at += 1; show();
      }}, "Later →")));
  }
  show();
  return h("section", {}, h("h2", {}, "Audit trail"), form, verdict, list);
}

// JSON as Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False).
function canonical(record) {
  return `{${FIELDS.slice().sort().map((k) => `${JSON.stringify(k)}:${JSON.stringify(record[k] ?? null)}`).join(",")}}`;
}

async function sha256(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// Walk the whole trail from the first record, page by page, checking every link.
async function verify(out) {
  out.className = "";
  out.textContent = "Verifying…";
  let prev = GENESIS;
  let expected = 1;
  let cursor = null;
  do {
    const page = await api("GET", "/v1/admin/audit", {params: {limit: 200, cursor}});
    for (const r of page.items) {
      const broken = r.seq !== expected ? `record ${expected} is missing or out of order`
        : r.prev_hash !== prev ? `record ${r.seq} does not follow record ${r.seq - 1}`
          : await sha256(prev + canonical(r)) !== r.hash ? `record ${r.seq} was edited` : null;
      if (broken) {
        out.className = "error";
        out.textContent = `The chain is broken: ${broken}.`;
        return;
      }
      prev = r.hash;
      expected += 1;
    }
    cursor = page.next_cursor;
  } while (cursor);
  out.className = "ok";
  out.textContent = `Verified ${expected - 1} records; head ${expected - 1}:${prev.slice(0, 16)}…`;
}
