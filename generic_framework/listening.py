"""Listening sockets for the servers (the bot service, the mock): bound before uvicorn starts.

uvicorn binds its own socket during start-up; when that fails it logs the error and exits with
its own status 3, which is none of the CLI's documented codes. Binding here first turns every
failure (the port is taken, the address is not this machine's, a name does not resolve) into a
:class:`~generic_framework.errors.ConfigError` that says what to do, before an app is
built; uvicorn then serves the sockets it is given (:func:`serve`).
"""

from __future__ import annotations

import errno
import logging
import socket

import uvicorn

from generic_framework.errors import ConfigError

__all__ = ["Server", "listen", "serve", "url_host"]

logger = logging.getLogger("uvicorn.error")

_BACKLOG = 2048  # uvicorn's default

_ADVICE = {
    errno.EADDRINUSE: "another program is listening there: choose another port, or stop it",
    errno.EACCES: "not allowed: ports below 1024 need privileges; choose a port above 1023",
    errno.EADDRNOTAVAIL: "that address is not one of this machine's: use 127.0.0.1 or 0.0.0.0",
}


def url_host(host: str) -> str:
    """``host`` as written in a URL: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host else host


def _addresses(host: str, port: int) -> list[tuple[int, tuple[object, ...]]]:
    try:
        found = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(
            f"cannot listen on {host!r}: the name does not resolve ({exc}); use an IP address "
            "such as 127.0.0.1"
        ) from None
    unique: list[tuple[int, tuple[object, ...]]] = []
    for family, _, _, _, address in found:
        if (family, address) not in unique:
            unique.append((family, address))
    return unique


def _bind(family: int, address: tuple[object, ...]) -> socket.socket:
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says so, and without it every response waits ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            # One socket per address family, as asyncio does: no dual-stack surprises.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address ``host`` resolves to (one for an IP address).

    Raises:
        ConfigError: a name does not resolve, or an address cannot be bound (in use, not this
            machine's, privileged); the message says what to do.
    """
    sockets: list[socket.socket] = []
    try:
        for family, address in _addresses(host, port):
            sockets.append(_bind(family, address))
    except OSError as exc:
        for sock in sockets:
            sock.close()
        advice = _ADVICE.get(exc.errno or 0, "check the host and the port")
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"cannot listen on {url_host(host)}:{port} ({reason}): {advice}"
        ) from None
    return sockets


class Server(uvicorn.Server):
    """uvicorn's server, announcing the sockets it is given as it announces its own."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        # uvicorn says "Uvicorn running on ..." only for sockets it bound itself; scripts and
        # tests wait for that line, so it is written here, once serving has started.
        if self.started and sockets:
            for sock in sockets:
                host, port = sock.getsockname()[:2]
                logger.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)",
                            url_host(host), port)  # fmt: skip


def serve(
    config: uvicorn.Config, sockets: list[socket.socket], server: Server | None = None
) -> None:
    """Serve ``config``'s app on ``sockets`` (from :func:`listen`) until stopped; closes them.

    ``server``: the :class:`Server` to run (one over ``config`` when omitted).
    """
    try:
        (server or Server(config)).run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
