"""The loop's seams: ``_call_llm`` (every model call) and ``_handle_tool_calls`` (every tool
round), overridden in a subclass, drive ``respond()`` and ``stream()`` alike; the scripted
:class:`FunctionModel` runs the whole loop without HTTP; a resolved spec has its own type."""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, make_settings

from generic_framework import FunctionModel
from generic_framework.config import Settings
from generic_framework.core.engine import TurnEngine
from generic_framework.core.events import Done, EventSink, PersonaEvent, TextDelta, ToolFinished
from generic_framework.core.persona import CONTENT_FILTER_NOTICE, Persona
from generic_framework.core.reply import Reply, ToolResult
from generic_framework.core.resources import Resources
from generic_framework.core.spec import PersonaSpec, ResolvedSpec
from generic_framework.core.turn import Turn
from generic_framework.errors import ConfigError, ToolLoopError
from generic_framework.runtime import Runtime
from generic_framework.testing import tool_call
from generic_framework.tools import tool
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    Choice,
    ToolCall,
    ToolMessage,
    Usage,
)

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return key.upper()


def answer(content: str = "", calls: list[ToolCall] | None = None) -> ChatCompletion:
    message = AssistantMessage(content=content, tool_calls=calls)
    finish = "tool_calls" if calls else "stop"
    usage = Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    return ChatCompletion(id="r", choices=[Choice(finish_reason=finish, message=message)],
                          usage=usage)  # fmt: skip


async def run(persona: Persona, text: str, *, stream: bool, **kwargs: Any) -> Reply:
    """One turn in either mode; a streamed one must show its text as deltas."""
    if not stream:
        return await persona.respond(text, **kwargs)
    events: list[PersonaEvent] = [event async for event in persona.stream(text, **kwargs)]
    done = events[-1]
    assert isinstance(done, Done)
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown.endswith(done.reply.content)
    return done.reply


@pytest.fixture
def offline(tmp_path: Path) -> Callable[..., Runtime]:
    """A runtime whose network is a script with nothing in it: any request fails the test."""

    def make(model: FunctionModel | None = None) -> Runtime:
        return Runtime(make_settings(tmp_path), model=model, transport=Script())

    return make


# ------------------------------------------------------------------------------ _call_llm


class Scripted(Persona):
    """Answers every model call from a list, without HTTP; keeps the requests it was sent."""

    answers: list[ChatCompletion]
    sent: list[tuple[ChatRequest, bool]]

    async def _call_llm(
        self, request: ChatRequest, turn: Turn, *, stream: bool
    ) -> AsyncGenerator[TextDelta | ChatCompletion, None]:
        self.sent.append((request, stream))
        completion = self.answers.pop(0)
        if stream and completion.message.content:
            yield TextDelta(completion.message.content)
        yield completion


@pytest.mark.parametrize("stream", [False, True])
async def test_an_overridden_call_llm_answers_both_modes(
    offline: Callable[..., Runtime], stream: bool
) -> None:
    ran.clear()
    runtime = offline()
    persona = Scripted("p", "S.", [lookup], runtime=runtime)
    persona.answers = [answer(calls=[tool_call("lookup", {"key": "k"})]), answer("Found K.")]
    persona.sent = []
    try:
        reply = await run(persona, "// find k", stream=stream, conversation_id="c1")
        turns = await runtime.store.turns("c1")
    finally:
        await runtime.aclose()
    assert reply.content == "Found K." and ran == ["k"]
    assert [s for _, s in persona.sent] == [stream, stream]
    assert [m.role for m in persona.sent[1][0].messages][-2:] == ["assistant", "tool"]
    # What the override returned was counted like any model answer.
    assert reply.usage.prompt_tokens == 20 and len(reply.rounds) == 2
    assert turns is not None and turns[0].record is not None
    assert turns[0].record.prompt_tokens == 20


# ------------------------------------------------------------------------------ _handle_tool_calls


class Canned(Persona):
    """Answers every tool call with a canned result instead of running the tool."""

    async def _handle_tool_calls(
        self, message: AssistantMessage, turn: Turn, events: EventSink
    ) -> list[ToolResult]:
        calls = message.tool_calls or []
        turn.new.append(message.model_copy(update={"content": None}))
        results = [
            ToolResult(call_id=c.id, name=c.function.name, ok=True, content="CANNED") for c in calls
        ]
        for call, result in zip(calls, results, strict=True):
            turn.new.append(ToolMessage(content=result.content, tool_call_id=call.id))
            events(ToolFinished(result.name, True, 0.0))
        return results


@pytest.mark.parametrize("stream", [False, True])
async def test_an_overridden_handle_tool_calls_answers_both_modes(
    tmp_path: Path, stream: bool
) -> None:
    ran.clear()

    def model(request: ChatRequest) -> Any:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return f"The tool said {last.content}."
        return [tool_call("lookup", {"key": "a"}), tool_call("lookup", {"key": "b"})]

    async with Runtime(make_settings(tmp_path), model=FunctionModel(model)) as runtime:
        persona = Canned("p", "S.", [lookup], runtime=runtime, tools_always=True)
        reply = await run(persona, "find a and b", stream=stream)
        exposition, _ = runtime.telemetry.metrics.exposition()
        # What the override put in the sink reaches a stream's consumer, between the round's
        # announcement and the answer.
        kinds = [type(e).__name__ async for e in persona.stream("find a and b")]
    assert kinds[:3] == ["RoundStarted", "ToolFinished", "ToolFinished"]
    assert kinds[-1] == "Done" and "TextDelta" in kinds
    assert reply.content == "The tool said CANNED." and ran == []
    assert [r.content for r in reply.rounds[0].results] == ["CANNED", "CANNED"]
    # The overridden round was counted from the results it returned.
    line = 'generic_framework_tool_calls_total{outcome="ok",persona="p",tool="lookup"} 2.0'
    assert line in exposition.decode()


async def test_a_tool_round_without_its_results_is_a_framework_error(tmp_path: Path) -> None:
    class Forgetful(Persona):
        async def _handle_tool_calls(
            self, message: AssistantMessage, turn: Turn, events: EventSink
        ) -> list[ToolResult]:
            return []

    model = FunctionModel(lambda request: [tool_call("lookup", {"key": "a"})])
    async with Runtime(make_settings(tmp_path), model=model) as runtime:
        persona = Forgetful("p", "S.", [lookup], runtime=runtime, tools_always=True)
        with pytest.raises(ToolLoopError, match="one result per call"):
            await persona.respond("find a")


# ------------------------------------------------------------------------------ FunctionModel


@pytest.mark.parametrize("stream", [False, True])
async def test_the_function_model_runs_the_loop_without_http(
    offline: Callable[..., Runtime], stream: bool
) -> None:
    ran.clear()

    async def model(request: ChatRequest) -> Any:  # an async function works too
        if request.tools and not isinstance(request.messages[-1], ToolMessage):
            return [tool_call("lookup", {"key": "x"}, id="c1")]
        return AssistantMessage(content="X is known now.", reasoning_content="easy")

    scripted = FunctionModel(model)
    async with offline(scripted) as runtime:
        persona = Persona("p", "S.", [lookup], runtime=runtime, tools_always=True)
        reply = await run(persona, "what is x?", stream=stream)
    assert reply.content == "X is known now." and ran == ["x"]
    assert [r.tool_calls[0].id for r in reply.rounds[:1]] == ["c1"]
    assert reply.model == "function-model" and reply.usage.total_tokens > 0
    assert [r.tools is not None for r in scripted.requests] == [True, True]
    assert scripted.requests[0].messages[0].content == "S."


async def test_the_function_model_streams_word_by_word(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: "one two  three")
    async with Runtime(make_settings(tmp_path), model=model) as runtime:
        persona = Persona("p", "S.", runtime=runtime)
        deltas = [e.text async for e in persona.stream("hi") if isinstance(e, TextDelta)]
    assert deltas == ["one ", "two  ", "three"]


async def test_a_sensitive_scripted_answer_is_filtered_like_the_client_does(
    tmp_path: Path,
) -> None:
    blocked = ChatCompletion(
        choices=[Choice(finish_reason="sensitive", message=AssistantMessage())]
    )
    async with Runtime(make_settings(tmp_path), model=FunctionModel(lambda r: blocked)) as runtime:
        reply = await Persona("p", "S.", runtime=runtime).respond("hi")
    assert (reply.content, reply.stop_reason) == (CONTENT_FILTER_NOTICE, "content_filter")


async def test_a_runtime_with_a_model_opens_no_client(tmp_path: Path) -> None:
    runtime = Resources(make_settings(tmp_path), model=FunctionModel(lambda r: "ok"))
    async with runtime:
        assert (await Persona("p", "S.", runtime=runtime).respond("hi")).content == "ok"
        assert runtime._client is None and runtime._store is None


# ------------------------------------------------------------------------------ the spec


def test_a_resolved_spec_has_its_own_type(settings: Settings) -> None:
    spec = PersonaSpec.build(name="p", system_prompt="S.")
    assert spec.model is None and spec.max_tool_rounds is None
    resolved = spec.resolve(settings)
    assert isinstance(resolved, ResolvedSpec)
    assert (resolved.model, resolved.max_tool_rounds) == ("glm-4.7", 3)
    assert resolved.web_search.mode == "builtin"
    with pytest.raises(ToolLoopError, match="resolved spec"):
        TurnEngine(spec, tool_timeout=1.0, keep_reasoning=False)  # type: ignore[arg-type]


def test_a_persona_s_fields_are_its_spec_s_alone(settings: Settings) -> None:
    persona = Persona(
        "p",
        "S.",
        [lookup],
        settings=settings,
        temperature=0.2,
        client_parameters={"top_p": "refuse"},
    )
    spec = persona.spec
    assert (spec.name, spec.system_prompt, spec.tools, spec.temperature) == (
        "p",
        "S.",
        ("lookup",),
        0.2,
    )
    # A spec field reaches the persona with no code of the persona's: client_parameters had
    # no keyword of its own.
    assert spec.client_parameters == {"top_p": "refuse"}
    # Nothing repeats the spec's fields beside it (``tools`` are the tools themselves; the
    # spec has their names).
    assert [f for f in PersonaSpec.model_fields if hasattr(persona, f)] == ["tools"]
    assert [t.name for t in persona.tools] == list(spec.tools or ())
    built = Persona.from_spec(PersonaSpec.build(name="p", system_prompt="S."), settings=settings)
    made = Persona("p", "S.", settings=settings).spec
    assert built.spec.model_dump(exclude={"tools"}) == made.model_dump(exclude={"tools"})


def test_a_persona_refuses_what_its_spec_refuses(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="temprature: unknown key"):
        Persona("p", "S.", settings=settings, temprature=0.5)
    with pytest.raises(ConfigError, match="max_tool_rounds"):
        Persona("p", "S.", settings=settings, max_tool_rounds=-1)
    with pytest.raises(ConfigError, match="pass the tools themselves"):
        Persona("p", "S.", settings=settings, tool_modules=["my.tools"])


# ------------------------------------------------------------------------------ opening


async def test_async_with_a_persona_opens_its_own_runtime_off_the_event_loop(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    new_client = Resources._new_client

    def spy(self: Resources, slots: Any) -> Any:
        built.append(threading.current_thread().name)
        return new_client(self, slots)

    monkeypatch.setattr(Resources, "_new_client", spy)
    async with Persona("p", "S.", settings=settings) as persona:
        assert persona.runtime._client is not None
    assert len(built) == 1 and built[0] != threading.main_thread().name
    assert persona.runtime.closed
