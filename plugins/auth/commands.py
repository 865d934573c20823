"""``neuralmind token …``: server-mode tokens (create, list, revoke) and the loopback token
(show, rotate). No server needs to run: the server re-reads both files when they change.

The mode is the config's (``--config`` or ``NEURALMIND_CONFIG``): ``create`` refuses loopback
mode and ``show``/``rotate`` refuse server mode, since a server accepts only its own mode's
tokens and a token it would answer with 401 helps nobody.

Token changes are also written to the kernel's event table (``token.created`` …) — made with
the kernel's migrations when no server has run in the state home yet — so ``/v1/events`` and
the audit see them; ``track_event`` plugins are not called from the CLI (no kernel runs
here), see docs/security.md. An event that cannot be written is said on stderr.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys

from neuralmind import KERNEL_PERMISSIONS, load_settings, open_shared, record_event, unreachable
from plugins.auth import loopback
from plugins.auth.roles import AUTH_PERMISSIONS, auth_section, known_roles, role_holds
from plugins.auth.schema import PG_MIGRATIONS
from plugins.auth.tokens import (ACTOR_MAX, SHORT_ID, TokenError, TokenRecord, Tokens,
                                 parse_expiry, plain, token_store)


class DatabaseDown(TokenError):
    """The shared database cannot be reached: no fault of the command's (exit 1)."""

    exit_code = 1


def create_command(settings) -> str:
    """The ``token create`` line that adds a token the server of ``settings`` reads: with its
    config, whose mode and tokens file the CLI takes (without one it is loopback mode)."""
    if settings.source is None:
        return ("`neuralmind token create --config F --actor A --role R` (F: a config with "
                "[server] allow_remote = true)")
    return f"`neuralmind token create --config {shlex.quote(settings.source)} --actor A --role R`"


def set_aside_line(settings, where: str, aside: dict[str, TokenRecord]) -> str:
    """One line for the tokens set aside (``TokenRecord.set_aside``): each by id, with what is
    wrong and the ``token revoke`` that removes it (with the config of ``settings``)."""
    from neuralmind.commands.common import counted
    config = f" --config {shlex.quote(settings.source)}" if settings.source is not None else ""
    each = "; ".join(f"{h[:SHORT_ID]}: {rec.set_aside} (remove it: `neuralmind token revoke"
                     f"{config} {h[:SHORT_ID]}`)" for h, rec in sorted(aside.items()))
    return (f"{counted(len(aside), 'token')} of {where} set aside, refused (401) like revoked "
            f"ones: an older NeuralMind wrote names this one does not take — {each}; give "
            f"their users new tokens with {create_command(settings)}")


class _Said(logging.Handler):
    """What the event log says while a command's event is written, kept for one warning."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _record(settings, kind: str, data: dict) -> None:
    """The event of a change already made: one that cannot be written is a warning, in one
    line with the reason (the change stands; exit 0), never silence — the audit trail misses
    it."""
    events_log, said = logging.getLogger("neuralmind.events"), _Said()
    events_log.addHandler(said)
    events_log.propagate = False
    try:
        written = record_event(settings, kind, data)
    finally:
        events_log.removeHandler(said)
        events_log.propagate = True
    if not written:
        why = "; ".join(said.lines) or "the event log could not be written"
        print(f"neuralmind: warning: {why} — /v1/events and the audit trail miss this change",
              file=sys.stderr)


def _settings(args):
    return load_settings(args.config)


def _server_settings(args):
    settings = _settings(args)
    if not settings.server_mode:
        raise TokenError("per-user tokens need server mode: the loopback daemon accepts only "
                         "its own token (`neuralmind token show`); give a config with "
                         "[server] allow_remote = true via --config (docs/security.md)")
    return settings


def _loopback_settings(args):
    settings = _settings(args)
    if settings.server_mode:
        raise TokenError("server mode uses no loopback token (the config sets [server] "
                         "allow_remote = true); give each user a token with "
                         + create_command(settings))
    return settings


def _tokens(settings) -> Tokens:
    """The tokens of ``settings``; a shared database out of reach is said at once, where its
    pool would retry for 30 s."""
    if settings.storage.backend == "postgres" and (why := unreachable(settings.storage.dsn)):
        raise DatabaseDown(why)
    return token_store(settings, open_shared(settings, "auth", PG_MIGRATIONS))


def _projects(text: str, settings) -> list[str] | str:
    if text.strip() == "*":
        return "*"
    ids = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not ids:
        raise TokenError("--projects: give project ids separated by commas, or *")
    if not all(map(plain, ids)):
        raise TokenError(f"--projects {text!r} holds a character that does not print (a "
                         "newline, a tab, a control character): give ids separated by commas")
    configured = {p.id for p in settings.projects}
    unknown = [p for p in ids if configured and p not in configured]
    if unknown:
        raise TokenError(f"--projects: {', '.join(unknown)} not in the config's [[projects]] "
                         f"({', '.join(sorted(configured))})")
    return ids


def withheld(section, role: str) -> list[str]:
    """The permissions ``role`` holds that reach beyond any project, which a token of it
    limited to projects never holds — among those known here: the kernel's and this plugin's
    (the CLI runs without the other plugins' registrations)."""
    return [p.name for p in (*KERNEL_PERMISSIONS, *AUTH_PERMISSIONS)
            if p.beyond_projects and role_holds(section, role, p)]


def scoped_note(role: str, projects: list[str], names: list[str]) -> str:
    """One line: what a token of ``role`` limited to ``projects`` cannot do (docs/security.md,
    "Tokens limited to projects")."""
    return (f"note: limited to projects {', '.join(projects)}, this {role} token holds the "
            f"role's permissions in those projects only: not {', '.join(names)}, nor any "
            "plugin's permission that reaches beyond projects — those need a token for every "
            "project (--projects '*')")


def cmd_create(args) -> int:
    settings = _server_settings(args)
    if not args.actor.strip():
        raise TokenError("--actor must not be empty: name who the token identifies "
                         "(e.g. --actor alice)")
    if len(args.actor) > ACTOR_MAX:
        raise TokenError(f"--actor is {len(args.actor)} characters long: a name has at most "
                         f"{ACTOR_MAX} (it is shown in every list, event and history entry)")
    if not plain(args.actor):
        raise TokenError(f"--actor {args.actor!r} holds a character that does not print (a "
                         "newline, a tab, a control character): give a name on one line")
    roles = known_roles(auth_section(settings))
    if args.role not in roles:
        raise TokenError(f"--role {args.role!r}: one of {', '.join(roles)}")
    projects = _projects(args.projects, settings)
    expires = parse_expiry(args.expires) if args.expires is not None else None
    held_beyond = withheld(auth_section(settings), args.role) if projects != "*" else []
    tokens = _tokens(settings)
    token, digest, rec = tokens.create(args.actor, args.role, projects, expires)
    _record(settings, "token.created", {"token_id": digest[:SHORT_ID], "token_actor": rec.actor,
                                        "role": rec.role, "projects": rec.projects})
    if held_beyond:  # stderr, like the reminder: stdout stays the description and the token
        print(scoped_note(args.role, projects, held_beyond), file=sys.stderr)
    if args.json:  # times as the listing shows them
        from plugins.auth.resources import token_out
        print(json.dumps({"token": token, "id": digest[:SHORT_ID], "actor": rec.actor,
                          "role": rec.role, "projects": rec.projects,
                          "expires_at": token_out(digest, rec).expires_at}))
        return 0
    print(f"token {digest[:SHORT_ID]} for {rec.actor} (role {rec.role}, projects "
          f"{rec.projects if rec.projects == '*' else ','.join(rec.projects)}"
          f"{', expires ' + rec.expires_at if rec.expires_at else ''}) added to {tokens.where}.")
    print("It is shown only this once; send it as `Authorization: Bearer <token>`:", file=sys.stderr)
    print(token)
    return 0


def cmd_list(args) -> int:
    from neuralmind.commands.common import shown
    from plugins.auth.resources import token_out
    settings = _settings(args)
    tokens = _tokens(settings)
    listed = tokens.listing()
    rows = [(token_out(h, r), r.set_aside) for h, r in listed]
    aside = {h: r for h, r in listed if r.set_aside is not None}
    if aside:  # stderr: stdout stays the listing
        print(f"neuralmind: warning: {set_aside_line(settings, tokens.where, aside)}",
              file=sys.stderr)
    if args.json:
        print(json.dumps([{**r.model_dump(), "set_aside": why} for r, why in rows]))
        return 0
    if not rows:
        print(shown(f"no tokens — add one with {create_command(settings)}"
                    if settings.server_mode else "no per-user tokens: loopback mode takes only "
                    "its own (`neuralmind token show`); per-user tokens need server mode "
                    "(docs/security.md)"))
        return 0
    print(f"{'ID':8}  {'ACTOR':20}  {'ROLE':8}  {'PROJECTS':20}  {'CREATED':24}  EXPIRES")
    # stored text, shown escaped: a name set aside (an older NeuralMind's) may hold a tab or
    # another control character, never sent to the terminal
    for r, why in rows:
        projects = r.projects if isinstance(r.projects, str) else ",".join(r.projects)
        expires = ((r.expires_at or "never") + (" (expired)" if r.expired else "")
                   + (f" (set aside: {why})" if why else ""))
        print(shown(f"{r.id:8}  {r.actor:20}  {r.role:8}  {projects:20}  {r.created_at:24}  "
                    f"{expires}"))
    return 0


def cmd_revoke(args) -> int:
    from neuralmind.commands.common import shown
    if args.actor is not None and not args.actor.strip():
        raise TokenError("--actor must not be empty: name whose tokens to revoke")
    if (args.id is None) == (args.actor is None):
        raise TokenError("give a token id (`neuralmind token list` shows them) or --actor"
                             + (", not both" if args.id else ""))
    settings = _settings(args)
    removed = _tokens(settings).revoke(short_id=args.id, actor=args.actor)
    if not removed:
        print(f"neuralmind: no token matches {args.id or args.actor}", file=sys.stderr)
        return 1
    for digest, rec in removed:
        _record(settings, "token.revoked", {"token_id": digest[:SHORT_ID],
                                       "token_actor": rec.actor, "role": rec.role,
                                       "projects": rec.projects})
        # shown escaped: the actor of a token set aside may hold a tab (TokenRecord.set_aside)
        print(shown(f"revoked {digest[:SHORT_ID]} ({rec.actor}, {rec.role})"))
    return 0


def cmd_show(args) -> int:
    settings = _loopback_settings(args)
    settings.home.mkdir(parents=True, exist_ok=True)
    token, replaced = loopback.provide_token(settings.home)
    if replaced:  # the file was emptied or deleted: a new token, as a rotation makes one
        _rotated(settings, "the token file held no token: a new one replaces the lost one")
    print(token)
    return 0


def cmd_rotate(args) -> int:
    settings = _loopback_settings(args)
    token = loopback.rotate(settings.home)
    _rotated(settings, "the old token is refused from now on")
    print(token)
    return 0


def _rotated(settings, what: str) -> None:
    """Record a new loopback token (the discovery file already holds it) and say so."""
    _record(settings, "token.rotated", {"token": "loopback"})
    print(f"{what}; the running server reads the new one", file=sys.stderr)


def _guarded(fn):
    def run(args) -> int:
        try:
            return fn(args)
        except TokenError as ex:
            print(f"neuralmind: {ex}", file=sys.stderr)
            return ex.exit_code
    return run


def add_commands(subparsers) -> None:
    from neuralmind import command_group
    group = command_group(subparsers, "token", help="API tokens: loopback (show, rotate) and "
                          "server mode (create, list, revoke)")

    def sub(name: str, fn, help: str):
        p = group.add_parser(name, help=help)
        p.add_argument("--config", help="TOML config (its [server] tokens_file and home)")
        p.set_defaults(func=_guarded(fn))
        return p

    create = sub("create", cmd_create, "server mode: add a token; prints it once")
    create.add_argument("--actor", required=True, help="who the token identifies (e.g. alice)")
    create.add_argument("--role", required=True, help="reader, builder, admin or a config role")
    create.add_argument("--projects", default="*", help="comma-separated project ids, or * (default)")
    create.add_argument("--expires", help="a date (the token lasts through it, UTC), an ISO "
                        "datetime, or a duration: 30d, 12h, 15m")
    create.add_argument("--json", action="store_true")
    lst = sub("list", cmd_list, "list server-mode tokens (ids, never secrets)")
    lst.add_argument("--json", action="store_true")
    revoke = sub("revoke", cmd_revoke, "revoke a token by id (from `token list`) or all of an actor's")
    revoke.add_argument("id", nargs="?")
    revoke.add_argument("--actor")
    sub("show", cmd_show, "loopback mode: print the loopback token (made on first use)")
    sub("rotate", cmd_rotate, "loopback mode: replace the loopback token; the old one stops "
        "working at once")
