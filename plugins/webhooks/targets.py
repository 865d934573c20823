"""Where a hook may send, checked when it is made and again before every try (DNS can change).

A target is an ``http(s)`` URL without credentials whose host resolves only to public
addresses, unless the operator lists a range in ``[webhooks] allow_private``. The check
resolves the name once and the connection goes to an address that passed it, so a name that
answers differently a moment later (DNS rebinding) cannot steer a try inside the network.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

log = logging.getLogger("neuralmind.webhooks")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]
RESPONSE_READ_MAX = 64 * 1024  # a receiver's answer is read this far and dropped


class TargetRefused(ValueError):
    """A URL a hook may not send to; the message says why and what would allow it."""


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line

    @property
    def host_header(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return name if self.port == default else f"{name}:{self.port}"


def parse(url: str, *, require_https: bool) -> Target:
    """The URL's parts, or :class:`TargetRefused` naming what is wrong with it."""
    if bad := next((c for c in url if c.isspace() or ord(c) < 32 or ord(c) == 127), None):
        raise TargetRefused(f"a URL cannot hold {bad!r} (percent-encode it: {quote(bad)}); "
                            "no request could be sent to it")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as ex:  # urllib's reasons, in ours
        why = ("its port is not a number from 1 to 65535" if "port" in str(ex).lower() else
               "its IPv6 address is not one, or its [ ] are not closed" if "IPv6" in str(ex)
               else "it cannot be read as one")
        raise TargetRefused(f"not a valid URL: {why}") from None
    if port == 0:
        raise TargetRefused("not a valid URL: its port is not a number from 1 to 65535")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise TargetRefused(f"only http:// and https:// URLs can receive webhooks, not "
                            f"{scheme + '://' if scheme else 'a URL without a scheme'}")
    if require_https and scheme != "https":
        raise TargetRefused("server mode sends webhooks over https only (an operator can allow "
                            "http with [webhooks] insecure_http = true)")
    if not parts.hostname:
        raise TargetRefused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("credentials in the URL (user:password@) are not sent; the "
                            "signature authenticates each delivery")
    if parts.fragment:
        raise TargetRefused("a URL fragment (#…) is never sent to a server; remove it")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    _check_ascii(parts.hostname, path)
    return Target(url, scheme, parts.hostname, port or (443 if scheme == "https" else 80), path)


def _check_ascii(host: str, path: str) -> None:
    """HTTP sends the request line and the Host header as ASCII (http.client cannot encode
    anything else), so a URL that is not ASCII there is refused, with its ASCII spelling. The
    message names one character, never the path or query: a refused try's error reaches the
    hook's events, and a path or query may hold a token."""
    if not host.isascii():
        try:
            spelled = f", {host.encode('idna').decode('ascii')}"
        except UnicodeError:  # no IDNA form (a label too long, a character IDNA forbids)
            spelled = ""
        raise TargetRefused(f"the host {host!r} is not ASCII: write its ASCII (punycode) "
                            f"form{spelled}; no request could be sent to it")
    if bad := next((c for c in path if not c.isascii()), None):
        raise TargetRefused(f"a URL's path and query must be ASCII; this one holds {bad!r}: "
                            f"percent-encode it as its UTF-8 bytes, {quote(bad)}; no request "
                            "could be sent to it")


def host_of(url: str) -> str | None:
    """The host a URL names (what events and logs may say of a target: its path and query
    may hold a token)."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _kind(ip: IPAddress) -> str | None:
    """Why an address is not public, or None when it is."""
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata services live there)"
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private or getattr(ip, "is_site_local", False):
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a public address"
    return None


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
# IPv4-compatible (``::a.b.c.d``, deprecated) and SIIT-translated (``::ffff:0:a.b.c.d``): a
# tunnel or translator on the way delivers them to the IPv4 address they end with
_EMBEDDED = (ipaddress.ip_network("::/96"), ipaddress.ip_network("::ffff:0:0:0/96"))


def _carried(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries to the IPv4 internet — mapped (``::ffff:a.b.c.d``),
    NAT64, 6to4, Teredo, IPv4-compatible, SIIT — since a private address behind it is reached
    all the same; else ``ip`` itself."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ip
    if ip.ipv4_mapped or ip.sixtofour:
        return ip.ipv4_mapped or ip.sixtofour
    if ip.teredo:
        return ip.teredo[1]
    if any(ip in net for net in (*_NAT64, *_EMBEDDED)) and int(ip) > 1:  # not :: nor ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class TargetPolicy:
    """The operator's rules: ``allow_private`` ranges, whether only https is allowed, and the
    certificates https targets are checked against (the system's, and ``ca_file``)."""

    def __init__(self, allow_private: Sequence[str], require_https: bool,
                 ca_file: str | None = None, resolve: Resolver = system_resolver):
        self.allowed = [ipaddress.ip_network(c, strict=False) for c in allow_private]
        self.require_https = require_https
        self.ca_file = ca_file
        self.resolve = resolve

    @functools.cached_property
    def tls(self) -> ssl.SSLContext:
        """Loaded on first use and kept (loading the system's store takes ~40 ms, more than a
        try): the system's trust store, and the operator's CA file besides."""
        context = ssl.create_default_context()
        if self.ca_file:
            context.load_verify_locations(self.ca_file)
        return context

    def target(self, url: str) -> Target:
        return parse(url, require_https=self.require_https)

    def addresses(self, target: Target) -> list[IPAddress]:
        """The addresses ``target`` resolves to now, every one allowed; else TargetRefused."""
        try:
            literal = ipaddress.ip_address(target.host.split("%")[0])
            found = [literal]
        except ValueError:
            try:
                found = [ipaddress.ip_address(a.split("%")[0])
                         for a in self.resolve(target.host, target.port)]
            except (OSError, UnicodeError) as ex:  # the resolver's words, without its errno
                why = (getattr(ex, "strerror", None) or str(ex)).lower()
                raise TargetRefused(f"cannot resolve {target.host}: {why}") from None
        if not found:
            raise TargetRefused(f"{target.host} resolves to no address")
        for ip in found:
            self._check(target.host, ip)
        return found

    def _check(self, host: str, ip: IPAddress) -> None:
        seen = _carried(ip)
        why = _kind(seen)
        if why is None or any(seen in net for net in self.allowed):
            return
        named = f"{host} resolves to {seen}" if str(seen) != host else str(seen)
        raise TargetRefused(f"{named}, {why}: webhooks are not sent inside the network unless "
                            f"an operator lists the range in [webhooks] allow_private "
                            f"(e.g. \"{seen}/{seen.max_prefixlen}\")")


# -- one try ---------------------------------------------------------------------------------

class _Pinned(http.client.HTTPConnection):
    """An HTTP(S) connection to an address already checked, speaking to the URL's host name
    (Host header, and for https the TLS server name and the certificate's check)."""

    def __init__(self, target: Target, address: IPAddress, timeout: float,
                 tls: ssl.SSLContext | None):
        super().__init__(str(address), target.port, timeout=timeout)
        self._target, self._tls = target, tls

    def connect(self) -> None:
        super().connect()
        if self._target.scheme == "https":
            self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._target.host)


@dataclass(frozen=True)
class Outcome:
    """What one try came to: a 2xx is a success; anything else says why it was not."""

    code: int | None
    latency_ms: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Connections:
    """Keep-alive connections, one per hook (a hook has one try in flight at a time), so a
    busy hook is not paid a TCP (and TLS) handshake per delivery. A connection is reused only
    to the address the try's own check just passed, and not after ``idle_s`` unused."""

    def __init__(self, idle_s: float = 15.0):
        self.idle_s = idle_s
        self._open: dict[str, tuple[_Pinned, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, target: Target, address: IPAddress) -> _Pinned | None:
        with self._lock:
            found = self._open.pop(key, None)
        if found is None:
            return None
        conn, used = found
        if (conn._target.url, conn.host) == (target.url, str(address)) and \
                time.monotonic() - used < self.idle_s:
            return conn
        conn.close()
        return None

    def keep(self, key: str, conn: _Pinned) -> None:
        with self._lock:
            old = self._open.pop(key, None)
            self._open[key] = (conn, time.monotonic())
        if old is not None:
            old[0].close()

    def close(self) -> None:
        with self._lock:
            conns, self._open = list(self._open.values()), {}
        for conn, _ in conns:
            conn.close()


# a kept connection the receiver closed while idle fails before any answer: sent again on a
# new connection (the delivery id lets the receiver drop it if the first did arrive)
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _exchange(conn: _Pinned, target: Target, body: bytes,
              headers: dict[str, str]) -> tuple[int, bool]:
    """One request and its answer: the status, and whether the connection can serve again."""
    conn.request("POST", target.path, body=body, headers={"Host": target.host_header, **headers})
    resp = conn.getresponse()
    resp.read(RESPONSE_READ_MAX)
    return resp.status, resp.isclosed() and not resp.will_close


def post(policy: TargetPolicy, url: str, body: bytes, headers: dict[str, str], timeout: float,
         connections: Connections | None = None, key: str = "") -> Outcome:
    """One POST of ``body`` to ``url``, checked against ``policy`` first; never raises.
    Redirects are not followed: a 3xx is a failed try. With ``connections``, the connection
    kept under ``key`` is used and kept again when the receiver allows it."""
    start = time.perf_counter()
    try:
        return _post(policy, url, body, headers, timeout, connections, key, start)
    except Exception as ex:  # unforeseen, still a failed try: recorded and tried again after
        # a back-off, where an exception skipped the record and left the delivery due at once
        log.warning("webhooks: a try to %s failed unexpectedly", host_of(url), exc_info=ex)
        return _failed(start, ex)


def _since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _failed(start: float, ex: Exception) -> Outcome:
    return Outcome(None, _since(start), f"{type(ex).__name__}: {ex}"[:500])


def _post(policy: TargetPolicy, url: str, body: bytes, headers: dict[str, str], timeout: float,
          connections: Connections | None, key: str, start: float) -> Outcome:
    try:
        target = policy.target(url)
        address = policy.addresses(target)[0]
    except TargetRefused as ex:
        return Outcome(None, _since(start), f"refused: {ex}")
    kept = connections.take(key, target, address) if connections is not None else None
    conn = kept or _Pinned(target, address, timeout,
                           policy.tls if target.scheme == "https" else None)
    reusable = False
    try:
        try:
            code, reusable = _exchange(conn, target, body, headers)
        except _STALE:
            if kept is None:
                raise
            conn.close()
            conn = _Pinned(target, address, timeout, conn._tls)
            code, reusable = _exchange(conn, target, body, headers)
    except TimeoutError:
        return Outcome(None, _since(start), f"timed out after {timeout:g} s")
    except (OSError, http.client.HTTPException) as ex:
        return _failed(start, ex)
    finally:
        if reusable and connections is not None:
            connections.keep(key, conn)
        else:
            conn.close()
    if 200 <= code < 300:
        return Outcome(code, _since(start))
    if 300 <= code < 400:
        return Outcome(code, _since(start), f"answered {code}: redirects are not followed")
    return Outcome(code, _since(start), f"answered {code}")
