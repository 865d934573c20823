"""Falcon resources for ``/v1/webhooks``: declarations and hand-offs to the service."""

from __future__ import annotations

from neuralmind import Page, PageQuery, operation
from plugins.webhooks.models import (DeliveriesQuery, Delivery, RotateIn, Webhook, WebhookCreated,
                                     WebhookIn, WebhookPatch)

TAGS = ["webhooks"]
MANAGE = "webhooks.manage"


def _ctx(req):
    return req.context.actor, req.context.request_id


class WebhookResources:
    def __init__(self, service):
        self.s = service

    @operation(permission=MANAGE, body=WebhookIn, response=WebhookCreated, status=201,
               tags=TAGS, summary="Subscribe a URL to events (201 with the secret, shown once)")
    def on_post(self, req, resp):
        actor, rid = _ctx(req)
        out = self.s.create(actor, req.context.body, rid)
        resp.location = f"/v1/webhooks/{out['id']}"
        return out

    @operation(permission=MANAGE, query=PageQuery, response=Page[Webhook], tags=TAGS,
               summary="List the hooks the caller manages, oldest first (no secrets)")
    def on_get(self, req, resp):
        q = req.context.query
        return self.s.page(req.context.actor, q.cursor, q.limit)

    @operation(permission=MANAGE, response=Webhook, tags=TAGS, summary="One hook")
    def on_get_item(self, req, resp, webhook_id):
        return self.s.out(self.s.hook(req.context.actor, webhook_id))

    @operation(permission=MANAGE, body=WebhookPatch, response=Webhook, tags=TAGS,
               summary="Change a hook's URL, events, projects or description; enable or "
                       "disable it")
    def on_patch_item(self, req, resp, webhook_id):
        actor, rid = _ctx(req)
        return self.s.update(actor, webhook_id, req.context.body, rid)

    @operation(permission=MANAGE, status=204, tags=TAGS,
               summary="Delete a hook and its deliveries")
    def on_delete_item(self, req, resp, webhook_id):
        actor, rid = _ctx(req)
        self.s.delete(actor, webhook_id, rid)

    @operation(permission=MANAGE, body=RotateIn, response=WebhookCreated, tags=TAGS,
               summary="Replace the signing secret (the new one is shown once)")
    def on_post_rotate(self, req, resp, webhook_id):
        actor, rid = _ctx(req)
        return self.s.rotate(actor, webhook_id, req.context.body.keep_previous_s, rid)

    @operation(permission=MANAGE, response=Delivery, tags=TAGS,
               summary="Send a signed `ping` now and say what the receiver answered")
    def on_post_test(self, req, resp, webhook_id):
        actor, rid = _ctx(req)
        return self.s.ping(actor, webhook_id, rid)

    @operation(permission=MANAGE, query=DeliveriesQuery, response=Page[Delivery], tags=TAGS,
               summary="A hook's deliveries, newest first: status, tries, last answer, next try")
    def on_get_deliveries(self, req, resp, webhook_id):
        q = req.context.query
        return self.s.deliveries(req.context.actor, webhook_id, q.status, q.cursor, q.limit)

    @operation(permission=MANAGE, response=Delivery, status=202, tags=TAGS,
               summary="Queue a finished delivery again (same id and body)",
               errors={409: "`delivery_pending`: it is still queued; `webhook_disabled`: enable "
                            "the hook first"})
    def on_post_redeliver(self, req, resp, webhook_id, delivery_id):
        return self.s.redeliver(req.context.actor, webhook_id, delivery_id)


def routes(service) -> list[tuple]:
    hooks = WebhookResources(service)
    base = "/v1/webhooks/{webhook_id}"
    return [("/v1/webhooks", hooks),
            (base, hooks, "item"),
            (f"{base}/rotate-secret", hooks, "rotate"),
            (f"{base}/test", hooks, "test"),
            (f"{base}/deliveries", hooks, "deliveries"),
            (f"{base}/deliveries/{{delivery_id}}/redeliver", hooks, "redeliver")]
