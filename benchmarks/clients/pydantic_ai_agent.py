"""pydantic-ai's Agent on an OpenAI-compatible chat model pointed at the benchmark server."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from benchmarks import job
from benchmarks.clients import Driver


class PydanticAIAgent(Driver):
    """``agent.run(question)``; the agent runs ``get_weather`` itself."""

    def __init__(self, base_url: str) -> None:
        model = OpenAIChatModel(
            job.MODEL, provider=OpenAIProvider(base_url=base_url, api_key=job.API_KEY)
        )
        self.agent = Agent(model, system_prompt=job.SYSTEM, tools=[job.get_weather])

    async def converse(self) -> str:
        result = await self.agent.run(job.QUESTION)
        return str(result.output)


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return PydanticAIAgent(base_url)
