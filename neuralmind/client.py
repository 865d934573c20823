"""The NeuralMind Python client: the /v1 contract with mem0-shaped verbs, stdlib only.

    from neuralmind.client import NeuralMindClient
    nm = NeuralMindClient()              # the local daemon, found through $NEURALMIND_HOME/daemon.json
    repo = nm.project(".")               # registers (idempotent) and returns a handle
    repo.memories.add(title="Use WAL", rationale="readers never block")
    for m in repo.memories.search("sqlite concurrency"):
        print(m.id, m.title, m.score)

Only the standard library is imported, so an agent's hook can import this module for free.
Responses become small frozen dataclasses; each keeps the full response dict in ``.raw``,
so a field the server adds later is reachable before the client knows its name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 30.0
QUERY_TIMEOUT = 120.0
BUILD_TIMEOUT = 600.0
RETRIES = 3
BACKOFF_S = 0.25
# how long a server may still accept only the token it replaced: each worker re-reads the
# token file at most this often (plugins/auth/loopback.py, LoopbackToken.RECHECK_S)
TOKEN_RECHECK_S = 0.25
JSONL = "application/x-ndjson"
# a body this small is in the socket's buffers whole before a server could stop reading it:
# a connection broken under it is no refusal of its size (413), but a server gone or hung up
SOCKET_SLACK = 64 * 1024
# 503s no retry helps: state that cannot be written or was written by a newer release, no model
LASTING = frozenset({"storage_read_only", "storage_newer", "semantic_unavailable",
                     "too_many_open_files"})
# the last line of a Markdown export that was not cut short
EXPORT_END = re.compile(r"^_End of the export: \d+ records\._\n\Z", re.M)
PROJECT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MEMORIES = "/v1/projects/{project_id}/memories"  # routes as the OpenAPI document names them
PAGING = ("limit", "cursor")
# where a refused token came from when it was the argument (``Unauthorized.token_from``); the
# command line, whose --token it was, says so in its own words
TOKEN_GIVEN = "the token sent was the one given (token=)"


# -- errors --------------------------------------------------------------------------------

class NeuralMindError(Exception):
    """Anything this client raises."""


class DaemonNotRunning(NeuralMindError, ConnectionError):
    """No server answers at the discovered (or given) address."""


class NotAServerURL(NeuralMindError, ValueError):
    """The URL given, in ``NEURALMIND_API_URL`` or in the daemon's file is not
    http(s)://host[:port][/path]."""


class NotAToken(NeuralMindError, ValueError):
    """The token given, in ``NEURALMIND_API_TOKEN`` or in the home is not one a header carries."""


class TimedOut(NeuralMindError, TimeoutError):
    """The server took longer than the call's timeout to answer (a read is not retried).
    ``hint``, the message's end, tells a caller of this module how to wait longer; the
    command line, which has no such setting, shows ``message`` alone."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(f"{message} ({hint})" if hint else message)
        self.message, self.hint = message, hint


class BrokenAnswer(NeuralMindError, ConnectionError):
    """Something answered at the server's address, but not with HTTP, or its answer broke off
    before its end (a read is retried, a write never: it may have landed)."""


class NeuralMindAPIError(NeuralMindError):
    """The server answered with the error envelope. ``resent``: the answer is to the request
    sent again after an earlier attempt's answer was lost (that attempt may have landed).
    ``method``: the request's (``GET``: a read was refused, nothing a caller wrote)."""

    resent = False
    method: str | None = None

    def __init__(self, status: int, code: str, message: str, details: dict | None = None,
                 request_id: str | None = None, headers: dict[str, str] | None = None):
        self.status, self.code, self.message = status, code, message
        self.details = details or {}
        self.request_id = request_id
        self.headers = headers or {}
        super().__init__(f"{self._said()} ({status} {code}, request {request_id})")

    def _said(self) -> str:
        """The message with what is wrong in each field of a 422."""
        wrong = "; ".join(self.field_errors())
        return f"{self.message}{': ' + wrong if wrong else ''}"

    def field_errors(self) -> list[str]:
        """``field: what is wrong`` for each error of a 422, unless the message already says
        it (``/x is not a directory``): ``confidence: Input should be less than or equal to
        1``."""
        errors = self.details.get("errors") if isinstance(self.details, dict) else None
        lines = []
        for error in errors if isinstance(errors, list) else ():
            loc = list(error.get("loc", []))
            if loc and loc[0] in ("body", "query"):
                loc = loc[1:]
            name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
            msg = error.get("msg", "")
            if msg and msg not in self.message:
                lines.append(f"{name or 'body'}: {msg}")
        return lines


class ValidationFailed(NeuralMindAPIError):
    """400 or 422: the request was refused as it stands; ``details["errors"]`` says why."""


class Unauthorized(NeuralMindAPIError):
    """401: no token, or a wrong one. ``token_from`` says where the token sent came from (the
    argument, ``NEURALMIND_API_TOKEN``, the home's files) — never the token itself."""

    def __init__(self, *args, token_from: str | None = None, **kw):
        self.token_from = token_from
        super().__init__(*args, **kw)

    def _said(self) -> str:
        return f"{super()._said()}; {self.token_from}" if self.token_from else super()._said()


class Forbidden(NeuralMindAPIError):
    """403: the token may not do this (or the path is reserved, or the Host is not allowed)."""


class NotFound(NeuralMindAPIError):
    """404: no such project, memory or job (or it is out of the token's reach)."""


class Conflict(NeuralMindAPIError):
    """409 (exists, busy, already finished) or 412 (``If-Match`` no longer matches)."""


class RateLimited(NeuralMindAPIError):
    """429: wait ``retry_after`` seconds."""

    @property
    def retry_after(self) -> float:
        value = self.headers.get("retry-after") or self.details.get("retry_after") or 1
        try:
            return float(value)
        except (TypeError, ValueError):
            return 1.0


class Unavailable(NeuralMindAPIError):
    """503: try later (or, for ``semantic_unavailable``, use keyword search)."""


_BY_STATUS = {400: ValidationFailed, 422: ValidationFailed, 401: Unauthorized, 403: Forbidden,
              404: NotFound, 409: Conflict, 412: Conflict, 429: RateLimited, 503: Unavailable}


def _api_error(resp: _Response, token_from: str | None = None) -> NeuralMindError:
    """What an error status says: its envelope's :class:`NeuralMindAPIError` subclass (a 401
    saying where the token sent came from, ``token_from``) — or, for a body that is no
    envelope (another web server's error page at the address), a :class:`BrokenAnswer` saying
    so, as for a success whose body is not JSON."""
    try:
        err = json.loads(resp.body)["error"]
        code, message = err.get("code", "http_error"), err.get("message", "")
        details, request_id = err.get("details") or {}, err.get("request_id")
    except ValueError:
        return resp.not_neuralmind("not JSON")
    except (KeyError, TypeError, AttributeError):
        return resp.not_neuralmind("JSON but no error envelope")
    cls = _BY_STATUS.get(resp.status, NeuralMindAPIError)
    said = {"token_from": token_from} if cls is Unauthorized else {}
    return cls(resp.status, code, message, details, request_id, resp.headers, **said)


# -- response types ------------------------------------------------------------------------

def _build(cls, data: dict[str, Any], **extra):
    """``cls`` from a response dict: known fields picked, the rest reachable through ``raw``.
    A record is known by its ``id``: a KeyError without one (``_json`` says the answer is
    not NeuralMind's), never a record of Nones."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} from {type(data).__name__}, not an object")
    values = dict(extra)
    for f in dataclasses.fields(cls):
        if f.name == "raw" or f.name in extra:
            continue
        if f.name in data or f.name == "id":
            values[f.name] = data[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = None
    return cls(**values, raw=data)


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    path: str | None = None
    registered_at: str | None = None
    alias: bool = False
    status: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    status: str
    project_id: str | None = None
    progress: dict = field(default_factory=dict)
    result: Any = None
    error: dict | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def finished(self) -> bool:
        return self.status not in ("queued", "running")


@dataclass(frozen=True)
class Memory:
    id: str
    title: str
    rationale: str
    status: str | None = None
    effective_status: str | None = None
    decision_type: str | None = None
    kind: str | None = None
    importance: float | None = None
    pinned: bool = False
    strength: float | None = None
    confidence: float | None = None
    files_affected: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    commit_sha: str | None = None
    author: str | None = None
    agent: str | None = None
    session_id: str | None = None
    review_by: str | None = None
    evidence: list = field(default_factory=list)
    rejected_alternatives: list = field(default_factory=list)
    dependency_constraints: list = field(default_factory=list)
    created_at: str | None = None
    updated_at: str | None = None
    last_accessed_at: str | None = None
    access_count: int = 0
    score: float | None = None
    linked_from: dict | None = None
    possible_duplicates: list = field(default_factory=list)
    contradictions: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class SearchHit:
    id: str
    label: str | None = None
    file_type: str | None = None
    source_file: str | None = None
    line: int | None = None
    score: float | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Tokens:
    total: int = 0
    l0: int = 0
    l1: int = 0
    l2: int = 0
    l3: int = 0


@dataclass(frozen=True)
class QueryResult:
    context: str
    tokens: Tokens
    project_id: str | None = None
    question: str | None = None
    layers_used: list = field(default_factory=list)
    reduction_ratio: float | None = None
    search_hits: int | None = None
    trace: Any = None
    warning: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class AskResult:
    """An answer with its numbered sources; ``cited`` are the numbers the answer cites."""

    answer: str
    sources: list = field(default_factory=list)
    cited: list = field(default_factory=list)
    provider: str | None = None
    model: str | None = None
    notices: list = field(default_factory=list)
    question: str | None = None
    project_id: str | None = None
    ms: float | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class AskEvent:
    """One event of a streamed answer: ``sources``, then ``delta`` (``data["text"]``), then
    ``done``."""

    kind: str
    data: dict


@dataclass(frozen=True)
class Event:
    id: int | None
    kind: str
    at: str | None = None
    project_id: str | None = None
    actor: str | None = None
    request_id: str | None = None
    data: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Page:
    """One page of a listing; listing methods iterate every page for you."""

    items: list
    next_cursor: str | None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class MCPAnswer:
    """What ``/v1/mcp`` answered: the session an ``initialize`` opened, and the JSON-RPC
    messages, read as they arrive."""

    session_id: str | None
    messages: Iterator[dict[str, Any]]


class Results(list):
    """A search's hits — a list, as before — with what the search said besides them: the
    ``mode`` it ran (a hybrid search without a model runs keyword), its ``notice`` (why it ran
    so, and for a memory search that found nothing, that nothing relevant was found or that no
    record matches its filters) and the whole response in ``raw``."""

    def __init__(self, hits: Iterable[Any], raw: dict[str, Any]):
        super().__init__(hits)
        self.raw, self.mode, self.notice = raw, raw.get("mode"), raw.get("notice")


def _query_result(data: dict) -> QueryResult:
    tokens = data.get("tokens") or {}
    return _build(QueryResult, data, tokens=Tokens(**{f.name: tokens[f.name] for f in
                                                      dataclasses.fields(Tokens) if f.name in tokens}))


# -- discovery -----------------------------------------------------------------------------

def home_dir() -> Path:
    return Path(os.environ.get("NEURALMIND_HOME") or Path.home() / ".neuralmind").expanduser()


def _discovery_file(home: Path | None = None) -> Any:
    """What the daemon's discovery file holds, as JSON, or None (the kernel's
    ``read_discovery`` checks it as a daemon's; the client, which imports nothing of the
    server, only reads it, and :func:`_held` checks its daemon holds the home)."""
    try:
        return json.loads((Path(home or home_dir()) / "daemon.json").read_text())
    except (OSError, ValueError):
        return None


def daemon_pid(home: Path) -> int | None:
    """The pid of the daemon holding ``home`` — a ``flock`` on ``.daemon.lock`` it keeps for
    its life (``kernel.daemon.claim_home``), its pid in the file — or None. Here, stdlib only,
    so the client and the kernel read the lock one way (``kernel.daemon.serving_pid``)."""
    try:
        import fcntl
    except ImportError:  # no flock, no daemon (it holds its home with one)
        return None
    try:
        fd = os.open(Path(home) / ".daemon.lock", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it
    except BlockingIOError:
        text = os.pread(fd, 20, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)


def _held(home: Path) -> dict[str, Any] | None:
    """The discovery file's contents when the daemon it names holds ``home``, else None: a
    file a crashed daemon left names an address any program may listen on since, and one
    copied with the home names another home's daemon — neither gets this home's token."""
    info = _discovery_file(home)
    holder = daemon_pid(Path(home))
    return info if isinstance(info, dict) and holder and info.get("pid") == holder else None


def older_daemon(home: Path) -> dict[str, Any] | None:
    """The discovery file's contents when the daemon it names is one of an older NeuralMind
    serving ``home`` — one from before daemons held their home (``.daemon.lock``), so none
    holds it —, else None. Its file is of that time (no ``code`` stamp: a file copied with the
    home of a daemon of today stays stale), its process listens at the file's port and holds
    a file of this home open (a pid given out again after a crash or a reboot does not, nor
    the original's daemon of a home copied while it ran) and NeuralMind's public
    ``/v1/health`` answers there (no token is sent)."""
    info = _discovery_file(home)
    if not (isinstance(info, dict) and "code" not in info and isinstance(info.get("host"), str)
            and all(type(info.get(k)) is int and info[k] > 0 for k in ("pid", "port"))):
        return None
    if daemon_pid(Path(home)) == info["pid"] or not _serving(info["pid"], info["port"], home):
        return None
    said = daemon_health(info)
    neuralmind = said and said.get("status") == "ok" and isinstance(said.get("version"), str)
    return info if neuralmind else None


def _serving(pid: int, port: int, home: Path) -> bool:
    """Whether process ``pid`` has a socket listening on ``port`` and a file of ``home`` open
    (its log, its database), from its open files and the TCP tables in ``/proc`` (Linux);
    without ``/proc``, whether it is alive. A process of another user is never this home's
    daemon."""
    if not os.path.isdir("/proc/self/fd"):
        try:
            os.kill(pid, 0)
        except OSError:  # no such process, or another user's
            return False
        return True
    opened = _opened(pid)
    if not opened:  # no such process, or another user's
        return False
    sockets = set()
    for table in ("tcp", "tcp6"):  # local address, state (0A: listening), inode
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        sockets |= {f"socket:[{f[9]}]" for f in map(str.split, rows)
                    if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port}
    if not opened & sockets:
        return False
    inside = os.path.join(os.path.realpath(home), "")  # its log, or its workers' databases
    held = opened.union(*(_opened(child) for child in _children(pid)))
    return any(path.startswith(inside) for path in held)


def _opened(pid: int) -> set[str]:
    """What process ``pid`` has open, as ``/proc`` names it (a path, ``socket:[inode]``);
    nothing when it cannot be read (no such process, another user's)."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return found


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (a gunicorn master's workers, which hold the home's
    databases: a master run in the foreground holds no file of the home itself)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def daemon_health(info: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    """What ``/v1/health`` answers at the address a discovery file names (a JSON object), or
    None: nothing answers, or not with one. Never through a proxy: a daemon is on loopback."""
    import urllib.request
    url = f"http://{info['host']}:{info['port']}/v1/health"
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                url, timeout=timeout) as r:
            said = json.loads(r.read())
    except (OSError, ValueError):
        return None
    return said if isinstance(said, dict) else None


def older(info: dict[str, Any], home: Path) -> str:
    """What to say of the daemon of an older NeuralMind serving ``home`` (:func:`older_daemon`),
    here and in ``daemon status`` and ``start``: a second daemon would migrate the home's files
    under it."""
    return (f"a daemon of an older NeuralMind serves {home} (pid {info['pid']}, at "
            f"http://{info['host']}:{info['port']}): it does not hold the home as this "
            "NeuralMind's daemons do, and none may start beside it — stop it with "
            "`neuralmind daemon stop`, then start this one (`neuralmind daemon start`)")


def moved(info: dict[str, Any], home: Path) -> str:
    """What to say of the daemon holding ``home`` when it serves it under another path (the
    home was renamed while it ran: it reads its token and files where they were, and answers
    every call 401); "" when it serves this path (or its file predates the ``home`` field).
    ``kernel.daemon`` says it with this, for ``daemon status`` and ``start``."""
    served = info.get("home")
    if not isinstance(served, str) or Path(served) == Path(home).resolve():
        return ""
    return (f"the daemon holding {home} (pid {info['pid']}) serves it as {served}: the home "
            "was moved while the daemon ran — restart it (`neuralmind daemon stop`, then "
            "`neuralmind daemon start`)")


def _no_daemon(home: Path) -> str:
    """Why the home gives no daemon to call, and what to do about it."""
    found = home / "daemon.json"
    info = _discovery_file(home)
    if not found.exists():
        why = f"{found} does not exist"
    elif not (isinstance(info, dict) and info.get("url")):
        why = f"{found} holds no address (it is damaged)"
    elif (held := _held(home)) and (elsewhere := moved(held, home)):
        return elsewhere
    elif old := older_daemon(home):
        return older(old, home)
    else:
        why = (f"{found} is stale: the daemon it names does not hold {home} (it exited, or "
               "the home was copied from under it)")
    return (f"no NeuralMind daemon found: {why}. Start one with `neuralmind daemon start` "
            "(or set NEURALMIND_API_URL)")


def discover(url: str | None = None, token: str | None = None, home: Path | None = None
             ) -> tuple[str | None, str | None]:
    """(url, token): arguments first, then ``NEURALMIND_API_URL``/``NEURALMIND_API_TOKEN``,
    then the discovery file of the daemon holding the home, then (token only)
    ``$NEURALMIND_HOME/token``."""
    return _discover(url, token, home)[:2]


def _discover(url: str | None, token: str | None, home: Path | None
              ) -> tuple[str | None, str | None, str]:
    """:func:`discover`'s (url, token), and where the token came from, said for a 401."""
    home = Path(home or home_dir())
    info = _held(home) or {}
    if moved(info, home):  # it would answer 401: _no_daemon says what to do
        info = {}
    given, url = url, url or os.environ.get("NEURALMIND_API_URL") or info.get("url")
    if url and (why := _not_a_server_url(url)):
        source = ("given" if given else "from NEURALMIND_API_URL"
                  if os.environ.get("NEURALMIND_API_URL") else f"from {home / 'daemon.json'}")
        raise NotAServerURL(f"{_shown(url)} ({source}) is not a server URL such as "
                            f"http://127.0.0.1:8765: {why}")
    url = _root(url) if url else None
    if token:
        return url, token, TOKEN_GIVEN
    if token := os.environ.get("NEURALMIND_API_TOKEN"):
        return url, token, ("the token sent was NEURALMIND_API_TOKEN's, which comes before the "
                            "home's own: correct or unset it")
    return url, *_local_token(url, info, home)


def _shown(url: Any) -> str:
    """``url`` for a message: on one line, the password in its userinfo (``user:PW@host``)
    masked."""
    if isinstance(url, str):
        url = re.sub(r"^((?:[a-zA-Z][a-zA-Z0-9+.-]*:)?(?://)?[^/?#@:]*:)[^/?#]*@", r"\1***@", url)
        if url.isprintable():
            return url
    return repr(url)


def _root(url: str) -> str:
    """The server's root: the address `up` prints ends in /v1, the prefix every call adds."""
    return url.rstrip("/").removesuffix("/v1")


def _loopback(url: str) -> bool:
    return urllib.parse.urlsplit(url).hostname in LOOPBACK


def _local_token(url: str | None, info: dict[str, Any], home: Path) -> tuple[str | None, str]:
    """This machine's own token for ``url`` (checked already), and where it came from; never
    sent elsewhere: the daemon's (its file's) to the daemon's address alone, the home's token
    file to a loopback address alone (a ``neuralmind serve`` on this machine). A team server,
    or a mistyped host, gets none."""
    daemon = info.get("url")
    ours = bool(url) and isinstance(daemon, str) and url == _root(daemon)
    if ours and info.get("token"):
        return info["token"], f"the token sent was the daemon's, from {home / 'daemon.json'}"
    if url and (ours or _loopback(url)) and (token := _token_file(home)):
        return token, f"the token sent was the home's, from {home / 'token'}"
    return None, ("no token was sent (none given, in NEURALMIND_API_TOKEN, or for this "
                  "address in the home): give one")


def _token_file(home: Path) -> str | None:
    try:
        return (home / "token").read_text().strip() or None
    except OSError:
        return None


def _not_a_server_url(url: Any) -> str | None:
    """Why ``url`` cannot be a server's address (each path of the API is added to it: a path
    of its own is where a proxy serves it), or None."""
    if not isinstance(url, str):
        return f"it is {type(url).__name__}, not text"
    if bad := re.search(r"[\x00-\x20\x7f]", url):  # urlsplit drops some; no request carries one
        return f"it holds {bad.group()!r} (a space or control character)"
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as ex:  # an unclosed or invalid [IPv6] host
        return f"its host is not an address ({ex})"
    if parts.scheme not in ("http", "https") or not host:
        return "it needs http:// or https:// and a host"
    try:
        parts.port
    except ValueError:
        return "its port is not a number from 1 to 65535"
    if parts.username is not None or parts.password is not None:
        return "credentials go in the token, not the URL"
    if parts.query or parts.fragment:
        return "it holds a query or a fragment"
    return None


def _check_token(token: str | None) -> None:
    """:class:`NotAToken` (a ValueError) when no HTTP header can carry ``token``."""
    if token is not None and not (isinstance(token, str) and token.isascii()
                                  and token.isprintable() and " " not in token):
        raise NotAToken("the token holds characters no HTTP header carries (it is printable "
                        "ASCII, without spaces): check --token, NEURALMIND_API_TOKEN or the "
                        "home's token file")


def _if_match(if_match: str | None) -> dict[str, str] | None:
    """The ``If-Match`` header of a write to one record: its ``updated_at`` (or ``*``), which
    the server refuses (412) once the record has changed."""
    if if_match is None:
        return None
    if not isinstance(if_match, str):
        raise TypeError(f"if_match is the record's updated_at text, not "
                        f"{type(if_match).__name__}")
    if not if_match.strip():
        raise ValueError("if_match is empty: give the record's updated_at, or leave it out")
    return {"If-Match": if_match}


def _flag(name: str, value: bool) -> bool:
    """``value`` when it is True or False: a TypeError naming ``name`` otherwise (a text such
    as ``"no"`` is true to Python, and the client would do the opposite of what was meant)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


def _check_seconds(name: str, value: float) -> None:
    """A ValueError naming ``name`` unless ``value`` is a number of seconds above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a number of seconds above 0, not {value!r}")


# -- the transport -------------------------------------------------------------------------

def _media(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` (``application/json; charset=utf-8`` →
    ``application/json``)."""
    return (content_type or "").split(";")[0].strip().lower()


def _not_neuralmind(url: str, status: int, content_type: str | None, body: str,
                    instead_of: str = "") -> BrokenAnswer:
    """The answer of something at the address that is not NeuralMind (``body`` says what it
    sent), said in one line rather than as the page it sent."""
    instead = f" instead of {instead_of}" if instead_of else ""
    return BrokenAnswer(f"the server at {url} answered {status} with {body} "
                        f"({content_type or 'no Content-Type'}){instead}: is it NeuralMind?")


class _Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, url: str = ""):
        self.status, self.headers, self.body, self.url = status, headers, body, url

    def json(self) -> dict[str, Any]:
        """The body of a success: a JSON object, sent as ``application/json``, as every
        NeuralMind answer with a body is. Anything else — a web page, a bare list, an empty
        body — is a :class:`BrokenAnswer` (an address that serves something else), not the
        decoder's traceback nor a record of Nones."""
        if _media(self.headers.get("content-type")) != "application/json":
            raise self.not_neuralmind("not JSON")
        try:
            data = json.loads(self.body)
        except ValueError:
            raise self.not_neuralmind("not JSON") from None
        if not isinstance(data, dict):
            raise self.not_neuralmind("JSON but no object")
        return data

    def not_neuralmind(self, what: str | None = None, instead_of: str = "") -> BrokenAnswer:
        """:func:`_not_neuralmind` of this answer, whose body is ``what``."""
        if not self.body:
            body = "an empty body"
        else:
            body = f"a body that is {what}" if what else "a body"
        return _not_neuralmind(self.url, self.status, self.headers.get("content-type"), body,
                               instead_of)


class NeuralMindClient:
    """The /v1 API. ``url``/``token`` default to the environment, then the local daemon."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, autostart: bool = False,
                 home: str | os.PathLike | None = None):
        _check_seconds("timeout", timeout)
        _flag("autostart", autostart)
        self.home = Path(home) if home else home_dir()
        self._explicit = (url, token)
        self.url, self.token, self._token_from = _discover(url, token, self.home)
        _check_token(self.token)
        self.timeout = timeout
        self._opener = None
        self._contract: dict[str, Any] | None = None  # the server's OpenAPI document, read once
        self.projects = Projects(self)
        self.jobs = Jobs(self)
        self.webhooks = Webhooks(self)
        if autostart and not self._answers():
            if self._explicit[0] or os.environ.get("NEURALMIND_API_URL"):
                raise DaemonNotRunning(self._unreachable(ConnectionRefusedError(
                    "no answer (autostart starts only the local daemon)")))
            self._start_daemon()

    def __repr__(self) -> str:
        return f"NeuralMindClient({self.url!r})"

    # -- daemon ------------------------------------------------------------------------

    def _start_daemon(self) -> None:
        """``neuralmind daemon start`` (the same command a user types), then re-discover."""
        import subprocess
        proc = subprocess.run([sys.executable, "-P", "-m", "neuralmind.cli", "daemon", "start"],
                              capture_output=True, text=True,
                              env={**os.environ, "NEURALMIND_HOME": str(self.home)})
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip()).removeprefix("neuralmind: ")
            raise DaemonNotRunning(f"could not start the daemon: {said}")
        self.url, self.token, self._token_from = _discover(*self._explicit, self.home)
        self._opener = None

    # -- requests ----------------------------------------------------------------------

    def _send(self, method: str, path: str, *, body: bytes | None = None,
              headers: dict[str, str] | None = None, timeout: float | None = None,
              stream: bool = False):
        import urllib.error
        import urllib.request  # here, not at the top: it costs more than the rest of this module
        if not self.url:  # none when made, or the daemon was down at the last call
            self._rediscover()
        if not self.url:
            raise DaemonNotRunning(_no_daemon(self.home))
        hdrs = {"Accept": "application/json", "User-Agent": "neuralmind-client/1", **(headers or {})}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=hdrs)
        if self._opener is None:  # a loopback daemon is never reached through a proxy
            local = _loopback(self.url)
            self._opener = urllib.request.build_opener(
                *([urllib.request.ProxyHandler({})] if local else []))
        try:
            resp = self._opener.open(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as ex:
            with ex:
                raw = ex.read()
            hdr = {k.lower(): v for k, v in ex.headers.items()}
            return _Response(ex.code, hdr, raw, self.url)
        except urllib.error.URLError as ex:  # refused, reset, timed out: the OSError itself
            if isinstance(ex.reason, OSError):
                # raised while connecting or sending: the request may not have run, so
                # request() counts no answer lost (one after sending comes bare, not here)
                ex.reason.unsent = True
                raise ex.reason from None
            raise
        hdr = {k.lower(): v for k, v in resp.headers.items()}
        if stream:
            return resp
        with resp:
            return _Response(resp.status, hdr, resp.read(), self.url)

    def request(self, method: str, path: str, *, json_body: Any = None, data: bytes | None = None,
                params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                timeout: float | None = None, idempotent: bool | None = None,
                stream: bool = False) -> _Response:
        """One call; an error envelope raises its ``NeuralMindAPIError`` subclass. With
        ``stream``, a success is the open response, to be read as it arrives.

        Idempotent requests (GET, HEAD, PUT, DELETE, and POSTs the caller marks so) are retried with
        backoff on connection errors, broken answers and 503; nothing else is, so a write never
        lands twice — but a refused connection sent nothing, so any call goes again once the
        discovery file names a daemon that restarted on another port, and after a 401 once the
        home's token has been replaced (rotated: :meth:`_token_replaced`). An error answered to
        a retry after a lost answer (the request was sent whole, and the connection broke
        before its answer came) is ``resent``: a DELETE's 404 then may say the first landed."""
        import http.client
        import socket
        import ssl  # http.client has loaded these by the first call
        # a server that cannot be reached: refused, reset, a host that does not resolve, TLS
        # spoken to a plain server (not a timeout: the request may be running)
        unreachable = (ConnectionError, socket.gaierror, ssl.SSLError)
        if timeout is not None:  # 0 was the client's own, nan and inf an error from the socket
            _check_seconds("timeout", timeout)
        if query := urllib.parse.urlencode(list(_flat(params or {}))):  # never a bare "?"
            path += "?" + query
        _check_headers(headers or {})
        body = json.dumps(json_body, default=_jsonable).encode() if json_body is not None \
            else data
        retry = idempotent if idempotent is not None else method in ("GET", "HEAD", "PUT", "DELETE")
        attempts, failed = RETRIES + 1 if retry else 1, 0
        lost = False  # an attempt reached the server, and its answer did not come back
        reread = False  # the home's token was read again after a 401
        while True:
            try:
                resp = self._send(method, path, body=body, headers=headers, timeout=timeout,
                                  stream=stream)
            except DaemonNotRunning:
                raise
            except TimeoutError as ex:
                raise TimedOut(f"{method} {path}: no answer from {self.url} within "
                               f"{timeout or self.timeout:g} s", _wait_longer(timeout)) from ex
            except unreachable as ex:
                if body and len(body) > SOCKET_SLACK and isinstance(
                        ex, (BrokenPipeError, ConnectionResetError)) and self._answers():
                    raise NeuralMindAPIError(413, "payload_too_large", (
                        f"the server stopped reading the {len(body):,}-byte body: it is larger "
                        "than the server accepts ([kernel] max_body_bytes)")) from None
                if self._rediscover() and isinstance(ex, ConnectionRefusedError):
                    continue
                lost = lost or not getattr(ex, "unsent", False)
                failed += 1
                if failed == attempts:
                    raise DaemonNotRunning(self._unreachable(ex)) from ex
            except http.client.HTTPException as ex:  # after `unreachable`: RemoteDisconnected is both
                lost = True
                failed += 1
                if failed == attempts:
                    raise BrokenAnswer(f"{method} {path}: the server at {self.url} "
                                       f"{_what_broke(ex)}") from ex
            else:
                if resp.status < 400:
                    return resp
                if resp.status == 401 and not reread:
                    reread = True
                    if self._token_replaced():  # a 401 executed nothing: any call goes again
                        time.sleep(TOKEN_RECHECK_S)  # until every worker reads the new one
                        continue
                failed += 1
                error = _api_error(resp, self._token_from)
                if isinstance(error, NeuralMindAPIError):
                    error.resent, error.method = lost, method
                lasting = getattr(error, "code", None) in LASTING  # another server's page: none
                if resp.status != 503 or failed == attempts or lasting:
                    raise error
            time.sleep(BACKOFF_S * 2 ** (failed - 1))

    def _answers(self) -> bool:
        """Whether the server answers at all (it may have refused only a body it would not
        read, closing the connection under the upload)."""
        import http.client
        try:
            return self._send("GET", "/v1/health", timeout=5).status == 200
        except (OSError, http.client.HTTPException):  # an answer that is not HTTP is none
            return False

    def _unreachable(self, ex: Exception) -> str:
        """Where the URL came from, what failed, and the one thing to do about it."""
        reason = getattr(ex, "strerror", None) or ex
        if self._explicit[0] or os.environ.get("NEURALMIND_API_URL"):
            source = "given" if self._explicit[0] else "from NEURALMIND_API_URL"
            return (f"cannot reach NeuralMind at {self.url} ({source}): {reason}. Is the server "
                    "running?")
        return (f"cannot reach NeuralMind at {self.url} (from {self.home / 'daemon.json'}): "
                f"{reason}. Start the daemon with `neuralmind daemon start`")

    def _rediscover(self) -> bool:
        """A restarted daemon may listen on a new port: read the discovery file again.
        Whether the URL moved."""
        if self._explicit[0] or os.environ.get("NEURALMIND_API_URL"):
            return False
        before = self.url
        self.url, self.token, self._token_from = _discover(*self._explicit, self.home)
        self._opener = None
        return self.url != before

    def _token_replaced(self) -> bool:
        """After a 401: read the home's token again (``neuralmind token rotate`` replaced it,
        or an emptied token file was made again), so that a long-lived client — the ``neuralmind
        mcp`` relay — carries on. Whether it changed. A token given (``token=``, ``--token``,
        ``NEURALMIND_API_TOKEN``) is the caller's, and never replaced."""
        if self._explicit[1] or os.environ.get("NEURALMIND_API_TOKEN"):
            return False
        url, before = self.url, self.token
        self.url, self.token, self._token_from = _discover(*self._explicit, self.home)
        _check_token(self.token)
        if self.url != url:
            self._opener = None
        return self.token not in (None, before)

    def _json(self, method: str, path: str, make: Callable[[dict], Any] | None = None,
              **kw) -> Any:
        """The answer's JSON object, made into what the call returns by ``make``. Every JSON
        answer passes here: one ``make`` cannot read — a record without its ``id``, a
        page without ``items`` — is not NeuralMind's (a :class:`BrokenAnswer`), as is one that
        is no JSON object (:meth:`_Response.json`)."""
        return self._made(self.request(method, path, **kw), make)

    @staticmethod
    def _made(resp: _Response, make: Callable[[dict], Any] | None) -> Any:
        """:meth:`_json`'s answer of ``resp``, for a caller that reads its status too."""
        data = resp.json()
        try:
            return make(data) if make else data
        except KeyError as ex:
            raise resp.not_neuralmind(f"JSON without its {ex.args[0]!r}") from None
        except (TypeError, ValueError):
            raise resp.not_neuralmind("JSON of another shape") from None

    def _delete(self, path: str, gone: str, **kw) -> None:
        """DELETE what answers 204 and no body (anything else is not NeuralMind's: a web
        page's 200 is no deletion). When the answer to the first attempt was lost, the
        retry's 404 ``gone`` — the deleted thing's own code, never ``project_not_found`` or a
        missing route's ``not_found`` — says that attempt landed: done."""
        try:
            resp = self.request("DELETE", path, **kw)
        except NotFound as ex:
            if ex.resent and ex.code == gone:
                return
            raise
        if resp.status != 204:
            raise resp.not_neuralmind(instead_of="204 No Content")

    def _takes(self, call: str, method: str, route: str, given: Iterable[str],
               leave_out: Iterable[str] = ()) -> None:
        """A TypeError naming each of ``given`` that ``method route`` does not take. The server
        ignores a field it does not know, so a misspelled filter (``tags=`` for ``tag=``)
        would match every record, and a misspelled change would change nothing. The names are the
        server's own OpenAPI document's (read once it is read whole: :meth:`_fields`); a route
        it does not publish goes unchecked."""
        if not given:
            return
        names = self._fields(method, route)
        unknown = sorted(set(given) - names) if names is not None else []
        if unknown:
            takes = ", ".join(sorted(names - set(leave_out)))
            raise TypeError(f"{call}() got {', '.join(map(repr, unknown))}, which {method} "
                            f"{route} does not take: it takes {takes}")

    def _fields(self, method: str, route: str) -> frozenset[str] | None:
        """The query parameters and body fields of ``method route``, or None (unchecked)."""
        if self._contract is None:
            try:
                self._contract = self._json("GET", "/v1/openapi.json")
            except NotFound:  # a server that publishes none: nothing is checked
                self._contract = {}
            except (NeuralMindAPIError, BrokenAnswer):
                # 429, 503, 401, an answer cut off: not cached, so the next call reads it
                # again; this one goes on unchecked. An unreachable server or a timeout
                # (DaemonNotRunning, TimedOut) raises: the call's own request would wait and
                # fail the same way, so it is not sent after it
                return None
        op = self._contract.get("paths", {}).get(route, {}).get(method.lower())
        if not isinstance(op, dict):
            return None
        names = {p["name"] for p in op.get("parameters", []) if p.get("in") == "query"}
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        schema = body.get("schema", {})
        ref = schema.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            schema = self._contract.get("components", {}).get("schemas", {}).get(
                ref.rsplit("/", 1)[1], {})
        if schema.get("additionalProperties") not in (None, False):
            return None
        return frozenset(names | set(schema.get("properties", {})))

    def _pages(self, path: str, make: Callable[[dict], Any], params: dict | None = None,
               limit: int = 200) -> Iterator[Any]:
        cursor = None
        while True:
            page = self._page(path, make, {**(params or {}), "limit": limit, "cursor": cursor})
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    def _page(self, path: str, make: Callable[[dict], Any], params: dict) -> Page:
        return self._json("GET", path, params=params, make=lambda data: Page(
            [make(i) for i in data["items"]], data.get("next_cursor"), data))

    # -- top-level verbs ---------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/v1/health")

    def openapi(self) -> dict[str, Any]:
        return self._json("GET", "/v1/openapi.json")

    def embeddings_status(self) -> dict[str, Any]:
        return self._json("GET", "/v1/embeddings/status")

    def whoami(self) -> dict[str, Any]:
        """The caller as the server sees them (the auth plugin's route): ``actor``, ``role``,
        ``kind`` (``loopback``; ``token`` on a server-mode server), ``projects`` (None: all),
        ``permissions``."""
        return self._json("GET", "/v1/auth/whoami")

    def mcp(self, message: dict[str, Any] | list[dict[str, Any]], *,
            session_id: str | None = None, protocol_version: str | None = None,
            project: str | None = None, timeout: float = BUILD_TIMEOUT) -> MCPAnswer:
        """POST one JSON-RPC message (or a batch) to ``/v1/mcp``: what ``neuralmind mcp``
        relays an agent's stdio through. ``project`` is the one tools act on when a call
        names none. Answers stream in as they arrive (progress, then the result); a refusal
        of the HTTP request itself raises like any call."""
        headers = {"Accept": "application/json, text/event-stream"}
        if session_id:
            headers["Mcp-Session-Id"] = session_id
        if protocol_version:
            headers["MCP-Protocol-Version"] = protocol_version
        resp = self.request("POST", "/v1/mcp", params={"project": project or None},
                            json_body=message, headers=headers, timeout=timeout, stream=True)
        streamed = (resp.headers.get("Content-Type") or "").startswith("text/event-stream")
        return MCPAnswer(resp.headers.get("Mcp-Session-Id"), _streamed(
            _mcp_messages(resp, streamed), "POST /v1/mcp", self, timeout))

    def project(self, path_or_id: str | os.PathLike = ".") -> ProjectHandle:
        """A handle on a project: a directory is registered (idempotent), an id is looked up;
        its ``registered`` says whether this call registered the directory."""
        return ProjectHandle(self, *self.projects._resolved(path_or_id))

    def events(self, project: str | None = None, kinds: Iterable[str] = (),
               last_event_id: int | None = None, timeout: float | None = None) -> EventStream:
        """Follow ``/v1/events`` (server-sent events) from now, or after ``last_event_id``.
        ``kinds`` filters (``memory.*`` matches a prefix); ``timeout`` bounds each read
        (default the client's; the server's heartbeat, every 15 s, keeps a quiet stream alive,
        so only a dead server makes a read time out)."""
        query = urllib.parse.urlencode(list(_flat({"project": project, "kind": _items(kinds)})))
        return EventStream(self, "/v1/events" + ("?" + query if query else ""), last_event_id,
                           timeout)


def _wait_longer(call_timeout: float | None) -> str:
    """How to wait longer: the call's own ``timeout=`` when it was given one (``query``,
    ``ask``, ``events`` …), else the client's."""
    return ("a longer timeout= for this call waits more" if call_timeout is not None
            else "a client made with a longer timeout= waits more")


def _what_broke(ex: Exception) -> str:
    """What was wrong with an answer ``http.client`` could not read, said of the server."""
    import http.client
    if isinstance(ex, (http.client.BadStatusLine, http.client.UnknownProtocol)):
        sent = ex.args[0] if ex.args and isinstance(ex.args[0], str) else ""
        return f"did not answer with HTTP (it sent {sent.strip()[:60]!r})"
    if isinstance(ex, http.client.IncompleteRead):
        more = f", {ex.expected} more expected" if ex.expected else ""
        return f"sent a broken answer (its body ended after {len(ex.partial)} bytes{more})"
    return f"sent a broken answer ({ex})"


def _check_headers(headers: dict[str, str]) -> None:
    """A ValueError naming the header whose value no HTTP request carries (text beyond
    Latin-1, a lone surrogate, a line break), before anything is sent."""
    for name, value in headers.items():
        if isinstance(value, str) and not (value.isprintable()
                                           and all(ord(c) < 256 for c in value)):
            raise ValueError(f"{name} {value!r} cannot be sent in an HTTP header: it holds "
                             "a character beyond Latin-1 or a control character")


def _flat(params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Query parameters as pairs; a value holding a lone surrogate, which no URL carries, is a
    ValueError naming its parameter."""
    for key, value in params.items():
        if value is None:
            continue
        for v in value if isinstance(value, (list, tuple, set)) else [value]:
            text = "true" if v is True else "false" if v is False else str(v)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{key} {text!r} holds a lone surrogate, which no URL "
                                 "carries") from None
            yield key, text


class EventStream:
    """An open ``/v1/events`` stream: iterate it for :class:`Event`; ``close()`` (or ``with``)
    to hang up. Connected on creation, so no event after the call is missed; a dropped
    connection is resumed with ``Last-Event-ID``."""

    def __init__(self, nm: NeuralMindClient, path: str, last_id: int | None,
                 timeout: float | None):
        self._nm, self._path, self.last_id, self._timeout = nm, path, last_id, timeout
        self._resp = None
        self._events: Iterator[Event] = iter(())
        self._connect()

    def _connect(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        resp = self._nm.request("GET", self._path, headers=headers, timeout=self._timeout,
                                stream=True)
        self._resp = resp
        self._events = _parse_sse(resp)

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        import http.client
        while True:
            if self._resp is None:
                raise StopIteration
            try:
                event = next(self._events)
            except (StopIteration, ConnectionError, http.client.HTTPException):
                # the stream ended or broke (a chunk cut off): resume after last_id
                self._resp.close()
                self._connect()
                continue
            except TimeoutError as ex:  # not even a heartbeat: the server is gone or stuck
                raise TimedOut(f"GET {self._path}: no event or heartbeat from {self._nm.url} "
                               f"within {self._timeout or self._nm.timeout:g} s",
                               _wait_longer(self._timeout)) from ex
            if event.id is not None:
                self.last_id = event.id
            return event

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _parse_sse(lines: Iterable[bytes]) -> Iterator[Event]:
    for fields, data in _sse(lines):
        payload = json.loads(data)
        eid = fields.get("id")
        yield _build(Event, {**payload, "id": int(eid) if eid and eid.isdigit() else None,
                             "kind": fields.get("event") or payload.get("kind", "message")})


def _sse(lines: Iterable[bytes]) -> Iterator[tuple[dict[str, str], str]]:
    """Server-sent events as ``(fields, data)``, each as soon as its blank line arrives."""
    fields: dict[str, str] = {}
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield fields, "\n".join(data)
            fields, data = {}, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            else:
                fields[name] = value


def _streamed(items: Iterator, what: str, nm: NeuralMindClient,
              call_timeout: float | None = None) -> Iterator:
    """``items`` read from a streamed answer as it arrives, its transport failing as every
    call's does: a stall is :class:`TimedOut` (past the call's timeout, else the client's), a
    break :class:`BrokenAnswer` (not ``http.client``'s own exceptions, which the caller cannot
    know)."""
    import http.client
    try:
        yield from items
    except TimeoutError as ex:
        raise TimedOut(f"{what}: the answer stopped arriving from {nm.url} for "
                       f"{call_timeout or nm.timeout:g} s", _wait_longer(call_timeout)) from ex
    except http.client.HTTPException as ex:
        raise BrokenAnswer(f"{what}: the server at {nm.url} {_what_broke(ex)}") from ex


def _ask_events(resp) -> Iterator[AskEvent]:
    with resp:
        for fields, data in _sse(resp):
            event = AskEvent(fields.get("event", "message"), json.loads(data))
            if event.kind == "error":
                err = event.data["error"]
                raise _api_error(_Response(err.get("status", 502), {},
                                           json.dumps(event.data).encode()))
            yield event


def _mcp_messages(resp, streamed: bool) -> Iterator[dict[str, Any]]:
    with resp:
        if streamed:
            for _, data in _sse(resp):
                yield json.loads(data)
            return
        body = resp.read()
    if body:
        data = json.loads(body)
        yield from data if isinstance(data, list) else [data]


# -- resources -----------------------------------------------------------------------------

def _project(data: dict) -> Project:
    return _build(Project, data)


def _job(data: dict) -> Job:
    return _build(Job, data)


def _memory(data: dict) -> Memory:
    return _build(Memory, data)


def _hit(data: dict) -> SearchHit:
    return _build(SearchHit, data)


def _results(make: Callable[[dict], Any]) -> Callable[[dict], Results]:
    """A search's answer read as :class:`Results`, each hit made by ``make``."""
    return lambda data: Results(map(make, data["results"]), data)


def _started(data: dict) -> Job:
    """The ``job`` of an answer that started one (a build, a decay, a consolidation)."""
    return _job(data["job"])


def _listed(data: dict) -> list[Any]:
    """The ``items`` of an answer that lists everything at once."""
    return data["items"]


def _jsonable(value: Any) -> Any:
    """What ``json.dumps`` sends of a value it has no type for: a set as a sorted list (tags
    given as ``{"a", "b"}``), a date or a time in ISO 8601 (as a query string sends them:
    ``review_by=date(2027, 1, 1)``); anything else is a TypeError naming its type."""
    import datetime as dt
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} cannot be sent as JSON")


def _each(tags: tuple, call: str) -> list[str]:
    """``*tags`` as given, each its own argument: a list passed as one (``untag(id, ["a"])``)
    was sent as its repr, ``"['a']"``, and removed nothing."""
    if not all(isinstance(t, str) for t in tags):
        raise TypeError(f"{call}(memory_id, *tags): each tag is its own text argument "
                        f"({call}(id, 'a', 'b'), or {call}(id, *names))")
    return list(tags)


def _items(values: Iterable[str] | str | None) -> list[str] | None:
    """A list argument as the server takes it: one string is one item (``files="a.py"``),
    never its characters; None stays None."""
    if values is None or isinstance(values, str):
        return values if values is None else [values]
    return list(values)


def _path(*parts: str) -> str:
    """A route's path from its template's start and the ids in it, each quoted whole (an id
    that is no text, holds a ``/`` or a lone surrogate, is a ValueError naming it: quoted as
    %2F, a ``/`` reaches the server as a separator, and ``ID/history`` another route)."""
    out = [parts[0]]
    for part in parts[1:]:
        if not isinstance(part, str) or not part:
            raise ValueError(f"an id is non-empty text, not {part!r}")
        if "/" in part:
            raise ValueError(f"the id {part!r} holds a /, which no id does")
        try:
            out.append(urllib.parse.quote(part, safe=""))
        except UnicodeEncodeError:
            raise ValueError(f"the id {part!r} holds a lone surrogate, which no URL carries"
                             ) from None
    return "/".join(out)


class Projects:
    """``/v1/projects``: register, list, show, remove."""

    def __init__(self, nm: NeuralMindClient):
        self._nm = nm

    def add(self, path: str | os.PathLike) -> Project:
        """Register a directory (on the server's file system); registering twice is fine."""
        return self._added(path)[0]

    def _added(self, path: str | os.PathLike) -> tuple[Project, bool]:
        """:meth:`add`'s project, and whether this call registered it (201; 200: it was)."""
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise ValueError(f"projects.add needs a directory, not {path!r}")
        real = os.path.abspath(os.path.expanduser(str(path)))
        resp = self._nm.request("POST", "/v1/projects", json_body={"path": real},
                                idempotent=True)
        return self._nm._made(resp, _project), resp.status == 201

    def get(self, project_id: str) -> Project:
        return self._nm._json("GET", _path("/v1/projects", project_id), _project)

    def list(self) -> Iterator[Project]:
        return self._nm._pages("/v1/projects", _project)

    def page(self, limit: int = 50, cursor: str | None = None) -> Page:
        return self._nm._page("/v1/projects", _project, {"limit": limit, "cursor": cursor})

    def remove(self, project_id: str) -> None:
        self._nm._delete(_path("/v1/projects", project_id), "project_not_found")

    def find(self, path: str | os.PathLike) -> Project | None:
        """The registered project at the directory ``path``; None when none is (nothing is
        registered)."""
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise TypeError(f"find(path): a directory's path, not {path!r}")
        where = os.path.realpath(os.path.expanduser(str(path)))
        return next((p for p in self.list() if p.path and os.path.realpath(p.path) == where),
                    None)

    def resolve(self, path_or_id: str | os.PathLike) -> Project:
        """A directory that exists here is registered — or, on a server that registers none
        (server mode: its projects come from its config), found among its projects; anything
        else is taken as an id (``ValueError`` when it cannot be one either: a path that is
        not a directory here)."""
        return self._resolved(path_or_id)[0]

    def _resolved(self, path_or_id: str | os.PathLike) -> tuple[Project, bool]:
        """:meth:`resolve`'s project, and whether this call registered it."""
        text = str(path_or_id)
        if os.path.isdir(os.path.expanduser(text)):
            try:
                return self._added(text)
            except Forbidden as ex:
                if ex.code != "registration_disabled":
                    raise
                if (found := self.find(text)) is not None:
                    return found, False
                if not PROJECT_ID.match(text):
                    raise Forbidden(ex.status, ex.code, f"{os.path.abspath(text)} is none of "
                                    f"the projects this server serves ({ex.message})",
                                    ex.details, ex.request_id, ex.headers) from None
        elif not PROJECT_ID.match(text):
            raise ValueError(f"{text}: {no_directory(text)}, nor a project id")
        return self.get(text), False


def no_directory(path: str) -> str | None:
    """Why ``path`` names no directory here (``not a directory``: something else is there;
    ``no such directory``), or None when it does."""
    path = os.path.expanduser(path)
    if os.path.isdir(path):
        return None
    return "not a directory" if os.path.exists(path) else "no such directory"


class Jobs:
    """``/v1/jobs``: follow long work (builds, maintenance)."""

    def __init__(self, nm: NeuralMindClient):
        self._nm = nm

    def get(self, job_id: str) -> Job:
        return self._nm._json("GET", _path("/v1/jobs", job_id), _job)

    def list(self, project: str | None = None, status: str | None = None) -> Iterator[Job]:
        return self._nm._pages("/v1/jobs", _job, {"project": project, "status": status})

    def cancel(self, job_id: str) -> Job:
        """Ask a running job to stop; 409 ``job_finished`` once it has ended — unless the
        answer to the first attempt was lost: that attempt landed, and the job is as it left it."""
        try:
            return self._nm._json("DELETE", _path("/v1/jobs", job_id), _job)
        except Conflict as ex:
            if not (ex.resent and ex.code == "job_finished"):
                raise
        return self.get(job_id)

    def wait(self, job_id: str, timeout: float = BUILD_TIMEOUT, poll: float = 0.2,
             on_progress: Callable[[Job], None] | None = None) -> Job:
        """Poll until the job has finished (done, error or cancelled); ``TimeoutError`` after
        ``timeout`` seconds. ``on_progress`` sees every poll's job."""
        _waiting(timeout, poll, on_progress)
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimedOut(f"job {job_id} still {job.status} after {timeout:g} s")
            time.sleep(poll)


def _waiting(timeout: float, poll: float, on_progress) -> None:
    """A ``ValueError``/``TypeError`` naming the argument a wait could not use."""
    _check_seconds("timeout", timeout)
    _check_seconds("poll", poll)
    if on_progress is not None and not callable(on_progress):
        raise TypeError(f"on_progress must be a function of the job, not "
                        f"{type(on_progress).__name__}")


DOCUMENT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain",
                  ".text": "text/plain", ".html": "text/html", ".htm": "text/html",
                  ".pdf": "application/pdf"}


class ProjectHandle:
    """One project: the index verbs (build, query, search, wakeup, stats), its code
    intelligence (impact, neighbours, next files, activity, savings, documents) and
    ``memories``."""

    def __init__(self, nm: NeuralMindClient, info: Project, registered: bool = False):
        self._nm = nm
        self.info = info
        self.id = info.id
        # making this handle registered the directory (it was no project): a caller that
        # registered it for a write the server refuses can remove() it again
        self.registered = registered
        self.memories = Memories(nm, info.id)

    def __repr__(self) -> str:
        return f"<project {self.id} {self.info.path or self.info.name}>"

    def _url(self, *parts: str) -> str:
        return _path("/v1/projects", self.id, *parts)

    def refresh(self) -> Project:
        self.info = self._nm.projects.get(self.id)
        return self.info

    def remove(self) -> None:
        self._nm.projects.remove(self.id)

    def build(self, full: bool = False, wait: bool = True, timeout: float = BUILD_TIMEOUT,
              on_progress: Callable[[Job], None] | None = None) -> Job:
        """Start a build; with ``wait`` follow it to the end (a build already running is
        followed rather than refused)."""
        if _flag("wait", wait):  # before the build starts: not started to be left unfollowed
            _waiting(timeout, 0.2, on_progress)
        try:
            job = self._nm._json("POST", self._url("build"), _started, json_body={"full": full})
        except Conflict as ex:
            running = ex.details.get("job")
            if not (wait and isinstance(running, dict) and running.get("id")):
                raise
            job = _job(running)
        if not wait:
            return job
        return self._nm.jobs.wait(job.id, timeout=timeout, on_progress=on_progress)

    def query(self, question: str, query_type: str = "auto", context_budget: int | None = None,
              trace: bool = False, timeout: float = QUERY_TIMEOUT) -> QueryResult:
        body = {"question": question, "query_type": query_type, "trace": trace}
        if context_budget is not None:
            body["context_budget"] = context_budget
        return _query_result(self._nm._json("POST", self._url("query"), json_body=body,
                                            timeout=timeout, idempotent=True))

    def search(self, query: str, n: int = 10, mode: str | None = None,
               file_type: str | None = None) -> Results:
        body = {"query": query, "n": n, "mode": mode, "file_type": file_type}
        return self._nm._json("POST", self._url("search"), _results(_hit), idempotent=True,
                              json_body={k: v for k, v in body.items() if v is not None})

    def wakeup(self) -> QueryResult:
        return _query_result(self._nm._json("GET", self._url("wakeup")))

    def ask(self, question: str, *, sources: Iterable[str] | None = None,
            context_budget: int | None = None, stream: bool = False,
            timeout: float = QUERY_TIMEOUT) -> AskResult | Iterator[AskEvent]:
        """A grounded answer citing the project's memories and code as ``[n]``. ``sources``
        picks from ``memories`` and ``code`` (default both). ``stream=True`` gives the answer's
        events as they arrive (``sources``, ``delta``…, ``done``); a provider failing midway
        raises its error (``provider_error``, ``provider_timeout``) from the iteration."""
        body: dict[str, Any] = {"question": question, "stream": _flag("stream", stream)}
        if sources is not None:
            body["sources"] = _items(sources)
        if context_budget is not None:
            body["context_budget"] = context_budget
        if not stream:
            return _build(AskResult, self._nm._json("POST", self._url("ask"), json_body=body,
                                                    timeout=timeout, idempotent=True))
        resp = self._nm.request("POST", self._url("ask"), json_body=body, stream=True,
                                headers={"Accept": "text/event-stream"}, timeout=timeout,
                                idempotent=True)
        return _streamed(_ask_events(resp), f"POST {self._url('ask')}", self._nm, timeout)

    def stats(self) -> dict[str, Any]:
        return self._nm._json("GET", self._url("stats"))

    # -- code intelligence (answers are the routes' JSON, docs/client.md) ----------------

    def impact(self, files: Iterable[str] = (), nodes: Iterable[str] = (), depth: int = 2,
               limit: int = 100, guessed: bool = True) -> dict[str, Any]:
        """What depends on these changed files or nodes, nearest first."""
        return self._nm._json("POST", self._url("impact"), idempotent=True, json_body={
            "files": _items(files), "nodes": _items(nodes), "depth": depth, "limit": limit,
            "guessed": guessed})

    def neighbors(self, file: str | None = None, node: str | None = None, depth: int = 1,
                  limit: int = 50) -> dict[str, Any]:
        """Callers, callees, importers, imports, subclasses and bases of a file or node."""
        return self._nm._json("GET", self._url("neighbors", "structural"), params={
            "file": file, "node": node, "depth": depth, "limit": limit})

    def learned_neighbors(self, file: str, limit: int = 20) -> dict[str, Any]:
        """The files learned to go with ``file``, strongest first."""
        return self._nm._json("GET", self._url("neighbors", "synaptic"),
                              params={"file": file, "limit": limit})

    def next_files(self, files_open: Iterable[str], task: str | None = None,
                   limit: int = 10, full: bool = False) -> list[dict[str, Any]] | dict[str, Any]:
        """The files to look at next, each ``{path, score, why}``; ``full``: the whole answer,
        with ``not_indexed`` (the open files the index does not hold)."""
        _flag("full", full)
        body = {"files_open": _items(files_open), "task": task, "limit": limit}
        files = None if full else lambda out: out["files"]
        return self._nm._json("POST", self._url("next"), files, idempotent=True,
                              json_body={k: v for k, v in body.items() if v is not None})

    def activity(self, files: Iterable[str], kind: str = "read",
                 session: str | None = None) -> dict[str, Any]:
        """Report files read, edited or tested: the server links them."""
        body = {"files": _items(files), "kind": kind, "session": session}
        return self._nm._json("POST", self._url("activity"),
                              json_body={k: v for k, v in body.items() if v is not None})

    def feedback(self, signal: str, file: str | None = None, node: str | None = None,
                 related: Iterable[str] | None = None) -> dict[str, Any]:
        """``helpful`` or ``unhelpful`` for a file or node (and what it came with)."""
        body = {"signal": signal, "file": file, "node": node,
                "related": _items(related)}
        return self._nm._json("POST", self._url("feedback"),
                              json_body={k: v for k, v in body.items() if v is not None})

    def synapse_stats(self) -> dict[str, Any]:
        return self._nm._json("GET", self._url("synapses", "stats"))

    def savings(self, days: int = 30) -> dict[str, Any]:
        """Tokens served by query and search vs the whole files, per day and in total."""
        return self._nm._json("GET", self._url("savings"), params={"days": days})

    def ingest(self, source: str | os.PathLike | bytes, name: str | None = None,
               content_type: str | None = None) -> dict[str, Any]:
        """Index a document that is not in the repository: a file path, or bytes with a
        ``name``; the type comes from the name's extension unless given."""
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            if not name:
                raise ValueError("bytes need a name, e.g. name='notes.md'")
        elif not isinstance(source, (str, os.PathLike)) or not str(source).strip():
            raise ValueError(f"ingest(source): a file's path or its bytes, not {source!r}")
        else:
            data = Path(source).read_bytes()
            name = name or Path(source).name
        media = content_type or DOCUMENT_TYPES.get(Path(name).suffix.lower(),
                                                   "application/octet-stream")
        return self._nm._json("POST", self._url("documents"), data=data, params={"name": name},
                              headers={"Content-Type": media})

    def documents(self) -> list[dict[str, Any]]:
        """The ingested documents, oldest first (without their text)."""
        return self._nm._json("GET", self._url("documents", "ingested"), _listed)

    def document(self, document_id: str) -> dict[str, Any]:
        return self._nm._json("GET", self._document(document_id))

    def delete_document(self, document_id: str) -> None:
        self._nm._delete(self._document(document_id), "document_not_found")

    def _document(self, document_id: str) -> str:
        """An ingested document's path; ``ingested`` names the list (``documents()``), never a
        document: 404 here rather than the list read as one."""
        if document_id == "ingested":
            raise NotFound(404, "document_not_found", "no ingested document with id ingested "
                           "('ingested' names the list: documents())")
        return self._url("documents", document_id)

    def validate(self, write: bool = False) -> dict[str, Any]:
        """What the index and learned state hold and miss; ``write`` repairs (admin)."""
        return self._nm._json("POST", self._url("validate"), json_body={"write": write})


# path segments after /memories/ that name routes: the server refuses them as a record's id
MEMORY_ROUTES = frozenset({"search", "batch", "export", "import", "maintenance", "stats", "tags",
                           "decay", "decay-policy", "consolidate"})


class Memories:
    """``/v1/projects/{id}/memories``: decisions with history, mem0's verbs."""

    def __init__(self, nm: NeuralMindClient, project_id: str):
        self._nm = nm
        self._project = _path("/v1/projects", project_id)
        self._base = _path(self._project, "memories")

    def _url(self, *parts: str) -> str:
        return _path(self._base, *parts)

    def _record(self, memory_id: str, *parts: str) -> str:
        """A record's path. An id that names a route is no record's: 404 here, rather than
        that route's answer read as a record."""
        if isinstance(memory_id, str) and memory_id in MEMORY_ROUTES:
            raise NotFound(404, "memory_not_found", f"no memory with id {memory_id} ("
                           f"'{memory_id}' names a route, never a record)")
        return self._url(memory_id, *parts)

    def _job(self, path: str, body: dict[str, Any], wait: bool, timeout: float) -> Job:
        if _flag("wait", wait):  # before the job starts, not after it has run
            _check_seconds("timeout", timeout)
        job = self._nm._json("POST", path, _started, json_body=body)
        return self._nm.jobs.wait(job.id, timeout=timeout) if wait else job

    def add(self, title: str, rationale: str, *, duplicates: str | None = None,
            **fields: Any) -> Memory:
        """Record a decision; the answer's ``possible_duplicates`` are advisory hints."""
        self._nm._takes("add", "POST", MEMORIES, fields)
        return self._nm._json("POST", self._base, _memory, params={"duplicates": duplicates},
                              json_body={"title": title, "rationale": rationale, **fields})

    def get(self, memory_id: str) -> Memory:
        return self._nm._json("GET", self._record(memory_id), _memory)

    def list(self, **filters: Any) -> Iterator[Memory]:
        """Every memory matching the filters (``status``, ``file``, ``tag``, ``type``, ``author``,
        ``agent``, ``session_id``, ``created_after``/``before``, ``min_confidence``), page by page
        (``page`` gives one page, with its ``limit`` and ``cursor``)."""
        return self._every("list", filters)

    def get_all(self, **filters: Any) -> Iterator[Memory]:
        """mem0's name for :meth:`list`."""
        return self._every("get_all", filters)

    def _every(self, call: str, filters: dict[str, Any]) -> Iterator[Memory]:
        """``list`` and ``get_all``, whose errors name the one called."""
        self._nm._takes(call, "GET", MEMORIES, filters, PAGING)
        if bad := sorted(set(filters) & set(PAGING)):
            raise TypeError(f"{call}() reads every page itself: give {' and '.join(bad)} to "
                            "page() instead")
        return self._nm._pages(self._base, _memory, filters)

    def page(self, limit: int = 50, cursor: str | None = None, **filters: Any) -> Page:
        self._nm._takes("page", "GET", MEMORIES, filters)
        return self._nm._page(self._base, _memory, {**filters, "limit": limit, "cursor": cursor})

    def search(self, query: str, *, mode: str | None = None, limit: int = 10,
               **filters: Any) -> Results:
        self._nm._takes("search", "POST", MEMORIES + "/search", filters)
        lists = {k: _items(filters[k]) for k in ("tag", "file", "kind", "kinds") if k in filters}
        body = {"query": query, "mode": mode, "limit": limit, **filters, **lists}
        return self._nm._json("POST", self._url("search"), _results(_memory), idempotent=True,
                              json_body={k: v for k, v in body.items() if v is not None})

    def update(self, memory_id: str, *, if_match: str | None = None, **changes: Any) -> Memory:
        """PATCH the given fields; ``if_match`` (an ``updated_at``) refuses a stale edit (412)."""
        headers = _if_match(if_match)
        self._nm._takes("update", "PATCH", MEMORIES + "/{memory_id}", changes)
        return self._nm._json("PATCH", self._record(memory_id), _memory, json_body=changes,
                              headers=headers)

    def invalidate(self, memory_id: str, reason: str, *, if_match: str | None = None) -> Memory:
        return self._nm._json("POST", self._record(memory_id, "invalidate"), _memory,
                              json_body={"reason": reason}, headers=_if_match(if_match))

    def restore(self, memory_id: str, commit_sha: str | None = None, *,
                if_match: str | None = None) -> Memory:
        body = {"commit_sha": commit_sha} if commit_sha else {}
        return self._nm._json("POST", self._record(memory_id, "restore"), _memory,
                              json_body=body, headers=_if_match(if_match))

    def delete(self, memory_id: str, *, if_match: str | None = None) -> None:
        self._nm._delete(self._record(memory_id), "memory_not_found",
                         headers=_if_match(if_match))

    def history(self, memory_id: str) -> Iterator[dict[str, Any]]:
        """The record's events, oldest first: ``{id, at, kind, actor, changes, note}``."""
        return self._nm._pages(self._record(memory_id, "history"), dict)

    def feedback(self, memory_id: str, helpful: bool, note: str | None = None) -> Memory:
        """helpful raises confidence by 0.05, unhelpful lowers it by 0.10 (floor 0.10)."""
        if not isinstance(helpful, bool):
            raise TypeError(f"helpful must be True or False, not {type(helpful).__name__}")
        body = {"signal": "helpful" if helpful else "unhelpful", **({"note": note} if note else {})}
        return self._nm._json("POST", self._record(memory_id, "feedback"), _memory,
                              json_body=body)

    def timeline(self, memory_id: str) -> list[dict[str, Any]]:
        """The record's history merged with the git commits that touched its files."""
        return self._nm._json("GET", self._record(memory_id, "timeline"), _listed)

    # -- tags, stats, collections --------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts by kind, status, author, agent and tag; embedded and pending vectors."""
        return self._nm._json("GET", self._url("stats"))

    def tags(self, status: str = "ALL") -> list[dict[str, Any]]:
        """``[{tag, count}]``, most used first."""
        return self._nm._json("GET", self._url("tags"), _listed, params={"status": status})

    def tag(self, memory_id: str, *tags: str) -> Memory:
        return self._nm._json("POST", self._record(memory_id, "tags"), _memory,
                              json_body={"tags": _each(tags, "tag")})

    def untag(self, memory_id: str, *tags: str) -> Memory:
        return self._nm._json("DELETE", self._record(memory_id, "tags"), _memory,
                              params={"tag": _each(tags, "untag")})

    def collections(self) -> list[dict[str, Any]]:
        return self._nm._json("GET", _path(self._project, "collections"), _listed)

    def save_collection(self, name: str, description: str | None = None,
                        **filters: Any) -> dict[str, Any]:
        """A named saved filter; pass ``collection=name`` to ``list`` and ``search``."""
        self._nm._takes("save_collection", "GET", MEMORIES, filters, (*PAGING, "collection"))
        return self._nm._json("PUT", _path(self._project, "collections", name),
                              json_body={"filters": filters, "description": description})

    def delete_collection(self, name: str) -> None:
        self._nm._delete(_path(self._project, "collections", name), "collection_not_found")

    # -- links and graph -----------------------------------------------------------------

    def link(self, memory_id: str, target: str, type: str = "relates_to",
             note: str | None = None) -> dict[str, Any]:
        """supersedes, depends_on, relates_to, contradicts or merged_into; a supersedes link
        makes ``target`` SUPERSEDED."""
        body = {"target": target, "type": type, **({"note": note} if note else {})}
        return self._nm._json("POST", self._record(memory_id, "links"), json_body=body)

    def unlink(self, memory_id: str, target: str, type: str | None = None) -> None:
        self._nm._delete(self._record(memory_id, "links"), "link_not_found",
                         params={"target": target, "type": type})

    def links(self, memory_id: str) -> list[dict[str, Any]]:
        return self._nm._json("GET", self._record(memory_id, "links"), _listed)

    def graph(self, memory_id: str, depth: int = 2) -> dict[str, Any]:
        """``{root, nodes, edges}`` within ``depth`` links (1–4)."""
        return self._nm._json("GET", self._record(memory_id, "graph"), params={"depth": depth})

    # -- contradictions ------------------------------------------------------------------

    def contradictions(self, status: str = "open", memory_id: str | None = None
                       ) -> Iterator[dict[str, Any]]:
        return self._nm._pages(_path(self._project, "contradictions"), dict,
                               {"status": status, "memory_id": memory_id})

    def check_contradictions(self, memory_id: str) -> dict[str, Any]:
        return self._nm._json("POST", _path(self._project, "contradictions", "check", memory_id))

    def resolve(self, contradiction_id: str, strategy: str, *, title: str | None = None,
                rationale: str | None = None) -> dict[str, Any]:
        """keep_newest, keep_oldest, keep_important, keep_both, or manual (with rationale)."""
        body = {k: v for k, v in {"strategy": strategy, "title": title,
                                  "rationale": rationale}.items() if v is not None}
        return self._nm._json("POST", _path(self._project, "contradictions", contradiction_id,
                                            "resolve"), json_body=body)

    def contradiction_config(self, **changes: Any) -> dict[str, Any]:
        """The project's settings (check_on_store, threshold, auto_resolve); changed first
        when given."""
        url = _path(self._project, "contradictions", "config")
        self._nm._takes("contradiction_config", "PUT",
                        "/v1/projects/{project_id}/contradictions/config", changes)
        if changes:
            return self._nm._json("PUT", url, json_body=changes)
        return self._nm._json("GET", url)

    # -- decay and consolidation ---------------------------------------------------------

    def decay_policy(self, **changes: Any) -> dict[str, Any]:
        """The project's decay policy (enabled, half_life_days, access_boost,
        archive_threshold); changed first when given."""
        self._nm._takes("decay_policy", "PUT", MEMORIES + "/decay-policy", changes)
        if changes:
            return self._nm._json("PUT", self._url("decay-policy"), json_body=changes)
        return self._nm._json("GET", self._url("decay-policy"))

    def decay(self, dry_run: bool = False, wait: bool = True,
              timeout: float = BUILD_TIMEOUT) -> Job:
        """A decay sweep: records below the threshold become ARCHIVED (``dry_run``: listed)."""
        return self._job(self._url("decay"), {"dry_run": dry_run}, wait, timeout)

    def consolidate(self, dry_run: bool = False, kinds: Iterable[str] = (),
                    threshold: float | None = None, wait: bool = True,
                    timeout: float = BUILD_TIMEOUT) -> Job:
        """Merge clusters of near-duplicates (``dry_run``: list them)."""
        body = {"dry_run": dry_run, "kinds": _items(kinds),
                **({"threshold": threshold} if threshold is not None else {})}
        return self._job(self._url("consolidate"), body, wait, timeout)

    def batch(self, items: list[dict[str, Any]], atomic: bool = True) -> dict[str, Any]:
        """Creates, patches, invalidates and deletes in one transaction, one result per item:
        all land or none does (422); ``atomic=False`` applies the items that validate."""
        return self._nm._json("POST", self._url("batch"),
                              json_body={"items": items, "atomic": atomic})

    def export(self) -> Iterator[dict[str, Any]]:
        """Every record with its history, one dict per JSONL line, streamed."""
        resp = self._nm.request("GET", self._url("export"), stream=True,
                                headers={"Accept": JSONL})
        kind = resp.headers.get("Content-Type")
        if _media(kind) != JSONL:  # a web page at the address: nothing of it is an export
            resp.close()
            raise _not_neuralmind(self._nm.url, resp.status, kind, "a body that is not JSONL")

        def lines():
            import http.client
            count, line = 0, b"\n"
            with resp:
                try:
                    for line in resp:
                        if line.strip():
                            record = json.loads(line)
                            count += 1
                            yield record
                except TimeoutError:  # stalled, not broken: _streamed says so
                    raise
                except (http.client.HTTPException, ValueError, OSError) as ex:
                    # broken off (a chunk or a line cut short, the connection reset): say how
                    # far it came
                    raise self._cut_short(count) from ex
            if not line.endswith(b"\n"):  # the server ends every complete export with one
                raise self._cut_short(count)
        return _streamed(lines(), f"GET {self._url('export')}", self._nm)

    def export_markdown(self) -> str:
        """Every record as a Markdown section (title, facts, text, lists, links, history),
        ending with the line that counts them."""
        text = self._nm.request("GET", self._url("export"), params={"format": "md"}).body.decode()
        if not EXPORT_END.search(text):
            raise self._cut_short(text.count("\n## "))
        return text

    def _cut_short(self, count: int) -> BrokenAnswer:
        return BrokenAnswer(f"GET {self._url('export')}: the export from {self._nm.url} broke "
                            f"off after {count} records, without its end (the server's log "
                            "says why); export again")

    def import_(self, lines: Iterable[dict[str, Any]] | bytes | str, mode: str = "skip"
                ) -> dict[str, Any]:
        """Load what ``export`` produced (its dicts, or the JSONL text), all or nothing;
        ``mode`` skip keeps records whose id exists, overwrite replaces them."""
        if isinstance(lines, str):
            lines = lines.encode()
        body = lines if isinstance(lines, bytes) else \
            "".join(json.dumps(line) + "\n" for line in lines).encode()
        return self._nm._json("POST", self._url("import"), data=body, params={"mode": mode},
                              headers={"Content-Type": JSONL})


# -- webhooks --------------------------------------------------------------------------------

SIGNATURE_TOLERANCE_S = 300


@dataclass(frozen=True)
class Webhook:
    id: str
    url: str
    events: list = field(default_factory=list)
    projects: list | None = None
    description: str = ""
    enabled: bool = True
    disabled_reason: str | None = None
    created_by: str | None = None
    created_at: str | None = None
    failing_since: str | None = None
    paused_at: str | None = None  # enabled false by a PATCH: events are kept for the resume
    previous_secret_until: str | None = None
    previous_secrets_until: list = field(default_factory=list)  # each replaced secret's grace
    secret: str | None = None  # only in what create() and rotate_secret() return
    raw: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class WebhookDelivery:
    id: str
    webhook_id: str
    kind: str
    status: str
    attempts: int = 0
    event_id: int | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    last_latency_ms: float | None = None
    next_attempt_at: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


def _webhook(data: dict) -> Webhook:
    return _build(Webhook, data)


def _delivery(data: dict) -> WebhookDelivery:
    return _build(WebhookDelivery, data)


class Webhooks:
    """``/v1/webhooks``: signed deliveries of events to your own services (docs/webhooks.md)."""

    def __init__(self, nm: NeuralMindClient):
        self._nm = nm

    def create(self, url: str, events: Iterable[str], projects: Iterable[str] | None = None,
               description: str = "") -> Webhook:
        """Subscribe ``url``; the returned ``secret`` is shown this once — keep it."""
        body = {"url": url, "events": _items(events), "description": description,
                "projects": _items(projects)}
        return self._nm._json("POST", "/v1/webhooks", _webhook, json_body=body)

    def list(self) -> Iterator[Webhook]:
        return self._nm._pages("/v1/webhooks", _webhook)

    def get(self, webhook_id: str) -> Webhook:
        return self._nm._json("GET", _path("/v1/webhooks", webhook_id), _webhook)

    def update(self, webhook_id: str, **changes: Any) -> Webhook:
        """PATCH ``url``, ``events``, ``projects`` (None: every project), ``description``,
        ``enabled``."""
        self._nm._takes("update", "PATCH", "/v1/webhooks/{webhook_id}", changes)
        return self._nm._json("PATCH", _path("/v1/webhooks", webhook_id), _webhook,
                              json_body=changes)

    def delete(self, webhook_id: str) -> None:
        self._nm._delete(_path("/v1/webhooks", webhook_id), "webhook_not_found")

    def rotate_secret(self, webhook_id: str, keep_previous_s: int = 0) -> Webhook:
        """A new secret (``.secret``); the old one also signs for ``keep_previous_s``."""
        return self._nm._json("POST", _path("/v1/webhooks", webhook_id, "rotate-secret"),
                              _webhook, json_body={"keep_previous_s": keep_previous_s})

    def test(self, webhook_id: str) -> WebhookDelivery:
        """Send a ``ping`` now; the delivery says what the receiver answered."""
        return self._nm._json("POST", _path("/v1/webhooks", webhook_id, "test"), _delivery)

    def deliveries(self, webhook_id: str, status: str | None = None) -> Iterator[WebhookDelivery]:
        """The hook's deliveries, newest first: ``pending``, ``delivered`` or ``failed``."""
        return self._nm._pages(_path("/v1/webhooks", webhook_id, "deliveries"), _delivery,
                               {"status": status})

    def redeliver(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        """Queue a finished delivery again (same id and body), at the end of the hook's queue."""
        return self._nm._json("POST", _path("/v1/webhooks", webhook_id, "deliveries",
                                            delivery_id, "redeliver"), _delivery)


def webhook_signature(secret: str, timestamp: str | int, body: bytes) -> str:
    """``sha256=`` + hex HMAC-SHA256, keyed with the secret's UTF-8 bytes, of
    ``timestamp + "." + body``: the ``NeuralMind-Signature`` of a delivery."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_signature(secret: str, body: bytes, headers: Any, *,
                     tolerance_s: float = SIGNATURE_TOLERANCE_S, now: float | None = None) -> bool:
    """Whether a webhook delivery is genuine and fresh: ``body`` is the raw request body
    (bytes, before any JSON parsing), ``headers`` the request's headers (any mapping; names
    are matched without regard to case). False when the signature does not match (the header
    may carry several during a secret rotation: one matching is enough), or when
    ``NeuralMind-Timestamp`` is more than ``tolerance_s`` seconds from ``now`` — a replayed
    delivery. Compared in constant time."""
    if not isinstance(secret, str) or not isinstance(body, (bytes, bytearray)):
        raise TypeError("verify_signature(secret, body, headers): the secret is text (whsec_…) "
                        "and the body the raw bytes received")
    if not secret.strip():  # `os.environ.get("SECRET", "")`: anyone can sign with no key
        raise ValueError("verify_signature: the secret is empty (is its variable set?)")
    if not all(math.isfinite(v) for v in (tolerance_s, 0 if now is None else now)):
        raise ValueError("verify_signature: tolerance_s and now are finite numbers of seconds "
                         "(nan or inf would let any old delivery through)")
    if not hasattr(headers, "items"):
        return False  # no headers: nothing signed it
    found = {str(k).lower(): str(v) for k, v in headers.items()}
    timestamp = found.get("neuralmind-timestamp", "")
    given = [s.strip().encode("utf-8", "replace")
             for s in found.get("neuralmind-signature", "").split(",") if s.strip()]
    # the headers are the sender's: ASCII digits only, and no more than a time has
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 20) or not given:
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_s:
        return False
    expected = webhook_signature(secret, timestamp, body).encode()
    return any(hmac.compare_digest(expected, s) for s in given)
