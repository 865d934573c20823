"""Short text renderings of tool results, written for a model to read; the structured content
beside them carries every field."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from plugins.mcp.errors import call

SNIPPET = 240
BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")  # control characters, line breaks


def _flatten(value: Any) -> Any:
    """``value`` with every string in it on one line: each run of line breaks and other
    control characters a space."""
    if isinstance(value, str):
        return BREAKS.sub(" ", value)
    if isinstance(value, dict):
        return {_flatten(k): _flatten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_flatten(v) for v in value]
    return value


def _one_line(*keep: str, offers: bool = False) -> Callable:
    """A renderer handed its result with every field on one line but those named in ``keep``
    (a rationale, a context, an answer: text that is many lines by nature). A title, path or
    note is stored as it was sent, and a line break in it would forge lines — another hit,
    another source — in the text the model reads. Each renderer is called with the caller's
    ``offer`` (``errors.said``); one that ``offers`` a tool is handed it, so that it tells a
    caller whose role may not call the tool who may."""
    def wrap(render: Callable[..., str]) -> Callable[[dict[str, Any], Callable[[str], str]], str]:
        @functools.wraps(render)
        def flat(out: dict[str, Any], offer: Callable[[str], str] = call) -> str:
            out = {k: v if k in keep else _flatten(v) for k, v in out.items()}
            return render(out, offer) if offers else render(out)
        return flat
    return wrap


def _cut(text: str, width: int = SNIPPET) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _more(page: dict[str, Any]) -> list[str]:
    return [f"(more: pass cursor={page['next_cursor']})"] if page.get("next_cursor") else []


def _notice(out: dict[str, Any]) -> list[str]:
    return [f"note: {out['notice']}"] if out.get("notice") else []


def _files(record: dict[str, Any]) -> str:
    files = record.get("files_affected") or []
    return f" · files: {', '.join(files)}" if files else ""


@_one_line("rationale")
def memory(record: dict[str, Any]) -> str:
    """A decision as markdown: what ``get_memory`` and a memory resource show."""
    status = record.get("effective_status") or record.get("status")
    lines = [f"# {record['title']}",
             f"id {record['id']} · {status} · {record.get('decision_type')} · confidence "
             f"{record.get('confidence')}{_files(record)}"]
    if record.get("tags"):
        lines.append("tags: " + ", ".join(record["tags"]))
    lines += ["", record.get("rationale", "")]
    for key, heading in (("evidence", "Evidence"), ("rejected_alternatives", "Rejected"),
                         ("dependency_constraints", "Constraints")):
        if record.get(key):
            lines += ["", f"## {heading}", *(f"- {item}" for item in record[key])]
    lines += ["", f"created {record.get('created_at')} · updated {record.get('updated_at')}"]
    return "\n".join(lines)


@_one_line()
def created(record: dict[str, Any]) -> str:
    text = f"remembered {record['id']}: {record['title']}"
    dupes = record.get("possible_duplicates") or []
    if dupes:
        text += "\npossible duplicates (update one of them if it is the same decision):\n" + \
            "\n".join(f"- {d['id']} ({d['status']}, score {d['score']:.2f}): {d['title']}"
                      for d in dupes)
    found = (record.get("contradictions") or {}).get("items") or []
    if found:
        text += "\ncontradicts (resolve_contradiction settles it):\n" + "\n".join(
            f"- {c['id']} with {c['a'] if c['b'] == record['id'] else c['b']} "
            f"({c['status']}, confidence {c['confidence']:.2f}): {c['explanation']}" for c in found)
    return text


@_one_line()
def changed(record: dict[str, Any]) -> str:
    return (f"{record['id']} is now {record.get('effective_status') or record['status']} "
            f"(updated {record['updated_at']}): {record['title']}")


@_one_line()
def recalled(out: dict[str, Any]) -> str:
    lines = [f"- {r['id']} [{r['status']}, score {r['score']:.2f}] {r['title']}"
             + (f" (linked: {r['linked_from']['type']} {r['linked_from']['id']})"
                if r.get("linked_from") else "")
             + (f" — {_cut(r['rationale'])}" if r.get("rationale") else "") + _files(r)
             for r in out.get("results") or []]
    if not lines:
        lines.append(f"no decisions match {out.get('query')!r} ({out.get('mode')})")
    return "\n".join(lines + _notice(out))


@_one_line()
def history(page: dict[str, Any]) -> str:
    lines = [f"- {e['at']} {e['kind']} by {e.get('actor') or '?'}"
             + (f": {', '.join(sorted(e['changes']))}" if e.get("changes") else "")
             + (f" — {e['note']}" if e.get("note") else "") for e in page.get("items", [])]
    return "\n".join(lines + _more(page)) or "no history"


@_one_line()
def code_hits(out: dict[str, Any]) -> str:
    lines = [f"- {h['source_file']}:{h['line']} {h['kind']} {h['label']} (score {h['score']:.2f})"
             for h in out.get("results") or []]
    if not lines:
        lines.append(f"no code matches {out.get('query')!r}")
    return "\n".join(lines + _notice(out))


@_one_line("context")
def context(out: dict[str, Any]) -> str:
    """The context itself (``query_code``, ``wakeup``): it is what the model asked for."""
    text = out.get("context", "")
    if out.get("warning"):
        text += f"\n\nwarning: {out['warning']}"
    return text


@_one_line()
def impact(out: dict[str, Any]) -> str:
    lines = [f"- d{i['distance']} {i['node']['path']}:{i['node']['line']} {i['node']['kind']} "
             f"{i['node']['label']}" + (f" (via {i['path'][0]['kind']} "
                                         f"{i['path'][-1]['dst']['label']})" if i["path"] else "")
             for i in out.get("impacted") or []]
    if not lines:
        lines.append(f"nothing in the index depends on it within depth {out.get('depth')}")
    for f in out.get("files") or []:
        for d in f.get("decisions") or []:
            lines.append(f"decision on {f['path']}: {d.get('id')} {d.get('title')}")
    if out.get("truncated"):
        lines.append("(more impacted than listed: raise limit)")
    return "\n".join(lines)


@_one_line()
def next_files(out: dict[str, Any]) -> str:
    lines = [f"- {f['path']} ({f['score']:.2f}): " + "; ".join(
        f"{w['kind']} {w['detail']}" for w in f["why"][:3]) for f in out.get("files") or []]
    if not lines:
        lines.append("no suggestions yet: nothing links these files to others")
    if out.get("not_indexed"):
        lines.append(_unindexed(out))
    return "\n".join(lines)


@_one_line()
def activity(out: dict[str, Any]) -> str:
    return (f"recorded {out['files']} file(s) as {out['kind']} (session {out['session']}): "
            f"{out['pairs']} pair(s) linked" + ("" if out["learning"] else
                                                 "; learning is off on this server")
            + (f"; left out, {_unindexed(out)}" if out.get("not_indexed") else ""))


def _unindexed(out: dict[str, Any]) -> str:
    """The files a call named that the index does not hold (a typo, a new or ignored file):
    said, since the text is what the model reads."""
    return f"not in the index: {', '.join(out['not_indexed'])}"


@_one_line("answer")
def answer(out: dict[str, Any]) -> str:
    """An ask's answer, then its numbered sources (cited ones marked) and notices."""
    cited = set(out.get("cited") or ())
    lines = [out.get("answer", ""), ""]
    lines += [f"{'*' if s['n'] in cited else ' '}[{s['n']}] {s['cite']} — {s['title']}"
              for s in out.get("sources") or ()]
    return "\n".join(lines + [f"note: {n}" for n in out.get("notices") or ()]).rstrip()


@_one_line()
def job(job: dict[str, Any]) -> str:
    r = job.get("result") if isinstance(job.get("result"), dict) else {}
    if "nodes" not in r:
        return f"{job['kind']} {job['status']}"
    return (f"index built: {r.get('files')} files ({r.get('files_changed')} changed, "
            f"{r.get('files_deleted')} deleted"
            + (f", {r['files_reindexed']} re-indexed unchanged" if r.get("files_reindexed") else "")
            + f"), {r['nodes']} symbols, {r.get('edges')} edges, "
            f"{r.get('chunks_embedded')} embedded, {r.get('duration_ms', 0) / 1000:.1f} s")


@_one_line(offers=True)
def stats(out: dict[str, Any], offer: Callable[[str], str]) -> str:
    if not out.get("built"):
        return f"{out['project_id']} has no index yet: {offer('build_index')}"
    langs = ", ".join(f"{lang} {v.get('files', 0)}" for lang, v in out.get("languages", {}).items())
    return (f"{out['project_id']}: {out['files']} files, {out['nodes']} symbols, {out['edges']} "
            f"edges, {out['vectors']} vectors; built {out['built_at']} at "
            f"{(out.get('built_head') or '-')[:12]}" + (f"; files per language: {langs}" if langs else ""))


@_one_line()
def project(p: dict[str, Any]) -> str:
    status = p.get("status") or {}
    note = ("  (its directory is gone: restore it, or `neuralmind project remove` it)"
            if status.get("directory_missing") else "" if status.get("built")
            else "  (no index yet)")
    return f"{p['id']}  {p.get('path') or p['name']}" + note


@_one_line()
def projects(page: dict[str, Any]) -> str:
    lines = [project(p) for p in page.get("items", [])] + _more(page)
    return "\n".join(lines) or "no projects: register_project adds one"


@_one_line()
def linked(link: dict[str, Any]) -> str:
    return f"{link['source']} {link['type']} {link['target']}"


@_one_line()
def graph(out: dict[str, Any]) -> str:
    lines = [f"- {n['id']} [{n['kind']}, {n['status']}, depth {n['depth']}] {n['title']}"
             for n in out.get("nodes") or []]
    lines += [f"  {e['source']} {e['type']} {e['target']}" for e in out.get("edges") or []]
    return "\n".join(lines)


@_one_line()
def contradictions(page: dict[str, Any]) -> str:
    lines = [f"- {c['id']} [{c['status']}, confidence {c['confidence']:.2f}] A {c['a']} vs "
             f"B {c['b']}: {c['explanation']}" for c in page.get("items") or []]
    return "\n".join(lines + _more(page)) or "no contradictions"


@_one_line()
def resolved(out: dict[str, Any]) -> str:
    c = out["contradiction"]
    text = (f"{c['id']} resolved ({c['strategy']}): kept {', '.join(out['kept'])}; superseded "
            f"{', '.join(out['superseded']) or 'nothing'}")
    return text + (f"; new record {out['created']}" if out.get("created") else "")


@_one_line()
def decayed(job: dict[str, Any]) -> str:
    r = job.get("result") or {}
    verb = "would archive" if r.get("dry_run") else "archived"
    lines = [f"decay sweep: {verb} {r.get('archived', 0)} of {r.get('checked', 0)} records"
             + ("" if r.get("enabled", True) else " (decay is off for this project)")]
    lines += [f"- {c['id']} (strength {c['strength']:.3f}): {c['title']}"
              for c in r.get("changes") or []]
    return "\n".join(lines)


@_one_line()
def consolidated(job: dict[str, Any]) -> str:
    r = job.get("result") or {}
    verb = "would merge" if r.get("dry_run") else "merged"
    lines = [f"consolidation: {len(r.get('clusters') or [])} cluster(s) among "
             f"{r.get('checked', 0)} records"]
    for c in r.get("clusters") or []:
        left = c.get("skipped") or []  # changed while the job ran: kept as they now are
        if c.get("merged_into") or r.get("dry_run"):
            line = f"- {verb} {', '.join(i for i in c['ids'] if i not in left)}" + (
                f" into {c['merged_into']}" if c.get("merged_into") else "")
        else:
            line = "- not merged"
        if left:
            line += f" (changed meanwhile, left as they are: {', '.join(left)})"
        lines.append(f"{line}: {c['titles'][0]}")
    return "\n".join(lines)


@_one_line()
def memory_stats(out: dict[str, Any]) -> str:
    parts = [f"{out['total']} memories"]
    for key in ("by_kind", "by_status", "by_tag"):
        if out.get(key):
            parts.append(f"{key[3:]}: " + ", ".join(f"{k} {v}" for k, v in out[key].items()))
    v = out.get("vectors") or {}
    parts.append(f"vectors: {v.get('embedded', 0)} embedded, {v.get('pending', 0)} pending")
    return "; ".join(parts)
