"""``neuralmind ask "QUESTION"``: a grounded answer through the daemon, streamed as it is
written, then its numbered sources."""

from __future__ import annotations

import json
import sys

KINDS = ("memories", "code")


def _question(text: str) -> str:
    """An argparse ``type``: what the route takes, said in the user's terms before a request
    ("String should have at least 1 character" for three spaces read as a contradiction)."""
    import argparse

    from plugins.ask.models import QUESTION_MAX
    if not text.strip():
        raise argparse.ArgumentTypeError("the question is blank")
    if len(text.strip()) > QUESTION_MAX:
        raise argparse.ArgumentTypeError(f"the question is {len(text.strip()):,} characters "
                                         f"long: at most {QUESTION_MAX:,}")
    return text


def add_commands(subparsers) -> None:
    from neuralmind.commands.common import project_flags, ranged
    p = subparsers.add_parser("ask", parents=[project_flags()],
                              help="answer a question from the project's memories and code, "
                                   "with numbered sources")
    p.add_argument("question", type=_question)
    p.add_argument("--sources", default="memories,code", type=_kinds,
                   help="comma-separated: memories, code (default both)")
    p.add_argument("--budget", type=ranged(256, 32_000), default=None,
                   help="tokens of sources (256–32000)")
    p.add_argument("--no-stream", action="store_true", help="print the answer when it is whole")
    p.set_defaults(func=cmd_ask)


def _kinds(text: str) -> list[str]:
    import argparse
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    wrong = [k for k in kinds if k not in KINDS]
    if not kinds or wrong:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or 'nothing'}: choose from "
                                         f"{', '.join(KINDS)}")
    return kinds


def cmd_ask(args) -> int:
    from neuralmind.commands.common import project, shown
    handle = project(args)
    if args.json or args.no_stream:
        result = handle.ask(args.question, sources=args.sources, context_budget=args.budget)
        if args.json:
            print(json.dumps(result.raw, indent=2))
            return 0
        print(shown(result.answer, lines=True))
        _footer(args, result.raw)
        return 0
    done: dict = {}
    for event in handle.ask(args.question, sources=args.sources, context_budget=args.budget,
                            stream=True):
        if event.kind == "sources":
            done.update(event.data)
        elif event.kind == "delta":
            sys.stdout.write(shown(event.data["text"], lines=True))
            sys.stdout.flush()
        elif event.kind == "done":
            done.update(event.data)
    print()
    _footer(args, done)
    return 0


def _footer(args, out: dict) -> None:
    """The sources (cited ones marked with *), then notices and the provider."""
    from neuralmind.commands.common import note, shown
    cited = set(out.get("cited") or ())
    if out.get("sources"):
        print()
    for s in out.get("sources") or ():
        mark = "*" if s["n"] in cited else " "
        print(shown(f"{mark}[{s['n']}] {s['cite']}  {s['title']}"))
    for notice in out.get("notices") or ():
        note(args, notice)
    model = f" ({out['model']})" if out.get("model") else ""
    print(shown(f"-- {out.get('provider')}{model}, {out.get('ms')} ms"), file=sys.stderr)
