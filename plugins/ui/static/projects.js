// Projects: what is registered, each index's state and numbers, a build with its progress
// (the job polled, `index.built` heard on the event stream), savings when the server has them.

import {api} from "./api.js";
import {action, clear, field, h, number, once, spinner, toast, value, when} from "./dom.js";

const SAVINGS = "/v1/projects/{project_id}/savings";
const POLL_MS = 300;

export function render(root, ctx) {
  const list = h("div");
  const detail = h("section", {"aria-live": "polite"});
  root.append(h("h1", {}, "Projects"), list, detail);
  let stopped = false;
  let polling = null;

  function table() {
    if (!ctx.projects.length) {
      return h("p", {class: "muted"}, "No projects yet. Run ", h("code", {}, "neuralmind up"),
        " in a repository, or register one below.");
    }
    return h("div", {class: "scroll"}, h("table", {},
      h("thead", {}, h("tr", {}, ["Project", "Id", "Index", ""].map((t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, ctx.projects.map((p) => h("tr", {class: p.id === ctx.project ? "current" : ""},
        h("td", {}, p.name, p.path ? h("div", {class: "muted small"}, p.path) : null),
        h("td", {}, h("code", {}, p.id)),
        h("td", {}, p.status?.built ? `built ${when(p.status.built_at)}` : "not built"),
        h("td", {}, p.id === ctx.project ? h("span", {class: "muted"}, "selected")
          : h("button", {type: "button", onclick: () => ctx.setProject(p.id)}, "Select")))))));
  }

  function registration() {
    if (!ctx.can("projects.write") || ctx.me.kind !== "loopback") return null;
    const path = h("input", {name: "path", required: true, placeholder: "/home/me/repo"});
    const form = h("form", {class: "inline"}, field("Register a directory", path),
      h("button", {type: "submit"}, "Register"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      return once(form, async () => {
        const made = await api("POST", "/v1/projects", {body: {path: path.value.trim()}});
        await ctx.reloadProjects();
        ctx.setProject(made.id);
        toast(`Registered ${made.id}`);
      });
    });
    return form;
  }

  // the build controls stay while the numbers below them refresh (an `index.built` event)
  function controls(p) {
    if (!ctx.can("index.build")) return null;
    const bar = h("progress", {max: 1, value: 0, hidden: true, "aria-label": "Build progress"});
    const said = h("span", {class: "muted", role: "status"});

    async function build(full) {
      let job;
      try {
        job = (await api("POST", `/v1/projects/${p.id}/build`, {body: {full}})).job;
      } catch (error) {
        if (error.code !== "index_busy" || !error.details.job) throw error;
        job = error.details.job;  // one is running: follow it
      }
      bar.hidden = false;
      follow(job.id);
    }

    function follow(jobId) {
      clearTimeout(polling);
      polling = setTimeout(async () => {
        if (stopped) return;
        const job = await api("GET", `/v1/jobs/${jobId}`);
        const pr = job.progress || {};
        if (pr.files_total) {
          bar.max = pr.files_total;
          bar.value = pr.files_done || 0;
        }
        said.textContent = `${job.status}: ${number(pr.files_done || 0)} of `
          + `${number(pr.files_total || 0)} files, ${number(pr.chunks_embedded || 0)} embedded`;
        if (job.status === "queued" || job.status === "running") return follow(jobId);
        said.textContent = job.status === "done"
          ? `done: ${number(job.result?.files)} files, ${number(job.result?.nodes)} symbols`
          : `${job.status}: ${job.error?.message || ""}`;
      }, POLL_MS);
    }

    return h("div", {class: "actions"},
      h("button", {type: "button", class: "primary", onclick: action(() => build(false))}, "Build"),
      h("button", {type: "button", onclick: action(() => build(true))}, "Full rebuild"), bar, said);
  }

  async function numbers(p) {
    const stats = await api("GET", `/v1/projects/${p.id}/stats`).catch((error) => ({error}));
    const savings = ctx.has(SAVINGS) ? await api("GET", `/v1/projects/${p.id}/savings`)
      .catch((error) => ({error: error.message})) : null;
    if (stopped) return;
    clear(statsBox, stats.error ? h("p", {class: "muted"}, stats.error.message) : statsView(stats),
      savings ? [h("h3", {}, "Savings"), value(savings)] : null);
  }

  const statsBox = h("div", {}, spinner());

  function show() {
    clear(list, table(), registration());
    const p = ctx.projectInfo();
    if (!p) return clear(detail);
    clear(detail, h("h2", {}, p.name), controls(p), statsBox);
    numbers(p);
  }

  // the shell has read the projects again (one registered, removed or built)
  const onProjects = (e) => {
    if (stopped) return;
    clear(list, table(), registration());
    if (e.detail.project_id === ctx.project && ctx.projectInfo()) numbers(ctx.projectInfo());
  };
  ctx.bus.addEventListener("projects", onProjects);
  show();
  return {leave() {
    stopped = true;
    clearTimeout(polling);
    ctx.bus.removeEventListener("projects", onProjects);
  }};
}

function statsView(s) {
  const facts = [["Built", s.built ? when(s.built_at) : "not yet"],
    ["At commit", s.built_head ? s.built_head.slice(0, 12) : "—"], ["Files", number(s.files)],
    ["Symbols", number(s.nodes)], ["Edges", number(s.edges)], ["Vectors", number(s.vectors)],
    ["Index size", `${number(s.index_bytes / 1024)} KiB`], ["Model", s.model_id || "—"]];
  const langs = Object.entries(s.languages || {});
  return [h("dl", {class: "facts"}, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    langs.length ? h("div", {class: "scroll"}, h("table", {},
      h("caption", {}, "By language"),
      h("thead", {}, h("tr", {}, ["Language", "Files", "Symbols", "Edges"].map((t) =>
        h("th", {scope: "col"}, t)))),
      h("tbody", {}, langs.map(([lang, v]) => h("tr", {}, h("td", {}, lang),
        h("td", {class: "num"}, number(v.files)), h("td", {class: "num"}, number(v.nodes)),
        h("td", {class: "num"}, number(v.edges))))))) : null];
}
