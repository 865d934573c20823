"""``NEURALMIND_*`` variables read as the config file's values are: one rule for a boolean."""

from __future__ import annotations

import pytest

from kernel.config import ConfigError, load_settings


@pytest.mark.parametrize("value, warm", [("0", False), ("false", False), ("False", False),
                                         ("no", False), ("OFF", False), ("1", True),
                                         ("True", True), ("yes", True), ("on", True)])
def test_embeddings_warm_from_the_environment_is_read_as_a_boolean(monkeypatch, value, warm):
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", value)
    assert load_settings().embeddings.warm is warm


def test_a_warm_value_that_is_no_boolean_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "sometimes")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == (
        "invalid config (defaults): embeddings.warm (from NEURALMIND_EMBEDDINGS_WARM): Input "
        'should be a valid boolean, unable to interpret input (got "sometimes")')
