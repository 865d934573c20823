"""``[tier2.self_hosted] bind_address, port`` drive ``neuralmind serve`` when tier2_bridge is
enabled; the config's ``[server]`` keys still win; a bad section stops start-up with a message."""

from __future__ import annotations

import subprocess
import sys

import pytest

from plugins.tier2_bridge.selfhosted import server_keys
from tests.support import ROOT, Server, free_port, request

ENABLED = '[kernel]\nplugins = ["auth", "tier2_bridge"]\n'


def serve_with(home, config: str, port: int) -> Server:
    """``neuralmind serve --config F`` with no --port: the port must come from the config."""
    server = Server(home, config=config, port=port)
    server.env.pop("NEURALMIND_PLUGINS", None)  # the config's [kernel] plugins decide
    server.cmd = [sys.executable, "-m", "neuralmind.cli", "serve", "--config",
                  str(server.home / "config.toml")]
    return server


def test_the_self_hosted_port_is_where_serve_listens(tmp_path):
    port = free_port()
    config = ENABLED + f'[tier2.self_hosted]\nbind_address = "127.0.0.1"\nport = {port}\n'
    with serve_with(tmp_path / "home", config, port) as server:
        r = server.get("/v1/admin/seats")  # tier2's own route: the plugin is on
        assert r.status == 200 and "active_actors" in r.json
        assert f"listening at http://127.0.0.1:{port}" in server.output()


def test_the_configs_server_section_wins(tmp_path):
    tier2_port, server_port = free_port(), free_port()
    config = (ENABLED + f"[server]\nport = {server_port}\n"
              f'[tier2.self_hosted]\nbind_address = "127.0.0.1"\nport = {tier2_port}\n')
    with serve_with(tmp_path / "home", config, server_port):
        with pytest.raises(OSError):
            request(tier2_port, "GET", "/v1/health", timeout=2)


def test_a_bad_section_stops_serve_with_a_message(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(ENABLED + '[tier2.self_hosted]\nport = "high"\nbind = "0.0.0.0"\n')
    done = subprocess.run([sys.executable, "-m", "neuralmind.cli", "serve", "--config", str(cfg)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "NEURALMIND_HOME": str(tmp_path / "h")})
    assert done.returncode == 2
    # the server's one check of every section, with the file and each key (no pydantic dump)
    assert done.stderr == (f"neuralmind: [tier2] in {cfg}: self_hosted.port: Input should be a "
                           "valid integer, unable to parse string as an integer (got \"high\"); "
                           "self_hosted.bind: Extra inputs are not permitted (got \"0.0.0.0\")\n")


def test_server_keys_leave_out_what_the_section_leaves_out():
    assert server_keys({}) == {}
    assert server_keys({"tier2": {"self_hosted": {"port": 9000}}}) == {"port": 9000}
    assert server_keys({"tier2": {"self_hosted": {"bind_address": "10.0.0.5", "port": 0}}}) == \
        {"host": "10.0.0.5", "port": 0}
    # a bad section gives no keys; the server's check of every section then names it
    assert server_keys({"tier2": {"self_hosted": {"port": 70000}}}) == {}
