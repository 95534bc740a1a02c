"""Serving the app with uvicorn: the loopback rule, timeouts and limits against slow clients.

Limits, and why:

- ``BOT_API_TOKEN`` unset: binding anything but a loopback address is refused
  (:func:`check_bind`), because ``/v1`` would then be open to the network.
- A connection must send each request head whole within :data:`HEAD_TIMEOUT` seconds (of
  connecting, or of the previous response), and an idle keep-alive connection is closed after
  :data:`KEEP_ALIVE_TIMEOUT`; a request body must arrive
  within 30 s (:class:`~generic_framework.service.middleware.BodyLimitMiddleware`). So a client
  that connects and says nothing, or trickles its body, cannot hold a connection for long.
- Request heads are capped at :data:`MAX_HEAD_BYTES` (431 beyond; h11's own cap counts only
  what is buffered while a head is incomplete, so a head that arrives whole in one read of up
  to 256 KiB passed it: :class:`_HeadLimitedConnection` counts every head); at most
  :data:`MAX_CONNECTIONS`
  connections and tasks at once (beyond that uvicorn answers 503 at once, so a flood cannot
  exhaust file descriptors). Upstream calls are capped separately by ``LLM_MAX_CONCURRENCY``,
  where excess calls wait in a queue.
- On SIGTERM (or Ctrl-C) the service first drains for ``BOT_DRAIN_DELAY`` seconds (default
  0): ``/readyz`` answers 503 ``draining``, so a proxy checking it stops sending new requests,
  while everything that still arrives is served (:class:`DrainingServer`). Then it stops
  accepting connections, and running requests get ``BOT_SHUTDOWN_TIMEOUT`` seconds (default 8,
  under Docker's default 10 s stop timeout) to finish before they are cancelled. A second
  signal ends the drain at once. A rolling upgrade relies on both (docs/design/0610).
- uvicorn's log records (the access log quotes request paths) go through
  :func:`~generic_framework.redaction.redact`, like every other log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import ipaddress
import json
import logging
import os
import time
from types import FrameType
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from generic_framework.chats.platforms import WebhookFactory, webhook_factories
from generic_framework.config import Settings
from generic_framework.errors import ConfigError
from generic_framework.limits import check_bind_host
from generic_framework.listening import Server, listen, serve
from generic_framework.runtime import Runtime
from generic_framework.service.app import create_app
from generic_framework.service.errors import error_body
from generic_framework.service.sole import sole_sqlite_service
from generic_framework.service.state import Drain, ServiceState
from generic_framework.store.postgres_errors import require_driver
from generic_framework.telemetry.logs import configure_logging, redact_uvicorn_logs
from generic_framework.telemetry.tracing import setup_tracing

logger = logging.getLogger("generic_framework.service")

__all__ = [
    "HEAD_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "DrainingServer",
    "check_bind",
    "is_loopback",
    "run",
    "uvicorn_config",
]

HEAD_TIMEOUT = 10.0
KEEP_ALIVE_TIMEOUT = 5
MAX_HEAD_BYTES = 16 * 1024
MAX_CONNECTIONS = 1000


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


class _HeadLimitedConnection(h11.Connection):
    """h11's server connection, refusing any request head over its size limit.

    h11 enforces ``max_incomplete_event_size`` only while a head is still incomplete; a head
    that arrives whole in one read (asyncio reads up to 256 KiB at a time) is parsed whatever
    its size. Here the bytes each request head took from the receive buffer are counted, so
    every head over the limit is refused, however it arrived.
    """

    head_too_large = False

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        before = len(self._receive_buffer)
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            # h11's own limit (an incomplete head already over it) hints at 431 too.
            self.head_too_large = exc.error_status_hint == 431
            raise
        used = before - len(self._receive_buffer)
        if isinstance(event, h11.Request) and used > self._max_incomplete_event_size:
            self.head_too_large = True
            raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


class _HeadLimitedProtocol(H11Protocol):
    """uvicorn's h11 protocol over a :class:`_HeadLimitedConnection`, answering 431."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        limit = config.h11_max_incomplete_event_size or MAX_HEAD_BYTES
        self.conn = _HeadLimitedConnection(h11.SERVER, limit)

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every protocol error with 400; an oversized head gets its 431.
        conn = self.conn
        if isinstance(conn, _HeadLimitedConnection) and conn.head_too_large:
            limit = conn._max_incomplete_event_size
            _send_error(self, 431, f"the request head is larger than {limit} bytes")
        else:
            super().send_400_response(msg)


def _guarded_protocol(head_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing connections that send no whole request head in time.

    The head of every request must arrive within ``head_timeout`` of the connection opening or
    of the previous response ending. uvicorn's own keep-alive timer starts only after a first
    response and is cancelled by the first byte of the next request, so without this a client
    could open connections and never speak, or trickle a request head forever.
    """

    class GuardedH11Protocol(_HeadLimitedProtocol):
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


def _send_error(protocol: H11Protocol, status: int, message: str) -> None:
    """Answer with an OpenAI-style JSON error and close, as uvicorn answers its 400s."""
    body = json.dumps(
        error_body(message, type_="invalid_request_error", code="request_head_too_large")
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    reason = http.HTTPStatus(status).phrase.encode()
    for event in (
        h11.Response(status_code=status, headers=headers, reason=reason),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ):
        protocol.transport.write(protocol.conn.send(event))
    protocol.transport.close()


class DrainingServer(Server):
    """uvicorn's server, draining for ``delay`` seconds on the first SIGTERM or SIGINT.

    uvicorn stops accepting connections as soon as a signal arrives, while a proxy still
    counts the replica as up until its next failed checks; requests sent to it meanwhile meet a
    refused connection (or an idle connection closing under them). Here the first signal only
    begins ``drain`` (``/readyz`` answers 503 ``draining``) and the server keeps serving
    everything that arrives; after ``delay`` seconds uvicorn's own shutdown runs (stop
    accepting, finish running requests within ``timeout_graceful_shutdown``, then the
    lifespan's shutdown), and the signal is re-raised at the end as uvicorn does. A second
    signal during the drain starts that shutdown at once. ``delay`` 0: uvicorn's behaviour.
    """

    def __init__(self, config: uvicorn.Config, drain: Drain, delay: float) -> None:
        super().__init__(config)
        self.drain = drain
        self.delay = delay
        self._drain_ends: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.delay > 0 and self._drain_ends is None and self.started and not self.should_exit:
            self._captured_signals.append(sig)  # re-raised once uvicorn has shut down
            self._drain_ends = time.monotonic() + self.delay
            self.drain.begin()
            logger.info(
                "draining: /readyz answers 503; serving %g s more, then closing (signal %d)",
                self.delay,
                sig,
            )
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._drain_ends is not None and time.monotonic() >= self._drain_ends:
            self.should_exit = True
        return await super().on_tick(counter)


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
        "timeout_graceful_shutdown": settings.bot_shutdown_timeout,
        "log_level": settings.log_level.lower(),
        "server_header": False,
        # The client's address behind a proxy is the app's (BOT_TRUSTED_PROXIES,
        # service/forwarded.py), not uvicorn's FORWARDED_ALLOW_IPS, which trusts loopback.
        "proxy_headers": False,
    }
    if settings.log_format == "json":
        # No uvicorn handlers of its own: its lines reach the root logger's JSON handler.
        options["log_config"] = None
    options.update(overrides)
    config = uvicorn.Config(app, **options)  # configures uvicorn's loggers
    redact_uvicorn_logs()
    return config


def run(
    settings: Settings,
    host: str | None = None,
    port: int | None = None,
    *,
    offline_notice: str | None = None,
) -> None:
    """Serve the bot until interrupted (what ``generic-framework serve`` calls).

    Args:
        settings: the configuration; ``host`` and ``port`` default to ``BOT_HOST``/``BOT_PORT``.
        host: the interface to bind.
        port: the port (0 picks a free one).
        offline_notice: set when ``settings`` point at the embedded mock: logged at start-up,
            and ``GET /v1/bot`` then reports ``offline: true`` with the recorded questions.

    The app builds its :class:`~generic_framework.runtime.Runtime` from ``settings`` and closes
    it at shutdown (:func:`~generic_framework.service.create_app`). Logs go to stderr as text
    or JSON lines (``LOG_FORMAT``); traces are exported when the ``OTEL_*`` variables ask for
    it (:func:`~generic_framework.telemetry.tracing.setup_tracing`).

    Raises:
        ConfigError: the host is invalid, binding beyond loopback without ``BOT_API_TOKEN``,
            another service uses the same SQLite database (:mod:`~.sole`: several replicas
            need ``DATABASE_URL``), a chat platform's setting is invalid (Telegram's
            webhook URL without its secret, or no token), the address cannot be bound
            (:func:`~generic_framework.listening.listen`), or a persona file or setting is
            invalid.
    """
    settings.register_secrets()  # the key, token and password: never in a log line or body
    webhooks = webhook_factories(os.environ)  # the chat platforms' webhooks that are set
    host = _checked_host(host if host is not None else settings.bot_host)
    port = port if port is not None else settings.bot_port
    check_bind(settings, host)
    # No persona file, or a BOT_DEFAULT_PERSONA naming none: the line `chat` prints, before
    # anything is bound or logged (a service with nothing to serve would never be ready).
    Runtime(settings).spec()
    if settings.uses_postgres:  # the driver's one-line hint, before anything is bound
        require_driver()
    sole: contextlib.AbstractContextManager[None] = (
        contextlib.nullcontext()
        if settings.uses_postgres
        else sole_sqlite_service(settings.database_path)
    )
    with sole:
        _run(settings, host, port, offline_notice, webhooks)


def _run(
    settings: Settings,
    host: str,
    port: int,
    offline_notice: str | None,
    webhooks: list[WebhookFactory],
) -> None:
    sockets = listen(host, port)  # a taken port fails here, before the app is built
    try:
        configure_logging(settings.log_level, settings.log_format)
        setup_tracing(os.environ)  # the entry point: OpenTelemetry reads its own variables
        if offline_notice is not None:
            logger.warning("%s", offline_notice)
        offline = offline_notice is not None
        app = create_app(settings, environ=os.environ, offline=offline, webhooks=webhooks)
        config = uvicorn_config(app, settings, host, port)
        state: ServiceState = app.state.service
        server = DrainingServer(config, state.drain, settings.bot_drain_delay)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    serve(config, sockets, server)


def _checked_host(host: str) -> str:
    try:
        return check_bind_host(host)
    except ValueError as exc:
        raise ConfigError(f"BOT_HOST {exc} (got {host!r})") from None
