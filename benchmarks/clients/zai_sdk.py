"""Z.AI's ``zai-sdk``: sync only (no async client in 0.2), so it runs a sync hand loop.

Concurrency uses a thread pool as wide as the SDK's default connection pool (50).
"""

from __future__ import annotations

import json
from typing import Any

from zai import ZaiClient

from benchmarks import job
from benchmarks.clients import Driver


class ZaiLoop(Driver):
    """``client.chat.completions.create`` twice, the tool run in between."""

    sync = True
    threads = 50

    def __init__(self, base_url: str) -> None:
        self.client = ZaiClient(api_key=job.API_KEY, base_url=base_url)

    def converse_sync(self) -> str:
        messages: list[Any] = [
            {"role": "system", "content": job.SYSTEM},
            {"role": "user", "content": job.QUESTION},
        ]
        for _ in range(5):
            response: Any = self.client.chat.completions.create(
                model=job.MODEL, messages=messages, tools=job.TOOLS
            )
            message = response.choices[0].message
            if not message.tool_calls:
                return str(message.content or "")
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = job.get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise AssertionError("too many rounds")

    async def aclose(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return ZaiLoop(base_url)
