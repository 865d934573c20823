"""The dashboard as HTTP sees it: the page and its files with a strict CSP and no inline code,
the one-time sign-in codes of loopback mode, and server mode's opt-in."""

from __future__ import annotations

import re
import time
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from plugins.ui.resources import CSP, STATIC
from tests.plugins.auth.helpers import create_token, server_config
from tests.support import ROOT, LocalServer


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_the_page_and_its_files_carry_the_csp_and_revalidate(local):
    page = local.get("/ui", auth=False)
    assert page.status == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert csp == CSP and "script-src 'self'" in csp and "unsafe" not in csp
    assert "frame-ancestors 'none'" in csp and page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    script = local.get("/ui/assets/app.js", auth=False)
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    again = local.get("/ui/assets/app.js", auth=False, headers={"If-None-Match": script.headers["etag"]})
    assert again.status == 304 and again.body == b""
    missing = local.get("/ui/assets/nope.js", auth=False)
    assert (missing.status, missing.error["code"]) == (404, "not_found")
    assert local.get("/ui/assets/..%2Fplugin.py", auth=False).status == 404
    for path in ("/", "/ui/"):
        root = local.get(path, auth=False)
        assert (root.status, root.headers["location"]) == (303, "/ui")


def test_no_inline_script_style_or_handler_and_no_markup_from_data():
    parser = Tags()
    parser.feed((STATIC / "index.html").read_text())
    for tag, attrs in parser.tags:
        assert not any(name.startswith("on") or name == "style" for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").startswith("/ui/assets/") and attrs["type"] == "module"
    assert "<style" not in (STATIC / "index.html").read_text()
    referenced = {a.get("href") or a.get("src") for t, a in parser.tags if t in ("link", "script", "img")}
    for ref in referenced:
        assert (STATIC / ref.removeprefix("/ui/assets/")).is_file(), ref
    for js in STATIC.glob("*.js"):
        text = js.read_text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", text), js
        for imported in re.findall(r'from "\./([\w.]+)"', text):
            assert (STATIC / imported).is_file(), (js.name, imported)


def test_package_data_ships_every_static_file():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["plugins.ui"]
    for path in STATIC.iterdir():
        assert any(Path("static", path.name).match(p) for p in patterns), path.name


def test_a_sign_in_code_works_once_for_the_token_that_made_it(local):
    assert local.post("/v1/ui/sign-in-codes", auth=False).status == 401
    made = local.post("/v1/ui/sign-in-codes")
    assert made.status == 201 and made.json["path"] == f"/ui#code={made.json['code']}"
    assert len(made.json["code"]) >= 43  # 256 bits
    first = local.post("/v1/ui/sign-in", {"code": made.json["code"]}, auth=False)
    assert first.status == 200 and first.json == {"token": local.token}
    assert first.headers["cache-control"] == "no-store"
    for code in (made.json["code"], "made-up"):
        again = local.post("/v1/ui/sign-in", {"code": code}, auth=False)
        assert (again.status, again.error["code"]) == (401, "sign_in_code_invalid")
    import sqlite3
    with sqlite3.connect(local.home / "ui.db") as db:  # the token is kept only until it is used
        assert db.execute("SELECT COUNT(*) FROM sign_in_codes").fetchone() == (0,)


def test_a_sign_in_code_expires(tmp_path):
    with LocalServer(tmp_path / "home", plugins=["auth", "ui"],
                     config="[ui]\nsign_in_code_ttl_s = 1\n") as server:
        code = server.post("/v1/ui/sign-in-codes").json["code"]
        time.sleep(1.1)
        r = server.post("/v1/ui/sign-in", {"code": code}, auth=False)
        assert (r.status, r.error["code"]) == (401, "sign_in_code_invalid")


def test_server_mode_serves_the_dashboard_only_when_enabled_and_never_makes_codes(tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "a"})
    with LocalServer(tmp_path / "off", plugins=["auth", "ui"], config=config) as server:
        assert server.get("/ui", auth=False).status == 404
    with LocalServer(tmp_path / "on", plugins=["auth", "ui"],
                     config=config + "[ui]\nenabled = true\n") as server:
        token = create_token(server.home, server.home / "config.toml", "ada", "admin")["token"]
        assert server.get("/ui", auth=False).status == 200
        r = server.post("/v1/ui/sign-in-codes", token=token)
        assert r.status == 404  # a team server never holds a raw token to hand out
        assert "ui.sign_in" not in server.get("/v1/auth/whoami", token=token).json["permissions"]
    with LocalServer(tmp_path / "local-off", plugins=["auth", "ui"],
                     config="[ui]\nenabled = false\n") as server:
        assert server.get("/ui", auth=False).status == 404


@pytest.mark.parametrize("section", ["sign_in_code_ttl_s = 0.5", "enabled = 3", "colour = 1"])
def test_a_bad_ui_section_stops_start_up(tmp_path, section):
    from kernel.config import ConfigError
    with pytest.raises(ConfigError, match=r"\[ui\]"):
        LocalServer(tmp_path / "home", plugins=["auth", "ui"], config=f"[ui]\n{section}\n").start()
