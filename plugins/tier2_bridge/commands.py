"""``neuralmind audit verify`` and ``neuralmind audit export``: the operator's side.

Both open ``audit.db`` read-only and never create or migrate it, so they can run beside a
live server (they read one consistent snapshot) or on a copy taken off the machine.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from neuralmind import load_settings, open_shared
from neuralmind.client import no_directory
from neuralmind.commands.common import shown, whole_file
from plugins.tier2_bridge.audit import (audit_path, malformed, read_only, records, shared_records,
                                        verify)
from plugins.tier2_bridge.storage import StoreUnavailable


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    group = command_group(subparsers, "audit", help="tier2: the hash-chained audit trail")
    check = group.add_parser("verify", help="walk the chain; exit 1 naming the first broken record")
    _where(check)
    check.add_argument("--anchor", metavar="SEQ:HASH",
                       help="a head printed by an earlier verify: also fail when the trail was "
                            "cut or rewritten up to it")
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    check.set_defaults(func=cmd_verify)
    export = group.add_parser("export", help="write every record as JSON lines")
    _where(export)
    export.add_argument("--out", help="file to write (0600; default: standard output)")
    export.set_defaults(func=cmd_export)


def _where(parser) -> None:
    parser.add_argument("--home", help="the state home holding audit.db "
                                       "(default: $NEURALMIND_HOME, the config's, ~/.neuralmind)")
    parser.add_argument("--config", help="TOML config to take the home from")


def _trail(args) -> tuple[Iterator[dict], str]:
    """The records to read and where they are: the home's audit.db, or the shared database
    when the config names one (and no --home points at a file)."""
    settings = load_settings(args.config)
    shared = None if args.home else open_shared(settings, "tier2_audit", None)
    if shared is not None:
        return shared_records(shared), "the shared database"
    path = audit_path(Path(args.home).expanduser() if args.home else settings.home)
    return records(read_only(path)), str(path)


ANCHOR = re.compile(r"([1-9][0-9]*):([0-9a-fA-F]{64})")


def _anchor(text: str | None) -> tuple[int, str] | None:
    if text is None:
        return None
    if not (found := ANCHOR.fullmatch(text)):
        raise ValueError(f"--anchor {text!r}: expected SEQ:HASH as printed by `audit verify` "
                         "(a record number from 1, a colon, 64 hex digits)")
    return int(found[1]), found[2].lower()


def _usage(args) -> str | None:
    """What is wrong with ``--home`` or ``--out`` before any file is opened, if anything."""
    if args.home is not None and (why := no_directory(args.home)):
        return f"--home {args.home!r}: {why}"
    out = getattr(args, "out", None)
    if out is not None:
        target = Path(out).expanduser()
        if not out or target.is_dir():
            return f"--out {out!r}: " + ("a directory; name a file" if out else "name a file")
        if not target.parent.is_dir():
            return f"--out {out}: no folder {target.parent} to write it in"
    return None


def cmd_verify(args) -> int:
    try:
        if why := _usage(args):
            raise ValueError(why)
        anchor = _anchor(args.anchor)
    except ValueError as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    try:
        rows, path = _trail(args)
        verdict = verify(rows, anchor)
    except StoreUnavailable as ex:
        if args.json:  # a script reads the verdict on stdout either way
            print(json.dumps({"whole": False, "records": 0, "head_seq": None, "head_hash": None,
                              "broken": None, "error": str(ex)}))
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 1
    broken = verdict.broken
    if args.json:
        where = {"seq": broken.seq, "reason": broken.reason} if broken else None
        print(json.dumps({"whole": broken is None, "records": verdict.records,
                          "head_seq": verdict.head_seq, "head_hash": verdict.head_hash,
                          "broken": where}))
    elif broken:
        print(shown(f"audit trail BROKEN at record {broken.seq}: {broken.reason} "
                    f"({verdict.records} records before it hold; {path})"))
    else:
        print(f"audit trail whole: {verdict.records} records; head "
              f"{verdict.head_seq}:{verdict.head_hash} (keep it to pass as --anchor later)")
    return 1 if broken else 0


def cmd_export(args) -> int:
    if why := _usage(args):
        print(f"neuralmind: {why}", file=sys.stderr)
        return 2
    try:
        rows, _ = _trail(args)
        if args.out:  # a new 0600 file (what a trail holds is not for every user's eyes)
            with whole_file(Path(args.out).expanduser(), mode=0o600) as out:
                count = _write(rows, out)
            print(f"exported {count} records to {args.out}", file=sys.stderr)
        else:
            _write(rows, sys.stdout)
    except BrokenPipeError:  # `… | head`: the CLI's main ends quietly, the reader is served
        raise
    except (StoreUnavailable, OSError) as ex:
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 1
    return 0


def _write(rows, out) -> int:
    count = 0
    for row in rows:
        if why := malformed(row):
            raise StoreUnavailable(f"record {row['seq']} cannot be exported: {why} "
                                   "(`neuralmind audit verify` names where the chain breaks)")
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    return count
