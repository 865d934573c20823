"""`neuralmind ui`: the browser opened through a private redirect file holding a one-time code
(never the token, never on a command line), or the link printed; clear words where no code
can be made."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from urllib.parse import urlsplit

from tests.plugins.auth.helpers import create_token, server_config
from tests.support import LocalServer, run_cli

RECORDER = """import json, sys
with open(sys.argv[1], "w") as fh:
    json.dump(sys.argv[2:], fh)
"""


def test_ui_opens_the_browser_on_a_private_redirect_file(local, tmp_path):
    (tmp_path / "recorder.py").write_text(RECORDER)
    seen = tmp_path / "argv.json"
    env = {**os.environ, "NEURALMIND_API_URL": local.url,
           "NEURALMIND_API_TOKEN": local.token, "NEURALMIND_HOME": str(tmp_path / "home"),
           "BROWSER": f"{sys.executable} {tmp_path / 'recorder.py'} {seen} %s"}
    (tmp_path / "home").mkdir()
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "ui"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"opened the dashboard at {local.url}/ui")
    [opened] = json.loads(seen.read_text())
    page = tmp_path / "home" / "ui-open.html"
    assert opened == page.as_uri() and "code" not in opened  # nothing secret on a command line
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    html = page.read_text()
    code = html.split("#code=", 1)[1].split('"', 1)[0]
    assert local.token not in html
    assert local.post("/v1/ui/sign-in", {"code": code}, auth=False).json == {"token": local.token}


def test_ui_prints_the_link_without_a_browser(local):
    env = {"NEURALMIND_API_URL": local.url, "NEURALMIND_API_TOKEN": local.token}
    code, out, err = run_cli("ui", "--no-browser", env=env)
    assert code == 0, err
    url = out.splitlines()[-1]
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == local.url and parts.path == "/ui"
    assert parts.query == "" and parts.fragment.startswith("code=")
    code, out, _ = run_cli("ui", "--json", env=env)
    assert json.loads(out)["url"].startswith(f"{local.url}/ui#code=")


def test_ui_says_what_to_do_where_no_code_can_be_made(tmp_path):
    config = server_config(tmp_path, {"a": tmp_path / "a"}, "[ui]\nenabled = true\n")
    with LocalServer(tmp_path / "home", plugins=["auth", "ui"], config=config) as server:
        token = create_token(server.home, server.home / "config.toml", "ada", "admin")["token"]
        code, out, err = run_cli("ui", env={"NEURALMIND_API_URL": server.url,
                                            "NEURALMIND_API_TOKEN": token})
        assert code == 1 and out == ""
        assert err == (f"neuralmind: this server makes no sign-in codes (server mode): open "
                       f"{server.url}/ui and paste a token\n")


def test_ui_finds_the_daemon_of_the_configs_home_and_says_the_links_real_lifetime(
        tmp_path, monkeypatch):
    """With the home named only by the config's ``[kernel] home`` (no NEURALMIND_HOME),
    `neuralmind ui` once looked in ~/.neuralmind and started a second daemon there, which
    could not listen on the port the first held. And it said "within a minute" whatever
    ``[ui] sign_in_code_ttl_s`` the server has."""
    from tests.client.test_discovery import held
    monkeypatch.delenv("NEURALMIND_HOME")
    user = tmp_path / "user"
    with LocalServer(tmp_path / "home", plugins=["auth", "ui"],
                     config="[ui]\nsign_in_code_ttl_s = 300\n") as server:
        config = tmp_path / "client.toml"  # a second daemon would find its port taken
        config.write_text(f'[kernel]\nhome = "{server.home}"\n[server]\nport = {server.port}\n')
        with held(server.home, url=server.url, token=server.token):
            code, out, err = run_cli("ui", "--no-browser",
                                     env={"NEURALMIND_CONFIG": str(config), "HOME": str(user)})
    assert code == 0, err
    said, url = out.splitlines()
    assert re.fullmatch(r"open this link within (299|300) s \(until \d\d:\d\d:\d\d\); it signs "
                        r"in once:", said), said
    assert url.startswith(f"{server.url}/ui#code=")
    assert not (user / ".neuralmind").exists()


def test_ui_says_a_server_serves_no_dashboard_and_how_to_serve_it(tmp_path, monkeypatch):
    """With the dashboard off, `neuralmind ui` said to open …/ui and paste a token — a page
    that did not exist there."""
    from tests.client.test_discovery import held
    for name in ("NEURALMIND_API_URL", "NEURALMIND_API_TOKEN", "NEURALMIND_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    # the daemon of the home, started before this configuration enabled ui
    home = tmp_path / "home"
    with LocalServer(tmp_path / "server", plugins=["auth"]) as server, \
            held(home, url=server.url, host="127.0.0.1", port=server.port, token=server.token,
                 plugins=["auth"]):
        code, out, err = run_cli("ui", env={"NEURALMIND_HOME": str(home),
                                            "NEURALMIND_PLUGINS": "auth,ui"})
    assert (code, out) == (1, "")
    assert err == (f"neuralmind: {server.url} serves no dashboard: the daemon at {server.url} "
                   "runs without the ui plugin, which this configuration enables, and so serves "
                   "none of its routes: restart it with this configuration (`neuralmind daemon "
                   "stop`, then `neuralmind daemon start`)\n")
    # a server (named by its URL) whose config turns the dashboard off
    with LocalServer(tmp_path / "off", plugins=["auth", "ui"],
                     config="[ui]\nenabled = false\n") as server:
        code, out, err = run_cli("ui", env={"NEURALMIND_API_URL": server.url,
                                            "NEURALMIND_API_TOKEN": server.token})
    assert (code, out) == (1, "")
    assert err == (f'neuralmind: {server.url} serves no dashboard: add "ui" to [kernel] plugins '
                   "in its config (and `[ui] enabled = true` on a team server, or where it was "
                   "set false), then restart the server\n")
