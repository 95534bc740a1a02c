"""Context overflow (1261): the oldest history turns are dropped and the call sent once more,
never splitting a tool call from its results; then an honest error. Counted; the stored
conversation is untouched."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, call, completion, error, make_settings

from generic_framework.core.events import Done
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.tools import calculate
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import ContextTooLongError

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]
TOO_LONG = "Prompt exceeds max length"
_made: list[Persona] = []


@pytest.fixture(autouse=True)
async def _close() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().runtime.aclose()


def persona(tmp_path: Path, client_for: MakeClient, fake: Script) -> Persona:
    settings = make_settings(tmp_path)
    runtime = Runtime(settings, client=client_for(fake, settings))
    _made.append(Persona("tester", "You test.", (calculate,), runtime=runtime))
    return _made[-1]


def overflows(bot: Persona) -> dict[str, float]:
    text = bot.runtime.telemetry.metrics.exposition()[0].decode()
    found = re.findall(r'context_overflows_total\{outcome="(\w+)",persona="tester"\} (\S+)', text)
    return {outcome: float(value) for outcome, value in found}


async def four_turns(bot: Persona, fake: Script) -> None:
    """Four stored turns; the second made a tool call answered by a tool message."""
    fake.add(
        completion("one"),
        completion("", tool_calls=[call("calculate", {"expression": "2+2"}, id="c2")]),
        completion("four"),
        completion("three"),
        completion("done four"),
    )
    for text in ("first", "// second", "third", "fourth"):
        await bot.respond(text, conversation_id="conv")


def contents(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in messages]


async def test_the_oldest_turns_are_dropped_and_the_call_sent_again(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    fake = script()
    bot = persona(tmp_path, client_for, fake)
    await four_turns(bot, fake)
    before = await bot.runtime.store.get("conv")
    fake.add(error(400, "1261", TOO_LONG), completion("fits now"))
    reply = await bot.respond("fifth", conversation_id="conv")
    assert reply.content == "fits now"
    refused, retried = fake.requests[-2], fake.requests[-1]
    assert [m["role"] for m in refused["messages"]].count("user") == 5
    # Turns one and two (the tool call and its result together) are gone; three and four stay.
    assert contents(retried["messages"]) == [
        ("system", "You test."),
        ("user", "third"),
        ("assistant", "three"),
        ("user", "fourth"),
        ("assistant", "done four"),
        ("user", "fifth"),
    ]
    assert overflows(bot) == {"trimmed": 1.0}
    after = await bot.runtime.store.get("conv")
    assert before is not None and after is not None
    assert after[: len(before)] == before  # nothing stored was dropped
    assert [m.message.content for m in after[len(before) :]] == ["fifth", "fits now"]


async def test_a_tool_call_is_never_sent_without_its_results(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    fake = script()
    bot = persona(tmp_path, client_for, fake)
    fake.add(
        completion("", tool_calls=[call("calculate", {"expression": "1+1"}, id="k1")]),
        completion("two"),
        completion("b"),
        completion("c"),
    )
    for text in ("// one", "two", "three"):
        await bot.respond(text, conversation_id="c")
    fake.add(error(400, "1261", TOO_LONG), completion("ok"))
    await bot.respond("four", conversation_id="c")
    kept = fake.requests[-1]["messages"]
    ids = {c["id"] for m in kept if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    assert ids == answered
    assert [m["content"] for m in kept if m["role"] == "user"] == ["three", "four"]


async def test_still_too_long_ends_with_an_honest_error(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    fake = script()
    bot = persona(tmp_path, client_for, fake)
    await four_turns(bot, fake)
    before = await bot.runtime.store.get("conv")
    fake.add(error(400, "1261", TOO_LONG), error(400, "1261", TOO_LONG))
    with pytest.raises(ContextTooLongError, match="even without its oldest turns") as caught:
        await bot.respond("fifth", conversation_id="conv")
    assert caught.value.code == "1261"
    assert "glm-4.7's context window (200K tokens)" in str(caught.value)
    assert str(caught.value).endswith(f"(the upstream said: {TOO_LONG})")
    assert overflows(bot) == {"trimmed": 1.0, "failed": 1.0}
    assert await bot.runtime.store.get("conv") == before


async def test_without_history_there_is_nothing_to_drop(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    fake = script(error(400, "1261", TOO_LONG))
    bot = persona(tmp_path, client_for, fake)
    with pytest.raises(ContextTooLongError, match="no earlier turn left to drop"):
        await bot.respond("a very long message")
    assert len(fake.requests) == 1
    assert overflows(bot) == {"failed": 1.0}


async def test_streamed_and_later_rounds_keep_the_shorter_history(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    fake = script()
    bot = persona(tmp_path, client_for, fake)
    await four_turns(bot, fake)
    fake.add(
        error(400, "1261", TOO_LONG),
        completion("", tool_calls=[call("calculate", {"expression": "3*3"}, id="r1")]),
        completion("nine"),
    )
    events = [e async for e in bot.stream("// three times three", conversation_id="conv")]
    assert isinstance(events[-1], Done) and events[-1].reply.content == "nine"
    first_round, second_round = fake.requests[-2], fake.requests[-1]
    users = ["third", "fourth", "three times three"]
    assert [m["content"] for m in first_round["messages"] if m["role"] == "user"] == users
    assert [m["content"] for m in second_round["messages"] if m["role"] == "user"] == users
