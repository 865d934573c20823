"""Settings: TOML, NEURALMIND_* overrides, and clear errors."""

import logging
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from kernel.config import ConfigError, load_settings


def test_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    monkeypatch.delenv("NEURALMIND_PLUGINS", raising=False)
    s = load_settings()
    assert s.home == tmp_path and s.kernel.max_body_bytes == 1024 * 1024
    assert s.kernel.plugins == ["auth", "memory", "index", "mcp", "ask", "ui"] and not s.server_mode


def test_file_then_environment(monkeypatch, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[kernel]\nplugins = ["auth"]\nmax_body_bytes = 10\n[server]\nport = 9\n'
                   '[memory]\nfusion = "blend"\n')
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth, example")
    monkeypatch.setenv("NEURALMIND_API_MAX_BODY_BYTES", "2048")
    s = load_settings(cfg)
    assert s.kernel.plugins == ["auth", "example"] and s.kernel.max_body_bytes == 2048
    assert s.server.port == 9

    class Memory(BaseModel):
        fusion: str

    assert s.section("memory", Memory).fusion == "blend"


def test_bad_files_and_values_are_config_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[kernel\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.toml")
    bad.write_text('[kernel]\nstate_dir = " "\n')  # was taken for the current folder
    with pytest.raises(ConfigError, match="an empty path names no folder"):
        load_settings(bad)
    bad.write_bytes(b"[server]\nport = 1 # \xff\n")  # every command read it: a traceback
    with pytest.raises(ConfigError, match=r"is not valid TOML: not UTF-8 \(byte 20\)$"):
        load_settings(bad)
    bad.write_text("[server]\nport = 'eighty'\n")
    with pytest.raises(ConfigError, match="port"):
        load_settings(bad)
    bad.write_text("[server]\nport = true\n")  # pydantic alone reads it as port 1
    with pytest.raises(ConfigError, match=r"server\.port: a number, not true or false"):
        load_settings(bad)
    bad.write_text("[memory]\nhybrid_tail = false\n")  # a plugin's section as well
    from plugins.memory.models import MemorySettings
    with pytest.raises(ConfigError, match="hybrid_tail: a number, not true or false"):
        load_settings(bad).section("memory", MemorySettings)
    bad.write_text('[[projects]]\nid = "Bad Id"\npath = "/x"\n')
    with pytest.raises(ConfigError, match="projects"):
        load_settings(bad)


def test_a_byte_order_mark_before_the_config_is_skipped(tmp_path, monkeypatch):
    """TOML lets a UTF-8 file start with a byte-order mark (toml-lang/toml#437), as editors
    on Windows write it; tomllib refused it as `Invalid statement (at line 1, column 1)`, a
    message with no word of the mark. Only the first is the mark: a second is no statement."""
    monkeypatch.delenv("NEURALMIND_HOME")
    cfg = tmp_path / "bom.toml"
    cfg.write_bytes(b'\xef\xbb\xbf[kernel]\r\nhome = "/tmp/nm-bom"\r\n[server]\r\nport = 9\r\n')
    s = load_settings(cfg)
    assert str(s.home) == "/tmp/nm-bom" and s.server.port == 9
    cfg.write_bytes(b"\xef\xbb\xbf[server]\nport = 1 # \xff\n")  # bytes count from the file's start
    with pytest.raises(ConfigError, match=r"is not valid TOML: not UTF-8 \(byte 23\)$"):
        load_settings(cfg)
    cfg.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf[server]\n")
    with pytest.raises(ConfigError, match=r"not valid TOML: Invalid statement \(at line 1, "
                                          r"column 1\)"):
        load_settings(cfg)


@pytest.mark.parametrize("section, key", [
    ("kernel", "plugin"), ("server", "prot"), ("embeddings", "modeldir"), ("index", "embed_char"),
    ("auth", "role"), ("memory", "keyword_weigth"), ("tier2", "seat_window_days"),
    ("tier2.self_hosted", "bind")])
def test_an_unknown_key_in_any_section_stops_start_up_naming_it(tmp_path, section, key):
    from kernel.app import Kernel
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[{section}]\n{key} = 1\n")
    settings = None
    with pytest.raises(ConfigError) as ex:
        settings = load_settings(cfg, kernel={"home": str(tmp_path / "home")},
                                 embeddings={"warm": False})
        Kernel(settings, plugins=["auth", "memory", "index", "tier2_bridge"],
               load_entrypoints=False).shutdown()
    assert key in str(ex.value) and "xtra" in str(ex.value), str(ex.value)
    assert section.split(".")[0] in str(ex.value)


def test_the_environment_wins_over_the_file_for_every_setting(monkeypatch, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[kernel]\nhome = "{tmp_path / "file-home"}"\nplugins = ["auth"]\n'
                   f'state_dir = "{tmp_path / "file-state"}"\n'
                   f'[embeddings]\nmodel_dir = "{tmp_path / "file-model"}"\nwarm = true\n')
    for name, value in (("NEURALMIND_HOME", "env-home"), ("NEURALMIND_STATE_DIR", "env-state"),
                        ("NEURALMIND_MODEL_DIR", "env-model")):
        monkeypatch.setenv(name, str(tmp_path / value))
    monkeypatch.setenv("NEURALMIND_PLUGINS", "memory")
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "0")
    s = load_settings(cfg)
    assert s.home == tmp_path / "env-home" and s.kernel.plugins == ["memory"]
    assert s.kernel.state_dir == str(tmp_path / "env-state")
    assert s.embeddings.model_dir == str(tmp_path / "env-model") and s.embeddings.warm is False
    # and a flag (an override the CLI passes) wins over both
    assert load_settings(cfg, kernel={"home": str(tmp_path / "flag")}).home == tmp_path / "flag"


def test_a_server_checks_every_plugins_section_before_it_forks(tmp_path, monkeypatch):
    """Each worker validates its plugins' sections as it boots; the master does it first, so
    a mistake is one error naming each bad key, not a traceback per worker."""
    from kernel.serving import gunicorn_options
    cfg = tmp_path / "c.toml"
    cfg.write_text("[index]\ntest_embed_chars = 10\n[memory]\nkeyword_weigth = 1\n"
                   "[auth]\nrole = 1\n[ask]\nbase_ur = 1\n[webhooks]\nx = 1\n[ui]\nenabld = 1\n"
                   "[tier2]\nseat_window_days = 1\n")
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth,memory,index,ask,webhooks,ui,tier2_bridge")
    with pytest.raises(ConfigError) as ex:
        gunicorn_options(load_settings(cfg))
    lines = str(ex.value).splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == [
        "[ask]", "[auth]", "[index]", "[memory]", "[tier2]", "[ui]", "[webhooks]"]
    assert lines[2] == (f"[index] in {cfg}: test_embed_chars: Input should be greater than or "
                        "equal to 64 (got 10)")
    for key in ("keyword_weigth", "role", "base_ur", "enabld", "seat_window_days"):
        assert f": {key}: Extra inputs are not permitted (got 1)" in str(ex.value)


def test_a_misspelt_section_stops_the_server_and_a_disabled_plugins_section_does_not(
        tmp_path, monkeypatch):
    from kernel.serving import gunicorn_options
    cfg = tmp_path / "c.toml"
    cfg.write_text('[storag]\nbackend = "postgres"\n[servr]\nport = 1\n[memroy]\n[zzz]\n'
                   "[webhooks]\npoll_s = 1\n[tier2]\n")  # webhooks and tier2_bridge: not enabled
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth,memory")
    with pytest.raises(ConfigError) as ex:
        gunicorn_options(load_settings(cfg))
    unknown = "is no section of NeuralMind or of an installed plugin"
    assert str(ex.value).splitlines() == [
        f"[memroy] in {cfg} {unknown}: did you mean [memory]?",
        f"[servr] in {cfg} {unknown}: did you mean [server]?",
        f"[storag] in {cfg} {unknown}: did you mean [storage]?",
        f"[zzz] in {cfg} {unknown}"]


@pytest.mark.parametrize("where", ["home", "state_dir", "state_dir/sub"])
def test_a_file_where_the_state_goes_stops_the_server_before_it_forks(tmp_path, monkeypatch,
                                                                       where):
    from kernel.serving import CannotServe, gunicorn_options
    (tmp_path / "afile").touch()
    path = tmp_path / "afile" / "sub" if where.endswith("/sub") else tmp_path / "afile"
    key = where.split("/")[0]
    monkeypatch.setenv("NEURALMIND_HOME", str(path if key == "home" else tmp_path / "home"))
    settings = load_settings(None, kernel={"plugins": ["auth"],
                                           **({"state_dir": str(path)} if key != "home" else {})})
    with pytest.raises(CannotServe, match=rf"^\[kernel\] {key} {path} is not a directory \(a "
                                          r"file is in its place\)$"):
        gunicorn_options(settings)


@pytest.mark.sqlite_only("refused before any database is opened")
def test_an_encrypted_tls_key_is_refused_without_asking_a_terminal(tmp_path, monkeypatch):
    """OpenSSL would prompt for the passphrase on the terminal, twice, and a service has none."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    from kernel.serving import BindError, gunicorn_options
    cert = trustme.CA().issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    (tmp_path / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    settings = load_settings(None, kernel={"plugins": ["auth"]}, server={
        "allow_remote": True, "tls_cert": str(tmp_path / "cert.pem"),
        "tls_key": str(tmp_path / "key.pem")})
    with pytest.raises(BindError, match=rf"^the TLS key {tmp_path / 'key.pem'} is encrypted: "):
        gunicorn_options(settings)


@pytest.mark.sqlite_only("refused before any database is opened")
def test_plain_gunicorn_says_a_config_mistake_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    from tests.support import ROOT
    cfg = tmp_path / "c.toml"
    cfg.write_text("[servr]\nport = 1\n")
    env = {**os.environ, "NEURALMIND_CONFIG": str(cfg), "NEURALMIND_HOME": str(tmp_path / "h")}
    done = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py",
                           "kernel.wsgi:application"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"neuralmind: [servr] in {cfg} is no section of NeuralMind or of an "
                           "installed plugin: did you mean [server]?\n")


def test_a_daemon_that_cannot_start_says_why(tmp_path, monkeypatch):
    from kernel import daemon
    cfg = tmp_path / "c.toml"
    cfg.write_text("[memory]\nkeyword_weigth = 1\n")
    home = tmp_path / "home"
    # the daemon's own home: in the user's, one already running there answered instead
    monkeypatch.setenv("NEURALMIND_HOME", str(home))
    with pytest.raises(RuntimeError) as ex:
        daemon.spawn(home, ["daemon", "start", "--foreground", "--config", str(cfg)])
    assert str(ex.value) == (f"the daemon exited with code 2: [memory] in {cfg}: keyword_weigth: "
                             f"Extra inputs are not permitted (got 1); see {home / 'daemon.log'}")
    assert ex.value.exit_code == 2
    from tests.support import run_cli  # the CLI passes a config mistake on as a usage error
    code, _, err = run_cli("daemon", "start", "--config", str(cfg),
                           env={"NEURALMIND_HOME": str(home)})
    assert code == 2 and "keyword_weigth: Extra inputs are not permitted" in err


def test_an_unknown_plugin_is_one_line_naming_it(tmp_path):
    from tests.support import run_cli
    code, _, err = run_cli("serve", env={"NEURALMIND_HOME": str(tmp_path),
                                         "NEURALMIND_PLUGINS": "auth,nope"})
    assert code == 2 and err.startswith("neuralmind: unknown plugin 'nope': no entry point")
    assert len(err.splitlines()) == 1


def test_a_dsn_in_the_file_selects_postgres_as_the_variable_does(tmp_path, monkeypatch):
    """``[storage] dsn`` alone was read and then ignored (backend stayed sqlite, silently);
    a database named is the database used, in the file as in NEURALMIND_DATABASE_URL. An
    explicit backend still wins."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[storage]\ndsn = "postgresql://nm@db.internal/nm"\n')
    assert load_settings(cfg).storage.backend == "postgres"
    cfg.write_text('[storage]\nbackend = "sqlite"\ndsn = "postgresql://nm@db.internal/nm"\n')
    assert load_settings(cfg).storage.backend == "sqlite"
    cfg.write_text("")
    monkeypatch.setenv("NEURALMIND_DATABASE_URL", "postgresql://nm@db.internal/nm")
    assert load_settings(cfg).storage.backend == "postgres"


def test_a_bad_value_names_the_variable_or_flag_it_came_from(tmp_path, monkeypatch):
    """The file was blamed for a value it did not hold: `invalid config mb.toml:
    kernel.max_body_bytes … (got "abc")` for NEURALMIND_API_MAX_BODY_BYTES=abc."""
    cfg = tmp_path / "mb.toml"
    cfg.write_text("[server]\nthreads = 0\n")
    monkeypatch.setenv("NEURALMIND_API_MAX_BODY_BYTES", "abc")
    with pytest.raises(ConfigError) as ex:
        load_settings(cfg, server={"port": 99999})
    said = str(ex.value)
    assert said.startswith(f"invalid config {cfg}: ")
    assert "kernel.max_body_bytes (from NEURALMIND_API_MAX_BODY_BYTES): Input should be a valid " \
           "integer" in said
    assert "server.port (from the command line): Input should be less than or equal to 65535 " \
           "(got 99999)" in said
    assert "server.threads: Input should be greater than or equal to 1 (got 0)" in said


@pytest.fixture
def failing_plugins(tmp_path, monkeypatch):
    """Two installed plugins, not enabled unless a test says so: one whose import calls
    sys.exit (a missing API key), one whose config_sections raises."""
    from tests.support import plugin_site
    site = plugin_site(tmp_path / "site", "neuralmind-failing",
                       {"exiter": "exiter_plugin", "sectionless": "sectionless_plugin"})
    (site / "exiter_plugin.py").write_text("import sys\nsys.exit('exiter needs FOO_API_KEY')\n")
    (site / "sectionless_plugin.py").write_text(
        "from neuralmind import hookimpl\n\n\n@hookimpl\ndef config_sections():\n"
        "    raise RuntimeError('no sections today')\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path / "home"))
    yield tmp_path
    sys.modules.pop("sectionless_plugin", None)


@pytest.mark.sqlite_only("checked before any storage opens")
def test_an_installed_plugin_that_is_not_enabled_never_stops_a_start(failing_plugins, caplog):
    """Only what is enabled may stop a server: an installed plugin that exits at import, or
    whose config_sections raises, is a warning naming it — and its section in a config the
    usual unknown-section error, saying the plugin fails to load."""
    from kernel.plugins import make_plugin_manager
    cfg = failing_plugins / "c.toml"
    cfg.write_text("[auth]\n")
    with caplog.at_level(logging.WARNING, logger="neuralmind.config"):
        load_settings(cfg).check_sections(make_plugin_manager(["auth"]))
    said = sorted(r.getMessage() for r in caplog.records if r.name == "neuralmind.config")
    assert said == [
        "plugin 'exiter' (exiter_plugin) failed to load: SystemExit: exiter needs FOO_API_KEY "
        "(not enabled, so left out)",
        "plugin 'sectionless' failed in config_sections: RuntimeError: no sections today "
        "(not enabled, so left out)"]
    cfg.write_text("[exiter]\napi_key = 1\n[sectionles]\n")
    with pytest.raises(ConfigError) as ex:
        load_settings(cfg).check_sections(make_plugin_manager(["auth"]))
    assert str(ex.value).splitlines() == [
        f"[exiter] in {cfg} belongs to no plugin that loads: plugin 'exiter' is installed but "
        "fails to load (the warning above says why)",
        f"[sectionles] in {cfg} is no section of NeuralMind or of an installed plugin (the "
        "sections of exiter, sectionless, installed but failing to load, are unknown)"]


@pytest.mark.sqlite_only("refused before any storage opens")
def test_an_enabled_plugin_that_exits_at_import_is_a_load_failure_naming_it(failing_plugins):
    from tests.support import run_cli
    code, out, err = run_cli("serve", env={"NEURALMIND_PLUGINS": "auth,exiter"})
    assert (code, out, err) == (2, "", "neuralmind: plugin 'exiter' (exiter_plugin) failed to "
                                       "load: SystemExit: exiter needs FOO_API_KEY\n")


def test_a_key_an_earlier_neuralmind_read_says_what_took_its_place(tmp_path):
    """``[memory] feedback_step`` was in an earlier build's docs: "Extra inputs are not
    permitted" read like a typo. A section's ``removed`` keys say what does their work now."""
    from tests.support import LocalServer
    config = "[memory]\nfeedback_step = 0.1\n"
    with pytest.raises(ConfigError) as refused:
        LocalServer(tmp_path / "home", plugins=["auth", "memory"], config=config).start()
    assert str(refused.value).endswith(
        ": feedback_step was removed: feedback_up and feedback_down set the steps of 'helpful' "
        "and 'unhelpful' now (0.05 and 0.10 by default); delete the line")
    assert "[memory]" in str(refused.value)


def test_a_relative_home_in_a_config_is_the_configs_folders(tmp_path, monkeypatch):
    """A relative ``[kernel] home`` was taken from each command's folder: an agent starting
    ``neuralmind mcp`` in each repository got a daemon in each, its token in the working
    tree. A config file's relative home and state_dir are taken from the file's folder;
    an absolute one, ``~``, and the environment's stay as they are."""
    config = tmp_path / "team" / "nm.toml"
    config.parent.mkdir()
    config.write_text('[kernel]\nhome = "state/home"\nstate_dir = "../projects"\n')
    elsewhere = tmp_path / "repo"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("NEURALMIND_HOME", raising=False)
    monkeypatch.delenv("NEURALMIND_STATE_DIR", raising=False)
    settings = load_settings(config)
    assert settings.home == tmp_path / "team" / "state" / "home"
    assert settings.kernel.state_dir == str(tmp_path / "team" / "../projects")
    config.write_text('[kernel]\nhome = "~/nm"\n')
    assert load_settings(config).home == Path("~/nm").expanduser()
    monkeypatch.setenv("NEURALMIND_HOME", "rel")
    assert load_settings(config).home == Path("rel")  # the environment's, as given
