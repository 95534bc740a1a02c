"""The ``serve`` command: the bot HTTP service in the foreground.

Without an API key (``OPENAI_API_KEY``), or with ``--mock``, the embedded mock server runs
in-process and the service answers from its recorded fixtures (:mod:`~generic_framework.cli.
offline`, as ``chat`` does): a start-up log line says so, and ``GET /v1/bot`` reports
``offline: true`` with the recorded questions.
"""

from __future__ import annotations

from generic_framework.cli.common import EXIT_OK, open_runtime, run_command
from generic_framework.cli.offline import offline_notice, upstream
from generic_framework.config import Settings

__all__ = ["run_serve"]


def run_serve(host: str | None, port: int | None, mock: bool = False) -> int:
    """The ``serve`` command; ``host`` and ``port`` override BOT_HOST and BOT_PORT."""

    def serve(settings: Settings) -> int:
        from generic_framework.service import run

        # No persona file, or a BOT_DEFAULT_PERSONA naming none: the line `chat` prints, and
        # exit 2, before the embedded mock starts (a service with nothing to serve is never
        # ready, and would only restart).
        open_runtime(settings).spec()
        with upstream(settings, mock) as (active, offline):
            notice = None
            if offline:
                notice = f"{offline_notice(mock)} GET /v1/bot lists the recorded questions."
            run(active, offline_notice=notice)
        return EXIT_OK

    return run_command(serve, bot_host=host, bot_port=port)
