"""generic_framework's GLMClient with a hand-written loop (typed messages, no Persona)."""

from __future__ import annotations

import json
from typing import Any

from benchmarks import job
from benchmarks.clients import Driver
from benchmarks.transports import build_http_client
from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    ContentDelta,
    FunctionDefinition,
    FunctionToolSpec,
    Message,
    StreamCompleted,
    SystemMessage,
    ToolMessage,
    UserMessage,
)


def settings_for(base_url: str, options: dict[str, Any]) -> Settings:
    """Settings pointing at the benchmark server; pool options come from ``options``."""
    settable = ("llm_", "data_dir", "history_turns", "database_url", "database_pool_timeout")
    extra = {k: v for k, v in options.items() if k.startswith(settable)}
    return Settings.defaults(api_key=job.API_KEY, base_url=base_url, llm_model=job.MODEL, **extra)


class GLMLoop(Driver):
    """ChatRequest in, ChatCompletion out, tools run between the rounds."""

    def __init__(self, base_url: str, options: dict[str, Any]) -> None:
        self.http = build_http_client(options)
        self.client = GLMClient(settings_for(base_url, options), http_client=self.http)
        self.tools = [
            FunctionToolSpec(
                function=FunctionDefinition(
                    name="get_weather",
                    description="Current weather in a city.",
                    parameters=job.WEATHER_SCHEMA,
                )
            )
        ]

    def _start(self) -> list[Message]:
        return [SystemMessage(content=job.SYSTEM), UserMessage(content=job.QUESTION)]

    @staticmethod
    def _answer_calls(message: AssistantMessage, messages: list[Message]) -> None:
        messages.append(message)
        for call in message.tool_calls or ():
            result = job.get_weather(**json.loads(call.function.arguments))
            messages.append(ToolMessage(content=result, tool_call_id=call.id))

    async def converse(self) -> str:
        messages = self._start()
        for _ in range(5):
            completion: ChatCompletion = await self.client.chat(
                ChatRequest(model=job.MODEL, messages=messages, tools=self.tools)
            )
            message = completion.message
            if not message.tool_calls:
                return message.content or ""
            self._answer_calls(message, messages)
        raise AssertionError("too many rounds")

    async def converse_stream(self, first_delays: list[float]) -> tuple[str, int]:
        messages = self._start()
        for _ in range(5):
            request = ChatRequest(model=job.MODEL, messages=messages, tools=self.tools)
            deltas = 0
            completion: ChatCompletion | None = None
            async for event in self.client.chat_stream(request):
                if isinstance(event, ContentDelta):
                    if deltas == 0:
                        delay = job.first_text_delay(event.text)
                        if delay is not None:
                            first_delays.append(delay)
                    deltas += 1
                elif isinstance(event, StreamCompleted):
                    completion = event.completion
            assert completion is not None
            message = completion.message
            if not message.tool_calls:
                return job.strip_stamp(message.content or ""), deltas
            self._answer_calls(message, messages)
        raise AssertionError("too many rounds")

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.http is not None:
            await self.http.aclose()


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return GLMLoop(base_url, options)
