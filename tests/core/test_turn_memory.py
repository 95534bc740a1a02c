"""What a running turn keeps alive: a round's response is let go once it is recorded, and the
turn's later calls are marked as continuing (served first by the process's budget)."""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest

from generic_framework import Persona, Runtime, tool
from generic_framework.config import Settings
from generic_framework.testing import FunctionModel, tool_call
from generic_framework.wire.messages import AssistantMessage, ChatCompletion, ChatRequest, Choice
from generic_framework.wire.slots import CONTINUING


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def _settings(tmp_path: Path) -> Settings:
    return Settings.defaults(api_key="k", data_dir=str(tmp_path))


@pytest.mark.parametrize("stream", [False, True])
async def test_the_first_rounds_response_is_released_before_the_next_call(
    tmp_path: Path, stream: bool
) -> None:
    first: list[weakref.ref[ChatCompletion]] = []
    seen: list[tuple[bool, bool]] = []  # (continuing, first response still alive) per call

    def answer(request: ChatRequest) -> ChatCompletion | str:
        alive = bool(first) and first[0]() is not None
        seen.append((CONTINUING.get(), alive))
        if request.messages[-1].role == "tool":
            return f"It is {request.messages[-1].content}."
        message = AssistantMessage(tool_calls=[tool_call("weather", {"city": "Oslo"})])
        completion = ChatCompletion(
            id="r1",
            model="function-model",
            choices=[Choice(message=message, finish_reason="tool_calls")],
        )
        first.append(weakref.ref(completion))
        return completion

    async with Runtime(_settings(tmp_path), model=FunctionModel(answer)) as runtime:
        persona = Persona(
            "w", "You say the weather.", tools=[weather], tools_always=True, runtime=runtime
        )
        if stream:
            async for _ in persona.stream("Weather in Oslo?"):
                pass
        else:
            reply = await persona.respond("Weather in Oslo?")
            assert reply.content == "It is Sunny in Oslo."
    # The first call is a turn's first; the second continues it, with the first round's
    # response (4-5 KB of models from Z.AI) already let go: only what the reply needs is kept.
    assert seen == [(False, False), (True, False)]
    assert CONTINUING.get() is False  # reset after the turn
