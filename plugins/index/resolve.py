"""Edges resolved to nodes, inside the build's transaction (a reader never sees a half-linked
graph). Each edge's reference (``chunker.Edge``) is looked up the way its language finds
names, and the edge is marked with how it was found:

* ``exact`` — through the file's own definitions, an import binding (Python ``import`` /
  ``from … import … as``, relative imports; JS/TS ``import`` and ``require``; Go import paths
  and ``go.mod``; Rust ``use``/``mod`` paths from ``crate``, ``self``, ``super``; Java
  imports and packages), the enclosing class and its bases (``self.f``, ``super().f``, Java's
  implicit ``this``), or the package (Go, Java: the files of one directory);
* ``name`` — a call on a receiver the parser cannot type (``obj.save()``), or a member the
  class does not define, taken to be the one function, method or class of that name in the
  project;
* ``unresolved`` — anything else (the standard library, third-party code, ambiguous names).

An incremental build re-links only what may have changed: its own new edges, edges whose
target was re-parsed or deleted, and unresolved or name-guessed edges whose name a changed
file defines."""

from __future__ import annotations

import builtins
import hashlib
import pathlib
import posixpath
import sys
from collections import defaultdict

from plugins.index.chunker import is_test, module_name

SYMBOLS = ("function", "method", "class")
_JS = ("javascript", "typescript", "tsx")
_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_PACKAGES = ("go", "java")  # one directory is one package: its files share a namespace
# method names of the standard containers, paths and hashes: a call on an untyped receiver
# is never guessed to be one of the project's methods
_COMMON_METHODS = frozenset(
    n for t in (dict, list, str, bytes, set, tuple, int, float, object, pathlib.Path,
                type(hashlib.sha1())) for n in dir(t)) | {
    "read", "write", "close", "flush", "readline", "seek", "tell", "send", "recv", "push", "map",
    "filter", "forEach", "reduce", "then", "catch", "finally", "has", "set", "slice", "splice",
    "concat", "includes", "indexOf", "toString", "trim", "some", "every", "entries", "log",
    "error", "warn", "info", "debug", "apply", "call", "bind", "length", "size", "next", "run",
    "start", "stop", "open", "len", "new", "unwrap", "expect", "clone", "iter", "collect",
    "to_string", "as_str", "is_empty", "equals", "hashCode", "add", "put", "contains"}
# names a receiver may have that are never the project's: a call on them is not guessed
_GLOBALS = {"python": frozenset(dir(builtins)),
            **dict.fromkeys(_JS, frozenset({"console", "window", "document", "process", "module",
                                            "exports", "globalThis", "require", "this"}))}


class Resolver:
    """The project's names, loaded once per build inside its transaction."""

    def __init__(self, store, conn):
        self.path: dict[int, str] = {}
        self.kind: dict[int, str] = {}
        self.qualname: dict[int, str] = {}
        self.parent: dict[int, int | None] = {}
        self.language: dict[str, str] = {}
        self.module: dict[str, int] = {}  # path → its module (or file) node
        self.qual: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.dirs: dict[tuple[str, str], list[str]] = defaultdict(list)  # (dir, language) → paths
        for r in store.graph_nodes(conn):
            nid, path = r["nid"], r["path"]
            self.path[nid], self.kind[nid] = path, r["kind"]
            self.qualname[nid], self.parent[nid] = r["qualname"], r["parent"]
            self.language[path] = r["language"]
            if r["parent"] is None:
                self.module.setdefault(path, nid)
            else:
                self.qual[(path, r["qualname"])].append(nid)
            if r["kind"] in SYMBOLS:
                self.by_name[r["name"]].append(nid)
        for path, language in self.language.items():
            self.dirs[(posixpath.dirname(path), _family(language))].append(path)
        self.bindings: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for path, ref, alias in store.graph_bindings(conn):
            self.bindings[path][alias].append(ref)
        self._busy: set[tuple[str, str]] = set()
        self.returns: dict[int, str] = dict(store.graph_returns(conn))
        self._types: dict[int, int | None] = {}
        self.bases: dict[int, list[int]] = defaultdict(list)
        for src, dst in store.graph_bases(conn):
            self.bases[src].append(dst)
        self._python = _python_modules(self)
        self._root_names = _root_package_names(self)
        self._go = _go_modules(store, conn)

    # -- scopes -------------------------------------------------------------------------------

    def scope(self, path: str) -> list[int]:
        """The module nodes whose top-level names ``path`` sees without an import."""
        language = self.language.get(path, "")
        if language in _PACKAGES:
            peers = self.dirs[(posixpath.dirname(path), language)]
            return [self.module[p] for p in peers if p in self.module]
        return [self.module[path]] if path in self.module else []

    def top(self, modules: list[int], name: str) -> int | None:
        """``name`` in these modules: defined there, a submodule, or imported there (a
        package re-exports what its ``__init__`` imports; JS ``export … from``)."""
        for module in modules:
            found = self.qual.get((self.path[module], name))
            if found:
                return found[-1]  # the last definition wins (Python overloads)
            sub = self.submodule(module, name)
            if sub is not None:
                return sub
        for module in modules:
            found = self.imported(self.path[module], name)
            if found is not None:
                return found
        return None

    def submodule(self, module: int, name: str) -> int | None:
        path = self.path[module]
        language = self.language.get(path)
        if language == "python":
            return self._python.get(f"{self.qualname[module]}.{name}")
        if language == "rust":
            return self._rust_file(_rust_dir(path), name)
        return None

    def enclosing_class(self, nid: int) -> int | None:
        cur = self.parent.get(nid)
        while cur is not None:
            if self.kind[cur] == "class":
                return cur
            cur = self.parent.get(cur)
        qualname = self.qualname.get(nid, "")
        if "." in qualname:  # a Go method whose type is declared in another file
            owner = qualname.rsplit(".", 1)[0]
            for module in self.scope(self.path[nid]):
                for cand in self.qual.get((self.path[module], owner), ()):
                    if self.kind[cand] == "class":
                        return cand
        return None

    def member(self, cls: int, name: str, own: bool = True, seen: set | None = None) -> int | None:
        """``name`` defined in class ``cls`` (``own``) or, failing that, in its bases."""
        seen = seen if seen is not None else set()
        if cls in seen or len(seen) > 16:
            return None
        seen.add(cls)
        qualname = f"{self.qualname[cls]}.{name}"
        twins = []
        for module in self.scope(self.path[cls]):
            twins += self.qual.get((self.path[module], self.qualname[cls]), ())
            if own:
                found = self.qual.get((self.path[module], qualname))
                if found:
                    return found[-1]
        for twin in twins or [cls]:  # Rust: `impl T` and `impl Trait for T` are both T
            for base in self.bases.get(twin, ()):
                found = self.member(base, name, True, seen)
                if found is not None:
                    return found
        return None

    def descend(self, node: int, parts: list[str]) -> int | None:
        for part in parts:
            kind = self.kind[node]
            if self.parent[node] is None:
                nxt = self.top([node], part)
            elif kind == "class":
                nxt = self.member(node, part)
            else:
                return None
            if nxt is None:
                return None
            node = nxt
        return node

    # -- imports ------------------------------------------------------------------------------

    def locate(self, path: str, spec: str) -> tuple[list[int], list[str]]:
        """The module nodes ``spec`` names from ``path``, and what is left of it (names
        inside the module: ``a::b::C`` → module ``b``, ``["C"]``)."""
        language = self.language.get(path, "")
        if language == "python":
            found = self._python_module(spec)
            return ([found], []) if found is not None else ([], [])
        if language in _JS:
            found = self._js_module(path, spec)
            return ([found], []) if found is not None else ([], [])
        if language == "go":
            return self._go_package(spec), []
        if language == "rust":
            return self._rust_module(path, spec)
        if language == "java":
            return self._java_package(spec)
        return [], []

    def binding(self, path: str, ref: str) -> int | None:
        """The node an import binding names (its module when the member is no definition)."""
        spec, _, member = ref.partition("#")
        if self.language.get(path) == "python" and member and member != "*":
            sub = self._python_module(f"{spec}.{member}" if spec else member)
            if sub is not None:
                return sub
        modules, rest = self.locate(path, spec)
        if not modules:
            return None
        parts = rest + ([p for p in member.split(".") if p] if member and member != "*" else [])
        if not parts:
            return modules[0]
        first = self.top(modules, parts[0])
        found = self.descend(first, parts[1:]) if first is not None else None
        return found if found is not None else modules[0]

    def _python_module(self, spec: str) -> int | None:
        found = self._python.get(spec)
        head, _, rest = spec.partition(".")
        if found is None and head in self._root_names:  # the project's root is the package
            found = self._python.get(rest) if rest else self.module.get("__init__.py")
        return found

    def _js_module(self, path: str, spec: str) -> int | None:
        if not spec.startswith("."):
            return None  # a package from node_modules
        base = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
        stem = base[: -len(posixpath.splitext(base)[1])] if base.endswith(_JS_EXTENSIONS) else base
        for cand in [base, *(s + e for s in (stem, stem + "/index") for e in _JS_EXTENSIONS)]:
            if cand in self.module and self.language[cand] in _JS:
                return self.module[cand]
        return None

    def _go_package(self, spec: str) -> list[int]:
        folder = None
        for root, module in self._go:
            if spec == module or spec.startswith(module + "/"):
                folder = posixpath.normpath(posixpath.join(root, spec[len(module) + 1:]))
                break
        if folder is None:
            parts = spec.split("/")
            for cut in range(len(parts) - 1):  # a suffix of two parts or more
                tail = "/".join(parts[cut:])
                hits = sorted(d for d, lang in self.dirs if lang == "go"
                              and (d == tail or d.endswith("/" + tail)))
                if hits:
                    folder = hits[0]
                    break
        peers = self.dirs.get((folder if folder != "." else "", "go"), [])
        return [self.module[p] for p in peers if p in self.module]

    def _java_package(self, spec: str) -> tuple[list[int], list[str]]:
        parts = spec.split(".")
        for cut in range(len(parts), 0, -1):
            tail = "/".join(parts[:cut])
            hits = sorted(d for d, lang in self.dirs if lang == "java"
                          and (d == tail or d.endswith("/" + tail)))
            if hits:
                peers = self.dirs[(hits[0], "java")]
                return [self.module[p] for p in peers if p in self.module], parts[cut:]
        return [], []

    def _rust_file(self, folder: str, name: str) -> int | None:
        for cand in (posixpath.join(folder, f"{name}.rs"), posixpath.join(folder, name, "mod.rs")):
            if cand in self.module and self.language[cand] == "rust":
                return self.module[cand]
        return None

    def _rust_module(self, path: str, spec: str) -> tuple[list[int], list[str]]:
        parts = [p for p in spec.split("::") if p]
        here = _rust_dir(path)
        starts = []
        # `crate::`, `self::`, `super::` name the module they start from: what no file holds
        # after it may be a module declared inside it (`self::tests::X`, `mod tests { … }`)
        explicit = bool(parts) and parts[0] in ("crate", "self", "super")
        if parts and parts[0] == "crate":
            starts.append(self._crate_root(path))
            parts = parts[1:]
        elif parts and parts[0] in ("self", "super"):
            while parts and parts[0] in ("self", "super"):
                if parts.pop(0) == "super":
                    here = posixpath.dirname(here)
            starts.append(here)
        else:  # a module declared here, else one at the crate root, else another crate
            starts += [here, self._crate_root(path)]
        for folder in starts:
            if folder is None:
                continue
            module, rest = self._rust_module_file(folder), list(parts)
            while rest:
                nxt = self._rust_file(folder, rest[0])
                if nxt is None:
                    break
                module, folder = nxt, posixpath.join(folder, rest.pop(0))
            inline = explicit and module is not None and bool(rest) and bool(
                self.qual.get((self.path[module], rest[0])))  # `self::tests::X`
            if module is not None and (inline or not parts or len(rest) < len(parts)):
                return [module], rest
        return [], []

    def _rust_module_file(self, folder: str) -> int | None:
        for name in ("mod.rs", "lib.rs", "main.rs"):
            cand = posixpath.join(folder, name)
            if cand in self.module:
                return self.module[cand]
        parent, name = posixpath.split(folder)
        cand = posixpath.join(parent, f"{name}.rs")
        return self.module.get(cand)

    def _crate_root(self, path: str) -> str | None:
        folder = posixpath.dirname(path)
        while True:
            for name in ("lib.rs", "main.rs"):
                if posixpath.join(folder, name) in self.module:
                    return folder
            if not folder:
                return None
            folder = posixpath.dirname(folder)

    # -- references ---------------------------------------------------------------------------

    def resolve(self, src: int, kind: str, target: str, ref: str | None) -> tuple[int | None, str]:
        path = self.path.get(src)
        if path is None:
            return None, "unresolved"
        if kind == "imports":
            found = self.binding(path, ref or target)
            return (found, "exact") if found is not None else (None, "unresolved")
        if kind == "returns":
            found = self.type_of(src)
            return (found, "exact") if found is not None else (None, "unresolved")
        ref = ref or target
        parts = ref.replace("::", ".").split(".")
        head, rest = parts[0], parts[1:]
        if head == "?":
            return self.guess(rest[-1] if rest else target)
        if head in ("self", "super"):
            cls = self.enclosing_class(src)
            if cls is None or not rest:
                return None, "unresolved"
            found = self.member(cls, rest[0], own=head == "self")
            found = self.descend(found, rest[1:]) if found is not None else None
            return (found, "exact") if found is not None else self.guess(rest[-1])
        if head.startswith("@"):  # an untyped parameter: a pytest fixture's, in tests
            cls = self.fixture(path, head[1:]) if rest and is_test(path) else None
            found = self.descend(cls, rest) if cls is not None else None
            if found is not None:
                return found, "exact"
            return self.guess(rest[-1]) if rest else (None, "unresolved")
        language = self.language.get(path, "")
        found = None
        if not rest and language == "java":  # implicit `this`
            cls = self.enclosing_class(src)
            found = self.member(cls, head) if cls is not None else None
        if found is None and language == "python" and rest and head in self.bindings[path]:
            found = self._dotted_module(head, rest)  # `import a.b` then `a.b.f()`
        if found is None:
            start = self.lookup(path, head)
            if start is not None:
                found = self.descend(start, rest)
                if found is None and len(rest) > 1:  # `obj.attr.f()`: attr's type is unknown
                    return self.guess(rest[-1])
            elif rest and self._variable(path, head, ref):
                return self.guess(rest[-1])
        return (found, "exact") if found is not None else (None, "unresolved")

    def _dotted_module(self, head: str, rest: list[str]) -> int | None:
        """The longest ``head.rest[:k]`` that is a Python module, descended by the rest."""
        for k in range(len(rest), 0, -1):
            module = self._python_module(".".join([head, *rest[:k]]))
            if module is not None:
                return self.descend(module, rest[k:])
        return None

    def _variable(self, path: str, head: str, ref: str) -> bool:
        """Whether ``head`` reads as a local variable, whose type nobody here knows: not an
        import (that is another package), not a type or module path (``Vec::new``), not a
        builtin (``str.join``)."""
        if head in self.bindings[path] or "::" in ref:
            return False
        if not (head[:1].islower() or head[:1] == "_"):
            return False
        return head not in _GLOBALS.get(self.language.get(path, ""), ())

    def lookup(self, path: str, name: str) -> int | None:
        """A bare name in ``path``: its own definitions and package, then its imports."""
        found = self.top(self.scope(path), name)
        return found if found is not None else self.imported(path, name)

    def imported(self, path: str, name: str) -> int | None:
        """What ``path``'s imports bind to ``name``: a named binding, else a wildcard's
        (modules that re-export each other are followed once)."""
        if (path, name) in self._busy or not self.bindings.get(path):
            return None
        self._busy.add((path, name))
        try:
            return self._imported(path, name)
        finally:
            self._busy.discard((path, name))

    def _imported(self, path: str, name: str) -> int | None:
        for ref in self.bindings[path].get(name, ()):
            spec, _, member = ref.partition("#")
            if self.language[path] == "python" and not member and name == spec.split(".")[0]:
                ref = name  # `import a.b` binds `a`
            found = self.binding(path, ref)
            if found is not None:
                return found
        for ref in self.bindings[path].get("*", ()):
            modules, rest = self.locate(path, ref.partition("#")[0])
            found = self.top(modules, name) if modules and not rest else None
            if found is not None:
                return found
        return None

    def type_of(self, fn: int) -> int | None:
        """The class function ``fn`` returns, from its ``returns`` reference."""
        if fn in self._types:
            return self._types[fn]
        self._types[fn] = None  # a function that returns what it returns
        ref = self.returns.get(fn)
        found = None
        if ref:
            dst, how = self.resolve(fn, "calls", ref.rsplit(".", 1)[-1], ref.removeprefix("()"))
            if dst is not None and how == "exact":
                found = dst if self.kind[dst] == "class" else (
                    self.type_of(dst) if ref.startswith("()") else None)
        self._types[fn] = found
        return found

    def fixture(self, path: str, name: str) -> int | None:
        """The class the pytest fixture ``name`` seen from ``path`` returns: a function of
        that name in the file itself, else in a ``conftest.py`` of its folder or above."""
        folder = posixpath.dirname(path)
        candidates = [path]
        while True:
            candidates.append(posixpath.join(folder, "conftest.py"))
            if not folder:
                break
            folder = posixpath.dirname(folder)
        for cand in candidates:
            for fn in self.qual.get((cand, name), ()):
                if self.kind[fn] == "function":
                    return self.type_of(fn)
        return None

    def guess(self, name: str) -> tuple[int | None, str]:
        """The only function, method or class of that name in the project, if there is one
        and it is not a method every string, list or dict has (``get``, ``find``, ``push``)."""
        if name in _COMMON_METHODS:
            return None, "unresolved"
        found = self.by_name.get(name, ())
        distinct = {(self.path[n], self.qualname[n]) for n in found}  # overloads are one
        return (found[-1], "name") if len(distinct) == 1 else (None, "unresolved")


def _family(language: str) -> str:
    return "javascript" if language in _JS else language


def _rust_dir(path: str) -> str:
    """Where the submodules of the Rust file ``path`` live."""
    folder, name = posixpath.split(path)
    if name in ("lib.rs", "main.rs", "mod.rs"):
        return folder
    return posixpath.join(folder, name[:-3])


def _python_modules(resolver: Resolver) -> dict[str, int]:
    """Each Python module under the name code imports it by: its path's dotted form, and the
    same without the leading folders that are not packages (``src/app/x.py`` → ``app.x``)."""
    packages = {posixpath.dirname(p) for p, lang in resolver.language.items()
                if lang == "python" and posixpath.basename(p) in ("__init__.py", "__init__.pyi")}
    out: dict[str, int] = {}
    for path, nid in resolver.module.items():
        if resolver.language[path] != "python":
            continue
        dotted = resolver.qualname[nid]
        out.setdefault(dotted, nid)
        folders = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
        cut = 0
        while cut < len(folders) and "/".join(folders[: cut + 1]) not in packages:
            cut += 1
        short = module_name("/".join(folders[cut:] + [posixpath.basename(path)]))
        if short and short != "__init__":
            out.setdefault(short, nid)
    return out


def _root_package_names(resolver: Resolver) -> frozenset[str]:
    """When the project's root is itself a package (an ``__init__.py`` at the top, as in a
    copy of ``site-packages/falcon``), the names its own code imports it by: the first part
    of absolute imports that name one of its modules once that part is left out."""
    if resolver.language.get("__init__.py") != "python":
        return frozenset()
    names = set()
    for found in resolver.bindings.values():
        for refs in found.values():
            for ref in refs:
                spec = ref.partition("#")[0]
                head, _, rest = spec.partition(".")
                if rest and head not in sys.stdlib_module_names and head not in resolver._python \
                        and rest in resolver._python:
                    names.add(head)
    return frozenset(names)


def _go_modules(store, conn) -> list[tuple[str, str]]:
    """``(folder, module path)`` of each ``go.mod`` the index holds, deepest first."""
    found = []
    for path, text in store.texts_named(conn, "go.mod"):
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "module":
                found.append((posixpath.dirname(path), words[1].strip('"')))
                break
    return sorted(found, key=lambda pair: -len(pair[0]))


def link(store, conn, names: set[str] | None, files_moved: bool = False) -> dict[str, int]:
    """Resolve the edges that need it (every edge when ``names`` is None: a full build);
    ``names`` are those a changed file defines; ``files_moved``: a file came or went, so a
    module an import could not find may be there now. Returns counts by outcome."""
    if names is not None and not names and not files_moved:
        return {}  # nothing was parsed, added or removed: every link still holds
    rows = store.edges_to_link(conn, names, files_moved)
    if not rows:
        return {}
    resolver = Resolver(store, conn)
    counts: dict[str, int] = defaultdict(int)
    updates = []
    ordered = sorted(rows, key=lambda r: r["kind"] != "inherits")  # bases before members
    for r in ordered:
        dst, how = resolver.resolve(r["src"], r["kind"], r["target"], r["ref"])
        if r["kind"] == "inherits" and dst is not None:
            resolver.bases[r["src"]].append(dst)
        updates.append((dst, how, r["rowid"]))
        counts[how] += 1
    store.set_links(conn, updates)
    return dict(counts)

