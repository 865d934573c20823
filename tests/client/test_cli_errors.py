"""What the client raises reaches the `neuralmind` command's user as one line and an exit
code, never a traceback — every ``NeuralMindError`` subclass, one added later too. A timeout
stopped the command with a 21-frame traceback: `TimedOut` is an OSError, which the command's
handler for files re-raised."""

from __future__ import annotations

import json
import socket

import pytest

from neuralmind.cli import client_error
from neuralmind.client import NeuralMindAPIError, NeuralMindClient, NeuralMindError, TimedOut


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def _example(cls: type) -> NeuralMindError:
    if issubclass(cls, NeuralMindAPIError):
        return cls(500, "some_code", "what went wrong", request_id="r-1")
    return cls("what went wrong")


@pytest.mark.parametrize("cls", [NeuralMindError, *_subclasses(NeuralMindError)],
                         ids=lambda cls: cls.__name__)
def test_every_client_error_is_one_line_and_an_exit_code(cls, capsys):
    code = client_error(_example(cls))
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("neuralmind: what went wrong") and err.count("\n") == 1
    assert code == (2 if issubclass(cls, ValueError) else 1)  # a URL or a token given wrongly


def test_a_timeout_names_no_setting_the_command_line_lacks(tmp_path, capsys):
    """`(timeout=)` read as an empty slot. The Python client's message says how to wait
    longer; the command has no flag for it, and says nothing of one."""
    with socket.create_server(("127.0.0.1", 0)) as hung:  # takes the connection, never answers
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        nm = NeuralMindClient(url, token="t", timeout=0.2, home=tmp_path)
        with pytest.raises(TimedOut) as info:
            nm.health()
    said = f"GET /v1/health: no answer from {url} within 0.2 s"
    assert str(info.value) == f"{said} (a client made with a longer timeout= waits more)"
    assert client_error(info.value) == 1
    assert capsys.readouterr().err == f"neuralmind: {said}\n"


def test_a_refused_token_given_is_named_as_each_caller_gives_it(served, tmp_path):
    """The command line's 401 named `token=`, the Python client's argument, besides --token."""
    from neuralmind.client import Unauthorized
    from tests.support import run_cli
    with pytest.raises(Unauthorized) as refused:
        NeuralMindClient(served.url, token="nm_wrong", home=tmp_path).projects.page()
    assert refused.value.token_from == "the token sent was the one given (token=)"
    code, out, err = run_cli("project", "list", "--url", served.url, "--token", "nm_wrong",
                             env={"NEURALMIND_HOME": str(tmp_path)})
    assert (code, out) == (1, "") and err.startswith(
        "neuralmind: invalid token; the token sent was the one given (--token) [unauthorized, "
        "status 401"), err


def test_a_command_given_a_server_needs_no_local_config(served, tmp_path, monkeypatch):
    """Every client command read the local config to find the daemon's home, so a broken or
    missing NEURALMIND_CONFIG stopped commands that name their server (--url), which need
    none of it; without a server named, the config's fault is still said (exit 2)."""
    from tests.support import run_cli
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\nport=1\n")
    for config in (broken, tmp_path / "missing.toml"):
        env = {"NEURALMIND_CONFIG": str(config), "NEURALMIND_HOME": str(tmp_path / "home")}
        code, out, err = run_cli("project", "list", "--json", "--url", served.url,
                                 "--token", served.token, env=env)
        assert code == 0 and isinstance(json.loads(out), list), err
        code, out, err = run_cli("project", "list", env=env)
        assert (code, out) == (2, "") and str(config) in err
        # a plugin's command too (it was not even offered without a config to read)
        code, out, err = run_cli("agent", "wakeup", "--json", "-p", "nope", "--url", served.url,
                                 "--token", served.token, env=env)
        assert code == 2 and "no project has that id" in err and str(config) not in err, err
