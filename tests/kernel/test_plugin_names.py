"""Who owns a plugin name: a bundled plugin's name is reserved, and a name two installed
distributions claim is taken from neither — never whichever comes first on sys.path, so an
installed package cannot quietly stand in for a plugin, authentication included
(docs/security.md, "Plugin names")."""

from __future__ import annotations

import importlib
import logging
import sys

import pytest

from kernel.config import load_settings
from kernel.plugins import PluginError, available, make_plugin_manager
from tests.support import plugin_site, run_cli

pytestmark = pytest.mark.sqlite_only("refused before any storage opens")

# a stand-in for the auth plugin that lets everyone in as admin
LENIENT = ("from neuralmind import Actor, hookimpl\n\n\n@hookimpl\n"
           "def actor_from_request(kernel, request, again):\n"
           "    return Actor('anyone', role='admin')\n")


def _on_path(monkeypatch, site, where: str) -> None:
    """``site`` first on sys.path (found before this distribution) or last (after it)."""
    monkeypatch.setattr(sys, "path", [str(site), *sys.path] if where == "first"
                        else [*sys.path, str(site)])
    importlib.invalidate_caches()


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_bundled_plugins_name_claimed_by_another_distribution_stops_start_up(
        tmp_path, monkeypatch, where):
    site = plugin_site(tmp_path / "site", "nm-lenient", {"auth": "lenient_auth"})
    (site / "lenient_auth.py").write_text(LENIENT)
    _on_path(monkeypatch, site, where)
    assert available()["auth"] == "plugins.auth.plugin"  # the name means the bundled plugin
    with pytest.raises(PluginError) as ex:
        make_plugin_manager(["auth", "memory"])
    assert str(ex.value) == (
        "plugin name 'auth' is reserved for NeuralMind's bundled plugin (plugins.auth.plugin), "
        "but the installed distribution nm-lenient 1.0 (lenient_auth) claims it too: uninstall "
        "it, or rename its entry point")
    assert "lenient_auth" not in sys.modules  # never imported
    code, out, err = run_cli("serve", env={"NEURALMIND_HOME": str(tmp_path / "home"),
                                           "NEURALMIND_PLUGINS": "auth,memory"})
    assert (code, out, err) == (2, "", f"neuralmind: {ex.value}\n")


def test_a_claim_on_a_bundled_name_not_enabled_is_a_warning(tmp_path, monkeypatch, caplog):
    site = plugin_site(tmp_path / "site", "nm-hooks", {"webhooks": "nm_hooks"})
    _on_path(monkeypatch, site, "first")
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    with caplog.at_level(logging.WARNING, logger="neuralmind.config"):
        load_settings(None).check_sections(make_plugin_manager(["auth"]))
    assert [r.getMessage() for r in caplog.records if r.name == "neuralmind.config"] == [
        "plugin name 'webhooks' is reserved for NeuralMind's bundled plugin "
        "(plugins.webhooks.plugin), but the installed distribution nm-hooks 1.0 (nm_hooks) "
        "claims it too: uninstall it, or rename its entry point (not enabled, so left out)"]


def test_a_name_two_distributions_claim_is_taken_from_neither(tmp_path, monkeypatch):
    one = plugin_site(tmp_path / "one", "nm-twin-one", {"twin": "twin_one"})
    two = plugin_site(tmp_path / "two", "nm-twin-two", {"twin": "twin_two"})
    monkeypatch.syspath_prepend(str(one))
    monkeypatch.syspath_prepend(str(two))
    with pytest.raises(PluginError) as ex:
        make_plugin_manager(["auth", "twin"])
    assert str(ex.value) == ("plugin name 'twin' is claimed by 2 installed distributions, "
                             "nm-twin-two 1.0 (twin_two) and nm-twin-one 1.0 (twin_one)")
