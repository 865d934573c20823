"""docs/webhooks.md cannot rot: its shell and Python examples run against a server, and its
two receivers — Python with the client's ``verify_signature``, Node with nothing but its
standard library — take real deliveries from it, refuse forged and replayed ones, and print
a repeated delivery once."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from neuralmind.client import webhook_signature
from tests.plugins.webhooks.test_delivery import emit
from tests.support import ROOT, free_port, request

DOC = ROOT / "docs" / "webhooks.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUN = {"sh", "python", "js"}  # toml and http blocks show a config and a request


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text())


def receiver_block(first_line: str) -> str:
    return next(code for _, code in blocks() if code.startswith(first_line))


@pytest.fixture
def shell_env(served, tmp_path) -> dict[str, str]:
    """What a user's shell has: the `neuralmind` command (this tree's) on PATH, the server's
    URL and token, and the plugin enabled."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "neuralmind"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m neuralmind.cli "$@"\n')
    shim.chmod(0o755)
    return {**os.environ,
            "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "NEURALMIND_HOME": str(served.home), "NEURALMIND_PLUGINS": "auth,webhooks",
            "NEURALMIND_API_URL": served.url, "NEURALMIND_API_TOKEN": served.token,
            "NM": served.url, "TOKEN": served.token}


def test_every_block_is_one_the_test_knows(served):
    kinds = {lang for lang, _ in blocks()}
    assert kinds <= RUN | {"toml", "http"} and {"sh", "python", "js"} <= kinds


def test_the_examples_run_as_written(served, receiver, shell_env):
    """Every sh and Python block but the receivers, in order; the examples' receiver at
    127.0.0.1:8000 is this test's (its port put in)."""
    ran = 0
    for lang, code in blocks():
        if lang not in ("sh", "python") or code.startswith("# receiver.py"):
            continue
        code = code.replace("127.0.0.1:8000", f"127.0.0.1:{receiver.port}")
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code] if lang == "sh" else \
            [sys.executable, "-c", code]
        done = subprocess.run(cmd, cwd=ROOT, env=shell_env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"```{lang}\n{code}```\n{done.stdout}\n{done.stderr}"
        ran += 1
    assert ran >= 3
    assert receiver.wait(1, kind="ping")  # the Python example's test ping arrived
    listed = [h["description"] for h in served.get("/v1/webhooks").json["items"]]
    assert listed == ["CI bot", "CI bot"]  # curl's and the CLI's; the client's was deleted


class Running:
    """A receiver from the doc in its own process, its output read as it comes."""

    def __init__(self, cmd: list[str], env: dict[str, str], port: int):
        self.port = port
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, self.proc.stderr.read()
                assert time.monotonic() < deadline, "the receiver never listened"
                time.sleep(0.05)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait(self, count: int) -> list[str]:
        deadline = time.monotonic() + 15
        while len(self.lines) < count:
            assert time.monotonic() < deadline, (self.lines, self.proc.poll())
            time.sleep(0.02)
        return self.lines[:count]

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        return request(self.port, "POST", "/hook", body=body, headers=headers).status

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("lang", ["python", "node"])
def test_the_receivers_take_real_deliveries_and_refuse_forged_ones(served, tmp_path, lang):
    if lang == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    port = free_port()
    hook = served.post("/v1/webhooks", {"url": f"http://127.0.0.1:{port}/hook",
                                        "events": ["memory.*"]}).json
    secret = hook["secret"]
    env = {**os.environ, "WEBHOOK_SECRET": secret, "PORT": str(port), "PYTHONPATH": str(ROOT)}
    if lang == "python":
        script = tmp_path / "receiver.py"
        script.write_text(receiver_block("# receiver.py"))
        cmd = [sys.executable, str(script)]
    else:
        script = tmp_path / "receiver.js"
        script.write_text(receiver_block("// receiver.js"))
        cmd = ["node", str(script)]
    running = Running(cmd, env, port)
    try:
        for n in range(3):
            emit(served, "memory.created", "p1", id=f"m{n}")
        lines = running.wait(3)
        sent = {d["id"] for d in served.get(f"/v1/webhooks/{hook['id']}/deliveries").json["items"]}
        assert {line.split()[0] for line in lines} == sent
        assert [line.split(" ", 3)[1:3] for line in lines] == [["memory.created", "p1"]] * 3
        assert json.loads(lines[0].split(" ", 3)[3]) == {"id": "m0"}

        body = b'{"id":null,"kind":"forged","project_id":null,"data":{}}'
        now = str(int(time.time()))
        headers = {"Content-Type": "application/json", "NeuralMind-Delivery": "dl_again",
                   "NeuralMind-Timestamp": now,
                   "NeuralMind-Signature": webhook_signature(secret, now, body)}
        assert running.post(body, {**headers, "NeuralMind-Signature":
                                   webhook_signature("whsec_wrong", now, body)}) == 401
        assert running.post(body + b" ", headers) == 401  # the body was changed
        old = str(int(time.time()) - 600)
        assert running.post(body, {**headers, "NeuralMind-Timestamp": old,
                                   "NeuralMind-Signature": webhook_signature(secret, old, body)}
                            ) == 401  # replayed: signed ten minutes ago
        assert running.post(body, headers) == 204
        assert running.post(body, headers) == 204  # a repeat is taken, and printed once
        time.sleep(0.3)
        assert [line.split()[0] for line in running.lines[3:]] == ["dl_again"]
    finally:
        running.stop()
