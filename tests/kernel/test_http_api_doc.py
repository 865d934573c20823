"""docs/http-api.md stays true: its route reference is the OpenAPI document rendered, and
every error code the code base raises is in its table."""

import os
import re
from pathlib import Path

from kernel.app import Kernel
from kernel.config import load_settings
from kernel.openapi import markdown
from kernel.plugins import bundled

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "http-api.md"
MARK = "## Routes\n\n"


def test_route_reference_is_generated_from_the_openapi(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    monkeypatch.setenv("NEURALMIND_EMBEDDINGS_WARM", "0")
    kernel = Kernel(load_settings(), plugins=sorted(bundled()), load_entrypoints=False)
    try:
        head, _, _ = DOC.read_text().partition(MARK)
        fresh = head + MARK + markdown(kernel.openapi)
        if os.environ.get("NEURALMIND_WRITE_DOCS"):
            DOC.write_text(fresh)
        assert DOC.read_text() == fresh, "regenerate: NEURALMIND_WRITE_DOCS=1 pytest " + __file__
    finally:
        kernel.shutdown()


def test_every_error_code_raised_is_documented():
    table = set(re.findall(r"^\| `(\w+)` \| \d{3} \|", DOC.read_text(), re.M))
    raised = set()
    for path in [*ROOT.glob("kernel/**/*.py"), *ROOT.glob("plugins/**/*.py")]:
        raised |= set(re.findall(r'\bcode="([a-z_]+)"', path.read_text()))
        raised |= set(re.findall(r'^\s+status, code, message = \d+, "([a-z_]+)"', path.read_text(), re.M))
    assert raised - table == set()
