"""A config refusal quotes what it refuses, never the credential in it: a DSN under a
misspelt key or of the wrong type, an ``[ask] base_url`` with a password or an ``api_key``
query, an origin with user information. What is left still says which value is wrong."""

from __future__ import annotations

import pytest

from kernel.config import ConfigError, load_settings, masked
from kernel.pg import shown_dsn
from tests.support import free_port, run_cli

pytestmark = pytest.mark.sqlite_only("config files, refused before any storage")


@pytest.mark.parametrize("text, shown", [
    ("postgresql://u:s3cretpw@db.example:5432/nm", "postgresql://u:***@db.example:5432/nm"),
    ('["postgresql://u:p@ss@db/nm"]', '["postgresql://u:***@db/nm"]'),
    ("https://sk-KEY@llm.example/v1", "https://***@llm.example/v1"),
    ("https://llm.example/v1?model=m&api_key=sk-KEY",
     "https://llm.example/v1?model=m&api_key=***"),
    ("host=db user=u password='s3 cret' sslpassword=pw", "host=db user=u password=*** sslpassword=***"),
    ("postgresql://db/nm?password=s3cret&sslmode=require",
     "postgresql://db/nm?password=***&sslmode=require"),
    ("https://dash.example:8443", "https://dash.example:8443"),  # nothing secret: as it is
])
def test_masked_hides_what_a_url_or_dsn_authenticates_with(text, shown):
    assert masked(text) == shown


def test_the_dsn_shown_hides_every_password_it_names():
    assert shown_dsn("postgresql://u:s3cret@db/nm?sslpassword=pw") == (
        "user=u password=*** dbname=nm host=db sslpassword=***")


@pytest.mark.parametrize("body, said", [
    ('[storage]\nbackend = "postgres"\ndns = "postgresql://u:s3cretpw@127.0.0.1:1/db"\n',
     'storage.dns: Extra inputs are not permitted (got "postgresql://u:***@127.0.0.1:1/db")'),
    ('[storage]\nbackend = "postgres"\ndsn = ["postgresql://u:s3cretpw@127.0.0.1:1/db"]\n',
     'storage.dsn: Input should be a valid string (got ["postgresql://u:***@127.0.0.1:1/db"])'),
    # cut at 60 characters after masking: the cut never leaves a password whole
    ('[storage]\ndns = "postgresql://someone:s3cretpw@a-long-host-name.example.com/nm_db"\n',
     'storage.dns: Extra inputs are not permitted (got "postgresql://someone:***@a-long-'
     'host-name.example.com/nm_db)'),
])
def test_a_refused_key_is_quoted_without_its_password(tmp_path, body, said):
    config = tmp_path / "bad.toml"
    config.write_text(body)
    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    assert "s3cretpw" not in str(raised.value)
    assert said in str(raised.value)


@pytest.mark.parametrize("base_url, shown", [
    ("https://user:sk-LLMKEY123@llm.example/v1", "https://user:***@llm.example/v1"),
    ("https://llm.example/v1?api_key=sk-LLMKEY456", "https://llm.example/v1?api_key=***"),
])
def test_serve_refuses_an_ask_base_url_with_a_key_without_printing_it(tmp_path, base_url,
                                                                     shown):
    config = tmp_path / "ask.toml"
    config.write_text(f'[ask]\nbase_url = "{base_url}"\nmodel = "m"\n')
    code, out, err = run_cli("serve", "--config", str(config), "--port", str(free_port()),
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert code == 2 and "LLMKEY" not in out + err
    assert "base_url takes no query, fragment or credentials" in err and shown in err


def test_an_origin_with_a_password_is_refused_without_printing_it(tmp_path):
    code, out, err = run_cli("serve", "--port", str(free_port()), "--allow-origin",
                             "https://admin:ORIGINPW2@dash.example",
                             env={"NEURALMIND_HOME": str(tmp_path / "home")})
    assert code == 2 and "ORIGINPW2" not in out + err
    assert "'https://admin:***@dash.example': credentials are not allowed in an origin" in err
