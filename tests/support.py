"""Small helpers that tests in several folders share: the IPv6 loopback probe, polling."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest


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
