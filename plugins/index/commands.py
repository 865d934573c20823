"""CLI commands of the index plugin: ``neuralmind eval code|impact|next`` and, in the
``project`` group, ``impact|next|neighbors|activity|savings|ingest|validate``."""

from __future__ import annotations

import argparse


def _revision(text: str) -> str:
    """An argparse ``type``: a revision, never an option git would read (``--output=…``)."""
    if not text or text.startswith("-"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a revision (a branch, a tag, a "
                                         "commit)")
    return text


def register(subparsers) -> None:
    from neuralmind import command_group
    from neuralmind.commands.common import filled, ranged, setting
    settings = "plugins.index.models:IndexSettings"
    from plugins.index.project_commands import register as project_commands
    project_commands(command_group(subparsers, "project"))
    parser = command_group(subparsers, "eval", "retrieval evaluations").add_parser(
        "code", help="CoSQA code search: MRR@10 and recall@1/5/10 per mode")
    parser.add_argument("--dataset", required=True, help="folder with code_idx_map.txt and "
                        "cosqa-retrieval-<split>-500.json")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--embed-chars", type=setting(settings, "embed_chars"), default=None,
                        help="override [index] embed_chars (what each vector embeds)")
    parser.add_argument("--embed-mode", choices=["docfirst", "code", "metadata"],
                        help="override [index] embed_mode")
    parser.add_argument("--hub-weight", type=setting(settings, "hub_weight"), default=None,
                        help="override [index] hub_weight (0: the plain cosine)")
    parser.add_argument("--keyword-weights", type=_weights,
                        help="comma-separated hybrid keyword weights to compare "
                             "(default: [index] keyword_weight)")
    parser.add_argument("--workdir", help="keep the throwaway project here (reruns reuse its "
                        "vectors); default a temporary folder removed afterwards")
    parser.set_defaults(func=_run)
    evals = command_group(subparsers, "eval")
    impact = evals.add_parser("impact", help="precision/recall of `impact` against the tests "
                              "that call each function (grep), on a Python repository")
    impact.add_argument("path", type=filled, help="the repository (it is read, never written)")
    impact.add_argument("--limit", type=ranged(1, 1000), default=200,
                        help="impacted nodes per function (1–1000, 200)")
    impact.add_argument("--json", action="store_true", help="one JSON object on stdout")
    impact.set_defaults(func=_run_impact)
    nxt = evals.add_parser("next", help="recall@k of `next` replaying a repository's commits "
                           "(train on the older half, test on the newer)")
    nxt.add_argument("repo", type=filled,
                     help="a git repository or bare git dir (it is read, never written)")
    nxt.add_argument("--rev", default="HEAD", type=_revision,
                     help="the history to replay (default HEAD)")
    nxt.add_argument("-k", "--k", type=ranged(1, 50), default=5, help="recall@k (1–50, 5)")
    nxt.add_argument("--max-files", type=setting(settings, "learn_max_files"), default=20,
                     help="commits touching more files are left out (default 20)")
    nxt.add_argument("--half-life-days", type=setting(settings, "learn_half_life_days"),
                     help="override [index] learn_half_life_days for the replay")
    nxt.add_argument("--json", action="store_true", help="one JSON object on stdout")
    nxt.set_defaults(func=_run_next)


def _run_impact(args) -> int:
    from plugins.index.eval_impact import main
    return main(args)


def _run_next(args) -> int:
    from plugins.index.eval_next import main
    return main(args)


def _weights(text: str) -> list[float]:
    import argparse
    try:
        weights = [float(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("comma-separated numbers between 0 and 1") from None
    if not weights or any(not 0 <= w <= 1 for w in weights):
        raise argparse.ArgumentTypeError("comma-separated numbers between 0 and 1")
    return weights


def _run(args) -> int:
    from plugins.index.eval import main
    return main(args)
