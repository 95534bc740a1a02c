"""Serving the app with uvicorn: the loopback rule, timeouts and limits against slow clients.

Limits, and why:

- ``BOT_API_TOKEN`` unset: binding anything but a loopback address is refused
  (:func:`check_bind`), because ``/v1`` would then be open to the network.
- A connection must send each request head whole within :data:`HEAD_TIMEOUT` seconds (of
  connecting, or of the previous response), and an idle keep-alive connection is closed after
  :data:`KEEP_ALIVE_TIMEOUT`; a request body must arrive
  within 30 s (:class:`~generic_framework.service.middleware.BodyLimitMiddleware`). So a client
  that connects and says nothing, or trickles its body, cannot hold a connection for long.
- Request heads are capped at :data:`MAX_HEAD_BYTES`; at most :data:`MAX_CONNECTIONS`
  connections and tasks at once (beyond that uvicorn answers 503 at once, so a flood cannot
  exhaust file descriptors). Upstream calls are capped separately by ``LLM_MAX_CONCURRENCY``,
  where excess calls wait in a queue.
- On SIGTERM, running requests get :data:`GRACEFUL_SHUTDOWN` seconds (under Docker's default
  10 s stop timeout) to finish.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from generic_framework.config import Settings
from generic_framework.service.app import create_app
from generic_framework.wire.errors import ConfigError

__all__ = [
    "GRACEFUL_SHUTDOWN",
    "HEAD_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "check_bind",
    "is_loopback",
    "run",
    "uvicorn_config",
]

HEAD_TIMEOUT = 10.0
KEEP_ALIVE_TIMEOUT = 5
MAX_HEAD_BYTES = 16 * 1024
MAX_CONNECTIONS = 1000
GRACEFUL_SHUTDOWN = 8


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings, host: str) -> None:
    """Refuse to serve beyond loopback without ``BOT_API_TOKEN``.

    Raises:
        ConfigError: ``host`` is not a loopback address and no token is configured.
    """
    if settings.bot_api_token is None and not is_loopback(host):
        raise ConfigError(
            f"BOT_API_TOKEN is not set: refusing to bind {host!r}, which other machines can "
            "reach; set BOT_API_TOKEN (e.g. `openssl rand -hex 32`) or bind 127.0.0.1"
        )


def _guarded_protocol(head_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing connections that send no whole request head in time.

    The head of every request must arrive within ``head_timeout`` of the connection opening or
    of the previous response ending. uvicorn's own keep-alive timer starts only after a first
    response and is cancelled by the first byte of the next request, so without this a client
    could open connections and never speak, or trickle a request head forever.
    """

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(head_timeout, self._head_expired)

        def _head_expired(self) -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

    return GuardedH11Protocol


def uvicorn_config(
    app: ASGIApp, settings: Settings, host: str, port: int, **overrides: Any
) -> uvicorn.Config:
    """The uvicorn configuration of the service (timeouts and limits above)."""
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "http": _guarded_protocol(overrides.pop("head_timeout", HEAD_TIMEOUT)),
        "ws": "none",
        "lifespan": "on",
        "timeout_keep_alive": KEEP_ALIVE_TIMEOUT,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "limit_concurrency": MAX_CONNECTIONS,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN,
        "log_level": settings.log_level.lower(),
        "server_header": False,
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)


def run(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Serve the bot until interrupted (what ``generic-framework serve`` calls).

    Args:
        settings: the configuration; ``host`` and ``port`` default to ``BOT_HOST``/``BOT_PORT``.
        host: the interface to bind.
        port: the port (0 picks a free one).

    The app builds its :class:`~generic_framework.runtime.Runtime` from ``settings`` and closes
    it at shutdown (:func:`~generic_framework.service.create_app`).

    Raises:
        ConfigError: binding beyond loopback without ``BOT_API_TOKEN``, or a persona file or
            setting is invalid.
    """
    host = host if host is not None else settings.bot_host
    port = port if port is not None else settings.bot_port
    check_bind(settings, host)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    app = create_app(settings, environ=os.environ)
    uvicorn.Server(uvicorn_config(app, settings, host, port)).run()
