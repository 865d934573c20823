"""``neuralmind ui``: open the dashboard signed in, without the token ever being in a URL.

The command runs as the user, so it can use the local token: it asks the daemon for a
one-time code (valid ``[ui] sign_in_code_ttl_s``, 60 s by default, usable once) and opens
``/ui#code=…``. The fragment never reaches a server or a log, and the page trades it for the
token over POST, then removes it from the address bar. The browser is pointed at a small
redirect file in the state home (0600) rather than at the URL itself, so the code is not on
a command line other users can read (``ps``)."""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import os
import sys
import webbrowser

REDIRECT = "ui-open.html"


def add_commands(subparsers) -> None:
    from neuralmind.commands.common import common_flags
    p = subparsers.add_parser("ui", parents=[common_flags()],
                              help="open the dashboard in a browser, signed in")
    p.add_argument("--no-browser", action="store_true",
                   help="print the one-time sign-in URL instead of opening a browser")
    p.set_defaults(func=cmd_ui)


def cmd_ui(args) -> int:
    from neuralmind.client import NotFound
    from neuralmind.commands.common import client, err
    explicit = bool(args.url or os.environ.get("NEURALMIND_API_URL"))
    # the settings' home (NEURALMIND_HOME, else the config's [kernel] home): the daemon
    # `neuralmind daemon start` runs is found there, never a second one started elsewhere
    nm = client(args, autostart=True)
    try:
        made = nm._json("POST", "/v1/ui/sign-in-codes")
    except NotFound as ex:
        if ex.code != "not_found":
            raise
        err(_no_code(nm, args, explicit))
        return 1
    url = nm.url + made["path"]
    if args.json:
        print(json.dumps({"url": url, "expires_at": made["expires_at"]}))
        return 0
    if args.no_browser or not _open(nm.home, url):
        print(f"open this link {_within(made['expires_at'])}; it signs in once:\n{url}")
        return 0
    print(f"opened the dashboard at {nm.url}/ui (signed in; the link works once)")
    return 0


def _no_code(nm, args, explicit: bool) -> str:
    """Why the server made no sign-in code, and what to do: a team server serves /ui without
    codes (a token is pasted there); one that serves no /ui at all — the ui plugin off, or
    ``[ui] enabled = false`` — is said to, with how to serve it, never sent to a page that
    is not there."""
    from neuralmind.cli import daemon_serves, not_served
    from neuralmind.client import NotFound
    try:
        nm.request("GET", "/ui")
    except NotFound:
        served = None if explicit else daemon_serves(nm.home)[1]
        if served is not None and "ui" not in served and (why := not_served(args)):
            return f"{nm.url} serves no dashboard: {why}"  # started before ui was enabled
        restart = ("the server" if explicit else
                   "the daemon (`neuralmind daemon stop`, then `neuralmind daemon start`)")
        return (f'{nm.url} serves no dashboard: add "ui" to [kernel] plugins in its config (and '
                "`[ui] enabled = true` on a team server, or where it was set false), then "
                f"restart {restart}")
    return (f"this server makes no sign-in codes (server mode): open {nm.url}/ui and paste a "
            "token")


def _within(expires_at: str) -> str:
    """How long the link works, from the code's ``expires_at`` (the server's ``[ui]
    sign_in_code_ttl_s``, 1–600 s, not this machine's config): ``within 60 s (until
    14:03:07)``, the time in this machine's zone."""
    until = dt.datetime.fromisoformat(expires_at)
    left = max(0, math.ceil((until - dt.datetime.now(dt.timezone.utc)).total_seconds()))
    return f"within {left} s (until {until.astimezone():%H:%M:%S})"


def _open(home, url: str) -> bool:
    """Open ``url`` through a private redirect file; False when no browser can be started."""
    from neuralmind import write_private
    page = home / REDIRECT
    target = html.escape(url, quote=True)
    write_private(page, f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" '
                        f'content="0;url={target}"><title>NeuralMind</title>'
                        f'<a href="{target}">Open the NeuralMind dashboard</a>\n')
    try:
        return webbrowser.open(page.as_uri())
    except webbrowser.Error as ex:
        print(f"neuralmind: no browser: {ex}", file=sys.stderr)
        return False
