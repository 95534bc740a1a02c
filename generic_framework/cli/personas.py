"""The ``personas`` command: one ``name<TAB>description`` line per persona file."""

from __future__ import annotations

from pathlib import Path

from generic_framework.cli.common import EXIT_OK, run_command
from generic_framework.config import Settings
from generic_framework.runtime import Runtime

__all__ = ["list_personas"]


def list_personas(directory: Path | None) -> int:
    """The ``personas`` command; returns the exit code (2 when there are none, as ``chat``)."""

    def show(settings: Settings) -> int:
        # Reading the specs opens nothing (no client, no store), so there is nothing to close.
        specs = Runtime(settings).specs(required=True)
        for name, spec in sorted(specs.items()):
            print(f"{name}\t{spec.description}")
        return EXIT_OK

    return run_command(show, personas_dir=directory)
