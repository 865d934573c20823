"""Memories: what the routes, the job and the query_context hook do, on top of the store.

It owns one :class:`MemoryStore` per project (kept for the process), the :class:`Searcher`
and the backfill thread, turns domain failures into API errors, and emits a kernel event
after each write has committed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from neuralmind import (APIError, Conflict, Forbidden, NotFound, PreconditionFailed, ProjectStores,
                        decode_cursor, encode_cursor, estimate_tokens, gitinfo, now_iso, text_pair,
                        today)
from plugins.memory import records
from plugins.memory.backfill import Backfiller
from plugins.memory.models import (BatchIn, ExportLine, MemoryIn, MemoryPatch, MemorySettings,
                                   SearchIn)
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore

FILTER_FIELDS = ("status", "file", "tag", "type", "author", "agent", "session_id",
                 "created_after", "created_before", "min_confidence")


def filters_of(model) -> dict[str, Any]:
    return {name: getattr(model, name) for name in FILTER_FIELDS}


def not_found(mid: str) -> NotFound:
    return NotFound(f"no memory with id {mid}", code="memory_not_found")


class Memories:
    def __init__(self, kernel, settings: MemorySettings):
        self.kernel = kernel
        self.settings = settings
        self.searcher = Searcher(settings, kernel)
        self.backfill = Backfiller(self.searcher, lambda: kernel.embedder, settings)
        self._stores = ProjectStores(lambda project: MemoryStore(kernel.open_database(
            project.state_dir / "memory.db", MIGRATIONS)))

    def store(self, project) -> MemoryStore:
        return self._stores.get(project)

    def close(self) -> None:
        self.backfill.stop()

    def _emit(self, kind: str, project, actor, request_id, **data) -> None:
        self.kernel.emit(f"memory.{kind}", project=project, actor=actor, data=data,
                         request_id=request_id)

    def _written(self, project, store) -> None:
        self.backfill.notify(store)

    def _get(self, store, mid: str) -> dict[str, Any]:
        rec = store.get(mid)
        if rec is None:
            raise not_found(mid)
        return rec

    # -- records ---------------------------------------------------------------------------

    def create(self, project, body: MemoryIn, actor, request_id: str | None,
               duplicates: str) -> dict[str, Any]:
        store = self.store(project)
        errors: list[dict] = []
        rec = records.build(body.model_dump(), root=project.path, now=now_iso(),
                            head=gitinfo.head(project.path), errors=errors)
        if errors:
            raise records.fail(errors)
        if not store.create(rec, records.content_sha(rec), actor.id):
            raise Conflict(f"a memory with id {rec['id']} already exists")
        stored = store.get(rec["id"])
        if stored is None:
            raise APIError("write did not persist")
        self._written(project, store)
        self._emit("created", project, actor, request_id, id=rec["id"])
        out = records.view(stored, today())
        out["possible_duplicates"] = self.duplicates(store, stored, duplicates)
        return out

    def duplicates(self, store, rec: dict[str, Any], mode: str) -> list[dict[str, Any]]:
        """Up to 3 ACTIVE records like ``rec`` (sharing a file when it has files)."""
        if mode == "none":
            return []
        filters = {"status": "ACTIVE", "file": rec["files_affected"]}
        if mode == "hybrid":
            hits, _ = self.searcher.search(store, rec["title"], "hybrid", filters,
                                           today(), 4)
        else:
            hits = self.searcher.similar_titles(store, rec["title"], filters, today(),
                                                4, exclude=rec["id"])
        return [{"id": r["id"], "title": r["title"], "status": r["status"], "score": round(s, 6)}
                for r, s in hits if r["id"] != rec["id"]][:3]

    def get(self, project, mid: str) -> dict[str, Any]:
        return records.view(self._get(self.store(project), mid), today())

    def list(self, project, query) -> tuple[list[dict[str, Any]], str | None]:
        before = decode_cursor(query.cursor, text_pair)
        on = today()
        rows = self.store(project).list(filters_of(query), on, query.limit + 1,
                                        tuple(before) if before else None)
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        cursor = encode_cursor([rows[-1]["created_at"], rows[-1]["id"]]) if more else None
        return [records.view(r, on) for r in rows], cursor

    def _write(self, project, store, rec, changes, *, kind, actor, request_id, note=None,
               expect: str | None = None) -> dict[str, Any]:
        if not store.update(rec, records.content_sha(rec), kind=kind, actor=actor.id,
                            changes=changes, note=note, expect_updated_at=expect):
            if store.get(rec["id"]) is None:
                raise not_found(rec["id"])
            raise PreconditionFailed("the memory changed since that updated_at",
                                     details={"updated_at": store.get(rec["id"])["updated_at"]})
        self._written(project, store)
        self._emit(kind, project, actor, request_id, id=rec["id"],
                   changes=sorted(changes))
        return records.view(rec, today())

    def patch(self, project, mid: str, body: MemoryPatch, actor, request_id,
              if_match: str | None) -> dict[str, Any]:
        store = self.store(project)
        rec = self._get(store, mid)
        expect = if_match.strip().strip('"') if if_match else None
        if expect is not None and expect != rec["updated_at"]:
            raise PreconditionFailed("the memory changed since that updated_at",
                                     details={"updated_at": rec["updated_at"]})
        errors: list[dict] = []
        new, changes = records.patched(rec, body.model_dump(exclude_unset=True), root=project.path,
                                       now=now_iso(), errors=errors)
        if errors:
            raise records.fail(errors)
        if not changes:
            return records.view(rec, today())
        return self._write(project, store, new, changes, kind="amended", actor=actor,
                           request_id=request_id, expect=expect or rec["updated_at"])

    def set_status(self, project, mid: str, status: str, *, kind: str, actor, request_id,
                   note: str | None = None, commit_sha: str | None = None) -> dict[str, Any]:
        """invalidate / restore: a status change with its event; 409 when it changes nothing."""
        store = self.store(project)
        rec = self._get(store, mid)
        on = today()
        current = records.effective_status(rec, on)
        if current == status:
            raise Conflict(f"memory {mid} is already {status}", code="invalid_transition")
        new = {**rec, "status": status, "updated_at": now_iso()}
        if kind == "restored":
            new["commit_sha"] = gitinfo.head(project.path) if commit_sha is None else commit_sha
            if rec["review_by"] and rec["review_by"] < on:
                new["review_by"] = None  # else the record would read STALE straight away
        changes = {f: [rec[f], new[f]] for f in ("status", "commit_sha", "review_by")
                   if new[f] != rec[f]}
        return self._write(project, store, new, changes, kind=kind, actor=actor,
                           request_id=request_id, note=note, expect=rec["updated_at"])

    def feedback(self, project, mid: str, helpful: bool, note: str | None, actor,
                 request_id) -> dict[str, Any]:
        store = self.store(project)
        rec = self._get(store, mid)
        step = self.settings.feedback_step if helpful else -self.settings.feedback_step
        confidence = round(min(1.0, max(0.05, rec["confidence"] + step)), 6)
        new = {**rec, "confidence": confidence, "updated_at": now_iso()}
        text = ("helpful" if helpful else "unhelpful") + (f": {note}" if note else "")
        return self._write(project, store, new, {"confidence": [rec["confidence"], confidence]},
                           kind="feedback", actor=actor, request_id=request_id, note=text,
                           expect=rec["updated_at"])

    def delete(self, project, mid: str, actor, request_id) -> None:
        store = self.store(project)
        rec = self._get(store, mid)
        if not store.delete(mid, now_iso(), actor.id, rec["title"]):
            raise not_found(mid)
        self._written(project, store)
        self._emit("deleted", project, actor, request_id, id=mid)

    def history(self, project, mid: str, limit: int, cursor: str | None
                ) -> tuple[list[dict[str, Any]], str | None]:
        after = decode_cursor(cursor, lambda seq: isinstance(seq, int) and not isinstance(seq, bool))
        rows = self.store(project).history(mid, limit + 1, after)
        if not rows and after is None:
            raise not_found(mid)
        more = len(rows) > limit
        rows = rows[:limit]
        return [ev for _, ev in rows], (encode_cursor(rows[-1][0]) if more else None)

    # -- search ------------------------------------------------------------------------------

    def search(self, project, body: SearchIn) -> dict[str, Any]:
        store = self.store(project)
        on = today()
        hits, notice = self.searcher.search(store, body.query, body.mode, filters_of(body), on,
                                            body.limit)
        results = [{**records.view(rec, on), "score": round(score, 6)} for rec, score in hits]
        if body.view == "compact":
            results = [{k: r[k] for k in ("id", "title", "status", "score", "files_affected")}
                       for r in results]
        return {"project_id": project.id, "query": body.query, "mode": body.mode,
                "results": results, "notice": notice}

    # -- batch, export, import ---------------------------------------------------------------

    def batch(self, project, body: BatchIn, actor, request_id) -> list[dict[str, str]]:
        if any(item.op == "delete" for item in body.items) and not self.kernel.allowed(
                actor, "memories.delete", project):
            raise Forbidden(f"{actor.id} may not memories.delete",
                            details={"permission": "memories.delete"})
        store = self.store(project)
        now, head = now_iso(), gitinfo.head(project.path)
        ids = {item.id for item in body.items if item.id}
        working = store.get_many(sorted(ids))
        errors: list[dict] = []
        ops, done = [], []
        for i, item in enumerate(body.items):
            loc = ("items", i)
            fields = {**(item.model_extra or {}), **({"id": item.id} if item.id else {})}
            if item.op != "create" and not item.id:
                errors.append(records.invalid((*loc, "id"), "required for patch and delete",
                                              "missing"))
                continue
            if item.op == "create":
                try:
                    body_i = MemoryIn.model_validate(fields)
                except ValidationError as ex:
                    errors.extend(records.located(ex, loc))
                    continue
                rec = records.build(body_i.model_dump(), root=project.path, now=now, head=head,
                                    loc=loc, errors=errors)
                if rec["id"] in working:
                    errors.append(records.invalid((*loc, "id"), "a memory with this id exists",
                                                  "memory_exists"))
                    continue
                working[rec["id"]] = rec
                ops.append(("create", rec, records.content_sha(rec), {}))
            elif item.id not in working:
                errors.append(records.invalid((*loc, "id"), "no memory with this id",
                                              "memory_not_found"))
                continue
            elif item.op == "patch":
                try:
                    patch = MemoryPatch.model_validate(fields)
                except ValidationError as ex:
                    errors.extend(records.located(ex, loc))
                    continue
                rec, changes = records.patched(working[item.id], patch.model_dump(exclude_unset=True),
                                               root=project.path, now=now, loc=loc, errors=errors)
                working[item.id] = rec
                if changes:
                    ops.append(("patch", rec, records.content_sha(rec), changes))
            else:
                rec = working.pop(item.id)
                ops.append(("delete", rec, None, {}))
            done.append({"op": item.op, "id": item.id or rec["id"]})
        if errors:
            raise records.fail(errors, f"{len({tuple(e['loc'][:2]) for e in errors})} batch "
                                       "item(s) did not validate; nothing was written")
        store.apply_batch(ops, now, actor.id)
        self._written(project, store)
        counts = {op: sum(1 for d in done if d["op"] == op) for op in ("create", "patch", "delete")}
        self._emit("batch", project, actor, request_id, **counts)
        return done

    def export(self, project) -> Iterator[bytes]:
        store = self.store(project)
        for rec, history in store.export():
            yield (json.dumps({"memory": rec, "history": history}, ensure_ascii=False) + "\n"
                   ).encode()

    def import_(self, project, raw: bytes, overwrite: bool, actor, request_id) -> dict[str, int]:
        lines, errors = [], []
        for n, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed = ExportLine.model_validate_json(line)
            except ValidationError as ex:
                errors.extend(records.located(ex, (f"line {n}",)))
                continue
            rec = parsed.memory.model_dump(mode="json")
            lines.append((rec, records.content_sha(rec), [e.model_dump() for e in parsed.history]))
        if errors:
            raise records.fail(errors, "the import did not validate; nothing was written")
        store = self.store(project)
        created, overwritten, skipped = store.import_lines(lines, overwrite)
        self._written(project, store)
        out = {"created": created, "overwritten": overwritten, "skipped": skipped}
        self._emit("imported", project, actor, request_id, **out)
        return out

    # -- maintenance and context -------------------------------------------------------------

    def maintain(self, project, actor, ctx=None) -> dict[str, int]:
        """Persist STALE for overdue review_by, and for decisions whose files changed in git
        since their commit."""
        store, on = self.store(project), today()
        active = store.active_to_check(on)
        stale: list[tuple[dict, str]] = []
        by_sha: dict[str, list[dict]] = {}
        for rec in active:
            if rec.pop("overdue"):
                stale.append((rec, f"review_by {rec['review_by']} has passed"))
            elif rec["commit_sha"] and rec["files_affected"]:
                by_sha.setdefault(rec["commit_sha"], []).append(rec)
        for sha, group in by_sha.items():
            if ctx is not None:
                ctx.check()
            changed = gitinfo.changed_since(project.path, sha)
            for rec in group if changed else ():
                hit = [f for f in rec["files_affected"] if f in changed]
                if hit:
                    stale.append((rec, f"files changed since {sha[:12]}: {', '.join(hit)}"))
        review = sum(1 for _, note in stale if note.startswith("review_by"))
        for rec, note in stale:
            new = {**rec, "status": "STALE", "updated_at": now_iso()}
            if store.update(new, records.content_sha(new), kind="stale", actor=actor.id,
                            changes={"status": ["ACTIVE", "STALE"]}, note=note,
                            expect_updated_at=rec["updated_at"]):
                self._emit("stale", project, actor, None, id=rec["id"], note=note)
        if stale:
            self._written(project, store)
        return {"checked": len(active), "stale_review_by": review,
                "stale_files_changed": len(stale) - review}

    def on_files(self, project, paths: list[str]) -> list[dict[str, Any]]:
        """The ACTIVE decisions on these files, one item per (file, decision), with every
        file the decision names."""
        wanted = set(paths)
        return [{"path": path, "kind": "decision", "id": rec["id"], "title": rec["title"],
                 "status": "ACTIVE", "files": rec["files_affected"]}
                for rec in self.store(project).files_context(sorted(wanted), today())
                for path in rec["files_affected"] if path in wanted]

    def context(self, project, hits: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        """The ACTIVE decisions on the files a code query hit, best hit first, within budget."""
        score: dict[str, float] = {}
        for hit in hits or ():
            path = hit.get("source_file")
            if not path:
                continue
            found = records.normalise_files(project.path, [str(path)], (), [])
            if found:
                score[found[0]] = max(score.get(found[0], float("-inf")), float(hit.get("score") or 0))
        decisions = self.store(project).files_context(sorted(score), today())
        if not decisions or budget <= 0:
            return []

        def rank(rec):
            best = max(score.get(f, float("-inf")) for f in rec["files_affected"])
            return (-best, -rec["confidence"], rec["updated_at"])

        lines: list[str] = []
        for rec in sorted(decisions, key=rank):
            entry = (f"- {rec['title']} [{rec['decision_type']}, {rec['id']}; files: "
                     f"{', '.join(rec['files_affected'])}]\n  {rec['rationale']}")
            if estimate_tokens("\n".join([*lines, entry])) > budget:
                continue
            lines.append(entry)
        if not lines:
            return []
        text = "\n".join(lines)
        return [{"title": "Decisions on these files", "text": text, "tokens": estimate_tokens(text)}]
