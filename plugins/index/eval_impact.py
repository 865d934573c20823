"""``neuralmind eval impact PATH``: how well ``impact`` of a function finds the tests that
exercise it, on a Python repository.

The ground truth comes from grep, not from our parser. A test file *calls* a function when it
holds ``name(`` and imports its module (``from pkg.mod import …``, ``import pkg.mod``, ``from
pkg import mod``), or calls it through its top-level package (``flask.json.dumps(``); it calls
a method when it holds ``.name(`` and the name of its class or of a class inheriting it (by
regex). Grep cannot tell same-named methods of unrelated classes apart, nor a function from a
same-named method, so the truth over-counts there: recall is a lower bound. Every function and
method outside the tests with a name of four letters or more (no dunders) is asked for; the
test files among its impact are the prediction. Precision and recall are pooled over all of
them (each true or false test file counts once per function), at depth 1 (direct callers, what
the truth describes) and, for recall, at depth 3. Three ways of walking the graph are compared:
resolved edges only, resolved plus the unique- name guesses (the default), and callers matched
by bare name — what the index knew before references were resolved."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from plugins.index.chunker import is_test

MIN_NAME = 4


def _imports(text: str) -> str:
    return "\n".join(line for line in text.splitlines()
                     if re.match(r"\s*(from\s+\S+\s+)?import\s", line))


def truth(fn: dict, tests: dict[str, str], heirs: dict[str, set[str]]) -> set[str]:
    """The test files that call ``fn`` by grep (see the module's docstring)."""
    name = re.escape(fn["name"])
    if fn["kind"] == "method":
        call = re.compile(rf"\.{name}\s*\(")
        owners = "|".join(map(re.escape, sorted({fn["owner"], *heirs.get(fn["owner"], ())})))
        owner = re.compile(rf"\b({owners})\b")
        return {p for p, text in tests.items() if call.search(text) and owner.search(text)}
    call = re.compile(rf"(?<!def )\b{name}\s*\(")
    module = fn["module"].split(".")
    dotted = re.escape(fn["module"])
    parent, last = re.escape(".".join(module[:-1])), re.escape(module[-1])
    imports = re.compile(rf"^\s*(from\s+{dotted}\s+import\b|import\s+{dotted}\b"
                         + (rf"|from\s+{parent}\s+import\s[^\n]*\b{last}\b" if parent else "")
                         + ")", re.M)
    through = re.compile(rf"\b{re.escape(module[0])}(\.\w+)*\.{name}\s*\(")
    return {p for p, text in tests.items()
            if (call.search(text) and imports.search(text)) or through.search(text)}


CLASS = re.compile(r"^\s*class\s+(\w+)\s*\(([^)]*)\)", re.M)


def inheritance(sources: dict[str, str]) -> dict[str, set[str]]:
    """Class name → the names of the classes that inherit it, directly or not (by regex)."""
    children: dict[str, set[str]] = defaultdict(set)
    for text in sources.values():
        for name, bases in CLASS.findall(text):
            for base in re.findall(r"\w+", bases):
                children[base].add(name)
    out: dict[str, set[str]] = {}
    for cls in list(children):
        seen, stack = set(), [cls]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        out[cls] = seen
    return out


def import_name(path: str, packages: set[str]) -> str:
    """The dotted name code imports ``path`` by: leading folders without an ``__init__.py``
    left out (``src/flask/app.py`` → ``flask.app``)."""
    parts = path[: -len(".py")].split("/")
    while len(parts) > 1 and "/".join(parts[:1]) not in packages:
        packages = {p.split("/", 1)[1] for p in packages if "/" in p}
        parts = parts[1:]
    return ".".join(p for p in parts if p != "__init__")


def score(pairs: list[tuple[set[str], set[str]]]) -> dict[str, float]:
    tp = sum(len(p & t) for p, t in pairs)
    predicted = sum(len(p) for p, _ in pairs)
    relevant = sum(len(t) for _, t in pairs)
    return {"precision": round(tp / predicted, 3) if predicted else 0.0,
            "recall": round(tp / relevant, 3) if relevant else 0.0,
            "predicted": predicted, "relevant": relevant, "true_positives": tp}


def main(args) -> int:
    root = Path(args.path).resolve()
    if not root.is_dir():
        print(f"neuralmind: {args.path} is not a directory", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nm-eval-impact-") as work:
        report = evaluate(root, Path(work), args.limit)
    if report is None:
        print(f"neuralmind: {root} holds no Python tests to measure against "
              "(files under tests/, test_*.py, *_test.py)", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{root}: {report['functions']} functions and methods, {report['test_files']} test "
          f"files, {report['with_tests']} functions called by a test (grep); build "
          f"{report['build_s']} s, links {report['links']}")
    print(f"{'walk':<22}{'P@1':>7}{'R@1':>7}{'R@3':>7}{'pred@1':>8}{'ms/fn':>8}")
    for name, m in report["walks"].items():
        print(f"{name:<22}{m['depth1']['precision']:>7.3f}{m['depth1']['recall']:>7.3f}"
              f"{m['depth3']['recall']:>7.3f}{m['depth1']['predicted']:>8}{m['ms']:>8.2f}")
    return 0


def evaluate(root: Path, work: Path, limit: int) -> dict | None:
    from plugins.index import graph, plugin
    from plugins.index.eval import throwaway_kernel
    kernel = throwaway_kernel(work, model=False)
    try:
        service = plugin._service(kernel)
        project, _ = kernel.projects.register(str(root))
        started = time.perf_counter()
        built = service.run_build(project, trigger="eval")
        build_s = round(time.perf_counter() - started, 2)
        store = service.store(project)
        sources = {f["path"]: (root / f["path"]).read_text(errors="replace")
                   for f in store.files("repo") if f["language"] == "python"}
        tests = {p: text for p, text in sources.items() if is_test(p)}
        if not tests:
            return None
        packages = {p.rsplit("/", 1)[0] for p in sources if p.endswith("/__init__.py")}
        functions = _functions(store, packages)
        heirs = inheritance(sources)
        g = service.graph(project, store)
        by_name = _callers_by_name(store)
        truths = {fn["nid"]: truth(fn, tests, heirs) for fn in functions}
        walks = {}
        for name, guessed in (("resolved", False), ("resolved + guesses", True)):
            started = time.perf_counter()
            found = {d: [(_tests_in(graph.impact(g, store, [fn["nid"]], d, limit, guessed)[0]),
                          truths[fn["nid"]]) for fn in functions] for d in (1, 3)}
            ms = (time.perf_counter() - started) * 1000 / max(1, 2 * len(functions))
            walks[name] = {"depth1": score(found[1]), "depth3": score(found[3]), "ms": ms}
        named = [({p for p in by_name.get(fn["name"], ()) if is_test(p)}, truths[fn["nid"]])
                 for fn in functions]
        walks["bare name (before)"] = {"depth1": score(named), "depth3": score(named), "ms": 0.0}
        return {"path": str(root), "functions": len(functions), "test_files": len(tests),
                "with_tests": sum(1 for t in truths.values() if t), "build_s": build_s,
                "links": built["edges_linked"], "walks": walks}
    finally:
        kernel.shutdown()


def _functions(store, packages: set[str]) -> list[dict]:
    """Functions and methods outside the tests worth asking for (of overloads, the last)."""
    out: dict[tuple[str, str], dict] = {}
    for r in store.symbols(("function", "method"), "python"):
        name = r["name"]
        if is_test(r["path"]) or len(name) < MIN_NAME or name.startswith("__") \
                or name.startswith("test"):
            continue
        owner = r["qualname"].rsplit(".", 2)[-2] if "." in r["qualname"] else ""
        out[(r["path"], r["qualname"])] = {
            "nid": r["nid"], "name": name, "kind": r["kind"], "owner": owner,
            "module": import_name(r["path"], packages)}
    return list(out.values())


def _callers_by_name(store) -> dict[str, set[str]]:
    """File paths of nodes with a call edge to each bare name (the index before resolving)."""
    out: dict[str, set[str]] = defaultdict(set)
    for target, path in store.call_sites():
        out[target].add(path)
    return out


def _tests_in(items: list[dict]) -> set[str]:
    return {i["node"]["path"] for i in items if is_test(i["node"]["path"])}
