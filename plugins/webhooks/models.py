"""The webhooks plugin's settings and its request and response models (pydantic)."""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from typing import Annotated, Literal

from pydantic import (AfterValidator, Field, StringConstraints, field_validator, model_validator)

from neuralmind import ConfigSection, Model, PageQuery, no_nul

EVENT_PATTERN = r"^(\*|[a-z0-9_][a-z0-9_.]*\*?)$"
PROJECT_ID = r"^[a-z0-9][a-z0-9_-]{0,63}$"


def _shaped(pattern: str, what: str) -> AfterValidator:
    """A check whose message says what the value should have been."""
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
        return value
    return AfterValidator(check)


EventPattern = Annotated[str,
                         StringConstraints(strip_whitespace=True, min_length=1, max_length=100),
                         _shaped(EVENT_PATTERN, "an event kind (lower case, like memory.created) "
                                 "or a prefix ending in * (memory.*, or * for every kind)")]
ProjectId = Annotated[str, _shaped(PROJECT_ID, "a project id (lower-case letters, digits, - and "
                                   "_, as GET /v1/projects lists them)")]
Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2_048)]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=1_000),
                        AfterValidator(no_nul)]
Events = Annotated[list[EventPattern], Field(
    min_length=1, max_length=50, description="Event kinds to receive; a trailing `*` matches a "
    "prefix (`memory.*`), `*` alone every kind")]
Projects = Annotated[list[ProjectId], Field(
    min_length=1, max_length=100, description="Only events of these projects; null: every "
    "project the hook's creator may read, and (with `events.global`) events of no project")]


class WebhooksSettings(ConfigSection):
    """The ``[webhooks]`` config section (docs/webhooks.md)."""

    allow_private: list[str] = Field(default_factory=list, description=(
        "CIDRs a target may resolve to although they are loopback, private, link-local or "
        "otherwise not public (e.g. 127.0.0.1/32, 10.20.0.0/16)"))
    insecure_http: bool = Field(False, description="allow http:// targets in server mode")
    ca_file: str | None = Field(None, description=(
        "a PEM file of CAs https targets may also be signed by (an internal CA), besides the "
        "system's"))
    builders_manage: bool = Field(False, description=(
        "builders may manage the hooks of the projects they can read (admins manage every hook)"))
    timeout_s: float = Field(10.0, gt=0, le=120, description="connect and read timeout per try")
    attempts: int = Field(12, ge=1, le=100, description="tries before a delivery is failed")
    retry_base_s: float = Field(10.0, gt=0, le=86_400, description="wait after the first failure")
    retry_max_s: float = Field(21_600.0, gt=0, le=604_800, description="longest wait between tries")
    disable_after_s: float = Field(86_400.0, gt=0, description=(
        "a hook whose tries keep failing this long is disabled, once the delivery being tried "
        "has used its last try or has failed this long itself"))
    lease_s: float = Field(30.0, ge=1, le=3_600, description=(
        "the sending worker's lease; another worker takes over this long after it dies"))
    poll_s: float = Field(0.5, gt=0, le=60, description="how often each worker looks for events "
                          "written by other processes")
    concurrency: int = Field(4, ge=1, le=64, description="hooks sent to at once (one delivery "
                             "in flight per hook, so each hook gets its events in order)")
    keep_days: int = Field(30, ge=1, le=3_650, description="finished deliveries kept this long; "
                           "a paused hook queues the events of this long after its pause")

    @field_validator("allow_private")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an address or CIDR (e.g. 127.0.0.1/32, "
                                 "10.0.0.0/8, ::1/128)") from None
        return values

    @field_validator("ca_file")
    @classmethod
    def _readable_pem(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ssl.create_default_context(cafile=os.path.expanduser(value))
            except (OSError, ssl.SSLError) as ex:
                raise ValueError(f"{value!r} is not a readable PEM file of certificates: "
                                 f"{ex}") from None
            return os.path.expanduser(value)
        return value

    @model_validator(mode="after")
    def _lease_outlives_a_try(self) -> WebhooksSettings:
        if self.lease_s < 2 * self.timeout_s:
            raise ValueError(f"lease_s ({self.lease_s}) must be at least twice timeout_s "
                             f"({self.timeout_s}): the sender renews its lease between tries")
        if self.retry_max_s < self.retry_base_s:
            raise ValueError("retry_max_s must not be below retry_base_s")
        return self


# -- requests ------------------------------------------------------------------------------

class WebhookIn(Model):
    url: Url = Field(description="http(s) URL the events are POSTed to (https in server mode)")
    events: Events
    projects: Projects | None = None
    description: Description = ""


class WebhookPatch(Model):
    """Changes to a hook; a field left out is unchanged (``projects: null`` means every project)."""

    url: Url | None = None
    events: Events | None = None
    projects: Projects | None = None
    description: Description | None = None
    enabled: bool | None = Field(None, description="false pauses the hook: nothing is sent, and "
                                 "the events of the next `keep_days` are queued for it; true "
                                 "resumes it (or enables a hook disabled for failing), sends "
                                 "what it kept in order, and clears the failure streak")


class DeliveriesQuery(PageQuery):
    status: Literal["pending", "delivered", "failed"] | None = None


# -- responses -----------------------------------------------------------------------------

class Webhook(Model):
    id: str
    url: str
    events: list[str]
    projects: list[str] | None
    description: str
    enabled: bool
    disabled_reason: str | None = Field(None, description="Why the hook is off: `paused by …`, or "
                                        "why the server disabled it")
    paused_at: str | None = Field(None, description="When a person paused the hook (events are "
                                  "queued for `keep_days` after it); null when enabled, or "
                                  "disabled for failing (nothing is queued)")
    created_at: str
    updated_at: str
    created_by: str = Field(description="The actor whose read access the hook delivers with")
    failing_since: str | None = Field(None, description="First failed try since the last success")
    last_success_at: str | None = None
    secret_rotated_at: str | None = None
    previous_secret_until: str | None = Field(
        None, description="After a rotation with `keep_previous_s`, deliveries are signed with "
        "the secret it replaced too until then")
    previous_secrets_until: list[str] = Field(
        default_factory=list, description="The end of each replaced secret's grace that still "
        "runs, the latest replaced first: each signs deliveries too until its own end")


class WebhookCreated(Webhook):
    secret: str = Field(description="The signing secret: shown once, here (and by a rotation)")


class RotateIn(Model):
    keep_previous_s: int = Field(0, ge=0, le=86_400, description=(
        "Keep signing with the replaced secret too for this long, so receivers can switch; "
        "earlier secrets whose grace runs keep signing until their own end (at most 4 at "
        "once). 0: only the new secret signs from now on, every grace ends"))


class Delivery(Model):
    id: str = Field(description="The `NeuralMind-Delivery` header: the same on every try")
    webhook_id: str
    event_id: int | None = Field(description="The event's id in the event log (null for a ping)")
    kind: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None = Field(None, description="The receiver's last HTTP status")
    last_error: str | None = None
    last_latency_ms: float | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = Field(None, description="When the next try is due (pending)")
    created_at: str
    delivered_at: str | None = None
