"""Fixtures of the index tests: small multi-language repositories the tests write, and one
server per module (auth + index in this process, the real packaged model loaded on first use)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support import LocalServer

FILES = {
    "README.md": "# Demo shop\n\nA small shop backend used to test the code index.\n\n"
                 "## Install\n\nRun make.\n\n```\n# not a heading\n```\n",
    "shop/__init__.py": '"""The shop package."""\n',
    "shop/cart.py": '''"""Shopping cart maths."""
from shop.prices import round_money


class Cart(object):
    """A customer's cart."""

    def add_item(self, sku, qty):
        """Put qty units of sku into the cart."""
        self.items[sku] = self.items.get(sku, 0) + qty

    def total(self):
        return round_money(sum(self.items.values()))


def compute_sales_tax(amount, rate):
    """Return the tax owed on an amount at a percentage rate."""
    return round_money(amount * rate / 100)
''',
    "shop/prices.py": '''def round_money(value):
    """Round a value to two decimals."""
    return round(value, 2)


def parseConfigFile(path):
    """Load the shop settings."""
    return open(path).read()
''',
    "web/server.js": """import express from "express";
// Starts the HTTP listener on a port.
export class HttpServer extends BaseServer {
  listen(port) { bindSocket(port); }
}
const sendEmail = (to, body) => smtpSend(to, body);
function retryFetch(url) { return fetch(url); }
""",
    "web/types.ts": "export interface Order { id: string }\n"
                    "export function orderTotal(o: Order): number { return 0; }\n",
    "svc/main.go": 'package main\nimport "fmt"\n// Greeter says hello.\ntype Greeter struct{}\n'
                   'func (g *Greeter) Greet(name string) { fmt.Println(name) }\nfunc main() {}\n',
    "svc/lib.rs": "/// A stack of ints.\npub struct Stack { items: Vec<i32> }\n"
                  "impl Stack { pub fn push(&mut self, x: i32) { self.items.push(x); } }\n",
    "svc/App.java": "import java.util.List;\n/** The app. */\npublic class App extends Base {\n"
                    "  public void run() { start(); }\n}\n",
    "notes.txt": "plain notes about invoices\n",
    ".gitignore": "*.log\nbuild/\n",
    "web/.gitignore": "generated.js\n!keep.log\n",
    "web/generated.js": "function generatedThing() {}\n",
    "web/keep.log": "kept despite the root rule\n",
    "debug.log": "ignored\n",
    "build/out.py": "def built_output(): pass\n",
    ".env": "SECRET=1\n",
}


def write_repo(root: Path, outside: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (root / "big.py").write_text("x = 1\n" * (10 * 1024 * 1024 // 6 + 1))  # > 10 MB
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret_lib.py").write_text("def outside_function(): pass\n")
    os.symlink(outside, root / "linked")
    os.symlink(outside / "secret_lib.py", root / "linked_file.py")
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LocalServer(tmp_path_factory.mktemp("home"), plugins=["auth", "index"]) as srv:
        yield srv


@pytest.fixture
def project(server, tmp_path):
    """A freshly written repository, registered (not yet built)."""
    root = write_repo(tmp_path / "repo", tmp_path / "outside")
    return server.register(root), root


def build(server, pid: str, **body) -> dict:
    r = server.post(f"/v1/projects/{pid}/build", {"wait": True, **body})
    assert r.status == 200, r.body
    job = r.json["job"]
    assert job["status"] == "done", job
    return job["result"]


def built(server, root: Path, files: dict[str, str]) -> str:
    """``files`` written under ``root``, registered and built: the project id."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    pid = server.register(root)
    build(server, pid)
    return pid


def wait_for(predicate, timeout: float = 15.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return predicate()
