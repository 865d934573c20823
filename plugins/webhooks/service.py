"""The webhooks service: who may manage which hook, which events each hook receives, and what
one try of a delivery does. Resources hand requests to it; the sender thread drives it; the
store holds the state. No HTTP framework and no SQL here."""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from neuralmind import (Actor, Conflict, InvalidFields, NotFound, __version__, decode_cursor,
                        encode_cursor, kind_filter, row_number, text_pair)
from neuralmind.client import webhook_signature
from plugins.webhooks.models import WebhookIn, WebhookPatch, WebhooksSettings
from plugins.webhooks.sender import Sender
from plugins.webhooks.store import (FILE, MIGRATIONS, PG_MIGRATIONS, Hook, Queued, WebhookStore,
                                    in_grace)
from plugins.webhooks.targets import TargetPolicy, TargetRefused, host_of, post

log = logging.getLogger("neuralmind.webhooks")

BATCH = 500  # events taken into the queue per transaction, so other workers get their turn
USER_AGENT = f"NeuralMind-Webhooks/{__version__}"
JITTER = random.Random()  # its own generator: the jitter never draws from the global one


def iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _cursor_hook(state: Any) -> bool:
    if not text_pair(state):
        return False
    try:
        return float(state[0]) >= 0
    except ValueError:
        return False


def _new_id(prefix: str, nbytes: int) -> str:
    return f"{prefix}_{secrets.token_hex(nbytes)}"


def _private_file(kernel):
    """``webhooks.db`` in the home, readable by its owner only: it holds the signing secrets
    (SQLite gives its -wal and -shm files the database file's mode)."""
    path = kernel.home / FILE
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    return kernel.open_database(path, MIGRATIONS)


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class Webhooks:
    """One kernel's hooks: made at start-up, its sender running in every worker."""

    def __init__(self, kernel, settings: WebhooksSettings, clock: Callable[[], float] = time.time):
        self.kernel = kernel
        self.settings = settings
        self.clock = clock  # when tries are due and how long a hook has failed (tests move it)
        self.policy = TargetPolicy(settings.allow_private,
                                   require_https=kernel.settings.server_mode
                                   and not settings.insecure_http, ca_file=settings.ca_file)
        self.store = WebhookStore(kernel.shared_database("webhooks", PG_MIGRATIONS)
                                  or _private_file(kernel))
        last = kernel.events.last_id()
        if (was := self.store.start_cursor(last)) is not None:
            log.warning("webhooks: the event log ends at #%d, before the #%d the deliveries had "
                        "reached (kernel.db restored from an older backup?): events from #%d on "
                        "are delivered", last, was, last + 1)
        self.sender = Sender(self)

    # -- who may manage which hook -------------------------------------------------------

    def _manages_all(self, actor: Actor) -> bool:
        """Every hook, those of every project included, is for callers who see everything."""
        return actor.projects is None and self.kernel.allowed(actor, "events.global")

    def _reaches(self, actor: Actor) -> Callable[[Hook], bool]:
        if self._manages_all(actor):
            return lambda hook: True

        def reaches(hook: Hook) -> bool:
            return hook.projects is not None and all(self._readable(actor, p)
                                                     for p in hook.projects)
        return reaches

    def _readable(self, actor: Actor, project_id: str) -> bool:
        project = self.kernel.projects.find(project_id)
        return project is not None and self.kernel.allowed(actor, "projects.read", project)

    def _check_projects(self, actor: Actor, projects: list[str] | None) -> list[str] | None:
        if projects is None:
            if not self._manages_all(actor):
                raise InvalidFields.one("projects", "name the projects this hook is for: you "
                                        "manage the hooks of your own projects, and null "
                                        "means every project", "projects_required")
            return None
        errors = [{"loc": ("projects", i), "msg": f"no project with id {pid}",
                   "type": "project_not_found"}
                  for i, pid in enumerate(projects) if not self._readable(actor, pid)]
        if errors:
            raise InvalidFields(errors, errors[0]["msg"])
        return list(dict.fromkeys(projects))

    def _check_url(self, url: str) -> str:
        try:
            self.policy.addresses(self.policy.target(url))
        except TargetRefused as ex:
            raise InvalidFields.one("url", str(ex), "url_refused") from None
        return url

    def hook(self, actor: Actor, hook_id: str) -> Hook:
        hook = self.store.hook(hook_id)
        if hook is None or not self._reaches(actor)(hook):
            raise NotFound(f"no webhook with id {hook_id}", code="webhook_not_found")
        return hook

    # -- managing hooks ----------------------------------------------------------------------

    def out(self, hook: Hook, secret: str | None = None) -> dict[str, Any]:
        at = self.clock()
        previous = in_grace(hook.previous_secrets, at)
        latest = hook.previous_secrets[0] if hook.previous_secrets else None
        data = {"id": hook.id, "url": hook.url, "events": hook.events, "projects": hook.projects,
                "description": hook.description, "enabled": hook.enabled,
                "disabled_reason": hook.disabled_reason, "paused_at": iso(hook.paused_at),
                "created_at": iso(hook.created_at),
                "updated_at": iso(hook.updated_at), "created_by": hook.owner_id,
                "failing_since": iso(hook.failing_since),
                "last_success_at": iso(hook.last_success_at),
                "secret_rotated_at": iso(hook.secret_rotated_at),
                "previous_secret_until": iso(latest[1]) if latest in previous else None,
                "previous_secrets_until": [iso(until) for _, until in previous]}
        return data if secret is None else {**data, "secret": secret}

    def create(self, actor: Actor, body: WebhookIn, request_id: str | None) -> dict[str, Any]:
        self.kernel.check_event_patterns(body.events, "events")
        projects = self._check_projects(actor, body.projects)
        url = self._check_url(body.url)
        at = self.clock()
        hook = Hook(id=_new_id("wh", 8), url=url, events=list(dict.fromkeys(body.events)),
                    projects=projects, description=body.description, secret=new_secret(),
                    previous_secrets=[], enabled=True, disabled_reason=None, paused_at=None,
                    owner_id=actor.id, owner_role=actor.role,
                    owner_kind=actor.kind,
                    owner_projects=None if actor.projects is None else list(actor.projects),
                    after_event=self.kernel.events.last_id(), created_at=at, updated_at=at,
                    failing_since=None, last_success_at=None, secret_rotated_at=None)
        self.store.add_hook(hook)
        self._emit("webhook.created", hook, actor, request_id, events=hook.events,
                   projects=hook.projects)
        return self.out(hook, hook.secret)

    def page(self, actor: Actor, cursor: str | None, limit: int) -> dict[str, Any]:
        """The hooks ``actor`` reaches, oldest first, after the cursor's ``[created_at, id]``
        (a hook deleted since the last page does not lose the reader's place)."""
        after = decode_cursor(cursor, _cursor_hook)
        reaches = self._reaches(actor)
        hooks = [h for h in self.store.hooks() if reaches(h)
                 and (after is None or (h.created_at, h.id) > (float(after[0]), after[1]))]
        more = len(hooks) > limit
        hooks = hooks[:limit]
        last = hooks[-1] if hooks else None
        return {"items": [self.out(h) for h in hooks],
                "next_cursor": encode_cursor([repr(last.created_at), last.id]) if more else None}

    def update(self, actor: Actor, hook_id: str, patch: WebhookPatch,
               request_id: str | None) -> dict[str, Any]:
        hook = self.hook(actor, hook_id)
        given = {k: getattr(patch, k) for k in patch.model_fields_set
                 if k == "projects" or getattr(patch, k) is not None}
        changes: dict[str, Any] = {}
        if "events" in given:
            self.kernel.check_event_patterns(given["events"], "events")
        if "url" in given:
            changes["url"] = self._check_url(given["url"])
        if "projects" in given:
            changes["projects"] = self._check_projects(actor, given["projects"])
        if "events" in given:
            changes["events"] = list(dict.fromkeys(given["events"]))
        if "description" in given:
            changes["description"] = given["description"]
        at = self.clock()
        if given.get("enabled") is False and hook.enabled:
            # a pause: nothing is sent, what happens meanwhile is queued (for keep_days at
            # most). A hook disabled for failing stays so: it queues nothing (docs/webhooks.md)
            changes.update(enabled=False, disabled_reason=f"paused by {actor.id}", paused_at=at)
        if changes:
            hook = self.store.change_hook(hook.id, {**changes, "updated_at": at})
        if given.get("enabled") is True and not hook.enabled:
            self.store.resume_hook(hook.id, at)
            hook = self.store.hook(hook.id)
            self.sender.notify()
        if given:
            self._emit("webhook.updated", hook, actor, request_id, changed=sorted(given))
        return self.out(hook)

    def delete(self, actor: Actor, hook_id: str, request_id: str | None) -> None:
        hook = self.hook(actor, hook_id)
        self.store.remove_hook(hook.id)
        self._emit("webhook.deleted", hook, actor, request_id)

    def rotate(self, actor: Actor, hook_id: str, keep_previous_s: int,
               request_id: str | None) -> dict[str, Any]:
        hook = self.hook(actor, hook_id)
        at = self.clock()
        secret = new_secret()
        running = self.store.set_secret(hook.id, secret,
                                        at + keep_previous_s if keep_previous_s else None, at)
        if running is not None:
            raise InvalidFields.one(
                "keep_previous_s", f"{len(running)} replaced secrets sign already, the most "
                f"there may be; the first grace ends at {iso(running[0])}: rotate then, or "
                "with keep_previous_s=0 to end every grace now (a leaked secret)",
                "secrets_in_grace")
        self._emit("webhook.secret_rotated", hook, actor, request_id,
                   keep_previous_s=keep_previous_s)
        return self.out(self.store.hook(hook.id), secret)

    def _emit(self, kind: str, hook: Hook, actor: Actor | None, request_id: str | None,
              **data: Any) -> None:
        """A hook's events name it and its host, never its URL (which may hold a token) or
        its secret; they belong to no project, as a hook may span several."""
        self.kernel.emit(kind, actor=actor, request_id=request_id,
                         data={"webhook_id": hook.id, "host": host_of(hook.url), **data})

    # -- deliveries ------------------------------------------------------------------------

    def delivery_out(self, row) -> dict[str, Any]:
        return {"id": row["id"], "webhook_id": row["hook_id"], "event_id": row["event_id"],
                "kind": row["kind"], "status": row["status"], "attempts": row["attempts"],
                "last_status_code": row["last_status_code"], "last_error": row["last_error"],
                "last_latency_ms": row["last_latency_ms"],
                "last_attempt_at": iso(row["last_attempt_at"]),
                "next_attempt_at": iso(row["next_at"]) if row["status"] == "pending" else None,
                "created_at": iso(row["created_at"]), "delivered_at": iso(row["delivered_at"])}

    def deliveries(self, actor: Actor, hook_id: str, status: str | None, cursor: str | None,
                   limit: int) -> dict[str, Any]:
        hook = self.hook(actor, hook_id)
        rows = self.store.deliveries(hook.id, status, decode_cursor(cursor, row_number),
                                     limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return {"items": [self.delivery_out(r) for r in rows],
                "next_cursor": encode_cursor(rows[-1]["seq"]) if more else None}

    def redeliver(self, actor: Actor, hook_id: str, delivery_id: str) -> dict[str, Any]:
        hook = self.hook(actor, hook_id)
        if not hook.enabled:
            raise Conflict(f"webhook {hook.id} is {'paused' if hook.paused_at else 'disabled'}: "
                           "enable it (PATCH enabled=true, or `neuralmind webhook update "
                           f"{hook.id} --enable`) before redelivering", code="webhook_disabled")
        before = self.store.requeue(hook.id, delivery_id, self.clock())
        if before is None:
            raise NotFound(f"no delivery {delivery_id} for webhook {hook.id}",
                           code="delivery_not_found")
        if before["status"] == "pending":
            raise Conflict(f"delivery {delivery_id} is still queued (try {before['attempts'] + 1} "
                           f"due {iso(before['next_at'])})", code="delivery_pending")
        self.sender.notify()
        return self.delivery_out(self.store.delivery(hook.id, delivery_id))

    def ping(self, actor: Actor, hook_id: str, request_id: str | None) -> dict[str, Any]:
        """Send a ``ping`` now, signed like any delivery, and say what the receiver answered."""
        hook = self.hook(actor, hook_id)
        at = self.clock()
        did = _new_id("dl", 12)
        body = json.dumps({"id": None, "at": iso(at), "kind": "ping", "project_id": None,
                           "actor": actor.id, "request_id": request_id,
                           "data": {"webhook_id": hook.id}}, separators=(",", ":"))
        outcome = self.send(hook.url, did, "ping", body.encode(), self.signing_secrets(
            hook.secret, hook.previous_secrets, at))
        self.store.record_ping(did, hook.id, body, at, outcome.code, outcome.error,
                               outcome.latency_ms)
        return self.delivery_out(self.store.delivery(hook.id, did))

    # -- the queue: filled from the event log, emptied by the sender ---------------------------

    def take_in(self) -> int:
        """Queue a delivery for every hook that wants each event committed since the cursor —
        enabled, or paused less than ``keep_days`` ago; returns how many events were read.
        Safe in any number of workers at once."""
        events = self.kernel.events
        if self.store.cursor() >= events.last_id():  # the usual case, without a write lock
            return 0
        total = 0
        at = self.clock()
        paused_after = at - self.settings.keep_days * 86_400
        while n := self.store.queue_events(events.after, self._plan, BATCH, at, paused_after):
            total += n
            if n < BATCH:
                break
        return total

    def _plan(self, events: Sequence[Any], hooks: list[Hook]) -> Iterator[Queued]:
        wants = [(h, kind_filter(h.events), None if h.projects is None else set(h.projects),
                  self._owner_reads(h)) for h in hooks]
        for event in events:
            body = None
            for hook, kind_ok, projects, readable in wants:
                if event.id <= hook.after_event or not kind_ok(event.kind):
                    continue
                if projects is not None and event.project_id not in projects:
                    continue
                if not readable(event):
                    continue
                if body is None:  # the event as the log holds it, never more
                    body = json.dumps(event.as_dict(), separators=(",", ":"), default=str)
                yield Queued(_new_id("dl", 12), hook.id, event.id, event.kind, body)

    def _owner_reads(self, hook: Hook) -> Callable[[Any], bool]:
        """What the hook's creator may read: the events it may deliver."""
        owner = Actor(hook.owner_id, role=hook.owner_role, kind=hook.owner_kind,
                      projects=None if hook.owner_projects is None else tuple(hook.owner_projects))
        if not self.kernel.allowed(owner, "events.read"):
            return lambda event: False
        return self.kernel.event_reader(owner)

    def attempt(self, row) -> bool:
        """One try of a queued delivery (a row of ``store.due``): recorded, and on failure
        due again after a back-off, failed after the last try, and the hook disabled once its
        tries have failed for ``disable_after_s`` and this delivery has used its last try or
        failed every try for that long itself (:meth:`WebhookStore.try_failed`). True when
        the receiver took it."""
        at = self.clock()
        outcome = self.send(row["url"], row["id"], row["kind"], row["body"].encode(),
                            self.signing_secrets(row["secret"], row["previous_secrets"], at),
                            row["hook_id"])
        if outcome.ok:
            self.store.delivered(row["id"], row["hook_id"], outcome.code, outcome.latency_ms, at)
            return True
        tries = row["attempts"] + 1
        # the wait counts from the failure: a try that timed out has already taken timeout_s
        next_at = self.clock() + self.backoff(tries) if tries < self.settings.attempts else None
        window = self.settings.disable_after_s
        since = self.store.try_failed(
            row["id"], row["hook_id"], outcome.code, outcome.error, outcome.latency_ms, at,
            next_at, at - window, f"every try failed for {_span(window)}; last: {outcome.error}")
        if since is not None:
            self.kernel.emit("webhook.disabled", data={
                "webhook_id": row["hook_id"], "host": host_of(row["url"]),
                "failing_since": iso(since), "last_error": outcome.error})
        return False

    def backoff(self, tries: int) -> float:
        """Seconds before the next try after ``tries`` failed ones: doubling from
        ``retry_base_s``, spread ±20 % so hooks that failed together do not retry together,
        never above ``retry_max_s`` (at the cap, spread below it)."""
        s = self.settings
        wait = s.retry_base_s * 2 ** min(tries - 1, 60)
        return JITTER.uniform(0.8 * min(wait, s.retry_max_s), min(1.2 * wait, s.retry_max_s))

    @staticmethod
    def signing_secrets(secret: str, previous: list[list] | str | None, at: float) -> list[str]:
        """The current secret, then every replaced one whose grace runs at ``at``."""
        return [secret, *(s for s, _ in in_grace(previous, at))]

    def send(self, url: str, delivery_id: str, kind: str, body: bytes, keys: list[str],
             hook_id: str | None = None):
        """POST one signed delivery (on the hook's kept connection when ``hook_id`` is given).
        The timestamp is the wall clock's: receivers check it."""
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   "NeuralMind-Event": kind, "NeuralMind-Delivery": delivery_id,
                   "NeuralMind-Timestamp": timestamp,
                   "NeuralMind-Signature": ", ".join(webhook_signature(k, timestamp, body)
                                                     for k in keys)}
        return post(self.policy, url, body, headers, self.settings.timeout_s,
                    self.sender.connections if hook_id else None, hook_id or "")

    def close(self) -> None:
        self.sender.stop()


def _span(seconds: float) -> str:
    """``24 h``, ``90 min``, ``4 s``: a window as a person reads it."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0 or seconds >= 10 * size:
            return f"{round(seconds / size, 1):g} {unit}"
    return f"{round(seconds, 1):g} s"
