"""An answer's sources, fetched through the app's own routes as the asker (``kernel.caller``):
memory search and the code index's query, so roles, project reach and the index's context
budget are exactly those of the same calls over HTTP. Nothing here imports another plugin."""

from __future__ import annotations

from typing import Any

from neuralmind import Caller, estimate_tokens, one_line

MEMORY_LIMIT = 8
MEMORY_MAX_TOKENS = 400  # of one record's text
MEMORY_QUERY_MAX = 2000  # the memory search's cap on its query: a longer question (ask takes
# 4,000 characters) is searched by its start (docs/ask.md)
MIN_QUERY_BUDGET = 256  # the query route's floor
L3_HEADER = "## Search results"  # the query context's last layer: the hits' snippets


def gather(caller: Caller, project_id: str, question: str, kinds: list[str],
           budget: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Numbered sources (memories first, then code) within ``budget`` tokens, and a notice
    for each kind that could not be read."""
    share = budget // len(set(kinds))
    found: list[dict[str, Any]] = []
    notices: list[str] = []
    if "memories" in kinds:
        found += _memories(caller, project_id, question, share, notices)
    if "code" in kinds:
        found += _code(caller, project_id, question, share, notices)
    for n, source in enumerate(found, 1):
        source["n"] = n
    return found, notices


def _refused(what: str, error: dict[str, Any]) -> str:
    if error["code"] == "not_found":  # the route is not mounted: its plugin is off
        return f"{what}: not served here (plugin disabled)"
    if error["code"] == "project_not_found":  # asked of a project ask reached: a role that
        # may not read this kind there is answered as if the project were not there
        return f"{what}: forbidden — this token may not read {what} in this project"
    return f"{what}: {error['code']} — {error['message']}"


def _memories(caller, project_id, question, budget, notices) -> list[dict[str, Any]]:
    answer = caller("POST", f"/v1/projects/{project_id}/memories/search",
                    body={"query": question[:MEMORY_QUERY_MAX], "mode": "hybrid",
                          "limit": MEMORY_LIMIT})
    if not answer.ok:
        notices.append(_refused("memories", answer.error))
        return []
    if answer.data.get("notice"):
        notices.append(f"memories: {answer.data['notice']}")
    out, spent = [], 0
    for record in answer.data["results"]:
        text = _cut(record["rationale"], min(MEMORY_MAX_TOKENS, budget - spent
                                             - estimate_tokens(record["title"])))
        if not text:
            break
        spent += estimate_tokens(record["title"]) + estimate_tokens(text)
        out.append({"kind": "memory", "cite": f"memory:{record['id']}", "title": record["title"],
                    "text": text, "score": record["score"], "memory_id": record["id"]})
    return out


def _code(caller, project_id, question, budget, notices) -> list[dict[str, Any]]:
    answer = caller("POST", f"/v1/projects/{project_id}/query",
                    body={"question": question, "context_budget": max(MIN_QUERY_BUDGET, budget),
                          "trace": True})
    if not answer.ok:
        notices.append(_refused("code", answer.error))
        return []
    hits = (answer.data.get("trace") or {}).get("hits") or []
    snippets = _snippets(answer.data, hits)
    out, spent = [], 0  # the query's floor may exceed this share: the snippets keep to it
    for i, h in enumerate(hits):
        title = one_line(h["label"])  # cite and title are lines of the provider's prompt
        text = _cut(snippets[i], budget - spent - estimate_tokens(title)) \
            if i in snippets else ""
        if not text:
            continue
        spent += estimate_tokens(title) + estimate_tokens(text)
        out.append({"kind": "code", "cite": f"{one_line(h['source_file'])}:{h['line']}",
                    "title": title, "text": text, "score": h["score"],
                    "path": h["source_file"], "line": h["line"],
                    "file_type": h.get("file_type")})
    return out


def _header(hit: dict[str, Any]) -> str:
    """A hit's L3 heading as the index writes it: its path and label on one line (a file may
    be named with a line break), in the form ``one_line`` gives them."""
    return f"### {one_line(hit['source_file'])}:{hit['line']} {one_line(hit['label'])} " \
           f"({hit['kind']})\n"


def _snippets(query: dict[str, Any], hits: list[dict[str, Any]]) -> dict[int, str]:
    """Each hit's snippet from the query's context: the items of its last layer, L3, in the
    hits' order, each its header (``### path:line qualname (kind)``, the index's documented
    layout) and its fenced code; a hit the budget left out has none. Nothing before L3 is
    read: L2 quotes memories' rationales as written, and a header and a fence there would
    pass a memory's text off as a file's code."""
    if not hits or "L3" not in query["layers_used"]:
        return {}
    context = query["context"]
    start = context.rfind(f"\n{L3_HEADER}\n{_header(hits[0])}")
    if start < 0:
        return {}
    at, out = start + len(L3_HEADER) + 2, {}
    for i, hit in enumerate(hits):
        header = _header(hit)
        if not context.startswith(header, at):
            break
        end = len(context)
        if i + 1 < len(hits):  # the next hit's item follows this one's closing fence
            found = context.find(f"```\n\n{_header(hits[i + 1])}", at)
            end = found + 3 if found >= 0 else end
        body = context[at + len(header):end].strip()
        if body.startswith("```"):  # the fence around the code, a run longer than any inside
            first, _, body = body.partition("\n")
            run = "`" * (len(first) - len(first.lstrip("`")))
            body = body[: body.rfind(run)] if body.rstrip().endswith(run) else body
        out[i] = body.strip()
        at = end + 2
    return out


def _cut(text: str, max_tokens: int) -> str:
    if max_tokens <= 0:
        return ""
    if estimate_tokens(text) <= max_tokens:
        return text
    return text[: max_tokens * 4 - 2].rstrip() + " …"
