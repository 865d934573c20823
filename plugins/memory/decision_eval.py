"""``neuralmind eval decisions``: decision search, in the original NeuralMind's eval shape.

The corpus is a JSON list of decisions (``id, title, rationale, decision_type, status,
files_affected, confidence, tags``); the queries file a JSON object whose ``queries`` list
holds ``{id, kind, query, gold: [ids]}`` — kinds ``sentence`` (asked the way agents ask),
``paraphrase`` (no search word shared with the answer) and ``negative`` (nothing answers it) —
and whose optional ``extra_decisions`` join the corpus. Every ACTIVE decision's title is asked
too (kind ``title``). Each query runs through the server's search code over ACTIVE records,
top 5, per mode; reported: recall@5 (sentence, paraphrase), the share of negatives answered
with nothing, and how many titles rank their own record first.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from neuralmind import today
from plugins.memory import records
from plugins.memory.decay import policy_of
from plugins.memory.eval import BadDataset, answers, read_json
from plugins.memory.models import DECISION_TYPES, STATUSES, MemorySettings
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore

LIMIT = 5
MODES = ("keyword", "semantic", "hybrid")
KINDS = ("sentence", "paraphrase", "negative")
FIELDS = {"id": str, "title": str, "rationale": str, "decision_type": str, "status": str,
          "files_affected": list, "confidence": (int, float), "tags": list}


class BadSet(ValueError):
    """The corpus or the queries are not in the expected shape."""


def check(decisions: list, queries: list, files: tuple[Path, Path, int] | None = None) -> None:
    """Raise :class:`BadSet` naming the first problem of the set (``files``: the corpus, the
    queries file, and how many decisions come from the corpus, to name where each is)."""
    corpus, qfile, own = files or ("the corpus", "the queries", len(decisions))
    for n, d in enumerate(decisions):
        where = f"{corpus}: decision" if n < own else f"{qfile}: extra_decisions:"
        where += f" {d.get('id', n) if isinstance(d, dict) else n}"
        if not isinstance(d, dict):
            raise BadSet(f"{where} is not an object")
        for name, typ in FIELDS.items():
            if not isinstance(d.get(name), typ):
                raise BadSet(f"{where}: {name} is missing or not a {getattr(typ, '__name__', 'number')}")
        if d["decision_type"].upper() not in DECISION_TYPES or d["status"].upper() not in STATUSES:
            raise BadSet(f"{where}: decision_type {d['decision_type']!r} or status "
                         f"{d['status']!r} is not one the store knows")
    ids = {d["id"] for d in decisions}
    if len(ids) != len(decisions):
        raise BadSet(f"two decisions share an id (in {corpus}, or {qfile}'s extra_decisions)")
    for n, q in enumerate(queries):
        if not (isinstance(q, dict) and isinstance(q.get("query"), str)
                and isinstance(q.get("gold"), list) and q.get("kind") in KINDS):
            raise BadSet(f"{qfile}: query {n}: needs query (text), gold (a list of ids) and kind "
                         f"({', '.join(KINDS)})")
        if not all(isinstance(g, str) for g in q["gold"]):
            raise BadSet(f"{qfile}: query {q.get('id', n)}: gold holds something that is not a "
                         "decision id (text)")
        if (q["kind"] == "negative") != (not q["gold"]):
            raise BadSet(f"{qfile}: query {q.get('id', n)}: a negative has no gold, and only a "
                         "negative")
        unknown = [g for g in q["gold"] if g not in ids]
        if unknown:
            raise BadSet(f"{qfile}: query {q.get('id', n)}: gold {', '.join(unknown)} is no "
                         "decision")


def read(path: Path, option: str) -> Any:
    """The JSON that ``path`` (given as ``option``) holds; :class:`BadSet` naming the file
    when it cannot be read or is not UTF-8 JSON."""
    try:
        return read_json(path)
    except BadDataset as ex:  # not UTF-8 JSON, as eval memory words it
        raise BadSet(f"{ex} ({option})") from None
    except FileNotFoundError:
        raise BadSet(f"cannot read {path}: no such file ({option})") from None
    except IsADirectoryError:
        raise BadSet(f"{path} is a folder, not a file ({option})") from None
    except OSError as ex:
        raise BadSet(f"cannot read {path}: {(ex.strerror or str(ex)).lower()} ({option})") \
            from None


def load(corpus: Path, queries: Path) -> tuple[list[dict], list[dict]]:
    decisions = read(corpus, "--corpus")
    qset = read(queries, "--queries")
    if not isinstance(decisions, list):
        raise BadSet(f"{corpus} must hold a JSON list of decisions")
    if not isinstance(qset, dict) or not isinstance(qset.get("queries"), list):
        raise BadSet(f"{queries} must hold a JSON object with a 'queries' list")
    if not isinstance(qset.get("extra_decisions") or [], list):
        raise BadSet(f"{queries}: extra_decisions must be a JSON list of decisions")
    own = len(decisions)
    decisions = decisions + list(qset.get("extra_decisions") or [])
    check(decisions, qset["queries"], (corpus, queries, own))
    titles = [{"id": f"title:{d['id']}", "kind": "title", "query": d["title"], "gold": [d["id"]]}
              for d in decisions if d["status"].upper() == "ACTIVE"]
    return decisions, qset["queries"] + titles


def fill(store: MemoryStore, decisions: list[dict], folder: Path) -> None:
    now = "2026-01-01T00:00:00.000Z"
    ops = []
    for d in decisions:
        body = {k: d[k] for k in FIELDS}
        body["decision_type"], body["status"] = d["decision_type"].upper(), d["status"].upper()
        rec = records.build(body, root=folder, now=now, head="", errors=[])
        ops.append(("create", rec, records.content_sha(rec), {}, "eval"))
    store.apply_batch(ops, now)


def evaluate(decisions: list[dict], queries: list[dict], modes: list[str], kernel,
             folder: Path, settings: MemorySettings | None = None) -> dict[str, Any]:
    store = MemoryStore(kernel.open_database(folder / "memory.db", MIGRATIONS))
    try:
        fill(store, decisions, folder)
        searcher = Searcher(settings or MemorySettings(), kernel)
        semantic = bool(set(modes) - {"keyword"})
        if semantic:
            searcher.fill(store, kernel.embedder, batch=64)
        active, on, policy = {"status": "ACTIVE"}, today(), policy_of(store.config("decay"))
        scores: dict[str, dict[str, list[float]]] = {}
        for q in queries:
            kw = searcher.keyword(store, q["query"], active, on, searcher.pool(LIMIT), full=False)
            leg = (searcher.semantic(store, q["query"], active, on, searcher.pool(LIMIT))
                   if semantic else None)
            ranked = answers(searcher, store, q["query"], kw, leg, modes, LIMIT, policy)
            for mode in modes:
                got = ranked[mode]
                if q["kind"] == "negative":
                    value = float(not got)
                elif q["kind"] == "title":
                    value = float(bool(got) and got[0] == q["gold"][0])
                else:
                    value = len(set(got) & set(q["gold"])) / len(q["gold"])
                scores.setdefault(q["kind"], {}).setdefault(mode, []).append(value)
    finally:
        store.db.close()
    metric = {"sentence": "recall@5", "paraphrase": "recall@5",
              "negative": "share answered with nothing", "title": "share ranked first"}
    return {"decisions": len(decisions), "modes": modes, "by_kind": {
        kind: {"n": len(next(iter(by_mode.values()))), "metric": metric[kind],
               **{mode: round(sum(v) / len(v), 3) for mode, v in by_mode.items()},
               **({"first": {mode: int(sum(v)) for mode, v in by_mode.items()}}
                  if kind == "title" else {})}
        for kind, by_mode in scores.items()}}


def main(args) -> int:
    from neuralmind import Kernel, load_settings
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        print(f"neuralmind: --mode takes a comma-separated subset of {', '.join(MODES)}",
              file=sys.stderr)
        return 2
    try:
        decisions, queries = load(Path(args.corpus).expanduser(), Path(args.queries).expanduser())
    except BadSet as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="neuralmind-eval-decisions-") as tmp:
        cache = Path(tempfile.gettempdir()) / "neuralmind-eval-decisions"  # the int8 model
        settings = load_settings(args.config, kernel={"home": str(cache / "home")},
                                 embeddings={"warm": False})
        kernel = Kernel(settings, plugins=[], load_entrypoints=False)
        try:
            result = evaluate(decisions, queries, modes, kernel, Path(tmp),
                              settings.section("memory", MemorySettings))
        finally:
            kernel.shutdown()
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['decisions']} decisions, {len(queries)} queries (top {LIMIT}, ACTIVE only)")
    print(f"{'kind':12}{'n':>4}" + "".join(f"{m:>10}" for m in modes) + "   metric")
    for kind in (*KINDS, "title"):
        row = result["by_kind"].get(kind)
        if row:
            print(f"{kind:12}{row['n']:>4}" + "".join(f"{row[m]:>10.3f}" for m in modes)
                  + f"   {row['metric']}")
    if "title" in result["by_kind"]:
        first = result["by_kind"]["title"]["first"]
        print("titles ranking their own record first: " + ", ".join(
            f"{m} {first[m]}/{result['by_kind']['title']['n']}" for m in modes))
    return 0
