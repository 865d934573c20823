"""CLI commands of the memory plugin: ``neuralmind eval memory``, ``eval contradictions`` and
``eval decisions`` (run in this process: they measure the plugin's own code)."""

from __future__ import annotations

import argparse


def fusion_rule(text: str) -> str:
    """An argparse ``type``: a hybrid variant ``eval memory`` can build (checked before any
    store is opened)."""
    from plugins.memory.eval import variant
    from plugins.memory.models import MemorySettings
    try:
        variant(text, MemorySettings())
    except ValueError as ex:
        raise argparse.ArgumentTypeError(str(ex)) from None
    return text


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    from neuralmind.commands.common import ranged
    p = command_group(subparsers, "eval", help="measure retrieval quality").add_parser(
        "memory", help="keyword/semantic/hybrid retrieval on a BEIR or LoCoMo dataset")
    p.add_argument("--dataset", required=True, help="a BEIR folder (corpus.jsonl, queries.jsonl, "
                   "qrels/) or a folder of LoCoMo *.json conversations")
    p.add_argument("--split", default="train", help="BEIR qrels split (default train)")
    p.add_argument("--mode", default="keyword,semantic,hybrid",
                   help="comma-separated: keyword, semantic, hybrid")
    p.add_argument("--work", help="store folder, kept between runs to reuse vectors "
                   "(default: a folder under the system temp dir named after the dataset)")
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                   help="the store's engine: SQLite files in --work (default), or the PostgreSQL "
                   "database of --dsn")
    p.add_argument("--dsn", help="with --backend postgres: postgresql://user:password@host/db "
                   "(default: [storage] dsn of --config, or $NEURALMIND_DATABASE_URL)")
    p.add_argument("--fusion", action="append", default=[], metavar="RULE", type=fusion_rule,
                   help="extra hybrid variants to compare, e.g. rrf:10, blend:0.3 (repeatable)")
    p.add_argument("--negatives", action="append", default=[], metavar="DIR",
                   help="another eval set (BEIR, LoCoMo or CoSQA folder) whose queries are asked "
                   "of this set's records: prints the share each mode answers with nothing "
                   "(repeatable)")
    p.add_argument("--folds", metavar="FILE", help="the ranker's out-of-fold models "
                   "(bench/data/ranker_folds.json): each training query is ranked by the model "
                   "that did not see it")
    p.add_argument("--limit-queries", type=ranged(1), default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-decay", action="store_true",
                   help="rank hybrid without the decay policy (default: the policy, on)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--config", help="TOML config ([memory] and [embeddings] sections)")
    p.set_defaults(func=run_eval)


    c = command_group(subparsers, "eval", help="measure retrieval quality").add_parser(
        "contradictions", help="precision/recall of the contradiction detector on labelled pairs")
    c.add_argument("--pairs", action="append", default=[], metavar="FILE",
                   help="a JSONL file of labelled pairs (repeatable; default: the repository's "
                        "bench/data/contradictions/pairs.jsonl and pairs_fresh.jsonl)")
    c.add_argument("--threshold", type=float, default=0.5, help="detector confidence (0.5)")
    c.add_argument("--no-cosine", action="store_true",
                   help="no model: the records' word overlap stands for their cosine")
    c.add_argument("--errors", action="store_true", help="list every false positive/negative")
    c.add_argument("--json", action="store_true", help="one JSON object on stdout")
    c.add_argument("--config", help="TOML config ([embeddings] section)")
    c.set_defaults(func=run_contradictions)

    d = command_group(subparsers, "eval", help="measure retrieval quality").add_parser(
        "decisions", help="decision search on a corpus and queries in the original NeuralMind's "
                          "eval shape")
    d.add_argument("--corpus", required=True, help="a JSON list of decisions")
    d.add_argument("--queries", required=True,
                   help="a JSON object: queries [{id, kind, query, gold}], extra_decisions")
    d.add_argument("--mode", default="keyword,semantic,hybrid",
                   help="comma-separated: keyword, semantic, hybrid")
    d.add_argument("--json", action="store_true", help="one JSON object on stdout")
    d.add_argument("--config", help="TOML config ([memory] and [embeddings] sections)")
    d.set_defaults(func=run_decisions)


def run_eval(args) -> int:
    from plugins.memory.eval import main
    return main(args)


def run_contradictions(args) -> int:
    from plugins.memory.contradiction_eval import main
    return main(args)


def run_decisions(args) -> int:
    from plugins.memory.decision_eval import main
    return main(args)
