"""Running the mock: in-process on an ephemeral port, or in the foreground for the CLI.

:class:`MockServer` runs uvicorn in a background thread with its own event loop, so it serves
synchronous callers (the official SDKs, ``subprocess``) and asynchronous ones alike without
blocking either. The listening socket is bound before the thread starts, so the port is known
at once and early connections simply wait in the backlog.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from generic_framework.listening import listen, serve, url_host
from generic_framework.mock.app import (
    CODING_PREFIX,
    GENERAL_PREFIX,
    MCP_SEARCH_PATH,
    FixtureSource,
    MockApp,
    create_app,
)
from generic_framework.mock.catalog import Catalog
from generic_framework.mock.fixture import DEFAULT_PERSONA, Fixture, load_fixtures

__all__ = ["MockServer", "bundled_examples", "serve_forever"]

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class MockServer:
    """The mock Z.AI server on ``127.0.0.1`` and an ephemeral port, in a background thread.

    Use it as a context manager, synchronous or asynchronous::

        with MockServer() as server:                    # the bundled fixtures
            settings = Settings(api_key="mock", base_url=server.base_url)

        async with MockServer("tests/fixtures", api_keys=["k1"]) as server:
            ...

    Attributes:
        app: the ASGI app (its ``catalog`` holds progress and logs).
        host: the interface it listens on.
    """

    def __init__(
        self,
        fixtures: FixtureSource = None,
        *,
        api_keys: Iterable[str] | None = None,
        latency_ms: float = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        app: MockApp | None = None,
    ) -> None:
        self.app = app or create_app(fixtures, api_keys=api_keys, latency_ms=latency_ms)
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sockets: list[socket.socket] = []

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        """The bound port (only known once started)."""
        if self._port is None:
            raise RuntimeError("the mock server is not running; call start() first")
        return self._port

    @property
    def url(self) -> str:
        """``http://host:port`` with no path."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The general endpoint, e.g. ``http://127.0.0.1:PORT/api/paas/v4``."""
        return self.url + GENERAL_PREFIX

    @property
    def coding_base_url(self) -> str:
        """The coding endpoint, e.g. ``http://127.0.0.1:PORT/api/coding/paas/v4``."""
        return self.url + CODING_PREFIX

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> MockServer:
        """Bind, start serving in a background thread, and wait until uvicorn is up.

        Raises:
            RuntimeError: the server is already running or failed to start.
            ConfigError: the address could not be bound.
        """
        if self._thread is not None:
            raise RuntimeError("the mock server is already running")
        sockets = listen(self.host, self._requested_port)
        self._port = sockets[0].getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": sockets}, name="mock-zai", daemon=True
        )
        self._server, self._thread, self._sockets = server, thread, sockets
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        # uvicorn offers no start-up callback; poll its flag (the socket already accepts).
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._cleanup(sockets)
                raise RuntimeError("the mock server failed to start")
            time.sleep(0.002)
        return self

    def _cleanup(self, sockets: list[socket.socket]) -> None:
        for sock in sockets:
            sock.close()
        self._server, self._thread, self._port, self._sockets = None, None, None, []

    def stop(self) -> None:
        """Stop serving and wait for the thread to finish (idempotent)."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT)
        self._cleanup(self._sockets)

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> MockServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # ------------------------------------------------------------------ state

    def report(self) -> dict[str, Any]:
        """Fixtures served, never served, and unmatched requests (as ``GET /mock/report``)."""
        return self.app.catalog.report()

    def reset(self) -> None:
        """Rewind every fixture and clear the logs."""
        self.app.catalog.reset()

    def set_fixtures(self, fixtures: Sequence[Fixture]) -> None:
        """Serve a different set of fixtures from now on."""
        self.app.set_fixtures(fixtures)

    def end_mcp_sessions(self) -> None:
        """Forget the Web Search MCP sessions: the next request on one gets 404."""
        self.app.end_mcp_sessions()

    def examples(self) -> list[dict[str, str]]:
        """The user inputs the loaded fixtures have answers for."""
        return self.app.catalog.examples()


def bundled_examples(
    persona: str | None = DEFAULT_PERSONA,
    endpoint: str | None = "general",
    *,
    faults: bool = False,
) -> list[str]:
    """The user inputs the bundled fixtures answer for ``persona``, best demonstrations first.

    Args:
        persona: only fixtures recorded with this persona (``scout``); ``None`` for all.
        endpoint: only ``//`` questions recorded on this endpoint (``general`` or ``coding``:
            with ``WEB_SEARCH_MODE=auto`` they search differently); ``None`` for all.
        faults: the failure demonstrations instead (a rate limit, an empty balance, a
            content filter...), which the question lists leave out.
    """
    return Catalog(load_fixtures()).questions(persona, endpoint, faults=faults)


def serve_forever(
    fixtures: str | Path | Sequence[str | Path] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8090,
    latency_ms: float = 0,
    api_keys: Iterable[str] | None = None,
    fail_rate: float = 0.0,
    fail_seed: int = 0,
    echo: Callable[[str], None] = print,
) -> None:
    """Serve the mock in the foreground until interrupted (``generic-framework mock``).

    Args:
        fixtures: fixture files or directories; ``None`` or an empty list serves the bundled
            fixtures.
        host: the interface to listen on.
        port: the port (``0`` picks a free one).
        latency_ms: milliseconds to wait before every answer.
        api_keys: accepted keys; ``None`` accepts any non-empty key.
        fail_rate: the fraction of valid API requests answered with HTTP 503 / 1305.
        fail_seed: the seed that makes those failures reproducible.
        echo: where the start-up summary is written.

    Raises:
        FixtureError: a fixture file is invalid.
        ConfigError: the address cannot be bound (the message says what to do).
        ValueError: ``fail_rate`` is outside 0-1.
    """
    sources: FixtureSource = [fixtures] if isinstance(fixtures, str | Path) else fixtures or None
    app = create_app(
        sources,
        api_keys=api_keys,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        fail_seed=fail_seed,
    )
    sockets = listen(host, port)
    # The port bound, which --port 0 leaves to the system.
    url = f"http://{url_host(host)}:{sockets[0].getsockname()[1]}"
    echo(f"Mock Z.AI: {len(app.fixtures)} fixture(s) loaded")
    if fail_rate:
        echo(f"  failing {fail_rate:.1%} of requests with HTTP 503 (seed {fail_seed})")
    echo(f"  general endpoint: {url}{GENERAL_PREFIX}")
    echo(f"  coding endpoint:  {url}{CODING_PREFIX}")
    echo(f"  web search MCP:   {url}{MCP_SEARCH_PATH}")
    echo(f"  report:           {url}/mock/report")
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="info")
    _redact_access_log()
    serve(config, sockets)


def _redact_access_log() -> None:
    """uvicorn's log through ``redact``: its access log quotes paths, where a client may put a
    key (imported only when serving: the mock's import stays light)."""
    from generic_framework.telemetry.logs import redact_uvicorn_logs

    redact_uvicorn_logs()
