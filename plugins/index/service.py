"""What the index routes do, without HTTP: one ``IndexService`` per kernel holds each
project's store and runs builds, searches, queries and rule changes against it."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from typing import Any

from neuralmind import (TOKEN_COUNTER, Conflict, Forbidden, InvalidFields, NotFound, ProjectStores,
                        VersionedCache, estimate_tokens, gitinfo, now_iso, pid_alive)
from plugins.index import context, search
from plugins.index.build import Build
from plugins.index.ignore import Rule, RuleSet, normalise_value, system_rules
from plugins.index.store import MIGRATIONS, IndexStore

LOCK_TTL_S = 120.0  # a build lock not refreshed for this long belongs to a dead build
HEARTBEAT_S = 2.0


class IndexService:
    def __init__(self, kernel, settings):
        self.kernel = kernel
        self.settings = settings
        self._stores = ProjectStores(lambda project: IndexStore(kernel.open_database(
            self.db_path(project), MIGRATIONS)))
        self.matrices: VersionedCache[search.Matrix] = VersionedCache()  # per index path
        self.layers: VersionedCache[tuple] = VersionedCache()  # L0, L1, size per index path

    # -- stores -------------------------------------------------------------------------------

    def db_path(self, project) -> str:
        return str(project.state_dir / "index.db")

    def store(self, project) -> IndexStore:
        return self._stores.get(project)

    def built_store(self, project) -> IndexStore:
        store = self.store(project)
        if not store.meta().get("built_at"):
            raise Conflict(f"project {project.id} has no index yet: POST "
                           f"/v1/projects/{project.id}/build first", code="index_not_built")
        return store

    def describe(self, project) -> dict[str, Any]:
        if not os.path.exists(self.db_path(project)):
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
        doomed = [f["path"] for f in store.files() if one.match_path(f["path"], f["size"])]
        return store.purge(doomed)

    def add_rule(self, project, body) -> tuple[Rule, int]:
        try:
            value = normalise_value(body.type, body.value)
        except ValueError as ex:
            raise InvalidFields.one("value", str(ex)) from None
        rid, now = "ign_" + secrets.token_hex(8), now_iso()
        self.store(project).save_rule(rid, body.type, value, body.enabled, body.reason, now)
        rule = self.rule(project, rid)
        return rule, self._purge_matching(project, rule)

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

    def update_rule(self, project, rid: str, patch) -> tuple[Rule, int]:
        rule = self._own_rule(project, rid)
        value = rule.value
        if patch.value is not None:
            try:
                value = normalise_value(rule.type, patch.value)
            except ValueError as ex:
                raise InvalidFields.one("value", str(ex)) from None
        enabled = rule.enabled if patch.enabled is None else patch.enabled
        reason = rule.reason if patch.reason is None else patch.reason
        self.store(project).save_rule(rid, rule.type, value, enabled, reason, now_iso())
        updated = self.rule(project, rid)
        return updated, self._purge_matching(project, updated)

    def delete_rule(self, project, rid: str) -> Rule:
        rule = self._own_rule(project, rid)
        self.store(project).delete_rule(rid)
        return rule

    def relative(self, project, raw: str, field: str = "path") -> str:
        """A client's path as a project-relative POSIX path; outside the root is a 422."""
        root = os.path.realpath(project.path)
        full = os.path.normpath(os.path.join(root, raw))
        if full != root and not full.startswith(root + os.sep):
            raise InvalidFields.one(field, "the path is outside the project", "path_outside_project")
        if full == root:
            raise InvalidFields.one(field, "name a file or folder inside the project", "path_is_root")
        return os.path.relpath(full, root).replace(os.sep, "/")

    # -- builds -------------------------------------------------------------------------------

    def start_build(self, project, actor, *, full: bool, wait: bool, request_id: str | None):
        """Submit the build job, or 409 ``index_busy`` with the job already running."""
        store = self.store(project)
        owner = "build-" + secrets.token_hex(6)
        # the job exists before the lock names it, so a build refused as busy always finds
        # the running build's job
        jid = self.kernel.jobs.create("build", project_id=project.id, actor=actor.id)
        holder = store.acquire("build", owner, os.getpid(), LOCK_TTL_S, pid_alive, job_id=jid)
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
                    store.heartbeat("build", owner)

            try:
                return self.run_build(project, check=ctx.check, progress=progress, full=full,
                                      actor=actor.id, request_id=request_id, trigger="api")
            finally:
                store.release("build", owner)

        try:
            return self.kernel.jobs.start(jid, work, wait=wait)
        except BaseException:
            store.release("build", owner)
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

    def search(self, project, query: str, n: int, mode: str, file_type: str | None):
        store = self.built_store(project)
        ranked, notice = search.search(self.kernel, self.matrices, store, self.db_path(project),
                                       query, n, mode, file_type, self.settings.keyword_weight)
        return search.hits(store, ranked), notice

    def query(self, project, question: str, query_type: str, budget: int | None,
              trace: bool) -> dict[str, Any]:
        started = time.perf_counter()
        store = self.built_store(project)
        budget = budget or self.settings.default_budget
        file_type = {"code": "code", "docs": "docs"}.get(query_type)
        ranked, notice = search.search(self.kernel, self.matrices, store, self.db_path(project),
                                       question, 8, "hybrid", file_type,
                                       self.settings.keyword_weight)
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
        size = sum(os.path.getsize(self.db_path(project) + s)
                   for s in ("", "-wal") if os.path.exists(self.db_path(project) + s))
        return {"project_id": project.id, "built": bool(meta.get("built_at")),
                "built_at": meta.get("built_at"), "built_head": meta.get("built_head") or None,
                "files": sum(v["files"] for v in per.values()),
                "nodes": sum(v["nodes"] for v in per.values()),
                "edges": sum(v["edges"] for v in per.values()), "vectors": stats["vectors"],
                "languages": per, "edge_kinds": stats["edge_kinds"], "index_bytes": size,
                "model_id": meta.get("model_id"), "token_counter": TOKEN_COUNTER}

    def document(self, project, raw: str) -> dict[str, Any]:
        store = self.store(project)
        missing = NotFound(f"{raw} is not an indexed file of {project.id}",
                           code="document_not_found")
        try:
            rel = self.relative(project, raw)
        except InvalidFields:
            raise missing from None
        row = store.file(rel)
        full = os.path.join(project.path, rel)
        if row is None or os.path.islink(full):
            raise missing
        try:
            data = open(full, "rb").read()
        except OSError:
            data = b""
        return {"project_id": project.id, "path": rel, "language": row["language"],
                "file_type": row["file_type"], "size": row["size"], "lines": row["lines"],
                "indexed_at": row["indexed_at"],
                "stale": hashlib.sha1(data).hexdigest() != row["hash"],
                "nodes": [{"id": n["id"], "kind": n["kind"], "label": n["qualname"],
                           "signature": n["signature"], "docstring": n["docstring"],
                           "line": n["line"], "end_line": n["end_line"]}
                          for n in store.nodes_of(rel)],
                "text": data.decode("utf-8", "replace")}
