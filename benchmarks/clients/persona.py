"""generic_framework's Persona with one function tool: the library as its users run it."""

from __future__ import annotations

from typing import Any

from benchmarks import job
from benchmarks.clients import Driver
from benchmarks.clients.glmclient import settings_for
from generic_framework.core.events import Done, TextDelta
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.tools.base import tool


class PersonaDriver(Driver):
    """``persona.respond(question)``; the persona runs the tool itself."""

    def __init__(self, base_url: str, options: dict[str, Any]) -> None:
        settings = settings_for(base_url, options)
        function = job.slow_weather if options.get("slow_tool") else job.get_weather
        self.runtime = Runtime(settings)
        self.persona = Persona(
            name="bench",
            system_prompt=job.SYSTEM,
            tools=[tool(function, inline=bool(options.get("inline_tool")))],
            web_search=False,
            tools_always=True,
            runtime=self.runtime,
        )
        self.last_rounds: list[float] = []

    async def converse(self) -> str:
        reply = await self.persona.respond(job.QUESTION)
        self.last_rounds = [r.duration_ms / 1000 for r in reply.rounds]
        return reply.content

    async def converse_stream(self, first_delays: list[float]) -> tuple[str, int]:
        deltas = 0
        answer = ""
        async for event in self.persona.stream(job.QUESTION):
            if isinstance(event, TextDelta):
                if deltas == 0:
                    delay = job.first_text_delay(event.text)
                    if delay is not None:
                        first_delays.append(delay)
                deltas += 1
            elif isinstance(event, Done):
                answer = event.reply.content
        return job.strip_stamp(answer), deltas

    async def aclose(self) -> None:
        await self.runtime.aclose()


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return PersonaDriver(base_url, options)
