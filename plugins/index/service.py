"""What the index routes do, without HTTP: one ``IndexService`` per kernel holds each
project's store and runs builds, searches, queries and rule changes against it."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from pathlib import Path
from typing import Any

from neuralmind import (TOKEN_COUNTER, APIError, Conflict, Forbidden, InvalidFields, NotFound,
                        ProjectStores, Unavailable, UnsupportedMediaType, VersionedCache,
                        estimate_tokens, file_size, gitinfo, now_iso)
from plugins.index import context, graph, ingest, learning, search
from plugins.index.build import Build, file_row, stored_embed_text
from plugins.index.walker import FileEntry, contained
from plugins.index.ignore import Rule, RuleSet, normalise_value, system_rules
from plugins.index.store import MIGRATIONS, IndexStore

LOCK_TTL_S = 120.0  # a build lease not refreshed for this long belongs to a dead build


def build_lease(project) -> str:
    """The kernel lease a build holds: one build of a project at a time, on every server."""
    return f"index.build:{project.id}"
HEARTBEAT_S = 2.0


class IndexService:
    def __init__(self, kernel, settings):
        self.kernel = kernel
        self.settings = settings
        self._stores = ProjectStores(lambda project: IndexStore(kernel.open_database(
            self.db_path(project), MIGRATIONS)))
        self.matrices: VersionedCache[search.Matrix] = VersionedCache()  # per index path
        self.layers: VersionedCache[tuple] = VersionedCache()  # L0, L1, size per index path
        self.graphs: VersionedCache[graph.Graph] = VersionedCache()  # per index path
        self.learning = learning.Learning(kernel, settings)

    def close(self) -> None:
        self.learning.close()

    def forget(self, project) -> None:
        """Let go of the project's stores and caches (the kernel's ``forget_project``)."""
        self._stores.forget(project)
        for cache in (self.matrices, self.layers, self.graphs):
            cache.forget(self.db_path(project))
        self.learning.forget(project)

    # -- stores -------------------------------------------------------------------------------

    def db_path(self, project) -> Path:
        """The project's index file, also the key of its per-process caches."""
        return project.state_dir / "index.db"

    def store(self, project) -> IndexStore:
        return self._stores.get(project)

    def built_store(self, project) -> IndexStore:
        """The project's store, once a build made it: a read never creates (or migrates) the
        file; without an index it is 409 ``index_not_built``."""
        # 0 bytes with no log: none, or a first open the disk refused — no index either way
        if not file_size(self.db_path(project)) or not (
                store := self.store(project)).meta().get("built_at"):
            raise Conflict(f"project {project.id} has no index yet: build it first (POST "
                           f"/v1/projects/{project.id}/build, `neuralmind project build` or "
                           "`neuralmind up`)", code="index_not_built")
        return store

    def describe(self, project) -> dict[str, Any]:
        if not file_size(self.db_path(project)):
            return {"built": False, "built_at": None, "built_head": None}
        meta = self.store(project).meta()
        return {"built": bool(meta.get("built_at")), "built_at": meta.get("built_at"),
                "built_head": meta.get("built_head") or None}

    # -- rules --------------------------------------------------------------------------------

    def rules(self, project) -> list[Rule]:
        own = [Rule(r["id"], r["type"], r["value"], bool(r["enabled"]), r["reason"], False,
                    r["created_at"], r["updated_at"]) for r in self.store(project).rules()]
        return system_rules(self.settings.max_file_bytes) + own

    def ruleset(self, project) -> RuleSet:
        return RuleSet(self.rules(project))

    def _purge_matching(self, project, rule: Rule) -> int:
        if not rule.enabled:
            return 0
        store, one = self.store(project), RuleSet([rule])
        doomed = [f["path"] for f in store.files("repo") if one.match_path(f["path"], f["size"])]
        return store.purge(doomed)

    def add_rule(self, project, body) -> tuple[Rule, int]:
        try:
            value = normalise_value(body.type, body.value)
        except ValueError as ex:
            raise InvalidFields.one("value", str(ex)) from None
        self._refuse_twin(project, body.type, value)
        rid, now = "ign_" + secrets.token_hex(8), now_iso()
        self.store(project).save_rule(rid, body.type, value, body.enabled, body.reason, now)
        rule = self.rule(project, rid)
        return rule, self._purge_matching(project, rule)

    def _refuse_twin(self, project, type_: str, value: str, rid: str | None = None) -> None:
        """A second rule of the same type and value would only double what the first does."""
        twin = next((r for r in self.rules(project)
                     if r.type == type_ and r.value == value and r.id != rid), None)
        if twin is not None:
            raise Conflict(f"ignore rule {twin.id} already leaves out {type_} {value!r}"
                           + ("" if twin.protected else ": change that one instead"),
                           code="rule_exists", details={"rule": twin.id})

    def rule(self, project, rid: str) -> Rule:
        for rule in self.rules(project):
            if rule.id == rid:
                return rule
        raise NotFound(f"no ignore rule with id {rid}", code="rule_not_found")

    def _own_rule(self, project, rid: str) -> Rule:
        rule = self.rule(project, rid)
        if rule.protected:
            raise Forbidden(f"{rid} is a protected system rule", code="rule_protected")
        return rule

    def update_rule(self, project, rid: str, patch) -> tuple[Rule, int, bool]:
        """The rule as patched, how many indexed files it removed, and whether it changed."""
        rule = self._own_rule(project, rid)
        value = rule.value
        if patch.value is not None:
            try:
                value = normalise_value(rule.type, patch.value)
            except ValueError as ex:
                raise InvalidFields.one("value", str(ex)) from None
            self._refuse_twin(project, rule.type, value, rid)
        enabled = rule.enabled if patch.enabled is None else patch.enabled
        reason = rule.reason if patch.reason is None else patch.reason
        if (value, enabled, reason) == (rule.value, rule.enabled, rule.reason):
            return rule, 0, False  # nothing written: ``updated_at`` says when it last changed
        self.store(project).save_rule(rid, rule.type, value, enabled, reason, now_iso())
        updated = self.rule(project, rid)
        return updated, self._purge_matching(project, updated), True

    def delete_rule(self, project, rid: str) -> Rule:
        rule = self._own_rule(project, rid)
        self.store(project).delete_rule(rid)
        return rule

    def relative(self, project, raw: str, field: str = "path") -> str:
        """A client's path as a project-relative POSIX path; outside the root is a 422."""
        root = os.path.realpath(project.path)
        full = os.path.normpath(os.path.join(root, raw))
        if full != root and not full.startswith(root + os.sep):
            raise InvalidFields.one(field, f"{raw} is outside the project", "path_outside_project")
        if full == root:
            raise InvalidFields.one(field, "name a file or folder inside the project", "path_is_root")
        return os.path.relpath(full, root).replace(os.sep, "/")

    # -- builds -------------------------------------------------------------------------------

    def start_build(self, project, actor, *, full: bool, wait: bool, request_id: str | None):
        """Submit the build job, or 409 ``index_busy`` with the job already running."""
        owner = "build-" + secrets.token_hex(6)
        # the job exists before the lock names it, so a build refused as busy always finds
        # the running build's job
        jid = self.kernel.jobs.create("build", project_id=project.id, actor=actor.id)
        lease = build_lease(project)
        try:
            holder = self.kernel.leases.acquire(lease, owner, LOCK_TTL_S, job_id=jid)
        except BaseException:
            self.kernel.jobs.discard(jid)  # else it stays queued until the server restarts
            raise
        if holder is not None:
            self.kernel.jobs.discard(jid)
            job = self.kernel.jobs.find(holder["job_id"]) if holder["job_id"] else None
            raise Conflict(f"a build of {project.id} is already running", code="index_busy",
                           details={"job": job.model_dump() if job else None})

        def work(ctx):
            beat = [time.monotonic()]

            def progress(**fields):
                ctx.progress(**fields)
                if time.monotonic() - beat[0] > HEARTBEAT_S:
                    beat[0] = time.monotonic()
                    self.kernel.leases.heartbeat(lease, owner)

            try:
                return self.run_build(project, check=ctx.check, progress=progress, full=full,
                                      actor=actor.id, request_id=request_id, trigger="api")
            finally:
                self.kernel.leases.release(lease, owner)

        try:
            return self.kernel.jobs.start(jid, work, wait=wait)
        except BaseException:
            # the work did not start (``start`` fails before its thread does), or ended and
            # let go of the lease already: neither discarding a started job nor releasing a
            # released lease changes anything
            self.kernel.leases.release(lease, owner)
            self.kernel.jobs.discard(jid)
            raise

    def run_build(self, project, *, check=lambda: None, progress=lambda **_: None,
                  full: bool = False, paths: set[str] | None = None, actor: str | None = None,
                  request_id: str | None = None, trigger: str) -> dict[str, Any]:
        store = self.store(project)
        result = Build(self.kernel, project, store, self.ruleset(project), self.settings,
                       check, progress).run(full=full, paths=paths)
        result["trigger"] = trigger
        if trigger == "watch" and not (result["files_changed"] or result["files_deleted"]):
            return result
        self.kernel.emit("index.built", project=project, actor=actor, data=result,
                         request_id=request_id)
        return result

    # -- reading ------------------------------------------------------------------------------

    def search(self, project, query: str, n: int, mode: str, file_type: str | None,
               learn: bool = True):
        """Hits, and a notice when hybrid fell back to keyword. Learns (``learn``): the hit
        files co-activate, and the answer counts toward the savings."""
        store = self.built_store(project)
        ranked, notice = search.search(self.kernel, self.matrices, store, self.db_path(project),
                                       query, n, mode, file_type, self.settings.keyword_weight,
                                       self.settings.hub_weight)
        found = search.hits(store, ranked)
        if learn:
            files = [h["source_file"] for h in found]
            served = sum(estimate_tokens(f"{h['source_file']}:{h['line']} {h['kind']} "
                                         f"{h['label']}") for h in found)
            self.learning.observe(project, "search", files, served, store.file_tokens(files))
        return found, notice

    def query(self, project, question: str, query_type: str, budget: int | None,
              trace: bool) -> dict[str, Any]:
        started = time.perf_counter()
        store = self.built_store(project)
        budget = budget or self.settings.default_budget
        file_type = {"code": "code", "docs": "docs"}.get(query_type)
        ranked, notice = search.search(self.kernel, self.matrices, store, self.db_path(project),
                                       question, 8, "hybrid", file_type,
                                       self.settings.keyword_weight, self.settings.hub_weight)
        found = search.hits(store, ranked)
        rows = store.nodes(h["nid"] for h in found)
        hit_rows = [rows[h["nid"]] for h in found if h["nid"] in rows]
        searched = time.perf_counter()
        l0, l1, size = context.static_layers(project, store, self.db_path(project), self.layers)
        l2 = context.neighbourhood(store, hit_rows)
        room = max(0, min(context.L2_MAX, budget - 2 * context.L0_MAX)
                   - sum(estimate_tokens(i) for i in l2))
        plain_hits = [{k: h[k] for k in ("source_file", "line", "label", "score")} for h in found]
        for part in self.kernel.pm.hook.query_context(kernel=self.kernel, project=project,
                                                      question=question, hits=plain_hits,
                                                      budget=room):
            for piece in part or ():
                l2.append(f"{piece.get('title', '')}\n{piece.get('text', '')}".strip())
        layers = [context.Layer("L0", context.L0_MAX, l0),
                  context.Layer("L1", context.L1_MAX, l1, "\n"),
                  context.Layer("L2", context.L2_MAX, l2),
                  context.Layer("L3", budget, context.snippets(hit_rows), hold_first=True)]
        text, counts, used = context.pack(layers, budget)
        total = sum(counts.values())
        files = [h["source_file"] for h in found]
        self.learning.observe(project, "query", files, total, store.file_tokens(files))
        out = {"project_id": project.id, "question": question, "context": text,
               "tokens": {"total": total, **counts}, "layers_used": used,
               "reduction_ratio": round(size / total, 2) if total else 0.0,
               "search_hits": len(found),
               "trace": None}
        if trace:
            out["trace"] = {"mode": "hybrid", "notice": notice, "file_type": file_type,
                            "budget": budget, "token_counter": TOKEN_COUNTER,
                            "hits": [{k: v for k, v in h.items() if k != "nid"} for h in found],
                            "search_ms": round((searched - started) * 1000, 2),
                            "total_ms": round((time.perf_counter() - started) * 1000, 2)}
        return out

    def wakeup(self, project) -> dict[str, Any]:
        store = self.built_store(project)
        l0, l1, size = context.static_layers(project, store, self.db_path(project), self.layers)
        layers = [context.Layer("L0", context.L0_MAX, l0),
                  context.Layer("L1", context.L1_MAX, l1, "\n")]
        text, counts, used = context.pack(layers, context.L0_MAX + context.L1_MAX)
        counts.update(l2=0, l3=0)
        total = sum(counts.values())
        return {"project_id": project.id, "context": text, "tokens": {"total": total, **counts},
                "layers_used": used, "reduction_ratio": round(size / total, 2) if total else 0.0,
                "warning": self.staleness(project, store)}

    def staleness(self, project, store) -> str | None:
        """Indexed files whose size or mtime moved since the build (one stat each), and a
        HEAD that moved; new files show up at the next build."""
        changed = 0
        for path, (size, mtime, _) in store.file_states().items():
            try:
                st = os.stat(os.path.join(project.path, path))
            except OSError:
                changed += 1
                continue
            changed += (st.st_size, st.st_mtime_ns) != (size, mtime)
        meta = store.meta()
        notes = []
        if changed:
            notes.append(f"{changed} indexed file(s) changed or were removed after the build")
        head = gitinfo.head(project.path)
        if head and meta.get("built_head") and head != meta["built_head"]:
            notes.append(f"HEAD moved from {meta['built_head'][:12]} to {head[:12]}")
        return ("; ".join(notes) + f" (built {meta.get('built_at')}); rebuild to refresh") \
            if notes else None

    def stats(self, project) -> dict[str, Any]:
        store = self.store(project)
        meta, stats = store.meta(), store.stats()
        per = stats["languages"]
        size = file_size(self.db_path(project))
        return {"project_id": project.id, "built": bool(meta.get("built_at")),
                "built_at": meta.get("built_at"), "built_head": meta.get("built_head") or None,
                "files": sum(v["files"] for v in per.values()),
                "nodes": sum(v["nodes"] for v in per.values()),
                "edges": sum(v["edges"] for v in per.values()), "vectors": stats["vectors"],
                "languages": per, "edge_kinds": stats["edge_kinds"], "index_bytes": size,
                "model_id": meta.get("model_id"), "token_counter": TOKEN_COUNTER}

    # -- the structural graph -----------------------------------------------------------------

    def graph(self, project, store) -> graph.Graph:
        return self.graphs.get(self.db_path(project), store.version,
                               lambda: (store.version(), graph.Graph.load(store)))

    def node(self, store, node_id: str, field: str = "node"):
        row = store.node_by_id(node_id)
        if row is None:
            raise NotFound(f"no node with id {node_id} in this index (ids change when their "
                           "file is re-indexed: search again)", code="node_not_found",
                           details={"field": field})
        return row

    def client_path(self, project, store, raw: str, field: str = "path") -> str:
        """A client's path as the index holds it, whichever Unicode normalisation form the
        client used (answers name a file as it is on disk); as ``relative`` puts it when the
        index lacks it."""
        rel = self.relative(project, raw, field)
        return store.indexed_path(rel) or rel

    def indexed(self, project, store, raw: str, field: str = "file") -> str:
        """A client's path as the indexed file it names; 404 ``file_not_indexed`` else."""
        rel = self.relative(project, raw, field)
        if (path := store.indexed_path(rel)) is None:
            raise NotFound(_not_indexed(project, rel), code="file_not_indexed",
                           details={"field": field})
        return path

    def seeds(self, project, store, files: list[str], nodes: list[str]
              ) -> tuple[list[int], list[str]]:
        """The node ids and file paths a request names, checked."""
        nids, paths = [], []
        for raw in files:
            rel = self.indexed(project, store, raw, "files")
            paths.append(rel)
            nids += [n["nid"] for n in store.nodes_of(rel) if n["parent"] is None]
        for node_id in nodes:
            row = self.node(store, node_id, "nodes")
            nids.append(row["nid"])
            paths.append(row["path"])
        return nids, list(dict.fromkeys(paths))

    def impact(self, project, body) -> dict[str, Any]:
        store = self.built_store(project)
        nids, paths = self.seeds(project, store, body.files, body.nodes)
        g = self.graph(project, store)
        items, roots, truncated = graph.impact(g, store, nids, body.depth, body.limit,
                                               body.guessed)
        files = graph.files_of(items, paths)
        decisions = self.decisions(project, [f["path"] for f in files])
        for f in files:
            f["decisions"] = decisions.get(f["path"], [])
        seeds = store.nodes(nids)
        return {"project_id": project.id, "depth": body.depth,
                "changed": [graph.node_ref(seeds[n]) for n in nids if n in seeds],
                "impacted": items, "files": files, "truncated": truncated}

    def neighbours(self, project, q) -> dict[str, Any]:
        store = self.built_store(project)
        if (q.node is None) == (q.file is None):
            raise InvalidFields.one("node", "name exactly one of node and file", "node_or_file")
        if q.node is not None:
            row = self.node(store, q.node)
            nids, outside, center = [row["nid"]], None, {"node": graph.node_ref(row)}
        else:
            outside = self.indexed(project, store, q.file)
            nids = [n["nid"] for n in store.nodes_of(outside)]
            center = {"file": outside}
        g = self.graph(project, store)
        found = graph.neighbours(g, store, nids, q.depth, q.limit, q.guessed, outside)
        unresolved = [{"kind": r["edge_kind"], "ref": r["ref"], "source": graph.node_ref(r)}
                      for r in store.unresolved(nids, q.limit)]
        return {"project_id": project.id, **center, "depth": q.depth, **found,
                "unresolved": unresolved}

    def records(self, project, paths: list[str]) -> list[dict[str, Any]]:
        """What other plugins keep on these files, one item per (file, record), through the
        ``describe_files`` hook (the memory plugin: ACTIVE decisions)."""
        if not paths:
            return []
        return [item for part in self.kernel.pm.hook.describe_files(
            kernel=self.kernel, project=project, paths=paths) for item in part or ()]

    def decisions(self, project, paths: list[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for item in self.records(project, paths):
            out.setdefault(item["path"], []).append(
                {k: item.get(k) for k in ("kind", "id", "title", "status")})
        return out

    # -- learned links ------------------------------------------------------------------------

    def activity(self, project, body, actor) -> dict[str, Any]:
        files, unknown = self._indexed(project, [self.relative(project, f, "files")
                                                 for f in body.files])
        session = body.session or f"actor:{actor.id}"
        return {"project_id": project.id, "kind": body.kind,
                **self.learning.activity(project, files, body.kind, session),
                "not_indexed": unknown}

    def feedback(self, project, body) -> dict[str, Any]:
        if (body.node is None) == (body.file is None):
            raise InvalidFields.one("node", "name exactly one of node and file", "node_or_file")
        if body.node is not None:
            path = self.node(self.built_store(project), body.node)["path"]
        else:
            path = self.client_path(project, self.store(project), body.file, "file")
        related = None if body.related is None else [
            self.relative(project, f, "related") for f in body.related]
        known, unknown = self._indexed(project, [path, *(related or ())])
        if path in unknown:
            related = []  # a file the index does not hold is linked with nothing
        elif related is not None:
            related = known[1:]
        return {"project_id": project.id, **self.learning.feedback(
            project, path, body.signal == "helpful", related), "not_indexed": unknown}

    def _indexed(self, project, paths: list[str]) -> tuple[list[str], list[str]]:
        """``paths`` (each once) split into those the index holds and those it does not:
        learning links only indexed files, so ``next`` can use them and ``validate`` finds
        no link to a file it does not know."""
        store = self.store(project)
        held = {path: store.indexed_path(path) for path in dict.fromkeys(paths)}
        return (list(dict.fromkeys(found for found in held.values() if found is not None)),
                [path for path, found in held.items() if found is None])

    def synaptic(self, project, q) -> dict[str, Any]:
        store = self.store(project)
        path = self.client_path(project, store, q.file, "file")
        links = self.learning.linked(project, [path], q.limit)
        return {"project_id": project.id, "file": path,
                "indexed": store.file(path) is not None, "neighbors": [
            {"file": other, "weight": round(w, 4), "count": count,
             "updated_at": learning.iso(updated), "indexed": store.file(other) is not None}
            for _, other, w, count, updated in links]}

    def next_files(self, project, body, *, learned: bool = True, structural: bool = True,
                   at: float | None = None) -> dict[str, Any]:
        """The files to open next after ``files_open``: structural neighbours, learned
        links, files sharing a decision, and the task's search hits, each with why
        (``learned``/``structural`` off and ``at`` are for ``neuralmind eval next``)."""
        store = self.built_store(project)
        opened = list(dict.fromkeys(self.client_path(project, store, f, "files_open")
                                    for f in body.files_open))
        g = self.graph(project, store)
        found: dict[str, dict[str, Any]] = {}

        def cand(path: str) -> dict[str, Any]:
            return found.setdefault(path, {"why": []})

        examples = {}
        for path in opened if structural else ():
            for other, (weight, edge) in g.near.get(path, {}).items():
                entry = cand(other)
                entry["_edges"] = entry.get("_edges", 0.0) + weight
                examples.setdefault(other, edge)
        rows = store.nodes({n for s, _, d in examples.values() for n in (s, d)})
        for other, (src, kind, dst) in examples.items():
            entry = found[other]
            entry["structural"] = entry["_edges"] / (entry.pop("_edges") + 2)
            if src in rows and dst in rows:
                detail = (f"{rows[src]['qualname']} ({rows[src]['path']}) {kind} "
                          f"{rows[dst]['qualname']} ({rows[dst]['path']})")
                entry["why"].append({"kind": "structural", "detail": detail,
                                     "weight": round(entry["structural"], 4)})
        if learned:
            for path, other, w, count, _ in self.learning.linked(project, opened, 200, at):
                entry = cand(other)
                if w > entry.get("learned", 0.0):
                    entry["learned"] = w
                    entry["why"] = [y for y in entry["why"] if y["kind"] != "learned"]
                    entry["why"].append({"kind": "learned", "weight": round(w, 4),
                                         "detail": f"used together with {path} ({count}×)"})
        for item in self.records(project, opened):
            for other in item.get("files") or ():
                entry = cand(other)
                entry["decision"] = 1.0
                entry["why"].append({"kind": "decision", "id": item.get("id"),
                                     "detail": item.get("title", "")})
        if body.task:
            hits, _ = self.search(project, body.task, 10, "hybrid", None, learn=False)
            # a hit scored at or below 0 (the cosine less hubness) does not match the task
            hits = [h for h in hits if h["score"] > 0]
            best = max((h["score"] for h in hits), default=1.0)
            for h in hits:
                entry = cand(h["source_file"])
                if "task" not in entry:
                    entry["task"] = h["score"] / best
                    entry["why"].append({"kind": "task", "weight": round(entry["task"], 4),
                                         "detail": f"{h['label']} matches the task"})
        live = set(g.by_path)
        kept = {p: c for p, c in found.items() if p not in opened and p in live}
        return {"project_id": project.id, "files_open": opened,
                "files": learning.next_files(kept, body.limit),
                "not_indexed": [p for p in opened if p not in live]}

    def synapse_stats(self, project) -> dict[str, Any]:
        return {"project_id": project.id, **self.learning.stats(project)}

    def savings(self, project, days: int) -> dict[str, Any]:
        return self.learning.savings(project, days)

    # -- ingested documents -------------------------------------------------------------------

    def ingest(self, project, name: str, content_type: str, data: bytes, actor,
               request_id: str | None) -> dict[str, Any]:
        """Index a document that is not in the repository: 201 with what it became."""
        if content_type not in ingest.TYPES:
            raise UnsupportedMediaType(f"{content_type or 'no type'} is not a document type "
                                       f"this server reads: {', '.join(ingest.TYPES)}")
        if len(data) > self.settings.max_document_bytes:
            raise self._too_large(f"the document is {len(data):,} bytes; at most "
                                  f"{self.settings.max_document_bytes:,} are taken ([index] "
                                  "max_document_bytes)")
        try:
            name = ingest.clean_name(name)
        except ValueError as ex:
            raise InvalidFields.one("name", str(ex), "document_name") from None
        if not data.strip():
            raise InvalidFields.one("content", "the document is empty", "document_empty")
        try:
            # bounded while it is extracted and parsed, before anything is stored: a few
            # kilobytes of PDF or of headings may otherwise become megabytes and thousands of
            # sections to index inside this request
            text = ingest.to_text(data, content_type,
                                  max_chars=4 * self.settings.max_document_bytes)
            parsed = ingest.parse(name, text, max_nodes=self.settings.max_document_sections)
        except ingest.Unreadable as ex:
            raise APIError(str(ex), code="document_unreadable", status=422) from None
        except ingest.TooLarge as ex:
            raise self._too_large(str(ex), ex.details) from None
        store = self.store(project)
        doc_id = "doc_" + secrets.token_hex(8)
        doc = {"id": doc_id, "name": name, "path": f"{ingest.PREFIX}{doc_id}/{name}",
               "content_type": content_type, "size": len(data),
               "sha": hashlib.sha1(data).hexdigest(), "text": text, "created_at": now_iso(),
               "actor": getattr(actor, "id", None)}
        store.add_document(self._document_row(store, doc, parsed), doc, doc["created_at"])
        search.measure_hubs(store)
        out = self.ingested(project, doc_id)
        self.kernel.emit("index.document_added", project=project, actor=actor,
                         data={k: out[k] for k in ("id", "name", "content_type", "size", "nodes")},
                         request_id=request_id)
        return out

    def _too_large(self, message: str, details: dict[str, Any] | None = None) -> APIError:
        """413 ``document_too_large``, naming the byte cap beside any bound that was passed:
        the one answer for a document too big as sent or once extracted."""
        return APIError(message, code="document_too_large", status=413,
                        details={"max_bytes": self.settings.max_document_bytes,
                                 **(details or {})})

    def _document_row(self, store, doc, parsed=None):
        """A document's file row (``parsed``: its text parsed already), its new texts embedded
        first when a model is at hand."""
        texts: dict[str, str] = {}
        row = file_row(FileEntry(doc["path"], doc["size"], 0), doc["text"].encode(),
                       doc["text"], self.settings, texts,
                       parsed or ingest.parse(doc["name"], doc["text"]))
        row.source = "ingested"
        self._embed(store, texts)
        return row

    def reindex_document(self, project, store, doc) -> None:
        """Derive a document's nodes again from its stored text (validate's repair)."""
        store.add_document(self._document_row(store, dict(doc)), None, now_iso())
        search.measure_hubs(store)

    def embed_missing(self, store) -> int:
        """Vectors for the nodes that have none (indexed while no model was available)."""
        texts = {}
        for row in store.unembedded():
            text = stored_embed_text(self.settings, row)
            if text:
                texts[row["embed_hash"]] = text
        embedded = self._embed(store, texts)
        search.measure_hubs(store)
        return embedded

    def _embed(self, store, texts: dict[str, str]) -> int:
        try:
            embedder = self.kernel.embedder
            model_id = embedder.model_id
        except Unavailable:
            return 0
        if store.meta().get("model_id", model_id) != model_id:
            return 0  # the next build re-embeds everything with the new model
        missing = sorted(store.missing_vectors(texts), key=lambda h: len(texts[h]))
        batch = self.settings.embed_batch
        for start in range(0, len(missing), batch):
            keys = missing[start:start + batch]
            try:
                vectors = embedder.embed([texts[k] for k in keys])
            except Unavailable:
                return start
            store.put_vectors([(k, v.tobytes()) for k, v in zip(keys, vectors)])
        return len(missing)

    def ingested(self, project, doc_id: str, text: bool = False) -> dict[str, Any]:
        store = self.store(project)
        doc = store.document_record(doc_id)
        if doc is None:
            raise NotFound(f"no ingested document with id {doc_id}", code="document_not_found")
        nodes = store.nodes_of(doc["path"])
        out = _ingested_out(project, doc, len(nodes))
        if text:
            out.update(nodes=[_node_out(n) for n in nodes], text=doc["text"])
        return out

    def ingested_documents(self, project) -> list[dict[str, Any]]:
        return [_ingested_out(project, doc, doc["nodes"])
                for doc in self.store(project).document_records()]

    def delete_document(self, project, doc_id: str, actor, request_id: str | None) -> None:
        if not self.store(project).remove_document(doc_id):
            raise NotFound(f"no ingested document with id {doc_id}", code="document_not_found")
        self.kernel.emit("index.document_deleted", project=project, actor=actor,
                         data={"id": doc_id}, request_id=request_id)

    def document(self, project, raw: str) -> dict[str, Any]:
        store = self.store(project)
        missing = NotFound(f"{raw} is not an indexed file of {project.id}",
                           code="document_not_found")
        try:
            rel = self.client_path(project, store, raw)
        except InvalidFields:
            raise missing from None
        row = store.file(rel)
        full = contained(str(project.path), rel)
        if row is None or (full is None and row["source"] != "ingested"):
            raise missing
        if row["source"] == "ingested":
            data = store.document_record(rel[len(ingest.PREFIX):].split("/")[0])["text"].encode()
        else:
            try:
                data = open(full, "rb").read()
            except OSError:
                data = b""
        return {"project_id": project.id, "path": rel, "language": row["language"],
                "file_type": row["file_type"], "size": row["size"], "lines": row["lines"],
                "indexed_at": row["indexed_at"], "source": row["source"],
                "stale": hashlib.sha1(data).hexdigest() != row["hash"],
                "nodes": [_node_out(n) for n in store.nodes_of(rel)],
                "text": data.decode("utf-8", "replace")}


def _ingested_out(project, doc, nodes: int) -> dict[str, Any]:
    return {"project_id": project.id, "id": doc["id"], "name": doc["name"], "path": doc["path"],
            "source": "ingested", "content_type": doc["content_type"], "size": doc["size"],
            "created_at": doc["created_at"], "actor": doc["actor"], "nodes": nodes}


def _node_out(n) -> dict[str, Any]:
    return {"id": n["id"], "kind": n["kind"], "label": n["qualname"], "signature": n["signature"],
            "docstring": n["docstring"], "line": n["line"], "end_line": n["end_line"]}


def _not_indexed(project, rel: str) -> str:
    """Why ``rel`` is no indexed file: a directory is named as one (impact and neighbours
    take files), not as a file the build left out."""
    full = contained(str(project.path), rel)
    if full is not None and os.path.isdir(full):
        return f"{rel} is a directory of {project.id}, not a file: name the files in it"
    return f"{rel} is not an indexed file of {project.id} (ignored, binary, or not built yet)"

