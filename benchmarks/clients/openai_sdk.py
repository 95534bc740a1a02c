"""The official ``openai`` SDK's AsyncOpenAI with a hand-written loop, default settings."""

from __future__ import annotations

import json
from typing import Any, cast

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionToolParam

from benchmarks import job
from benchmarks.clients import Driver

# The job's tools, as the SDK types them.
TOOLS = cast("list[ChatCompletionToolParam]", job.TOOLS)


class OpenAILoop(Driver):
    """``client.chat.completions.create`` twice, the tool run in between."""

    def __init__(self, base_url: str) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key=job.API_KEY)

    async def converse(self) -> str:
        messages: list[Any] = [
            {"role": "system", "content": job.SYSTEM},
            {"role": "user", "content": job.QUESTION},
        ]
        for _ in range(5):
            response = await self.client.chat.completions.create(
                model=job.MODEL, messages=messages, tools=TOOLS
            )
            message = response.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                args = json.loads(call.function.arguments)  # type: ignore[union-attr]
                result = job.get_weather(**args)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise AssertionError("too many rounds")

    async def aclose(self) -> None:
        await self.client.close()


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return OpenAILoop(base_url)
