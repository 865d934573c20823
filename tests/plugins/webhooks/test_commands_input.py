"""``neuralmind webhook add`` given its URL where it does not go: the hook's URL is the
argument, while ``--url`` (every client command's) names the NeuralMind server. Refused in
words before any request."""

from __future__ import annotations

import pytest

from tests.support import run_cli

ENV = {"NEURALMIND_PLUGINS": "auth,webhooks"}


@pytest.mark.parametrize("argv, says", [
    (("--url", "https://x.example/h", "-e", "memory.*"),
     "neuralmind: give the hook's URL as the argument: `neuralmind webhook add HOOK_URL -e "
     "KIND` (--url https://x.example/h names the NeuralMind server to call, not where events "
     "go)\n"),
    (("-e", "memory.*"),
     "neuralmind: give the hook's URL as the argument: `neuralmind webhook add HOOK_URL -e "
     "KIND`\n"),
])
def test_add_without_the_hooks_url_says_which_url_is_which(argv, says, tmp_path):
    """`webhook add --url https://x/h -e …` once answered `required: URL`, naming neither
    the argument it wanted nor what --url had been taken for. No server answers here: the
    command is refused before it calls one."""
    code, out, err = run_cli("webhook", "add", *argv,
                             env={**ENV, "NEURALMIND_HOME": str(tmp_path / "home")})
    assert (code, out, err) == (2, "", says)
    assert not (tmp_path / "home").exists()


def test_add_help_names_the_hooks_url_apart_from_the_server():
    code, out, _ = run_cli("webhook", "add", "--help", env=ENV)
    words = " ".join(out.split())  # argparse wraps the help to the terminal's width
    assert code == 0 and "HOOK_URL where to POST events" in words
    assert "required, and not --url, which names the NeuralMind server" in words
