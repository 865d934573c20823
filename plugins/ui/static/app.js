// The dashboard's shell: sign-in, the pages, the project picker and the one event stream
// every page listens to. Built only on the public /v1 routes.

import {api, follow, session} from "./api.js";
import {$, clear, field, h, once, toast} from "./dom.js";
import * as activity from "./activity.js";
import * as ask from "./ask.js";
import * as code from "./code.js";
import * as memories from "./memories.js";
import * as projects from "./projects.js";

const PAGES = {projects, memories, code, ask, activity};
const PROJECT_KEY = "neuralmind.project";
const RECENT = 500;  // events kept for the activity page

const ctx = {
  me: null,
  paths: new Set(),
  projects: [],
  project: null,
  bus: new EventTarget(),
  recent: [],
  can(permission) { return Boolean(this.me?.permissions.includes(permission)); },
  has(path, method = "get") { return this.paths.has(`${method} ${path}`); },
  projectInfo() { return this.projects.find((p) => p.id === this.project) || null; },
  go(hash) { if (location.hash === hash) route(); else location.hash = hash; },
  setProject,
  reloadProjects,
};
// the page drawn: its name, project and what render() returned — `leave()` cleans up,
// `route(rest)` (optional) follows a new address within the page without drawing it again
let shown = null;
let stopEvents = null;

async function boot() {
  $(".skip").addEventListener("click", (e) => { e.preventDefault(); $("#main").focus(); });
  $("#sign-out").addEventListener("click", signOut);
  $("#project").addEventListener("change", (e) => setProject(e.target.value));
  // a token that served this tab was revoked meanwhile; one never accepted was mistyped
  window.addEventListener("nm:unauthorized", () => signOut(ctx.me
    ? "Your token was refused (revoked, expired or rotated): sign in again."
    : "That token is not valid: check it (`neuralmind token show` on the server's machine, or "
      + "ask an admin for one)."));
  window.addEventListener("hashchange", async () => {  // a sign-in link opened in this tab
    if (!await redeem()) return;
    if (ctx.me) location.reload();  // signed in already, maybe as someone else: afresh
    else await start();
  });
  if (await redeem() === false) return;
  if (!session.token) return signedOut();
  await start();
}

// `neuralmind ui` opens /ui#code=…: trade the one-time code for the token, over POST, and take
// it out of the address bar first. Undefined when there is no code, else whether it worked.
async function redeem() {
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  if (!code) return undefined;
  history.replaceState(null, "", `${location.pathname}#/projects`);  // gone before any await
  try {
    session.set((await api("POST", "/v1/ui/sign-in", {body: {code}})).token);
  } catch (error) {
    signedOut(`That sign-in link did not work (${error.message}).`);
    return false;
  }
  return true;
}

async function start() {
  try {
    const [me, doc] = await Promise.all([api("GET", "/v1/auth/whoami"),
      api("GET", "/v1/openapi.json")]);
    ctx.me = me;
    ctx.paths = new Set(Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m} ${path}`)));
    await reloadProjects();
  } catch (error) {
    if (error.status === 401) return;  // nm:unauthorized signs out
    return clear($("#main"), h("p", {class: "error", role: "alert"},
      `The server could not be read: ${error.message}`));
  }
  $("#me").textContent = `${ctx.me.actor} · ${ctx.me.role}`;
  $("#nav").hidden = $("#who").hidden = false;
  for (const link of document.querySelectorAll("#nav a")) {
    link.hidden = link.dataset.needs ? !ctx.has(link.dataset.needs, "post") : false;
  }
  stopEvents = follow((event) => {
    ctx.recent.unshift(event);
    ctx.recent.length = Math.min(ctx.recent.length, RECENT);
    ctx.bus.dispatchEvent(new CustomEvent("event", {detail: event}));
    if (event.kind.startsWith("project.") || event.kind === "index.built") projectsChanged(event);
  }, (status) => {
    const live = $("#live");
    live.textContent = status === "live" ? "● live" : status === "reconnecting" ? "○ reconnecting" : "";
    live.dataset.status = status;
  });
  window.addEventListener("hashchange", route);
  route();
}

async function reloadProjects() {
  const page = await api("GET", "/v1/projects", {params: {limit: 200}});
  ctx.projects = page.items;
  const saved = sessionStorage.getItem(PROJECT_KEY);
  const ids = ctx.projects.map((p) => p.id);
  ctx.project = ids.includes(ctx.project) ? ctx.project : ids.includes(saved) ? saved : ids[0] || null;
  clear($("#project"), ctx.projects.length ? ctx.projects.map((p) =>
    h("option", {value: p.id, selected: p.id === ctx.project}, `${p.name} (${p.id})`))
    : h("option", {value: ""}, "no projects"));
}

// Every page's picker follows the projects: one registered or removed anywhere shows here; the
// page is drawn again when the project it showed is gone. Pages hear "projects" on the bus.
async function projectsChanged(event) {
  const before = ctx.project;
  await reloadProjects().catch(() => null);
  if (!ctx.me) return;
  if (ctx.project !== before) route();
  ctx.bus.dispatchEvent(new CustomEvent("projects", {detail: event}));
}

function setProject(id) {
  ctx.project = id || null;
  sessionStorage.setItem(PROJECT_KEY, id || "");
  $("#project").value = id || "";
  route();
}

function route() {
  const [name = "projects", ...parts] = location.hash.replace(/^#\/?/, "").split("/");
  const known = PAGES[name] ? name : "projects";
  let rest;
  try {
    rest = parts.map(decodeURIComponent);
  } catch {  // a malformed %-escape: an address no page made
    rest = null;
  }
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.getAttribute("href") === `#/${known}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (rest && shown?.name === known && shown.project === ctx.project && shown.view?.route) {
    shown.view.route(rest);  // the same page: it keeps its list, search and scroll
    return;
  }
  shown?.view?.leave?.();
  const main = clear($("#main"));
  shown = {name: known, project: ctx.project,
    view: rest ? PAGES[known].render(main, ctx, rest) : notFound(main)};
  document.title = `${main.querySelector("h1")?.textContent || "NeuralMind"} · NeuralMind`;
}

function notFound(main) {
  main.append(h("h1", {}, "Not found"), h("p", {}, "This address is not one the dashboard makes. ",
    h("a", {href: "#/projects"}, "Go to the projects"), "."));
  return null;
}

function signOut(message) {
  if (stopEvents) stopEvents();
  stopEvents = null;
  ctx.me = null;
  session.clear();
  shown?.view?.leave?.();
  shown = null;
  window.removeEventListener("hashchange", route);
  signedOut(typeof message === "string" ? message : "Signed out.");
}

function signedOut(message) {
  $("#nav").hidden = $("#who").hidden = true;
  const input = h("input", {type: "password", name: "token", autocomplete: "off", required: true,
    spellcheck: "false"});
  const form = h("form", {class: "card", "aria-labelledby": "sign-in-title"},
    h("h1", {id: "sign-in-title"}, "Sign in"),
    message ? h("p", {class: "notice", role: "status"}, message) : null,
    field("Token", input, "Kept in this tab only (sessionStorage) and sent as a bearer header."),
    h("button", {type: "submit", class: "primary"}, "Sign in"),
    h("p", {class: "muted"}, "On the server's own machine, run ", h("code", {}, "neuralmind ui"),
      " to open the dashboard signed in. On a team server, an admin makes your token with ",
      h("code", {}, "neuralmind token create"), "."));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) return signedOut("Paste a token first: the field was empty or only spaces.");
    session.set(token);
    input.value = "";
    return once(form, start);
  });
  clear($("#main"), h("section", {class: "sign-in"}, form));
  document.title = "Sign in · NeuralMind";
  input.focus();
}

window.addEventListener("error", (e) => toast(`Something broke: ${e.message}`, "error"));
window.addEventListener("unhandledrejection", (e) => {
  e.preventDefault();  // said here, in the page's own words, not left to the console
  if (e.reason?.status !== 401) toast(e.reason?.message || String(e.reason), "error");
});
boot();
