"""A caller's :class:`TurnOptions` through the persona's one model-call seam, in both modes.

The scripted :class:`FunctionModel` answers and keeps every request it was sent, so each test
sees the requests the loop built: sampling settings applied, the caller's tools offered instead
of the persona's, calls handed back, the continuation sent, a JSON schema checked and corrected
once, a caller's ``//`` history sent as a stored one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from generic_framework import FunctionModel, OutputSchemaError
from generic_framework.config import Settings
from generic_framework.core.events import Done, TextDelta
from generic_framework.core.options import JsonSchemaFormat, TurnOptions
from generic_framework.core.persona import Persona, as_stored
from generic_framework.core.reply import Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime
from generic_framework.testing import tool_call
from generic_framework.tools import WebSearch, tool
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatRequest,
    FunctionDefinition,
    FunctionToolSpec,
    ToolMessage,
    UserMessage,
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


WEATHER = FunctionToolSpec(function=FunctionDefinition(name="get_weather"))


async def _turn(model: FunctionModel, text: str, *, stream: bool, **kwargs: Any) -> Reply:
    async with Runtime(Settings.defaults(api_key="k"), model=model) as runtime:
        persona = Persona(
            "tutor", "You are Tutor.", tools=[lookup], tools_always=True,
            web_search=WebSearch(mode="builtin"), runtime=runtime,
        )  # fmt: skip
        if not stream:
            return await persona.respond(text, **kwargs)
        events = [event async for event in persona.stream(text, **kwargs)]
    done = events[-1]
    assert isinstance(done, Done)
    return done.reply


@pytest.mark.parametrize("stream", [False, True])
async def test_options_reach_every_request(stream: bool) -> None:
    model = FunctionModel(lambda request: "ok")
    options = TurnOptions(
        temperature=0.2, top_p=0.5, max_tokens=64, stop="END", user_id="u-1234", json_object=True
    )
    await _turn(model, "hi", stream=stream, options=options)
    (sent,) = model.requests
    assert (sent.temperature, sent.top_p, sent.max_tokens) == (0.2, 0.5, 64)
    assert sent.stop == ["END"]
    assert sent.user_id == "u-1234"
    assert sent.response_format == {"type": "json_object"}


@pytest.mark.parametrize("stream", [False, True])
async def test_the_callers_tools_replace_the_personas_and_their_calls_come_back(
    stream: bool,
) -> None:
    model = FunctionModel(lambda request: [tool_call("get_weather", {"city": "Nanaimo"})])
    options = TurnOptions(client_tools=(WEATHER,), tool_choice="auto")
    reply = await _turn(model, "// weather?", stream=stream, options=options)
    (sent,) = model.requests  # one call: the caller runs the tool
    assert [spec.type for spec in sent.tools or ()] == ["web_search", "function"]
    assert [getattr(spec, "function", None) for spec in sent.tools or ()][1] == WEATHER.function
    assert sent.tool_choice == "auto"
    assert reply.stop_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Nanaimo"})
    ]


async def test_the_continuation_follows_the_question() -> None:
    def answer(request: ChatRequest) -> str:
        last = request.messages[-1]
        assert isinstance(last, ToolMessage)
        return f"It is {last.content}."

    call = tool_call("get_weather", {"city": "Nanaimo"}, id="c1")
    continuation = (
        AssistantMessage(tool_calls=[call]),
        ToolMessage(content="rain", tool_call_id="c1"),
    )
    model = FunctionModel(answer)
    options = TurnOptions(client_tools=(WEATHER,), continuation=continuation)
    reply = await _turn(model, "weather?", stream=False, options=options)
    assert reply.content == "It is rain."
    assert [m.role for m in model.requests[0].messages] == ["system", "user", "assistant", "tool"]


async def test_caller_tools_cannot_go_into_a_stored_conversation() -> None:
    model = FunctionModel(lambda request: "ok")
    with pytest.raises(ValueError, match="stored conversation"):
        await _turn(
            model, "hi", stream=False, conversation_id="c1",
            options=TurnOptions(client_tools=(WEATHER,)),
        )  # fmt: skip
    assert model.requests == []


SCHEMA = JsonSchemaFormat(
    "Weather",
    {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_json_schema_answer_is_corrected_once(stream: bool) -> None:
    answers = iter(['{"c": 1}', '{"celsius": 9}'])
    model = FunctionModel(lambda request: next(answers))
    async with Runtime(Settings.defaults(api_key="k"), model=model) as runtime:
        persona = Persona("tutor", "You are Tutor.", runtime=runtime)
        options = TurnOptions(json_schema=SCHEMA)
        if stream:
            events = [e async for e in persona.stream("weather?", options=options)]
            texts = [e.text for e in events if isinstance(e, TextDelta)]
            assert texts == ['{"celsius": 9}']  # only the checked answer is shown
            assert isinstance(events[-1], Done)
            reply = events[-1].reply
        else:
            reply = await persona.respond("weather?", options=options)
    assert reply.content == '{"celsius": 9}'
    first, second = model.requests
    assert any("Weather" in str(m.content) for m in first.messages if m.role == "system")
    assert second.messages[-2] == AssistantMessage(content='{"c": 1}')
    assert "celsius" in str(second.messages[-1].content)
    assert len(reply.rounds) == 2


async def test_a_json_schema_answer_off_twice_raises() -> None:
    model = FunctionModel(lambda request: "not json")
    with pytest.raises(OutputSchemaError, match="Weather"):
        await _turn(model, "weather?", stream=False, options=TurnOptions(json_schema=SCHEMA))
    assert len(model.requests) == 2


def test_a_callers_history_reads_as_a_stored_one() -> None:
    messages = [
        UserMessage(content="  // weather in Nanaimo?"),
        AssistantMessage(content="Rain [1]."),
        UserMessage(content="//"),
        AssistantMessage(content="Please write a question after //"),
        UserMessage(content="thanks"),
    ]
    assert as_stored(messages) == (
        UserMessage(content="weather in Nanaimo?"),
        AssistantMessage(content="Rain [1]."),
        UserMessage(content="thanks"),
    )


def test_a_persona_file_pins_only_known_parameters() -> None:
    spec = PersonaSpec.build(
        name="t", system_prompt="p", client_parameters={"temperature": "ignore", "tools": "refuse"}
    )
    assert spec.client_parameters == {"temperature": "ignore", "tools": "refuse"}
    with pytest.raises(ConfigError, match="client_parameters"):
        PersonaSpec.build(name="t", system_prompt="p", client_parameters={"seed": "ignore"})
    with pytest.raises(ConfigError, match="client_parameters"):
        PersonaSpec.build(name="t", system_prompt="p", client_parameters={"top_p": "maybe"})


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"temperature": 1.5}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": ""}, "stop"),
        ({"tool_choice": "required"}, "tool_choice"),
    ],
)
def test_options_outside_zais_ranges_are_refused(values: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        TurnOptions(**values)
