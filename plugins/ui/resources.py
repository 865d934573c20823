"""The dashboard's routes: the page and its static files (package data, read once, served
with a strict Content-Security-Policy), and in loopback mode the one-time sign-in codes."""

from __future__ import annotations

import hashlib
import mimetypes
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from neuralmind import Model, NotFound, Unauthorized, operation

STATIC = Path(__file__).resolve().parent / "static"
PAGE = "index.html"
# no inline script or style anywhere: every script and sheet is a file of STATIC
CSP = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "connect-src 'self'", "manifest-src 'self'", "base-uri 'none'", "form-action 'none'",
    "frame-ancestors 'none'"])
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}


class Static:
    """The files of ``static/``, read once: bytes, media type and ETag by name."""

    def __init__(self, folder: Path = STATIC):
        self.files: dict[str, tuple[bytes, str, str]] = {}
        for path in sorted(folder.iterdir()):
            if path.is_file():
                data = path.read_bytes()
                kind = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or \
                    "application/octet-stream"
                self.files[path.name] = (data, kind, f'"{hashlib.sha256(data).hexdigest()[:16]}"')

    def send(self, req, resp, name: str) -> None:
        found = self.files.get(name)
        if found is None:
            raise NotFound(f"no dashboard file {name}")
        data, kind, etag = found
        for header, value in HEADERS.items():
            resp.set_header(header, value)
        resp.set_header("Cache-Control", "no-cache")  # revalidated: an upgrade shows at once
        resp.etag = etag
        if req.get_header("If-None-Match") == etag:
            resp.status = 304
            return
        resp.content_type = kind
        resp.data = data


class PageResource:
    def __init__(self, static: Static):
        self.static = static

    @operation(permission=None, media_type="text/html", include_in_schema=False)
    def on_get(self, req, resp):
        self.static.send(req, resp, PAGE)

    @operation(permission=None, include_in_schema=False)
    def on_get_asset(self, req, resp, name):
        self.static.send(req, resp, name)


class RootResource:
    """``/`` and ``/ui/``: where a browser pointed at the server's address lands."""

    @operation(permission=None, include_in_schema=False)
    def on_get(self, req, resp):
        resp.status = 303
        resp.location = "/ui"


class SignInCode(Model):
    code: str = Field(description="Single use; trade it at POST /v1/ui/sign-in")
    expires_at: str
    path: str = Field(description="`/ui#code=…`: the fragment never reaches a server or a log")


class SignInIn(Model):
    code: str = Field(min_length=1, max_length=200)


class SignedIn(Model):
    token: str


class SignInCodesResource:
    def __init__(self, codes):
        self.codes = codes

    @operation(permission="ui.sign_in", response=SignInCode, status=201, tags=["ui"],
               summary="A one-time code that signs the dashboard in with the caller's own token "
                       "(loopback mode; what `neuralmind ui` opens the browser with)")
    def on_post(self, req, resp):
        token = (req.get_header("Authorization") or "").partition(" ")[2].strip()
        code, expires = self.codes.issue(token)
        at = datetime.fromtimestamp(expires, UTC).isoformat(timespec="seconds")
        return SignInCode(code=code, expires_at=at.replace("+00:00", "Z"), path=f"/ui#code={code}")


class SignInResource:
    def __init__(self, codes):
        self.codes = codes

    @operation(permission=None, body=SignInIn, response=SignedIn, tags=["ui"],
               summary="Trade a one-time sign-in code for the token it stands for (once, "
                       "within its lifetime)",
               errors={401: "`sign_in_code_invalid`: unknown, used or expired"})
    def on_post(self, req, resp):
        token = self.codes.redeem(req.context.body.code)
        if token is None:
            raise Unauthorized("this sign-in code is unknown, used or expired: run `neuralmind "
                               "ui` again, or paste a token", code="sign_in_code_invalid")
        resp.set_header("Cache-Control", "no-store")
        return SignedIn(token=token)


def routes(kernel, settings, sign_in: bool) -> list[tuple]:
    page = PageResource(Static())
    root = RootResource()
    out = [("/", root), ("/ui/", root), ("/ui", page), ("/ui/assets/{name}", page, "asset")]
    if sign_in:
        from plugins.ui.codes import MIGRATIONS, Codes
        codes = kernel.state("ui.codes", lambda: Codes(
            kernel.open_database(kernel.home / "ui.db", MIGRATIONS), settings.sign_in_code_ttl_s))
        out += [("/v1/ui/sign-in-codes", SignInCodesResource(codes)),
                ("/v1/ui/sign-in", SignInResource(codes))]
    return out
