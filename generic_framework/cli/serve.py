"""The ``serve`` command: the bot HTTP service in the foreground."""

from __future__ import annotations

from generic_framework.cli.common import EXIT_OK, run_command
from generic_framework.config import Settings

__all__ = ["run_serve"]


def run_serve(host: str | None, port: int | None) -> int:
    """The ``serve`` command; ``host`` and ``port`` override BOT_HOST and BOT_PORT."""

    def serve(settings: Settings) -> int:
        from generic_framework.service import run

        run(settings)
        return EXIT_OK

    return run_command(serve, bot_host=host, bot_port=port)
