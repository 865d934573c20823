"""``/v1/auth/*``: who am I, and the admin's view of the tokens file (never a secret)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import Field

from neuralmind import Conflict, Model, NotFound, Unavailable, iso_time, operation
from plugins.auth.tokens import (SHORT_ID, AmbiguousId, TokenError, TokenRecord, Tokens,
                                 expiry_instant, instant)


class WhoAmI(Model):
    actor: str
    role: str
    kind: str = Field(description="`loopback` (the local user) or `token` (server mode)")
    projects: list[str] | None = Field(description="Projects the credentials reach; null: all")
    permissions: list[str] = Field(description="Permissions the role holds")


class TokenOut(Model):
    id: str = Field(description="First 8 hex characters of sha256(token)")
    actor: str
    role: str
    projects: list[str] | str = Field(description='A list of project ids, or "*"')
    created_at: str
    expires_at: str | None = None
    expired: bool
    set_aside: str | None = Field(None, description=(
        "why the token is refused though stored: its entry holds a name an older NeuralMind "
        "let through and today's rules refuse (revoke it, and create a new one); null when "
        "the token is in use"))


class TokenList(Model):
    items: list[TokenOut]


def token_out(h: str, rec: TokenRecord) -> TokenOut:
    """A token as every route shows a time (UTC, to the millisecond): a stored one may be in
    whole seconds, in another zone, or a date for an expiry (the instant that day ends)."""
    expires = iso_time(expiry_instant(rec.expires_at)) if rec.expires_at is not None else None
    return TokenOut(id=h[:SHORT_ID], actor=rec.actor, role=rec.role, projects=rec.projects,
                    created_at=iso_time(instant(rec.created_at)), expires_at=expires,
                    expired=rec.expired(), set_aside=rec.set_aside)


@contextmanager
def stored_tokens() -> Iterator[None]:
    """Reading and revoking tokens: stored tokens a hand edit broke are a 503 saying what is
    wrong, never a 500 (the server refuses every token until they are fixed)."""
    try:
        yield
    except AmbiguousId as ex:  # two hashes sharing 8 hex characters: ask for the CLI
        raise Conflict(str(ex), code="token_id_ambiguous") from None
    except TokenError as ex:
        raise Unavailable(str(ex)) from None


class WhoAmIResource:
    def __init__(self, kernel):
        self.kernel = kernel

    @operation(permission="auth.whoami", response=WhoAmI, tags=["auth"],
               summary="The caller as the server sees them: actor, role, projects, permissions")
    def on_get(self, req, resp):
        actor = req.context.actor
        perms = [p for p in sorted(self.kernel.permissions) if self.kernel.allowed(actor, p)]
        return WhoAmI(actor=actor.id, role=actor.role, kind=actor.kind,
                      projects=list(actor.projects) if actor.projects is not None else None,
                      permissions=perms)


class TokensResource:
    def __init__(self, kernel, tokens: Tokens):
        self.kernel = kernel
        self.tokens = tokens

    @operation(permission="tokens.manage", response=TokenList, tags=["auth"],
               summary="Server-mode tokens (ids, actors, roles; never the secrets)")
    def on_get(self, req, resp):
        with stored_tokens():
            return TokenList(items=[token_out(h, r) for h, r in self.tokens.listing()])

    @operation(permission="tokens.manage", status=204, tags=["auth"],
               summary="Revoke a token by its id; every worker refuses it at its next request")
    def on_delete_item(self, req, resp, token_id):
        with stored_tokens():
            if len(token_id) != SHORT_ID or token_id not in {
                    h[:SHORT_ID] for h, _ in self.tokens.listing()}:
                raise NotFound(f"no token with id {token_id}", code="token_not_found")
            removed = self.tokens.revoke(short_id=token_id)
        for h, rec in removed:
            self.kernel.emit("token.revoked", actor=req.context.actor,
                             request_id=req.context.request_id,
                             data={"token_id": h[:SHORT_ID], "token_actor": rec.actor,
                                   "role": rec.role, "projects": rec.projects})
