"""Tools that misbehave on purpose, for the fault matrix (a persona file imports this module)."""

from __future__ import annotations

import asyncio

from generic_framework.tools import tool


@tool
def explode(reason: str) -> str:
    """Fail on purpose: always raises.

    Args:
        reason: why it fails.
    """
    raise RuntimeError(f"exploded on purpose: {reason}")


@tool
async def hang(seconds: float) -> str:
    """Wait far longer than any tool may take.

    Args:
        seconds: how long to wait.
    """
    await asyncio.sleep(seconds)
    return "woke up"
