"""What the chat platforms' commands (``telegram``, ``discord``) share: reading the
platform's settings before anything starts, and serving the metrics.

:func:`run_bot` reads the platform's settings (a missing token is a configuration error, said
at once, and every secret registered for redaction), the persona files and the logging, then
runs the bot over the real upstream or the embedded mock (said in one line). The bots have no
HTTP server of their own, so with ``TELEGRAM_METRICS_PORT`` / ``DISCORD_METRICS_PORT`` they
serve the runtime's registry with prometheus-client's own threaded server
(:func:`metrics_served`: scrapes must not wait on the event loop of the turns).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from generic_framework.cli.common import err, persona_specs, run_command
from generic_framework.cli.offline import offline_notice, upstream
from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec
from generic_framework.runtime import Runtime
from generic_framework.telemetry.logs import configure_logging

__all__ = ["metrics_served", "run_bot"]


class _BotSettings(Protocol):
    @property
    def token(self) -> str: ...

    def register_secrets(self) -> None: ...


_S = TypeVar("_S", bound=_BotSettings)


def run_bot(
    read: Callable[[], _S],
    serve: Callable[[Settings, _S, Mapping[str, PersonaSpec], bool], Coroutine[Any, Any, int]],
    mock: bool,
) -> int:
    """A bot command: ``serve(settings, platform settings, personas, offline)``'s exit code
    (``mock``: answer from the embedded mock even with a key)."""

    def action(settings: Settings) -> int:
        chosen = read()
        chosen.register_secrets()
        chosen.token  # noqa: B018  # a missing token is a configuration error, said now
        specs = persona_specs(settings, None)
        configure_logging(settings.log_level, settings.log_format)
        with upstream(settings, mock) as (active, offline):
            if offline:
                err(offline_notice(mock))
            return asyncio.run(serve(active, chosen, specs, offline))

    return run_command(action)


@contextmanager
def metrics_served(runtime: Runtime, host: str, port: int) -> Iterator[None]:
    """The runtime's metrics at ``http://host:port/metrics`` meanwhile (port 0: none)."""
    if not port:
        yield
        return
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, host, registry=runtime.telemetry.metrics.registry)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
