"""The kernel's own routes: health and status, the OpenAPI document and its docs page,
projects, jobs, events, the daemon's shutdown. Plugins add theirs through ``register_routes``."""

from __future__ import annotations

import importlib.util
import json
import mimetypes
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from kernel import API_VERSION, __version__
from kernel.api import JSON, operation
from kernel.errors import BadRequest, Forbidden, NotFound, Unavailable
from kernel.events import kind_filter
from kernel.jobs import Job
from kernel.models import (Model, Page, PageQuery, decode_cursor, encode_cursor, no_nul,
                           row_number, text_pair)

DOCS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>NeuralMind API</title>
<link rel="stylesheet" href="/v1/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/v1/docs/assets/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/v1/openapi.json", dom_id: "#ui"});</script>
</body></html>"""


class Health(Model):
    ok: bool
    status: Literal["ok"] = Field(description="Kept for clients that read it; `ok` is spec 000's")
    api_version: str
    version: str
    uptime_s: float = Field(description="Seconds since the server started (all its workers)")


class ProjectOut(Model):
    id: str
    name: str
    path: str | None = Field(None, description="Redacted (null) for callers without projects.paths")
    registered_at: str | None = Field(description="When it was registered; null for a project "
                                      "the config declares ([[projects]]), which none registered")
    alias: bool = False
    status: dict[str, Any] = Field(default_factory=dict,
                                   description="What plugins report (index: built, built_at, …)")


class ProjectIn(Model):
    path: str = Field(min_length=1, max_length=4096, description="A directory on the server: "
                      "an absolute path, or one from `~`")


# a project id to filter by: looked up in the store, which can hold no NUL (PostgreSQL)
ProjectFilter = Annotated[str, AfterValidator(no_nul)]


class JobsQuery(PageQuery):
    project: ProjectFilter | None = None
    status: Literal["queued", "running", "done", "error", "cancelled"] | None = None


class EventsQuery(Model):
    project: ProjectFilter | None = None
    kind: list[str] = Field(default_factory=list, description="Only these kinds (repeatable; "
                            "a trailing `*` matches a prefix, e.g. `memory.*`); one that matches "
                            "no event kind a plugin declares is a 422")


class EmbeddingsStatus(Model):
    model_id: str | None
    dim: int | None
    loaded: bool
    load_ms: float | None = None
    threads: int | None = None
    compute: str | None = Field(None, description='"int8" or "float" (docs/embeddings.md)')
    remembered: dict[str, int] | None = Field(None, description="Vectors kept for texts seen "
                                              "lately: {size, texts, hits, misses}")
    error: str | None = Field(None, description="Why no model could be loaded, with the settings to fix it")


class ActiveJobs(Model):
    queued: int
    running: int


class ServerStatus(Model):
    version: str
    api_version: str
    uptime_s: float = Field(description="Seconds since the server started (all its workers)")
    mode: Literal["loopback", "server"]
    pid: int = Field(description="The serving process (a gunicorn worker under gunicorn)")
    workers: int
    plugins: list[str] = Field(description="The plugins enabled, in load order")
    model: EmbeddingsStatus
    projects: int = Field(description="Projects the caller can see")
    jobs: ActiveJobs = Field(description="Jobs queued and running the caller can see")


class ShutdownOut(Model):
    stopping: bool
    pid: int = Field(description="The daemon's process, which exits once in-flight requests end")


def embeddings_status(kernel) -> EmbeddingsStatus:
    embedder = kernel.embedder  # never raises: a missing model shows in status()
    status = getattr(embedder, "status", None)
    if callable(status):
        return EmbeddingsStatus(**status())
    return EmbeddingsStatus(model_id=embedder.model_id, dim=embedder.dim, loaded=True)


def jobs_seen(kernel, actor) -> tuple[list[str], dict[str, list[str] | None]]:
    """The projects ``actor`` may read, and which jobs it sees, as ``kernel.jobs``' ``visible``
    and ``hidden``: a caller who sees every project sees the jobs of removed ones too (as
    ``GET /v1/jobs/{id}`` shows them), so its listing leaves out only what it may not read."""
    projects = kernel.projects.all()
    readable = [p.id for p in projects if kernel.allowed(actor, "projects.read", p)]
    if actor.projects is not None:
        return readable, {"visible": readable, "hidden": []}
    return readable, {"visible": None, "hidden": [p.id for p in projects if p.id not in readable]}


def uptime(kernel) -> float:
    """Seconds since the server started: under gunicorn its master, whose ``time.monotonic()``
    at start (the clock every process of the machine shares) the workers inherit as
    ``NEURALMIND_STARTED``, so a worker started again does not make the server look new."""
    return round(time.monotonic() - float(os.environ.get("NEURALMIND_STARTED")
                                          or kernel.started), 3)


class EmbeddingsStatusResource:
    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission="system.read", response=EmbeddingsStatus, tags=["system"],
               summary="The shared embedder: model, dimension, whether it is loaded")
    def on_get(self, req, resp):
        return embeddings_status(self.kernel)


class HealthResource:
    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission=None, response=Health, tags=["system"], summary="Liveness and version")
    def on_get(self, req, resp):
        return Health(ok=True, status="ok", api_version=API_VERSION, version=__version__,
                      uptime_s=uptime(self.kernel))


class StatusResource:
    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission="system.read", response=ServerStatus, tags=["system"],
               summary="What runs: version, uptime, workers, plugins, model, projects, jobs")
    def on_get(self, req, resp):
        kernel = self.kernel
        readable, seen = jobs_seen(kernel, req.context.actor)
        return ServerStatus(
            version=__version__, api_version=API_VERSION, uptime_s=uptime(kernel),
            mode="server" if kernel.settings.server_mode else "loopback", pid=os.getpid(),
            workers=int(os.environ.get("NEURALMIND_WORKERS", "1")), plugins=kernel.plugin_names,
            model=embeddings_status(kernel), projects=len(readable),
            jobs=ActiveJobs(**kernel.jobs.active_counts(**seen)))


class ShutdownResource:
    """``POST /v1/admin/shutdown``: the local daemon stops (gunicorn's graceful stop, so the
    answer and other in-flight requests finish). A team server is stopped by whatever
    supervises it, never by a token."""

    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission="system.shutdown", response=ShutdownOut, status=202, tags=["system"],
               summary="Stop the local daemon (admin; the loopback daemon only)")
    def on_post(self, req, resp):
        daemon_pid = os.environ.get("NEURALMIND_DAEMON_PID")
        if (self.kernel.settings.server_mode or os.environ.get("NEURALMIND_SERVING") != "daemon"
                or not daemon_pid):
            raise Forbidden("only the local daemon stops through the API; stop this server "
                            "where it was started", code="shutdown_not_allowed")
        os.kill(int(daemon_pid), signal.SIGTERM)
        return ShutdownOut(stopping=True, pid=int(daemon_pid))


class OpenAPIResource:
    def __init__(self, kernel):
        self.kernel = kernel
        self._body: bytes | None = None

    @operation(permission=None, tags=["system"], summary="This OpenAPI 3.1 document",
               include_in_schema=False)
    def on_get(self, req, resp):
        if self._body is None:
            self._body = json.dumps(self.kernel.openapi).encode()
        resp.content_type = JSON
        resp.data = self._body


def swagger_assets() -> str:
    """Swagger UI 5 (it reads OpenAPI 3.1; the 4.x of ``swagger-ui-bundle`` did not) as the
    ``swagger-ui-py`` package ships it, located without importing the package — no CDN."""
    spec = importlib.util.find_spec("swagger_ui")
    return os.path.realpath(os.path.join(next(iter(spec.submodule_search_locations)), "static"))


class DocsResource:
    """``/v1/docs``: Swagger UI served from an installed package."""

    @operation(permission=None, media_type="text/html", include_in_schema=False)
    def on_get(self, req, resp):
        resp.content_type = "text/html; charset=utf-8"
        resp.text = DOCS_PAGE

    @operation(permission=None, include_in_schema=False)
    def on_get_asset(self, req, resp, name):
        root = swagger_assets()
        path = "" if "\0" in name else os.path.realpath(os.path.join(root, name))
        if not path.startswith(root + os.sep) or not os.path.isfile(path):
            raise NotFound(f"no asset {name!r}")
        resp.content_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
        with open(path, "rb") as fh:
            resp.data = fh.read()


def project_out(kernel, req, project) -> ProjectOut:
    show_path = kernel.allowed(req.context.actor, "projects.paths", project)
    return ProjectOut(id=project.id, name=project.name,
                      path=str(project.path) if show_path else None,
                      registered_at=project.registered_at, alias=project.alias,
                      status=kernel.describe(project))


class ProjectsResource:
    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission="projects.write", body=ProjectIn, response=ProjectOut, status=201,
               responses={200: ProjectOut}, tags=["projects"],
               summary="Register a project (200 when it already is)")
    def on_post(self, req, resp):
        project, created = self.kernel.projects.register(req.context.body.path)
        resp.status = 201 if created else 200
        resp.location = f"/v1/projects/{project.id}"
        if created:
            self.kernel.emit("project.registered", project=project, actor=req.context.actor,
                             request_id=req.context.request_id)
        return project_out(self.kernel, req, project)

    @operation(permission="projects.read", query=PageQuery, response=Page[ProjectOut],
               tags=["projects"], summary="List the projects the caller can see")
    def on_get(self, req, resp):
        q = req.context.query
        after = decode_cursor(q.cursor, lambda pid: isinstance(pid, str))
        visible = [p for p in self.kernel.projects.all()
                   if (after is None or p.id > after)
                   and self.kernel.allowed(req.context.actor, "projects.read", p)]
        page = visible[: q.limit]
        more = len(visible) > q.limit
        return Page[ProjectOut](items=[project_out(self.kernel, req, p) for p in page],
                                next_cursor=encode_cursor(page[-1].id) if more else None)

    @operation(permission="projects.read", response=ProjectOut, tags=["projects"],
               summary="One project (status.directory_missing: its directory is gone)",
               directory=False)
    def on_get_item(self, req, resp, project_id):
        return project_out(self.kernel, req, req.context.project)

    @operation(permission="projects.write", status=204, tags=["projects"],
               summary="Unregister a project (its files are never touched; its running jobs "
                       "are asked to stop)", directory=False)
    def on_delete_item(self, req, resp, project_id):
        project = self.kernel.projects.remove(project_id)
        self.kernel.jobs.cancel_project(project.id)
        self.kernel.emit("project.removed", project=project, actor=req.context.actor,
                         request_id=req.context.request_id)


class JobsResource:
    def __init__(self, kernel):
        self.kernel = kernel

    def _visible(self, req, job: Job) -> Job:
        """A job of a project the caller may read; of a project removed since, to a caller
        who sees every project (a build that was running then ends ``cancelled``, and
        whoever waited on it learns so rather than of no such job)."""
        if job.project_id is None:
            return job
        actor, project = req.context.actor, self.kernel.projects.find(job.project_id)
        if (actor.projects is None if project is None
                else self.kernel.allowed(actor, "projects.read", project)):
            return job
        raise NotFound(f"no job with id {job.id}", code="job_not_found")

    @operation(permission="jobs.read", query=JobsQuery, response=Page[Job], tags=["jobs"],
               summary="List jobs, newest first",
               errors={404: "`project_not_found`: `project` names none the caller can see"})
    def on_get(self, req, resp):
        q = req.context.query
        if q.project is not None:
            self.kernel.authorize(req.context.actor, "projects.read", self.kernel.projects.get(q.project))
        items = self.kernel.jobs.list(**jobs_seen(self.kernel, req.context.actor)[1],
                                      project_id=q.project, status=q.status, limit=q.limit + 1,
                                      after=decode_cursor(q.cursor, text_pair))
        more = len(items) > q.limit
        items = items[: q.limit]
        cursor = encode_cursor([items[-1].created_at, items[-1].id]) if more else None
        return Page[Job](items=items, next_cursor=cursor)

    @operation(permission="jobs.read", response=Job, tags=["jobs"], summary="One job")
    def on_get_item(self, req, resp, job_id):
        return self._visible(req, self.kernel.jobs.get(job_id))

    @operation(permission="jobs.cancel", response=Job, status=202, tags=["jobs"],
               summary="Ask a running job to stop",
               errors={409: "`job_finished`: the job already ended"})
    def on_delete_item(self, req, resp, job_id):
        self._visible(req, self.kernel.jobs.get(job_id))
        return self.kernel.jobs.cancel(job_id)


class EventsResource:
    """``GET /v1/events``: server-sent events, resumable with ``Last-Event-ID``. A stream holds
    one of its worker's threads while it is open: a worker keeps one thread for everything
    else (more streams are 503 ``too_many_streams``), so open streams never stop it answering."""

    def __init__(self, kernel):
        self.kernel = kernel
        threads = int(os.environ.get("NEURALMIND_THREADS") or kernel.settings.server.threads)
        self.slots = max(threads - 1, 1)
        self._open = threading.BoundedSemaphore(self.slots)

    @operation(permission="events.read", query=EventsQuery, media_type="text/event-stream",
               tags=["events"], summary="Follow events as server-sent events",
               errors={404: "`project_not_found`: `project` names none the caller can see",
                       503: "`too_many_streams`: this worker's threads but one hold streams"})
    def on_get(self, req, resp):
        kernel, actor, q = self.kernel, req.context.actor, req.context.query
        if q.project is not None:
            kernel.authorize(actor, "projects.read", kernel.projects.get(q.project))
        kernel.check_event_patterns(q.kind, "kind")
        last_id = _last_event_id(req.get_header("Last-Event-ID"))
        if last_id is None:
            last_id = kernel.events.last_id()
        wanted = kind_filter(q.kind)
        readable = kernel.event_reader(actor)

        def keep(event) -> bool:
            if not wanted(event.kind):
                return False
            if q.project is not None and event.project_id != q.project:
                return False
            return readable(event)

        if not self._open.acquire(blocking=False):
            raise Unavailable(f"this worker has {self.slots} event streams open, all its "
                              "threads but one: try again, or give the server more threads "
                              "([server] threads)", code="too_many_streams",
                              headers={"Retry-After": "5"})
        resp.content_type = "text/event-stream"
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("X-Accel-Buffering", "no")
        stream = kernel.events.stream(last_id, keep, kernel.settings.kernel.sse_heartbeat_s,
                                      lambda: kernel.still_admitted(req))
        resp.stream = Slot(stream, self._open.release)


class Slot:
    """A stream that holds a slot until it ends or the server closes it (a generator never
    started runs no ``finally``: the WSGI server's ``close`` lets the slot go)."""

    def __init__(self, stream: Iterator[bytes], release: Callable[[], None]):
        self._stream, self._release = stream, release
        self._held = True

    def __iter__(self) -> Slot:
        return self

    def __next__(self) -> bytes:
        return next(self._stream)

    def close(self) -> None:
        if self._held:
            self._held = False
            self._stream.close()
            self._release()


def _last_event_id(header: str | None) -> int | None:
    """The id an event stream resumes after: what this server sent as an event's ``id``."""
    if not header:
        return None
    if not (re.fullmatch(r"[0-9]{1,19}", header) and row_number(int(header))):
        raise BadRequest("Last-Event-ID is not an event id this server sent (digits)",
                         details={"header": "Last-Event-ID"})
    return int(header)


def routes(kernel) -> list[tuple]:
    projects, jobs_ = ProjectsResource(kernel), JobsResource(kernel)
    docs = DocsResource()
    return [
        ("/v1/health", HealthResource(kernel)),
        ("/v1/status", StatusResource(kernel)),
        ("/v1/admin/shutdown", ShutdownResource(kernel)),
        ("/v1/openapi.json", OpenAPIResource(kernel)),
        ("/v1/docs", docs),
        ("/v1/docs/", docs),  # the same page: a trailing slash is how many people type it
        ("/v1/docs/assets/{name}", docs, "asset"),
        ("/v1/projects", projects),
        ("/v1/projects/{project_id}", projects, "item"),
        ("/v1/jobs", jobs_),
        ("/v1/jobs/{job_id}", jobs_, "item"),
        ("/v1/events", EventsResource(kernel)),
        ("/v1/embeddings/status", EmbeddingsStatusResource(kernel)),
    ]
