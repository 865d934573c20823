// Ask: a question answered from the project's memories and code, streamed as it is written
// (fetch streaming of server-sent events), each [n] a link to its source.

import {api, events} from "./api.js";
import {clear, field, h, number, toast} from "./dom.js";
import {codeLink} from "./code.js";

const CITE = /\[(\d+)\]/g;

export function render(root, ctx) {
  root.append(h("h1", {}, "Ask"));
  if (!ctx.project) {
    root.append(h("p", {class: "muted"}, "Select or register a project first."));
    return null;
  }
  const question = h("textarea", {rows: 3, required: true, maxlength: 4000,
    placeholder: "Why do we keep SQLite in WAL mode?"});
  const kinds = ["memories", "code"].map((k) => h("input", {type: "checkbox", name: "sources",
    value: k, checked: true}));
  const budget = h("input", {type: "number", min: 256, max: 32000, step: 1, value: 3000});
  const ask = h("button", {type: "submit", class: "primary"}, "Ask");
  const stop = h("button", {type: "button", hidden: true}, "Stop");
  const form = h("form", {class: "card"}, field("Question", question),
    h("fieldset", {class: "modes"}, h("legend", {}, "Sources"),
      kinds.map((box) => h("label", {}, box, ` ${box.value}`))),
    field("Budget (tokens of sources)", budget), h("div", {class: "actions"}, ask, stop));
  const answer = h("p", {class: "answer", "aria-live": "polite"});
  const sources = h("ol", {class: "sources"});
  const footer = h("p", {class: "muted small"});
  root.append(form, h("section", {"aria-label": "Answer"}, answer, sources, footer));
  let control = null;

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const picked = kinds.filter((box) => box.checked).map((box) => box.value);
    if (!picked.length) return toast("Pick at least one kind of source.", "error");
    control = new AbortController();
    ask.disabled = true;
    stop.hidden = false;
    clear(answer, h("span", {class: "muted"}, "Reading the sources…"));
    clear(sources);
    clear(footer);
    let text = "";
    let known = [];
    try {
      const resp = await api("POST", `/v1/projects/${ctx.project}/ask`, {raw: true,
        signal: control.signal, headers: {Accept: "text/event-stream"},
        body: {question: question.value, stream: true, sources: picked,
          context_budget: Number(budget.value)}});
      for await (const message of events(resp)) {
        const data = JSON.parse(message.data);
        if (message.event === "sources") {
          known = data.sources;
          clear(sources, known.map(source));
          if (data.notices.length) footer.append(data.notices.join(" · "), h("br"));
        } else if (message.event === "delta") {
          text += data.text;
          clear(answer, cite(text, known));
        } else if (message.event === "done") {
          clear(answer, cite(data.answer, known));
          for (const n of data.cited) sources.querySelector(`#source-${n}`)?.classList.add("cited");
          footer.append(`${data.provider}${data.model ? ` (${data.model})` : ""}, ${number(data.ms)} ms`);
        } else if (message.event === "error") {
          answer.append(h("span", {class: "error", role: "alert"},
            ` — stopped: ${data.error.message} (${data.error.code})`));
        }
      }
    } catch (error) {
      if (error.name !== "AbortError") {
        clear(answer, h("span", {class: "error", role: "alert"}, `${error.message} (${error.code})`));
      } else if (text) {
        answer.append(h("span", {class: "muted"}, " — stopped."));
      } else {
        clear(answer, h("span", {class: "muted", role: "status"}, "Stopped before any answer."));
      }
    } finally {
      ask.disabled = false;
      stop.hidden = true;
    }
  });
  stop.addEventListener("click", () => control?.abort());
  question.focus();
  return {leave: () => control?.abort()};
}

// The answer's text with each [n] a link to source n: text nodes and anchors, never markup.
function cite(text, known) {
  const out = [];
  let last = 0;
  for (const match of text.matchAll(CITE)) {
    const n = Number(match[1]);
    out.push(text.slice(last, match.index));
    out.push(known.some((s) => s.n === n) ? h("a", {href: `#source-${n}`, class: "cite",
      onclick: (e) => { e.preventDefault(); document.getElementById(`source-${n}`)?.focus(); }},
    `[${n}]`) : match[0]);
    last = match.index + match[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function source(s) {
  const href = s.kind === "memory" ? `#/memories/${encodeURIComponent(s.memory_id)}`
    : codeLink(s.path, s.line);
  return h("li", {id: `source-${s.n}`, value: s.n, tabindex: "-1"},
    h("a", {href}, s.cite), ` ${s.title}`,
    s.text ? h("details", {}, h("summary", {}, "what the answer was given"),
      h("pre", {}, s.text)) : null);
}
