"""generic_framework's Persona with one function tool: the library as its users run it.

With the option ``conversation`` every turn belongs to one stored conversation (SQLite in a
temporary directory) and ``HISTORY_TURNS`` is 1: each turn loads the one turn before it, sends
it along, and stores itself, which is what a chat with a ``conversation_id`` costs per turn.
With ``database_url`` too, the store is that PostgreSQL database (which then also holds the
upstream budget's slots, as it does for replicas), and the conversation is this process's own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
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
        self.data_dir: str | None = None
        self.conversation_id: str | None = None
        if options.get("conversation"):
            self.data_dir = tempfile.mkdtemp(prefix="bench-store-")
            self.conversation_id = "bench-conversation"
            if options.get("database_url"):
                self.conversation_id = f"bench-conversation-{os.getpid()}"
            options = {**options, "data_dir": self.data_dir, "history_turns": 1}
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
        reply = await self.persona.respond(job.QUESTION, conversation_id=self.conversation_id)
        self.last_rounds = [r.duration_ms / 1000 for r in reply.rounds]
        return reply.content

    async def converse_stream(self, first_delays: list[float]) -> tuple[str, int]:
        deltas = 0
        answer = ""
        async for event in self.persona.stream(job.QUESTION, conversation_id=self.conversation_id):
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
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return PersonaDriver(base_url, options)
