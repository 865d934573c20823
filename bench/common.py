"""What several bench scripts share, so each rule lives once: argument types that refuse bad
sizes in one argparse line (a 0 or a typo would otherwise end in a traceback or a silent
hang minutes later), the wrk check, where the eval sets are, and a model cache the run's
processes share, removed at the end."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from neuralmind.commands.common import ranged

ROOT = Path(__file__).resolve().parent.parent

WRK_INSTALL = "apt-get install wrk"


positive_int = ranged(1)  # the CLI's own check: a bench takes counts as the commands do


def sizes(text: str) -> list[int]:
    """An argparse type: a comma-separated list of whole numbers ≥ 1 (``1000,10000``)."""
    try:
        return [positive_int(part.strip()) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"takes whole numbers ≥ 1 separated by commas, not {text!r}") from None


def choices(allowed: tuple[str, ...]):
    """An argparse type: a comma-separated list, each of ``allowed``."""
    def parse(text: str) -> list[str]:
        got = [part.strip() for part in text.split(",")]
        if wrong := [p for p in got if p not in allowed]:
            raise argparse.ArgumentTypeError(
                f"takes a comma-separated list of {', '.join(allowed)}, not {', '.join(wrong)}")
        return got
    return parse


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def wrk_note(script: str, left_out: str) -> None:
    """One line first when wrk is missing, for a script that goes on without it: which of
    its figures are left out (never printed as None, nor silently absent)."""
    if not have_wrk():
        print(f"bench/{script}: wrk is not installed ({WRK_INSTALL}): {left_out}", flush=True)


def need_wrk(script: str, purpose: str) -> None:
    """Exit 2 with one line when wrk is missing: a script whose figure *is* wrk's has no
    honest fallback, and a FileNotFoundError traceback minutes in says less."""
    if not have_wrk():
        print(f"bench/{script} needs wrk ({WRK_INSTALL}) for {purpose}", file=sys.stderr)
        raise SystemExit(2)


def eval_dir() -> Path:
    """The eval sets: ``$NEURALMIND_EVAL_DIR``, else ``../shared/eval`` beside this checkout
    (docs/performance.md's commands say ``../shared/eval``)."""
    return Path(os.environ.get("NEURALMIND_EVAL_DIR", ROOT.parent / "shared" / "eval"))


def model_cache() -> tempfile.TemporaryDirectory:
    """A folder for the int8 model an embedder derives (``OnnxEmbedder(cache_dir=…)``),
    removed when the ``with`` ends: the run's embedders (its child processes too) derive it
    once, where each embedder without one derives it again."""
    return tempfile.TemporaryDirectory(prefix="nm-bench-model-")
