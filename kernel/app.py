"""The Kernel: owns the config, the plugin manager, the route table, jobs, events and the
embedder, and builds the Falcon app every plugin's routes are mounted on."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import falcon

from kernel import __version__, errors, jobs, openapi, storage
from kernel.api import HTTP_METHODS, JSON, Operation, Validator, operation_of
from kernel.auth import KERNEL_PERMISSIONS, Actor, Permission
from kernel.config import ConfigError, Settings, load_settings
from kernel.errors import (APIError, Forbidden, InvalidFields, NotFound, PreconditionFailed,
                           Unauthorized, log_failure)
from kernel.events import (KERNEL_EVENT_KINDS, Event, EventKind, EventLog, HeldEvents,
                           unknown_patterns)
from kernel.guards import LOOPBACK_HOSTS, Guards
from kernel.inner import Caller
from kernel.leases import Leases
from kernel.pg import PgBackend, PgDatabase
from kernel.plugins import (PluginError, StartupError, each, make_plugin_manager,
                            plugin_label)
from kernel.projects import Project, ProjectRegistry, gone, refuse_a_gone_directory
from kernel.retention import Retention

log = logging.getLogger("neuralmind.kernel")
T = TypeVar("T")
VERSIONLESS = ("this route compares If-Match with no version, so the write was not done: send "
               "it without If-Match (or with If-Match: *)")
SIDE_THREADS = 4  # work running beside a request's own thread (Kernel.beside), per process


class Kernel:
    """One per process. Plugins reach everything they may use through this object."""

    def __init__(self, settings: Settings | None = None, *, plugins: Iterable[str] | None = None,
                 extra_plugins: Iterable[object] = (), load_entrypoints: bool = True):
        try:
            self._start(settings, plugins, extra_plugins, load_entrypoints)
        except BaseException as ex:
            if getattr(self, "_pg", None) is not None:  # its pool's threads and connections
                self._pg.close()
            if getattr(self, "retention", None) is not None:
                self.retention.stop()
            if not (isinstance(ex, sqlite3.DatabaseError) and storage.damaged(ex)):
                raise
            # a damaged file met while starting (kernel.db, a plugin's) stops the start in
            # one line naming it, rather than a traceback in each worker
            raise StartupError(storage.damage_said(ex)) from None

    def _start(self, settings: Settings | None, plugins: Iterable[str] | None,
               extra_plugins: Iterable[object], load_entrypoints: bool) -> None:
        self.settings = settings or load_settings()
        self.started = time.monotonic()
        self.home = self.settings.home
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
        names = list(plugins) if plugins is not None else self.settings.kernel.plugins
        self.plugin_names = list(dict.fromkeys(names))
        self.pm = make_plugin_manager(names, extra_plugins, load_entrypoints)
        _refuse_wrappers(self.pm)
        self._failed: set[tuple[str, str]] = set()  # (hook, plugin) logged as failing
        storage_ = self.settings.storage
        self._pg = (PgBackend(storage_.dsn, storage_.pool_size)
                    if storage_.backend == "postgres" else None)
        self._files: weakref.WeakSet[storage.Database] = weakref.WeakSet()  # see shutdown
        self.db = (self.shared_database("kernel", kernel_migrations(postgres=True))
                   or self.open_database(self.home / "kernel.db", kernel_migrations(postgres=False)))
        self.projects = ProjectRegistry(self.db, self.settings, forget=self._forget)
        self.jobs = jobs.Jobs(self.db)
        self.events = EventLog(self.db, self._fan_out)
        self.leases = Leases(self.db)
        self.permissions = self._collect("register_permissions", KERNEL_PERMISSIONS,
                                         Permission, "permission")
        self.event_kinds = self._collect("register_event_kinds", KERNEL_EVENT_KINDS,
                                         EventKind, "event kind")
        self.routes: list[tuple[str, str, Operation, str]] = []
        self._served: dict[str, tuple[str, str]] = {}  # uri template → (uri, its owner)
        self._components: dict[str, type] = {"Error": dict}  # component name → its model
        self._embedder = None
        self._embedder_lock = threading.Lock()
        self._states: dict[str, Any] = {}
        self._states_lock = threading.RLock()
        self._undeclared: set[str] = set()
        self._side: ThreadPoolExecutor | None = None
        self._openapi: dict[str, Any] | None = None
        self.app = self._build_app()
        self.jobs.mark_interrupted()
        self.retention = Retention(self.settings.kernel, self.events, self.jobs)
        self.retention.start()
        self._start_plugins()
        if self.settings.embeddings.warm:
            threading.Thread(target=self._warm, name="embedder-warm", daemon=True).start()

    def _start_plugins(self) -> None:
        """The plugins' ``startup``; one that raises stops the process with one line naming it
        (found in the traceback among the hook's implementations, as a wrapper may wrap them;
        a kernel error it raised goes on as it is)."""
        try:
            self.pm.hook.startup(kernel=self)
        except (ConfigError, PluginError, StartupError):
            raise
        except Exception as ex:
            if storage.damaged(ex):  # the file, not the plugin, is at fault: said by __init__
                raise
            by_code = {getattr(impl.function, "__code__", None): impl.plugin
                       for impl in self.pm.hook.startup.get_hookimpls()}
            frames, culprit = ex.__traceback__, None
            while frames is not None:
                culprit = by_code.get(frames.tb_frame.f_code, culprit)
                frames = frames.tb_next
            who = f"plugin {plugin_label(self.pm, culprit)!r}" if culprit else "a plugin"
            raise StartupError(f"{who} did not start: {type(ex).__name__}: {ex}") from ex

    # -- plugins' public API -------------------------------------------------------------

    def open_database(self, path: str | Path, migrations) -> storage.Database:
        """A plugin store's SQLite file, migrated, with the kernel's pragmas."""
        db = storage.Database(path, migrations)
        self._files.add(db)
        return db

    def shared_database(self, component: str, migrations) -> PgDatabase | None:
        """With ``[storage] backend = "postgres"``, the database every server shares, with
        ``component``'s own PostgreSQL migrations applied; None on SQLite. A plugin's store
        factory asks once and opens its PostgreSQL twin or its SQLite store accordingly."""
        return self._pg.database(component, migrations) if self._pg is not None else None

    def state(self, owner: str, factory: Callable[[], T] | None = None) -> T | None:
        """What plugin ``owner`` keeps for this kernel (services, stores, threads), made by
        ``factory()`` on first use; None when nothing is kept and no factory is given.
        State lives on the kernel, so two kernels in one process (tests, the bench) never
        share a plugin's services."""
        found = self._states.get(owner)
        if found is None and factory is not None:
            with self._states_lock:  # re-entrant: a factory may ask for another plugin's state
                found = self._states.get(owner)
                if found is None:
                    found = self._states[owner] = factory()
        return found

    def drop_state(self, owner: str) -> Any:
        """Forget ``owner``'s state (at shutdown) and return it, or None."""
        with self._states_lock:
            return self._states.pop(owner, None)

    def beside(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on the kernel's side threads while the caller works on: a keyword
        leg beside the query's embedding (sqlite3 and onnxruntime release the GIL, so a hybrid
        search costs about its slower leg, not the sum). Threads start on first use, so each
        gunicorn worker has its own."""
        if self._side is None:
            with self._states_lock:
                if self._side is None:
                    self._side = ThreadPoolExecutor(SIDE_THREADS, thread_name_prefix="kernel-side")
        return self._side.submit(fn, *args)

    def caller(self, req: falcon.Request) -> Caller:
        """Call this app's other routes as the client of ``req`` (same credentials, Host and
        request id): a plugin builds on other plugins' routes without importing them."""
        return Caller(self.app, req.env, req.context.request_id)

    def emit(self, kind: str, *, project: Project | str | None = None,
             actor: Actor | str | None = None, data: dict[str, Any] | None = None,
             request_id: str | None = None) -> None:
        """Record an event after a write has committed, then fan it out to ``track_event``.
        Inside a request, the request's events are recorded together once its handler and the
        plugins' middleware (``api.call``) are done, before any ``after_events`` middleware."""
        if kind not in self.event_kinds and kind not in self._undeclared:
            self._undeclared.add(kind)
            log.warning("event kind %r is emitted but no plugin declares it "
                        "(register_event_kinds): webhooks and streams reach it only through a "
                        "wider pattern", kind)
        pid = project.id if isinstance(project, Project) else project
        who = actor.id if isinstance(actor, Actor) else actor
        self.events.append(kind, pid, who, data, request_id)

    def check_event_patterns(self, patterns: Iterable[str], field: str) -> None:
        """422 naming ``field`` when one of ``patterns`` matches no declared event kind."""
        if wrong := unknown_patterns(patterns, self.event_kinds):
            raise InvalidFields.one(field, "matches no event kind: " + ", ".join(wrong))

    def allowed(self, actor: Actor | None, permission: str, project: Project | None = None) -> bool:
        if actor is None:
            return False
        answers = self.pm.hook.permission_allowed(kernel=self, actor=actor, permission=permission,
                                                  project=project)
        return False not in answers and True in answers

    def event_reader(self, actor: Actor) -> Callable[[Event], bool]:
        """Whether ``actor`` may read an event, for one pass over events (answers are kept per
        project): those of projects it can read; those of no project (token changes, job
        cancels) and of removed projects, which name actors, roles and other projects, only
        with ``events.global``. ``/v1/events`` and webhooks deliver by this one rule."""
        everything = self.allowed(actor, "events.global")
        seen: dict[str, bool] = {}

        def readable(event: Event) -> bool:
            if event.project_id is None:
                return everything
            if event.project_id not in seen:
                project = self.projects.find(event.project_id)
                seen[event.project_id] = everything if project is None else self.allowed(
                    actor, "projects.read", project)
            return seen[event.project_id]

        return readable

    def authorize(self, actor: Actor, permission: str, project: Project | None) -> None:
        """403 for a missing permission; 404 when the project itself is out of the actor's
        reach, so a token never learns which other projects exist."""
        if self.allowed(actor, permission, project):
            return
        if project is not None and (permission == "projects.read"
                                    or not self.allowed(actor, "projects.read", project)):
            raise NotFound(f"no project with id {project.id}", code="project_not_found")
        message, details = self.pm.hook.refusal(
            kernel=self, actor=actor, permission=permission, project=project
        ) or (f"{actor.id} may not {permission}", {})
        raise Forbidden(message, details={"permission": permission, **details})

    def actor(self, req: falcon.Request) -> Actor:
        actor = getattr(req.context, "actor", None)
        if actor is None:
            actor = self.pm.hook.actor_from_request(kernel=self, request=req, again=False)
            if actor is None:
                raise Unauthorized()
            req.context.actor = actor
        return actor

    def still_admitted(self, req: falcon.Request) -> bool:
        """Whether the credentials ``req`` was let in with still hold (a long answer's check:
        a token revoked or expired since ends it)."""
        try:
            again = self.pm.hook.actor_from_request(kernel=self, request=req, again=True)
        except APIError:
            return False
        return again is not None and again.id == req.context.actor.id

    @property
    def embedder(self):
        """The shared embedder: a plugin's (``embedder`` hook) or the packaged model, made once."""
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    from kernel.embeddings import default_embedder
                    self._embedder = (self.pm.hook.embedder(kernel=self)
                                      or default_embedder(self.settings))
        return self._embedder

    def _warm(self) -> None:
        """Load the model off the request path, so neither the first request nor a client's
        handshake waits for it (mcp-memory-service's eager load timed clients out)."""
        try:
            self.embedder.embed(["warm up"])
        except Exception as ex:  # no model is a supported configuration: semantic search 503s
            log.warning("embedder not warmed: %s", ex)

    def describe(self, project: Project) -> dict[str, Any]:
        """The project's ``status``: what each plugin says of it. One that raises is logged
        (once per process: every listing asks again) and left out, so the kernel's own routes
        answer as if it had said nothing."""
        if gone(project):  # the plugins' stores were there: asking them would make it anew
            return {"directory_missing": True}
        status: dict[str, Any] = {}
        for label, part in self._call_each("describe_project", f"project {project.id}",
                                           once=True, project=project):
            if isinstance(part, dict):
                status.update(part)
            elif part is not None:
                self._failing("describe_project", label, f"project {project.id}", TypeError(
                    f"it answered {type(part).__name__}, not a dict"), once=True)
        return status

    @property
    def openapi(self) -> dict[str, Any]:
        if self._openapi is None:
            self._openapi = openapi.build(self.routes, __version__)
        return self._openapi

    def shutdown(self) -> None:
        """Each plugin's ``shutdown`` (one that raises is logged, and the others still run),
        then, whatever they did, the kernel's own: the event log, the pool, each SQLite file
        folded in."""
        self.retention.stop()
        try:
            self._call_each("shutdown", "")
        finally:
            self.events.close()
            if self._side is not None:
                self._side.shutdown(wait=False)
            if self._pg is not None:
                self._pg.close()
            # a file whose commits stayed in its -wal is not whole alone (a copy, a restore)
            for db in list(self._files):
                try:
                    db.checkpoint()
                    db.close()  # this thread's: the last connection to close removes the log
                except sqlite3.Error as ex:
                    log.warning("%s: its log could not be folded in at shutdown: %s", db.path, ex)

    def _forget(self, project: Project) -> None:
        self._call_each("forget_project", f"project {project.id}", project=project)

    # -- assembly --------------------------------------------------------------------------

    def _fan_out(self, event: Event) -> None:
        self._call_each("track_event", f"event {event.id}", event=event)

    def _call_each(self, hook: str, about: str, *, once: bool = False, **kw
                   ) -> list[tuple[str, Any]]:
        """Each plugin's answer to ``hook`` with its name, called one by one in pluggy's
        order: one that raises is logged naming the plugin (``once``: the first time only)
        and left out, and the others still run."""
        answers = []
        args = {"kernel": self, **kw}
        for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
            label = plugin_label(self.pm, impl.plugin)
            try:
                answers.append((label, impl.function(*[args[name] for name in impl.argnames])))
            except Exception as ex:
                self._failing(hook, label, about, ex, once=once)
        return answers

    def _failing(self, hook: str, label: str, about: str, ex: Exception, *, once: bool) -> None:
        if not once or (hook, label) not in self._failed:
            self._failed.add((hook, label))
            log_failure(log, f"{hook} of plugin {label!r}" + (f" for {about}" if about else ""),
                        ex)

    def _collect(self, hook: str, own: Iterable[T], cls: type[T], noun: str) -> dict[str, T]:
        """What ``hook`` answers, each a ``cls`` (``name``, …), with the kernel's ``own``, by
        name; a name registered twice stops start-up, naming both owners."""
        found: dict[str, T] = {}
        owners: dict[str, str] = {}
        for owner, batch in [("kernel", own), *each(self.pm, hook, kernel=self)]:
            for item in _entries(owner, hook, batch, f"{cls.__name__}(...)"):
                if not isinstance(item, cls):
                    raise StartupError(f"plugin {owner!r} {hook}: {item!r:.60} is not a "
                                       f"{cls.__name__}")
                if item.name in found:
                    raise StartupError(f"{noun} {item.name!r} is registered twice (by "
                                       f"{owners[item.name]} and {owner})")
                found[item.name], owners[item.name] = item, owner
        return found

    def _allowed_hosts(self) -> frozenset[str]:
        hosts = set(LOOPBACK_HOSTS)
        if self.settings.server_mode:
            hosts.update(h.lower() for h in self.settings.server.public_hosts)
        return frozenset(hosts)

    def _build_app(self) -> falcon.App:
        # Falcon calls process_response innermost first: the plugins' middleware (api.call),
        # then HeldEvents writes the request's events, then the middleware that asked to run
        # after them (``after_events``: bookkeeping that may wait on a lock, as tier2's seat
        # note does) — so nothing that can block stands between a write and its events
        inner: list[object] = []
        outer: list[object] = []
        for owner, batch in each(self.pm, "register_middleware", kernel=self):
            for entry in _entries(owner, "register_middleware", batch, "middleware objects"):
                if not _is_middleware(entry):
                    raise StartupError(f"plugin {owner!r} register_middleware: {entry!r:.60} is "
                                       "not a middleware object (an instance with "
                                       f"{', '.join(MIDDLEWARE_METHODS)})")
                (outer if getattr(entry, "after_events", False) is True else inner).append(entry)
        middleware = [*outer, HeldEvents(self.events),
                      Guards(self._allowed_hosts(), self.settings.kernel.max_body_bytes), *inner]
        app = falcon.App(middleware=middleware)
        app.req_options.auto_parse_qs_csv = False
        app.resp_options.default_media_type = JSON
        errors.install(app)
        from kernel import routes as kernel_routes
        for owner, batch in [("kernel", kernel_routes.routes(self)),
                             *each(self.pm, "register_routes", kernel=self)]:
            for entry in _entries(owner, "register_routes", batch, "(uri, resource[, suffix])"):
                if not (isinstance(entry, (tuple, list)) and len(entry) in (2, 3)
                        and isinstance(entry[0], str)):
                    raise StartupError(f"plugin {owner!r} register_routes: {entry!r:.60} is not "
                                       "(uri, resource[, suffix]); it returns a list of them")
                try:
                    self._mount(app, owner, *entry)
                except (StartupError, ValueError) as ex:  # ValueError: Falcon's, on the uri
                    raise StartupError(f"plugin {owner!r}: {ex}") from None
        return app

    def _mount(self, app: falcon.App, owner: str, uri: str, resource: object,
               suffix: str | None = None) -> None:
        # Falcon would let a second resource at a template replace the first without a word
        template = re.sub(r"{\w+}", "{}", uri)
        if template in self._served:
            clash, holder = self._served[template]
            by = "the kernel" if holder == "kernel" else f"plugin {holder!r}"
            raise StartupError(f"{type(resource).__name__} at {uri}: {clash} is already served "
                               f"by {by} (each route is declared once, by one plugin)")
        self._served[template] = (uri, owner)
        bound = _Bound()
        found = False
        for method in HTTP_METHODS:
            name = f"on_{method}" + (f"_{suffix}" if suffix else "")
            handler = getattr(resource, name, None)
            if handler is None:
                continue
            found = True
            op = operation_of(handler)
            where = f"{type(resource).__name__}.{name} ({uri})"
            if op is None:
                raise StartupError(f"{where} has no @operation declaration")
            if op.permission is not None and op.permission not in self.permissions:
                raise StartupError(f"{where} names unknown permission {op.permission!r}")
            op = dataclasses.replace(op, method=method)
            try:
                openapi.check_models(op)
                for tp in (op.body, op.query, op.response, *op.responses.values()):
                    openapi.claim_components(tp, self._components)
            except (openapi.ComponentClash, openapi.Unpublishable) as ex:
                raise StartupError(f"{where}: {ex}") from None
            setattr(bound, f"on_{method}", self._wrap(handler, op))
            op_id = f"{method}_{type(resource).__name__}" + (f"_{suffix}" if suffix else "")
            self.routes.append((uri, method, op, op_id))
        if not found:
            raise StartupError(f"{type(resource).__name__} at {uri} has no responders")
        if hasattr(bound, "on_get") and not hasattr(bound, "on_head"):
            bound.on_head = bound.on_get  # HTTP's HEAD: the GET, whose body Falcon leaves out
        app.add_route(uri, bound)

    def _wrap(self, handler, op: Operation):
        validator = Validator(op, self.settings.kernel.max_body_bytes)
        query_fields = frozenset(op.query.model_fields) if op.query is not None else frozenset()
        takes_body = op.body is not None or bool(op.raw_types)
        kernel = self

        def responder(req: falcon.Request, resp: falcon.Response, **params):
            ctx = req.context
            ctx.operation = op
            actor = None if op.public else kernel.actor(req)
            validator.path(params)  # 401 first, as for a bad body; then no lookup by a NUL
            pid = params.get("project_id")
            ctx.project = kernel.projects.get(pid) if pid is not None else None
            if actor is not None:
                kernel.authorize(actor, op.permission, ctx.project)
            if ctx.project is not None and op.directory:
                refuse_a_gone_directory(ctx.project)
            if op.versionless and req.get_header("If-Match", default="*").strip() != "*":
                raise PreconditionFailed(VERSIONLESS)
            if op.query is not None:
                ctx.query = validator.query(req)
            if takes_body:
                ctx.body = validator.body(req)
            resp.status = op.status
            try:
                result = handler(req, resp, **params)
            except InvalidFields as ex:
                # a field of the query model is the query's; the others the body's when the
                # operation takes one, else the query's as well: nothing else was sent
                ex.place(query_fields if takes_body
                         else {e["loc"][0] for e in ex.errors if e["loc"]})
                raise
            if result is not None:
                validator.write(resp, result)

        return responder



MIDDLEWARE_METHODS = ("process_request", "process_resource", "process_response")


def _is_middleware(entry: object) -> bool:
    """Whether Falcon takes ``entry`` as middleware: an instance (a class's methods are not
    bound) with one of its methods at least, each callable."""
    found = [getattr(entry, name) for name in MIDDLEWARE_METHODS if hasattr(entry, name)]
    return not isinstance(entry, type) and bool(found) and all(map(callable, found))


def _entries(owner: str, hook: str, batch: Any, what: str) -> list:
    """A hook's answer, a list of ``what`` (None: none), or a start-up error naming the plugin."""
    if batch is None:
        return []
    if not isinstance(batch, (list, tuple)):
        raise StartupError(f"plugin {owner!r} {hook} must return a list of {what}, not "
                           f"{type(batch).__name__}")
    return list(batch)


# the hooks the kernel calls plugin by plugin (``_call_each``), so one that fails is left out
CALLED_ONE_BY_ONE = ("describe_project", "forget_project", "shutdown", "track_event")


def _refuse_wrappers(pm) -> None:
    """A wrapper of a hook called plugin by plugin would never run: refused at start-up."""
    for hook in CALLED_ONE_BY_ONE:
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if impl.wrapper or impl.hookwrapper:
                raise PluginError(f"plugin {plugin_label(pm, impl.plugin)!r} wraps {hook}, "
                                  "which the kernel calls plugin by plugin (so one that fails "
                                  "is left out): implement it instead")


class _Bound:
    """The object Falcon routes to: each responder wrapped with its operation's checks."""


def kernel_migrations(postgres: bool) -> list[str]:
    """The kernel's tables (projects, jobs, events, leases), version by version: SQLite's
    kernel.db grew a step at a time; PostgreSQL started at the second one."""
    from kernel import events, leases, projects
    if postgres:
        return [projects.MIGRATIONS[0] + jobs.PG_MIGRATION + events.PG_MIGRATION
                + leases.PG_MIGRATION, *jobs.PG_STEPS]
    return [projects.MIGRATIONS[0] + jobs.MIGRATIONS[0] + events.MIGRATIONS[0],
            jobs.MIGRATIONS[1] + leases.SQLITE_MIGRATION, *jobs.MIGRATIONS[2:]]
