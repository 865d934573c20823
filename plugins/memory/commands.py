"""CLI commands of the memory plugin: ``neuralmind eval memory``."""

from __future__ import annotations

import argparse


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    p = command_group(subparsers, "eval", help="measure retrieval quality").add_parser(
        "memory", help="keyword/semantic/hybrid retrieval on a BEIR or LoCoMo dataset")
    p.add_argument("--dataset", required=True, help="a BEIR folder (corpus.jsonl, queries.jsonl, "
                   "qrels/) or a folder of LoCoMo *.json conversations")
    p.add_argument("--split", default="train", help="BEIR qrels split (default train)")
    p.add_argument("--mode", default="keyword,semantic,hybrid",
                   help="comma-separated: keyword, semantic, hybrid")
    p.add_argument("--work", help="store folder, kept between runs to reuse vectors "
                   "(default: a folder under the system temp dir named after the dataset)")
    p.add_argument("--fusion", action="append", default=[], metavar="RULE",
                   help="extra hybrid variants to compare, e.g. rrf:10, blend:0.3 (repeatable)")
    p.add_argument("--negatives", action="append", default=[], metavar="DIR",
                   help="another eval set (BEIR, LoCoMo or CoSQA folder) whose queries are asked "
                   "of this set's records: prints the share each mode answers with nothing "
                   "(repeatable)")
    p.add_argument("--folds", metavar="FILE", help="the ranker's out-of-fold models "
                   "(bench/data/ranker_folds.json): each training query is ranked by the model "
                   "that did not see it")
    p.add_argument("--limit-queries", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--config", help="TOML config ([memory] and [embeddings] sections)")
    p.set_defaults(func=run_eval)


def run_eval(args) -> int:
    from plugins.memory.eval import main
    return main(args)
