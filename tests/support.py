"""Small helpers that tests in several folders share: the CLI as a subprocess, the IPv6 loopback
probe, polling, a recording upstream budget."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generic_framework.wire.slots import SlotLease

ROOT = Path(__file__).resolve().parents[1]


def run_cli(
    args: list[str],
    env: dict[str, str],
    *,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m generic_framework ARGS`` as users run it: output as text, exit code kept."""
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def has_ipv6_loopback() -> bool:
    """Whether this machine can bind ``::1`` (containers often cannot)."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6_loopback = pytest.mark.skipif(
    not has_ipv6_loopback(), reason="no IPv6 loopback on this machine"
)


async def wait_for(check: Callable[[], bool], what: str = "", seconds: float = 10.0) -> None:
    """Poll ``check`` until it holds; fail saying ``what`` was awaited after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what or 'the check'}"
        await asyncio.sleep(0.02)


class RecordingSlots:
    """A budget that records what the client asks of it."""

    limit = 1

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def acquire(self, *, respect_pause: bool = True) -> SlotLease:
        self.calls.append(("acquire", respect_pause))
        calls = self.calls

        class Lease:
            async def release(self) -> None:
                calls.append("release")

        return Lease()

    async def pause(self, seconds: float) -> None:
        self.calls.append(("pause", seconds))

    async def aclose(self) -> None:
        self.calls.append("close")
