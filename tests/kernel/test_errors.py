"""An uncaught exception becomes 500 internal_error: no exception text, traceback logged with
the request id. Driven in-process: the behaviour is the serializer's, not the server's."""

import logging
import types

import falcon.testing

from kernel.api import operation
from kernel.app import Kernel
from kernel.config import load_settings
from kernel.plugins import hookimpl


class Boom:
    @operation(permission=None)
    def on_get(self, req, resp):
        raise RuntimeError("secret-db-password in /etc/passwd")


def test_uncaught_exception_is_an_opaque_500(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "0")  # no model to derive for this home
    plugin = types.SimpleNamespace(register_routes=hookimpl(lambda kernel: [("/v1/boom", Boom())]))
    kernel = Kernel(load_settings(), plugins=[], extra_plugins=[plugin], load_entrypoints=False)
    client = falcon.testing.TestClient(kernel.app, headers={"Host": "localhost"})
    with caplog.at_level(logging.ERROR, logger="neuralmind.errors"):
        r = client.simulate_get("/v1/boom", headers={"X-Request-Id": "trace-me"})
    assert r.status_code == 500
    assert r.json == {"error": {"code": "internal_error", "message": "internal error", "status": 500,
                                "request_id": "trace-me", "details": {}}}
    assert "secret" not in r.text and "RuntimeError" not in r.text
    record = next(rec for rec in caplog.records if "trace-me" in rec.getMessage())
    assert record.exc_info and "secret-db-password" in str(record.exc_info[1])
