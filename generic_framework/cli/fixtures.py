"""The ``record`` and ``replay`` commands: write fixtures from the real endpoint, replay them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from generic_framework.cli.common import EXIT_OK, err, run_command
from generic_framework.config import Settings
from generic_framework.wire.errors import ConfigError

__all__ = ["run_record", "run_replay"]


def run_record(message: str, out: Path, persona: str | None) -> int:
    """The ``record`` command: needs OPENAI_API_KEY; says on stderr where it wrote."""

    def write(settings: Settings) -> int:
        from generic_framework.recording.recorder import record

        if not settings.has_api_key:
            raise ConfigError("record talks to the real endpoint: set OPENAI_API_KEY")
        path = asyncio.run(record(settings, message, out, persona=persona, environ=os.environ))
        err(f"wrote {path}")
        return EXIT_OK

    return run_command(write)


def run_replay(paths: list[Path], as_json: bool) -> int:
    """The ``replay`` command: 1 when a fixture fails (see ``replay_main``)."""

    def check(settings: Settings) -> int:
        from generic_framework.recording.replay import replay_main

        return replay_main(paths, settings=settings, as_json=as_json, environ=os.environ)

    return run_command(check)
