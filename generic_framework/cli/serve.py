"""The ``serve`` command: the bot HTTP service in the foreground.

Without an API key (``OPENAI_API_KEY``), or with ``--mock``, the embedded mock server runs
in-process and the service answers from its recorded fixtures (:mod:`~generic_framework.cli.
offline`, as ``chat`` does): a start-up log line says so, and ``GET /v1/bot`` reports
``offline: true`` with the recorded questions.
"""

from __future__ import annotations

import signal

from generic_framework.cli.common import EXIT_OK, EXIT_USAGE, err, run_command
from generic_framework.cli.offline import offline_notice, upstream
from generic_framework.config import Settings
from generic_framework.service import run

__all__ = ["run_serve"]


def run_serve(
    host: str | None, port: int | None, mock: bool = False, *, stay_on_config_error: bool = False
) -> int:
    """The ``serve`` command; ``host`` and ``port`` override BOT_HOST and BOT_PORT.

    With ``stay_on_config_error``, a configuration error (:data:`EXIT_USAGE`) is printed, then
    the process waits for SIGTERM or SIGINT before exiting 2: restarting cannot fix a setting,
    and a container's restart policy (``unless-stopped``) would restart it in a loop. The
    container stays up, unhealthy (nothing listens), with the error in its log.
    """

    def serve(settings: Settings) -> int:
        with upstream(settings, mock) as (active, offline):
            notice = None
            if offline:
                notice = f"{offline_notice(mock)} GET /v1/bot lists the recorded questions."
            run(active, offline_notice=notice)
        return EXIT_OK

    code = run_command(serve, bot_host=host, bot_port=port)
    if code == EXIT_USAGE and stay_on_config_error:
        wait_for_stop(
            "configuration error: not exiting until stopped, so no restart policy retries it; "
            "fix the setting, then recreate the service (docker compose up -d)"
        )
    return code


def wait_for_stop(notice: str) -> None:
    """Say ``notice``, then block until SIGTERM or SIGINT arrives (``docker stop``, Ctrl-C).

    The signals are blocked before the notice is printed: whoever stops the process on seeing
    it (an orchestrator, a test) cannot catch it before it waits, which would end it by the
    signal's default action instead of exit 2."""
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    err(notice)
    signal.sigwait(stop)
