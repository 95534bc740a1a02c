"""The two-round job every client runs, and what a correct answer looks like.

Stdlib only: this module is imported by every client process, including ones that run in an
interpreter without generic_framework (a separate environment for a peer whose pins clash).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

MODEL = "glm-4.7"
API_KEY = "bench-key"
SYSTEM = "You are a terse weather assistant. Use the tools."
QUESTION = "What's the weather in Paris?"
EXPECTED = "Answer: sunny, 21 C in Paris"
TOOL_SLEEP = 0.2
"""Seconds each call of the slow tool sleeps in the parallel-tools scenario."""

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name."}},
    "required": ["city"],
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": WEATHER_SCHEMA,
        },
    }
]


def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: City name.
    """
    return f"sunny, 21 C in {city}"


async def slow_weather(city: str) -> str:
    """Current weather in a city, from a slow backend.

    Args:
        city: City name.
    """
    await asyncio.sleep(TOOL_SLEEP)
    return f"sunny, 21 C in {city}"


def check(answer: str | None) -> None:
    """Raise if ``answer`` is not what the scripted server sends for the job."""
    if not answer or not answer.startswith(EXPECTED):
        raise AssertionError(f"unexpected answer: {answer!r}")


def first_text_delay(text: str) -> float | None:
    """Seconds since the server stamped this text delta (``@<monotonic_ns>;`` prefix)."""
    now = time.monotonic_ns()
    if not text.startswith("@"):
        return None
    stamp, sep, _ = text[1:].partition(";")
    return (now - int(stamp)) / 1e9 if sep and stamp.isdigit() else None


def strip_stamp(text: str) -> str:
    """The answer text without the server's timestamp prefix."""
    if text.startswith("@"):
        return text.partition(";")[2]
    return text
