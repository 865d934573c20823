"""``POST …/validate`` (spec §5.2): what a project's index and learned state hold, what is
missing or stale, and with ``write: true`` (admin) the repairs. Every repair writes inside the
project's state dir only (``index.db``, ``usage.db``): the repository is read, never written.

Checks, in order: the index file (SQLite ``quick_check``, schema version, built); the
keyword index against the nodes (repair: the missing rows re-derived, orphans dropped);
vectors (nodes without one — repair: embedded when a model is available — orphans, dropped,
and vectors whose hubness no build measured, measured); graph links never resolved or left dangling (repair: every edge re-resolved);
ingested documents against their nodes (repair: re-derived from the stored text, strays
purged); learned links to files no longer indexed (information, not a failure: a
deleted or moved file's links fade like any; repair: forgotten); the project's build
and watch leases held by dead processes (repair: released); last, files changed, removed or added on disk since the build
(repair: an incremental build, which takes the build lock like any build)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from plugins.index import resolve
from plugins.index.build import read_project_file, walk_named
from plugins.index.learning import FLOOR
from plugins.index.keywords import node_keywords
from plugins.index.service import LOCK_TTL_S, build_lease
from plugins.index.watch import TTL_S, watch_lease


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    count: int | None = None
    repaired: bool = False


def validate(service, project, write: bool, actor=None, request_id: str | None = None
             ) -> dict[str, Any]:
    store = service.store(project)
    checks: list[Check] = []
    integrity = store.integrity()
    meta = store.meta()
    built = bool(meta.get("built_at"))
    checks.append(Check("index", integrity == "ok" and built,
                        f"quick_check {integrity}; schema version {store.schema_version()}; "
                        + (f"built {meta['built_at']}" if built else "never built")))
    checks.append(_keywords(store, write))
    checks.append(_vectors(service, store, write))
    checks.append(_links(store, write))
    checks.append(_documents(service, project, store, write))
    checks.append(_learned(service, project, store, write))
    checks.append(_locks(service.kernel.leases, project, write))
    checks.append(_files(service, project, store, write, built, actor, request_id))
    if write and not checks[0].ok and integrity == "ok":
        checks[0] = Check("index", bool(store.meta().get("built_at")), checks[0].detail,
                          repaired=bool(store.meta().get("built_at")))
    return {"project_id": project.id, "write": write, "ok": all(c.ok for c in checks),
            "checks": [asdict(c) for c in checks]}


def _files(service, project, store, write: bool, built: bool, actor, request_id) -> Check:
    root = str(project.path)
    known = store.file_states()
    # what a build would index: no file it skips (over the size cap, a name not UTF-8,
    # binary, minified, a symlink out) is ever new on disk
    present = {e.path: e for e in walk_named(root, service.ruleset(project))}
    changed = [p for p, (size, mtime, _) in known.items()
               if p not in present or (present[p].size, present[p].mtime_ns) != (size, mtime)]
    added = [p for p in present if p not in known
             and isinstance(read_project_file(root, p), tuple)]
    stale = len(changed) + len(added)
    detail = (f"{len(known)} files indexed; {len(changed)} changed or removed and "
              f"{len(added)} new on disk since the build")
    if not (stale or not built) or not write:
        return Check("files", built and not stale, detail, stale)
    job = service.start_build(project, actor, full=False, wait=True, request_id=request_id)
    if job.status != "done":
        return Check("files", False, detail + f"; the build {job.status}: {job.error}", stale)
    result = job.result
    redone = result["files_changed"] + result.get("files_reindexed", 0)
    return Check("files", True, detail + f"; re-indexed {redone} and dropped "
                 f"{result['files_deleted']}", stale, repaired=True)


def _keywords(store, write: bool) -> Check:
    missing, orphans = store.fts_gaps()
    detail = f"{len(missing)} nodes without a keyword row, {orphans} keyword rows without a node"
    if not (missing or orphans) or not write:
        return Check("keywords", not (missing or orphans), detail, len(missing) + orphans)
    rows = store.nodes(missing)
    store.mend_fts([(nid, *node_keywords(r["qualname"], r["signature"], r["docstring"],
                                         r["text"])) for nid, r in rows.items()])
    return Check("keywords", True, detail, len(missing) + orphans, repaired=True)


def _vectors(service, store, write: bool) -> Check:
    lacking, orphans, hubless = (len(store.unembedded()), store.orphan_vectors(),
                                 len(store.hubless()))
    detail = (f"{lacking} nodes without a vector, {orphans} vectors of no node, {hubless} "
              "without their hubness")
    wrong = lacking + orphans + hubless
    if not wrong or not write:
        return Check("vectors", not wrong, detail, wrong)
    store.drop_orphan_vectors()
    embedded = service.embed_missing(store)  # and measures what has no hubness
    left = len(store.unembedded())
    note = f"; embedded {embedded}" + (f", {left} still without (no model available)"
                                       if left else "")
    return Check("vectors", not left, detail + note, wrong, repaired=True)


def _links(store, write: bool) -> Check:
    counts = store.link_counts()
    waiting = counts.get("unlinked", 0)
    detail = ", ".join(f"{n} {how}" for how, n in sorted(counts.items())) or "no edges"
    if not waiting or not write:
        return Check("graph", not waiting, detail, waiting)
    store.relink(lambda conn: resolve.link(store, conn, None))
    return Check("graph", True, detail, waiting, repaired=True)


def _documents(service, project, store, write: bool) -> Check:
    strays, lost = store.orphan_ingested(), store.documents_without_file()
    detail = (f"{len(store.document_records())} ingested documents; {len(lost)} without their "
              f"nodes, {len(strays)} ingested files without a record")
    if not (strays or lost) or not write:
        return Check("documents", not (strays or lost), detail, len(strays) + len(lost))
    store.purge(strays)
    for doc in lost:
        service.reindex_document(project, store, doc)
    return Check("documents", True, detail, len(strays) + len(lost), repaired=True)


def _learned(service, project, store, write: bool) -> Check:
    """Only a damaged ``usage.db`` fails: links to files no longer indexed are what any
    ``git rm`` or ``git mv`` leaves, kept on purpose to fade like every link, so they are
    counted for information (and forgotten at once with ``write``)."""
    usage = service.learning.store(project)
    service.learning.flush(project)
    integrity = usage.integrity()
    indexed = {f["path"] for f in store.files()}
    gone = sorted(p for p in usage.synapse_files() if p not in indexed)
    detail = f"usage.db quick_check {integrity}; {len(gone)} linked files no longer indexed"
    if not gone or not write:
        kept = (f" (kept on purpose: their links fade, half-life "
                f"{service.learning.settings.learn_half_life_days:g} days, until below {FLOOR}; "
                "`write: true` (`--write`) forgets them now)") if gone else ""
        return Check("learned", integrity == "ok", detail + kept, len(gone))
    usage.forget(gone)
    return Check("learned", integrity == "ok", detail + " (forgotten)", len(gone), repaired=True)


def _locks(leases, project, write: bool) -> Check:
    dead = [row for name, ttl in ((build_lease(project), LOCK_TTL_S), (watch_lease(project), TTL_S))
            if (row := leases.get(name)) is not None and leases.holder(name, ttl) is None]
    detail = f"{len(dead)} leases of processes gone" if dead else "no stale locks"
    if not dead or not write:
        return Check("locks", not dead, detail, len(dead))
    for row in dead:
        leases.release(row["name"], row["owner"])
    return Check("locks", True, detail, len(dead), repaired=True)

