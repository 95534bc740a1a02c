"""LiteLLM's ``acompletion`` with a hand-written loop, as an ``openai/`` compatible model.

The local cost map is used (``LITELLM_LOCAL_MODEL_COST_MAP``) so importing LiteLLM never fetches
anything from the network.
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import litellm

from benchmarks import job
from benchmarks.clients import Driver


class LiteLLMLoop(Driver):
    """``litellm.acompletion`` twice, the tool run in between."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        litellm.telemetry = False

    async def converse(self) -> str:
        messages: list[Any] = [
            {"role": "system", "content": job.SYSTEM},
            {"role": "user", "content": job.QUESTION},
        ]
        for _ in range(5):
            response: Any = await litellm.acompletion(
                model=f"openai/{job.MODEL}",
                api_base=self.base_url,
                api_key=job.API_KEY,
                messages=messages,
                tools=job.TOOLS,
            )
            message = response.choices[0].message
            if not message.tool_calls:
                return str(message.content or "")
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = job.get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise AssertionError("too many rounds")


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return LiteLLMLoop(base_url)
