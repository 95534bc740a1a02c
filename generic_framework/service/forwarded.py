"""The client's address behind a reverse proxy: ``X-Forwarded-For``, believed only from
``BOT_TRUSTED_PROXIES``.

Behind a proxy every request comes from the proxy's address; the proxy names the client in
``X-Forwarded-For`` (HAProxy's ``option forwardfor``, nginx, Caddy, Traefik), appending the
address it received the request from to whatever the request already carried. So only the
right end of the list is written by proxies we run; anything to its left may be the client's
own invention. :class:`ForwardedClientMiddleware` therefore:

- does nothing unless the connection's peer is a trusted proxy: from any other peer the
  header is ignored, whatever it says;
- walks the list from the right, skipping trusted proxies, and takes the first address that is
  not one (the right-most untrusted address) as the client; when every entry is a trusted proxy
  the left-most is the client; an entry that is not an IP address (``unknown``, a name, a
  forged value) ends the walk, and the last proxy-written address stands;
- puts that address in the ASGI scope's ``client``, which the access log prints and which any
  per-client decision reads; ``X-Forwarded-Proto`` from a trusted proxy sets the scheme.

``Forwarded`` (RFC 7239) is not read: a proxy that writes one header passes the other through
from the client unchanged, so believing both would let a client spoof the one its proxy does not
write (docs/design/0609). uvicorn's own proxy-header handling (``FORWARDED_ALLOW_IPS``, which
trusts loopback by default) is turned off by :func:`~generic_framework.service.server.
uvicorn_config`: this is the one place.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from generic_framework.limits import IPNetwork

__all__ = ["ForwardedClientMiddleware", "forwarded_client", "parse_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_MAX_HOPS = 32
"""Entries read from the right of the list at most: no proxy chain is longer."""


def parse_address(entry: str) -> IPAddress | None:
    """The IP address of one ``X-Forwarded-For`` entry (``203.0.113.7``, ``203.0.113.7:4711``,
    ``2001:db8::1``, ``[2001:db8::1]:4711``); IPv4-mapped IPv6 as IPv4; None when it is not one.
    """
    text = entry.strip().strip('"')
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def forwarded_client(
    entries: Sequence[str], trusted: Callable[[IPAddress], bool]
) -> IPAddress | None:
    """The right-most untrusted address of an ``X-Forwarded-For`` list (see the module); None
    when the list names no address at all."""
    found: IPAddress | None = None
    for entry in list(reversed(entries))[:_MAX_HOPS]:
        address = parse_address(entry)
        if address is None:
            break
        found = address
        if not trusted(address):
            break
    return found


class ForwardedClientMiddleware:
    """Set the scope's ``client`` from ``X-Forwarded-For`` when the peer is a trusted proxy.

    Args:
        app: the application.
        trusted: the networks of ``BOT_TRUSTED_PROXIES``.
    """

    def __init__(self, app: ASGIApp, trusted: Sequence[IPNetwork]) -> None:
        self.app = app
        self.trusted = tuple(trusted)

    def is_trusted(self, address: IPAddress) -> bool:
        """True when ``address`` is in one of the trusted networks."""
        return any(address in network for network in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client") if scope["type"] == "http" else None
        address = parse_address(peer[0]) if peer else None
        if address is not None and self.is_trusted(address):
            self._rewrite(scope)
        await self.app(scope, receive, send)

    def _rewrite(self, scope: Scope) -> None:
        entries: list[str] = []
        proto = None
        for name, value in scope.get("headers", ()):
            if name == b"x-forwarded-for":
                entries.extend(bytes(value).decode("latin-1").split(","))
            elif name == b"x-forwarded-proto":
                proto = bytes(value).decode("latin-1").split(",")[-1].strip().lower()
        client = forwarded_client(entries, self.is_trusted)
        if client is not None:
            scope["client"] = (str(client), 0)
        if proto in ("http", "https"):
            scope["scheme"] = proto
