"""docs/plugins.md and kernel/hookspecs.py stay in step: every spec has a section, every
section names a real spec, and the documented signature matches."""

import inspect
import re
from pathlib import Path

from kernel import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def specs():
    return {name: fn for name, fn in vars(hookspecs).items()
            if callable(fn) and hasattr(fn, "neuralmind_spec")}


def test_every_hook_has_a_section_and_every_section_a_hook():
    sections = re.findall(r"^### `(\w+)`$", DOC.read_text(), re.M)
    assert sorted(sections) == sorted(specs())


def test_documented_signatures_match_the_specs():
    text = DOC.read_text()
    for name, fn in specs().items():
        args = ", ".join(inspect.signature(fn).parameters)
        assert f"`{name}({args})`" in text, name


def test_firstresult_hooks_say_so():
    text = DOC.read_text()
    for name, fn in specs().items():
        body = text.split(f"### `{name}`", 1)[1].split("###", 1)[0]
        assert ("*firstresult*" in body) == fn.neuralmind_spec["firstresult"], name
