"""Settings: TOML, NEURALMIND_* overrides, and clear errors."""

import pytest
from pydantic import BaseModel

from kernel.config import ConfigError, load_settings


def test_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    monkeypatch.delenv("NEURALMIND_PLUGINS", raising=False)
    s = load_settings()
    assert s.home == tmp_path and s.kernel.max_body_bytes == 1024 * 1024
    assert s.kernel.plugins == ["auth", "memory", "index", "mcp"] and not s.server_mode


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
    bad.write_text("[server]\nport = 'eighty'\n")
    with pytest.raises(ConfigError, match="port"):
        load_settings(bad)
    bad.write_text('[[projects]]\nid = "Bad Id"\npath = "/x"\n')
    with pytest.raises(ConfigError, match="projects"):
        load_settings(bad)
