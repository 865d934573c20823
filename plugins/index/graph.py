"""The resolved structural graph in this process, reloaded when the index's version stamp
moves: structural neighbours of a node or file, and the impact of a change — what depends on
the changed nodes, nearest first, each with the chain of edges that connects it.

Only resolved edges are walked (``exact``, and ``name`` guesses unless the caller leaves them
out, see ``resolve.py``); unresolved ones are listed by name where a caller asks for a node's
own references."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

KINDS = ("calls", "imports", "inherits")
# relation → (edge kind, direction): "in" walks from a node to what points at it
RELATIONS = {"callers": ("calls", "in"), "callees": ("calls", "out"),
             "importers": ("imports", "in"), "imports": ("imports", "out"),
             "subclasses": ("inherits", "in"), "bases": ("inherits", "out")}


@dataclass
class Graph:
    """Adjacency of one index version: ``(node, kind, how)`` per edge, both directions."""

    into: dict[int, list[tuple[int, str, str]]] = field(default_factory=lambda: defaultdict(list))
    out: dict[int, list[tuple[int, str, str]]] = field(default_factory=lambda: defaultdict(list))
    children: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    path: dict[int, str] = field(default_factory=dict)
    by_path: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    # file → file it has edges with (either way) → [weight, one such edge (src, kind, dst)]
    near: dict[str, dict[str, list]] = field(default_factory=lambda: defaultdict(dict))

    @classmethod
    def load(cls, store) -> Graph:
        graph = cls()
        for nid, path, parent in store.node_tree():
            graph.path[nid] = path
            graph.by_path[path].append(nid)
            if parent is not None:
                graph.children[parent].append(nid)
        for src, dst, kind, how in store.resolved_edges():
            graph.out[src].append((dst, kind, how))
            graph.into[dst].append((src, kind, how))
            a, b = graph.path.get(src), graph.path.get(dst)
            if a is not None and b is not None and a != b:
                weight = 1.0 if how == "exact" else 0.5
                for one, other in ((a, b), (b, a)):
                    entry = graph.near[one].setdefault(other, [0.0, (src, kind, dst)])
                    entry[0] += weight
        return graph

    def subtree(self, roots) -> list[int]:
        """``roots`` and everything they contain (a class's methods, a module's functions)."""
        seen, stack = dict.fromkeys(roots), list(roots)
        while stack:
            for child in self.children.get(stack.pop(), ()):
                if child not in seen:
                    seen[child] = None
                    stack.append(child)
        return list(seen)

    def walk(self, seeds: list[int], depth: int, kinds, direction: str, guessed: bool,
             limit: int, chain_imports: bool = True
             ) -> dict[int, tuple[int, list[tuple[int, str, str, int]]]]:
        """Breadth-first from ``seeds``: ``{node: (distance, steps)}`` for each node reached
        within ``depth`` (seeds excluded), steps ``(src, kind, how, dst)`` from the node back
        to a seed — the first, so a shortest, chain found. Without ``chain_imports`` a module
        reached through an import is not walked on: that it imports the changed code does not
        make everything importing it depend on that code."""
        adjacency = self.into if direction == "in" else self.out
        seen = set(seeds)
        back: dict[int, tuple[int, str, str]] = {}
        reached: dict[int, int] = {}
        frontier = deque((s, 0) for s in seeds)
        while frontier and len(reached) < limit:
            node, dist = frontier.popleft()
            if dist >= depth or (not chain_imports and node in back and back[node][1] == "imports"):
                continue
            for other, kind, how in sorted(adjacency.get(node, ()), key=lambda e: e[2] != "exact"):
                if other in seen or kind not in kinds or (how == "name" and not guessed):
                    continue
                seen.add(other)
                back[other] = (node, kind, how)
                reached[other] = dist + 1
                frontier.append((other, dist + 1))
                if len(reached) >= limit:
                    break
        out = {}
        for node, dist in reached.items():
            steps, cur = [], node
            while cur in back:
                prev, kind, how = back[cur]
                steps.append((cur, kind, how, prev) if direction == "in"
                             else (prev, kind, how, cur))
                cur = prev
            out[node] = (dist, steps)
        return out


def node_ref(row) -> dict:
    return {"id": row["id"], "label": row["qualname"], "kind": row["kind"], "path": row["path"],
            "line": row["line"]}


def impact(graph: Graph, store, seeds: list[int], depth: int, limit: int, guessed: bool
           ) -> tuple[list[dict], list[int], bool]:
    """What depends on ``seeds`` (and what they contain): ``(impacted, seed nids, truncated)``,
    nearest first; each item ``{node, distance, path}`` with the path as edges from the
    impacted node to a changed one."""
    roots = graph.subtree(seeds)
    reached = graph.walk(roots, depth, KINDS, "in", guessed, limit + 1, chain_imports=False)
    truncated = len(reached) > limit
    ordered = sorted(reached.items(), key=lambda kv: (
        kv[1][0], any(how != "exact" for _, _, how, _ in kv[1][1]), graph.path.get(kv[0], ""),
        kv[0]))[:limit]
    wanted = {n for n, _ in ordered} | {n for _, (_, steps) in ordered for s in steps
                                        for n in (s[0], s[3])}
    rows = store.nodes(wanted)
    items = []
    for nid, (dist, steps) in ordered:
        if nid not in rows:
            continue
        items.append({"node": node_ref(rows[nid]), "distance": dist, "path": [
            {"src": node_ref(rows[s]), "kind": kind, "how": how, "dst": node_ref(rows[d])}
            for s, kind, how, d in steps if s in rows and d in rows]})
    return items, roots, truncated


def neighbours(graph: Graph, store, seeds: list[int], depth: int, limit: int, guessed: bool,
               outside: str | None = None) -> dict[str, list[dict]]:
    """Per relation (callers, callees, importers, imports, subclasses, bases), the nodes
    within ``depth`` steps of that one kind; with ``outside`` (a file), only nodes elsewhere."""
    found: dict[str, list[tuple[int, int, str]]] = {}
    for name, (kind, direction) in RELATIONS.items():
        reached = graph.walk(seeds, depth, (kind,), direction, guessed, limit * 4)
        kept = [(nid, dist, steps[0][2]) for nid, (dist, steps) in reached.items()
                if outside is None or graph.path.get(nid) != outside]
        found[name] = sorted(kept, key=lambda t: (t[1], graph.path.get(t[0], ""), t[0]))[:limit]
    rows = store.nodes({nid for items in found.values() for nid, _, _ in items})
    return {name: [{"node": node_ref(rows[nid]), "distance": dist, "how": how}
                   for nid, dist, how in items if nid in rows]
            for name, items in found.items()}


def files_of(impacted: list[dict], seed_paths: list[str]) -> list[dict]:
    """The files of the changed and impacted nodes: distance 0 for the changed ones."""
    files: dict[str, dict] = {p: {"path": p, "distance": 0, "nodes": 0} for p in seed_paths}
    for item in impacted:
        path = item["node"]["path"]
        entry = files.setdefault(path, {"path": path, "distance": item["distance"], "nodes": 0})
        entry["nodes"] += 1
    return sorted(files.values(), key=lambda f: (f["distance"], f["path"]))
