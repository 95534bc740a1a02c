"""The ``record`` and ``replay`` commands: write fixtures from the real endpoint, replay them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from generic_framework.cli.common import EXIT_ERROR, EXIT_OK, err, persona_specs, run_command
from generic_framework.config import Settings
from generic_framework.errors import ConfigError

__all__ = ["run_record", "run_replay"]


def run_record(message: str, out: Path, persona: str | None) -> int:
    """The ``record`` command: needs OPENAI_API_KEY; says on stderr where it wrote.

    The key, the persona and the ``--out`` file are checked before the (paid) call.
    """

    def write(settings: Settings) -> int:
        from generic_framework.recording.recorder import record

        if not settings.has_api_key:
            raise ConfigError("record talks to the real endpoint: set OPENAI_API_KEY")
        specs = persona_specs(settings, persona)
        _check_writable(out)
        try:
            path = asyncio.run(
                record(settings, message, out, persona=persona, environ=os.environ, specs=specs)
            )
        except OSError as exc:
            err(f"error: could not write {str(out)!r} ({exc.strerror or exc}): the call was made")
            return EXIT_ERROR
        err(f"wrote {path}")
        return EXIT_OK

    return run_command(write)


def _check_writable(out: Path) -> None:
    """Refuse an ``--out`` that cannot be written, before anything is recorded."""
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a directory: name a .json file")
    folder = out.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the folder of --out {str(out)!r} ({exc.strerror or exc})"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write in {str(folder)!r} (--out): choose another file")


def run_replay(paths: list[Path], as_json: bool) -> int:
    """The ``replay`` command: 1 when a fixture fails (see ``replay_main``)."""

    def check(settings: Settings) -> int:
        from generic_framework.recording.replay import replay_main

        return replay_main(paths, settings=settings, as_json=as_json, environ=os.environ)

    return run_command(check)
