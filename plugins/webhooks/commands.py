"""``neuralmind webhook …``: manage hooks and their deliveries through the server's API."""

from __future__ import annotations

import sys

from neuralmind.commands.common import (CommandError, client, common_flags, emit, fields,
                                        path_id, ranged, table)

HOOK_COLUMNS = ("id", "enabled", "url", "events", "projects", "failing_since")
HOOK_DETAIL = ("id", "url", "events", "projects", "description", "enabled", "disabled_reason",
               "paused_at", "created_by", "created_at", "updated_at", "failing_since",
               "last_success_at", "secret_rotated_at", "previous_secrets_until")
DELIVERY_COLUMNS = ("id", "kind", "event_id", "status", "attempts", "last_status_code",
                    "last_latency_ms", "next_attempt_at", "last_error")


def _secret_note(hook) -> str:
    return (f"\n\nsecret: {hook.secret}\n(shown once: store it where the receiver can read it; "
            "docs/webhooks.md shows how to verify signatures)")


def cmd_add(args) -> int:
    if args.target is None:  # `--url` is every command's server, easily taken for the hook's
        raise CommandError("give the hook's URL as the argument: `neuralmind webhook add "
                           "HOOK_URL -e KIND`" + (f" (--url {args.url} names the NeuralMind "
                           "server to call, not where events go)" if args.url else ""))
    hook = client(args).webhooks.create(args.target, args.event, projects=args.project,
                                        description=args.description or "")
    return emit(args, hook.raw, text=fields(hook, HOOK_DETAIL) + _secret_note(hook))


def cmd_list(args) -> int:
    rows = [h.raw for h in client(args).webhooks.list()]
    return emit(args, rows, rows=rows, columns=HOOK_COLUMNS)


def cmd_show(args) -> int:
    hook = client(args).webhooks.get(args.id)
    return emit(args, hook.raw, text=fields(hook, HOOK_DETAIL))


def cmd_update(args) -> int:
    changes = {"url": args.target, "events": args.event, "description": args.description,
               "enabled": args.enabled}
    changes = {k: v for k, v in changes.items() if v is not None}
    if args.all_projects:
        changes["projects"] = None
    elif args.project:
        changes["projects"] = args.project
    if not changes:
        print("neuralmind: nothing to change: give --target, --event, --project, --all-projects, "
              "--description, --enable or --disable", file=sys.stderr)
        return 2
    hook = client(args).webhooks.update(args.id, **changes)
    return emit(args, hook.raw, text=fields(hook, HOOK_DETAIL))


def cmd_delete(args) -> int:
    client(args).webhooks.delete(args.id)
    return emit(args, {"deleted": args.id}, text=f"deleted webhook {args.id} and its deliveries")


def cmd_rotate(args) -> int:
    hook = client(args).webhooks.rotate_secret(args.id, keep_previous_s=args.keep_previous)
    earlier = hook.raw.get("previous_secrets_until") or []
    note = (f"\nthe previous secret also signs until {hook.raw.get('previous_secret_until')}"
            if args.keep_previous else "\nno earlier secret signs anything any more")
    if args.keep_previous and len(earlier) > 1:
        note += f"\nand {len(earlier) - 1} earlier one(s) until {', '.join(earlier[1:])}"
    return emit(args, hook.raw, text=f"new secret for {hook.id}: {hook.secret}{note}")


def cmd_test(args) -> int:
    d = client(args).webhooks.test(args.id)
    text = (f"ping {d.id}: {d.status}, answered {d.last_status_code} in {d.last_latency_ms} ms"
            if d.status == "delivered" else f"ping {d.id}: {d.status}: {d.last_error}")
    emit(args, d.raw, text=text)
    return 0 if d.status == "delivered" else 1


def cmd_deliveries(args) -> int:
    items = client(args).webhooks.deliveries(args.id, status=args.status)
    rows = [d.raw for _, d in zip(range(args.limit), items)]
    if args.json:
        return emit(args, rows)
    print(table(rows, DELIVERY_COLUMNS) if rows else "(none)")
    return 0


def cmd_redeliver(args) -> int:
    d = client(args).webhooks.redeliver(args.id, args.delivery)
    return emit(args, d.raw, text=f"{d.id} queued again for {d.webhook_id}")


VERBS = {  # name: (what it runs, its help, whether it takes a hook id)
    "add": (cmd_add, "subscribe a URL; prints the signing secret once", False),
    "list": (cmd_list, "the hooks you manage", False),
    "show": (cmd_show, "one hook", True),
    "update": (cmd_update, "change a hook, or pause/resume it", True),
    "delete": (cmd_delete, "delete a hook and its deliveries", True),
    "rotate-secret": (cmd_rotate, "replace the signing secret; prints the new one", True),
    "test": (cmd_test, "send a ping now; exit 1 unless the receiver took it", True),
    "deliveries": (cmd_deliveries, "the hook's deliveries, newest first", True),
    "redeliver": (cmd_redeliver, "queue a finished delivery again", True),
}


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    group = command_group(subparsers, "webhook",
                          help="signed deliveries of events to your services (admin)")
    flags = common_flags()
    parsers = {}
    for name, (func, text, with_id) in VERBS.items():
        parsers[name] = group.add_parser(name, parents=[flags], help=text)
        if with_id:
            parsers[name].add_argument("id", type=path_id("a webhook id",
                                                          "`neuralmind webhook list`"),
                                       help="the webhook id (wh_…)")
        parsers[name].set_defaults(func=func)
    add, upd = parsers["add"], parsers["update"]
    add.add_argument("target", metavar="HOOK_URL", nargs="?",  # missing: cmd_add says why
                     help="where to POST events: https://… (http where the operator allows "
                          "it); required, and not --url, which names the NeuralMind server")
    add.add_argument("--event", "-e", action="append", required=True, metavar="KIND",
                     help="an event kind, or a prefix ending in * (memory.*); repeatable")
    add.add_argument("--project", "-p", action="append", metavar="ID",
                     help="only this project's events (repeatable; default every project)")
    add.add_argument("--description", "-d")
    upd.add_argument("--target", metavar="URL", help="send to this URL instead")
    upd.add_argument("--event", "-e", action="append", metavar="KIND",
                     help="replace the event kinds (repeatable)")
    scope = upd.add_mutually_exclusive_group()
    scope.add_argument("--project", "-p", action="append", metavar="ID",
                       help="replace the projects (repeatable)")
    scope.add_argument("--all-projects", action="store_true", help="every project")
    upd.add_argument("--description", "-d")
    onoff = upd.add_mutually_exclusive_group()
    onoff.add_argument("--enable", dest="enabled", action="store_const", const=True,
                       help="resume (or enable a hook disabled for failing): send what it kept")
    onoff.add_argument("--disable", dest="enabled", action="store_const", const=False,
                       help="pause: send nothing, queue the events of the next keep_days")
    parsers["rotate-secret"].add_argument(
        "--keep-previous", type=ranged(0, 86400), default=0, metavar="SECONDS",
        help="keep signing with the replaced secret too for this long (0–86400); "
             "0 ends every earlier secret's grace")
    parsers["deliveries"].add_argument("--status", choices=["pending", "delivered", "failed"])
    parsers["deliveries"].add_argument("--limit", type=ranged(1), default=50,
                                       help="show at most this many (default 50)")
    parsers["redeliver"].add_argument(
        "delivery", type=path_id("a delivery id", "`neuralmind webhook deliveries ID`"),
        help="the delivery id (dl_…)")
