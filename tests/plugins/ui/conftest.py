"""Fixtures of the dashboard tests: Debian's chromium driven by Playwright's Python package
(``playwright install`` is never used: it downloads a browser), and a shop project on a
loopback server in this process."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.plugins.ask.conftest import shop
from tests.support import LocalServer

CHROMIUM = os.environ.get("NEURALMIND_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# what the machines here need: no sandbox as root, and no background calls to Google's hosts
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLUGINS = ["auth", "memory", "index", "ask", "ui", "tier2_bridge"]


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):  # CI installs it (.ci/run): there, its absence fails
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            f"no chromium at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A browser tab on the dashboard, with what went wrong in it collected."""

    def __init__(self, browser, server, width=1280, height=900):
        self.server = server
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(m.text))
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def signed_in(self, hash_: str = "#/projects"):
        """Open the dashboard the way `neuralmind ui` does: a one-time code in the fragment."""
        code = self.server.post("/v1/ui/sign-in-codes").json["path"]
        self.response = self.page.goto(self.server.url + code)
        self.page.wait_for_selector("#nav:not([hidden])")
        if hash_ != "#/projects":
            self.go(hash_)
        return self.page

    def pasted(self, token: str, who: str):
        """Sign in as a team server's user does: the token pasted into the form."""
        self.page.goto(self.server.url + "/ui")
        self.page.fill("input[type=password]", token)
        self.page.press("input[type=password]", "Enter")
        self.page.wait_for_selector(f"#me:has-text('{who}')")
        return self.page

    def go(self, hash_: str):
        self.page.evaluate("h => { location.hash = h; }", hash_)

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """Loopback mode, the shop registered and built; ``local.pid``."""
    root = tmp_path_factory.mktemp("ui-local")
    with LocalServer(root / "home", plugins=PLUGINS) as server:
        server.pid = server.register(shop(root))
        assert server.post(f"/v1/projects/{server.pid}/build", {"wait": True}).status == 200
        yield server


@pytest.fixture
def tab(browser, local):
    opened = []

    def make(server=local, **kw) -> Page:
        page = Page(browser, server, **kw)
        opened.append(page)
        return page

    yield make
    for page in opened:
        page.close()
