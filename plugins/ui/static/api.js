// The /v1 API as the page calls it: the token from sessionStorage in a bearer header on every
// call (never in a URL), errors as the envelope says them, server-sent events read from a
// fetch stream (EventSource cannot send a header).

const KEY = "neuralmind.token";

export const session = {
  get token() { return sessionStorage.getItem(KEY); },
  set(token) { sessionStorage.setItem(KEY, token); },
  clear() { sessionStorage.removeItem(KEY); },
};

// The message names each field a 422 refused (`query: String should have at most 2000
// characters`), as the CLI does: "the request did not validate" alone says nothing to fix.
function said(status, error) {
  const fields = (error?.details?.errors || []).slice(0, 3).map((e) => {
    const loc = (e.loc || []).filter((p, i) => !(i === 0 && (p === "body" || p === "query")));
    return `${loc.join(".") || "body"}: ${e.msg}`;
  });
  const message = error?.message || `HTTP ${status}`;
  return fields.length ? `${message}: ${fields.join("; ")}` : message;
}

export class ApiError extends Error {
  constructor(status, error) {
    super(said(status, error));
    this.status = status;
    this.code = error?.code || "http_error";
    this.details = error?.details || {};
    this.requestId = error?.request_id || null;
  }
}

function query(params) {
  const out = new URLSearchParams();
  for (const [key, v] of Object.entries(params || {})) {
    for (const item of Array.isArray(v) ? v : [v]) {
      if (item !== undefined && item !== null && item !== "") out.append(key, String(item));
    }
  }
  const text = out.toString();
  return text ? `?${text}` : "";
}

// One call; JSON in, JSON out. `raw: true` hands back the Response (streams, exports).
export async function api(method, path, {body, params, headers, signal, raw} = {}) {
  const init = {method, signal, cache: "no-store",
    headers: {Accept: "application/json", ...headers}};
  const token = session.token;
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path + query(params), init);
  } catch (error) {  // the browser says only "Failed to fetch"
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, {code: "unreachable", message: "The server cannot be reached "
      + "(stopped, restarting, or the network is down): try again in a moment."});
  }
  if (!resp.ok) {
    const data = await resp.json().catch(() => null);
    const error = new ApiError(resp.status, data?.error);
    if (resp.status === 401 && token) window.dispatchEvent(new CustomEvent("nm:unauthorized"));
    throw error;
  }
  if (raw) return resp;
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

// Server-sent events of a fetch Response: {event, data, id} as each blank line arrives.
export async function* events(resp) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += value.replace(/\r/g, "");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message = {event: "message", data: [], id: null};
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const at = line.indexOf(":");
        const name = at < 0 ? line : line.slice(0, at);
        const val = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
        if (name === "data") message.data.push(val);
        else if (name === "event") message.event = val;
        else if (name === "id") message.id = val;
      }
      if (message.data.length) yield {...message, data: message.data.join("\n")};
    }
  }
}

// Follow /v1/events until stopped, resuming after a drop with Last-Event-ID; `onStatus` hears
// "live", "reconnecting" and "stopped". Returns the function that stops it.
export function follow(onEvent, onStatus = () => {}) {
  const control = new AbortController();
  let last = null;
  let stopped = false;
  (async () => {
    let delay = 500;
    while (!stopped) {
      try {
        const headers = {Accept: "text/event-stream"};
        if (last) headers["Last-Event-ID"] = last;
        const resp = await api("GET", "/v1/events", {headers, signal: control.signal, raw: true});
        delay = 500;
        onStatus("live");
        for await (const message of events(resp)) {
          if (message.id) last = message.id;
          onEvent(JSON.parse(message.data));
        }
      } catch (error) {
        if (stopped || error.name === "AbortError" || error.status === 401) break;
      }
      if (stopped) break;
      onStatus("reconnecting");
      await new Promise((done) => setTimeout(done, delay));
      delay = Math.min(delay * 2, 10000);
    }
    onStatus("stopped");
  })();
  return () => { stopped = true; control.abort(); };
}

// A download of what `path` answers (the memories export), as a file the browser saves.
export async function download(path, filename) {
  const resp = await api("GET", path, {raw: true, headers: {Accept: "*/*"}});
  const url = URL.createObjectURL(await resp.blob());
  const link = Object.assign(document.createElement("a"), {href: url, download: filename});
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
