"""The ``mock`` command: the mock Z.AI server in the foreground, replaying recorded fixtures."""

from __future__ import annotations

from pathlib import Path

from generic_framework.cli.common import EXIT_OK, EXIT_USAGE, err
from generic_framework.errors import ConfigError
from generic_framework.mock import serve_forever

__all__ = ["run_mock"]


def run_mock(
    fixtures: list[Path],
    host: str,
    port: int,
    latency_ms: int,
    fail_rate: float = 0.0,
    fail_seed: int = 0,
) -> int:
    """The ``mock`` command (the bundled fixtures when ``fixtures`` is empty); the exit code."""
    try:
        serve_forever(
            fixtures,
            host=host,
            port=port,
            latency_ms=latency_ms,
            fail_rate=fail_rate,
            fail_seed=fail_seed,
        )
    except ConfigError as exc:
        err(f"error: {exc}")
        return EXIT_USAGE
    return EXIT_OK
