"""The two WSGI apps bench/http_overhead.py compares under the same gunicorn settings:
a bare Falcon app, and our kernel with one extra bench route. Selected by ``BENCH_APP``."""

import json
import os

import falcon
from pydantic import BaseModel

from kernel.api import operation
from kernel.models import Model
from kernel.plugins import hookimpl


class Payload(Model):
    title: str
    rationale: str
    tags: list[str] = []


class Echoed(Model):
    title: str
    size: int


class BareHealth:
    def on_get(self, req, resp):
        resp.data = json.dumps({"status": "ok", "version": "bare", "uptime_s": 0}).encode()


class BareEcho:
    class In(BaseModel):
        title: str
        rationale: str
        tags: list[str] = []

    def on_post(self, req, resp):
        body = self.In.model_validate_json(req.bounded_stream.read())
        resp.data = json.dumps({"title": body.title, "size": len(body.rationale)}).encode()


class KernelEcho:
    @operation(permission="system.read", body=Payload, response=Echoed, summary="bench echo")
    def on_post(self, req, resp):
        body = req.context.body
        return Echoed(title=body.title, size=len(body.rationale))


class EchoPlugin:
    @hookimpl
    def register_routes(self, kernel):
        return [("/v1/bench/echo", KernelEcho())]


def _make():
    if os.environ.get("BENCH_APP") == "bare":
        app = falcon.App()
        app.add_route("/v1/health", BareHealth())
        app.add_route("/v1/bench/echo", BareEcho())
        return app
    from kernel.app import Kernel
    return Kernel(extra_plugins=[EchoPlugin()]).app


application = _make()
