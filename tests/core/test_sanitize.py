"""The history sanitiser: unit cases, and properties over arbitrary and stored histories."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zai_script import Script, call, completion, error, make_settings

from generic_framework.core.persona import Persona
from generic_framework.core.sanitize import history_problems, sanitize_history, split_turns
from generic_framework.errors import GLMError
from generic_framework.runtime import Runtime
from generic_framework.tools import tool
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)


def tc(id_: str) -> ToolCall:
    return ToolCall(id=id_, function=FunctionCall(name="f", arguments="{}"))


def user(text: str = "q") -> UserMessage:
    return UserMessage(content=text)


def asst(content: str | None = "a", *ids: str, reasoning: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=content, tool_calls=[tc(i) for i in ids] or None, reasoning_content=reasoning
    )


def answer(id_: str) -> ToolMessage:
    return ToolMessage(content="r", tool_call_id=id_)


# --------------------------------------------------------------------------- unit cases


def test_a_valid_history_passes_through_as_the_same_objects() -> None:
    history: list[Message] = [user(), asst(None, "1", "2"), answer("1"), answer("2"), asst("done")]
    clean = sanitize_history(history)
    assert history_problems(history) == []
    assert all(a is b for a, b in zip(clean, history, strict=True))


def test_repairs() -> None:
    history: list[Message] = [
        asst("leading assistant"),
        answer("orphan"),
        user("u1"),
        asst(""),  # empty assistant
        asst("   ", "x"),  # empty text beside calls -> null
        answer("x"),
        SystemMessage(content="stray system"),
        asst(None, "y", "z"),  # answers out of order -> whole group dropped
        answer("z"),
        answer("y"),
        user("u2"),
        asst(None, "w"),  # unanswered
        asst("final"),
    ]
    assert history_problems(history)
    clean = sanitize_history(history)
    assert history_problems(clean) == []
    assert [(m.role, m.content) for m in clean] == [
        ("user", "u1"),
        ("assistant", None),
        ("tool", "r"),
        ("user", "u2"),
        ("assistant", "final"),
    ]


def test_extra_answer_breaks_the_group() -> None:
    history: list[Message] = [user(), asst(None, "1"), answer("1"), answer("1"), asst("a")]
    assert history_problems(history)
    assert [m.role for m in sanitize_history(history)] == ["user", "assistant"]


def test_trimming_keeps_whole_turns_and_groups() -> None:
    history: list[Message] = [
        user("1"), asst("a1"),
        user("2"), asst(None, "c"), answer("c"), asst("a2"),
        user("3"), asst("a3"),
    ]  # fmt: skip
    assert [m.content for m in sanitize_history(history, max_turns=2)] == [
        "2", None, "r", "a2", "3", "a3",
    ]  # fmt: skip
    assert sanitize_history(history, max_turns=0) == []
    assert sanitize_history(history, max_turns=10) == history


def test_reasoning_is_dropped_only_when_asked() -> None:
    history: list[Message] = [user(), asst("a", reasoning="why")]
    kept = sanitize_history(history)
    assert kept[1] is history[1]
    dropped = sanitize_history(history, keep_reasoning=False)
    assert dropped[1].reasoning_content is None  # type: ignore[union-attr]
    assert history[1].reasoning_content == "why"  # type: ignore[union-attr]  # not mutated


def test_split_turns() -> None:
    assert [len(t) for t in split_turns([asst("x"), user(), asst(), user()])] == [1, 2, 1]


# --------------------------------------------------------------------------- properties

ids = st.sampled_from(["a", "b", "c", "d"])
texts = st.sampled_from([None, "", "  ", "\n\n", "text", "more text"])
messages = st.one_of(
    st.builds(lambda t: UserMessage(content=t or ""), texts),
    st.builds(SystemMessage, content=st.just("sys")),
    st.builds(
        lambda content, calls, reasoning: AssistantMessage(
            content=content, tool_calls=[tc(i) for i in calls] or None, reasoning_content=reasoning
        ),
        texts,
        st.lists(ids, max_size=3),
        st.sampled_from([None, "why"]),
    ),
    st.builds(lambda i, t: ToolMessage(content=t or "", tool_call_id=i), ids, texts),
)


@given(st.lists(messages, max_size=25), st.one_of(st.none(), st.integers(0, 5)), st.booleans())
@settings(max_examples=300, deadline=None)
def test_sanitised_histories_always_pass_the_invariants(
    history: list[Message], max_turns: int | None, keep: bool
) -> None:
    clean = sanitize_history(history, max_turns=max_turns, keep_reasoning=keep)
    assert history_problems(clean) == []
    assert sanitize_history(clean, keep_reasoning=keep) == clean  # idempotent
    if max_turns is not None:
        assert len(split_turns(clean)) <= max_turns
    # Only drops and clean-ups: every kept message comes from the input, in order.
    position = 0
    for message in clean:
        while position < len(history) and not _same_origin(history[position], message):
            position += 1
        assert position < len(history)
        position += 1


def _same_origin(original: Message, kept: Message) -> bool:
    if original is kept:
        return True
    if isinstance(original, AssistantMessage) and isinstance(kept, AssistantMessage):
        return original.tool_calls == kept.tool_calls and (
            original.content == kept.content or not (original.content or "").strip()
        )
    return False


# A random conversation: each turn is a list of tool rounds (each a list of call kinds), then
# an ending: a normal answer, an empty answer, a cut answer, a content filter or an API error.
call_kinds = st.sampled_from(["ok", "unknown", "bad_json", "web_search", "raises"])
rounds = st.lists(st.lists(call_kinds, min_size=1, max_size=3), max_size=3)
endings = st.sampled_from(["answer", "empty", "length", "sensitive", "api_error"])
conversations = st.lists(st.tuples(st.booleans(), rounds, endings), min_size=1, max_size=5)


@tool
def ok_tool(x: int = 1) -> int:
    """Return x."""
    return x


@tool
def raising_tool() -> None:
    """Raise."""
    raise ValueError("nope")


def _script_for(web: bool, tool_rounds: list[list[str]], ending: str, cap: int) -> list[Any]:
    if not web:
        tool_rounds = []
    responses: list[Any] = []
    for kinds in tool_rounds[: cap + 1]:
        calls = []
        for kind in kinds:
            if kind == "web_search":
                calls.append(call("web_search", "{}", type="web_search"))
            else:
                name = {"ok": "ok_tool", "bad_json": "ok_tool", "unknown": "ghost"}.get(
                    kind, "raising_tool"
                )
                calls.append(call(name, "{oops" if kind == "bad_json" else "{}"))
        responses.append(completion("", tool_calls=calls))
    if len(tool_rounds) > cap:  # the forced answer already came, as tool calls
        return responses
    responses.append(
        {
            "answer": completion("An answer [ref_1]."),
            "empty": completion("   "),
            "length": completion("cut", finish_reason="length"),
            "sensitive": completion("x", finish_reason="sensitive"),
            "api_error": error(400, "1214", "bad"),
        }[ending]
    )
    return responses


@given(conversations)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_stored_history_passes_the_invariants(
    conversation: list[tuple[bool, list[list[str]], str]],
) -> None:
    async def run(directory: Path) -> None:
        config = make_settings(directory, max_tool_rounds=2)
        transport = Script()
        client = GLMClient(config, transport=transport)
        persona = Persona(
            "p", "S.", [ok_tool, raising_tool], runtime=Runtime(config, client=client)
        )
        for web, tool_rounds, ending in conversation:
            transport.add(*_script_for(web, tool_rounds, ending, cap=2))
            with contextlib.suppress(GLMError):
                await persona.respond(("// q" if web else "q"), conversation_id="conv")
            transport.assert_done()
        stored = await persona.runtime.store.load("conv", 1000)
        await persona.runtime.aclose()
        await client.aclose()
        assert history_problems(stored) == []
        assert sanitize_history(stored) == stored
        assert all(
            m.content for m in stored if isinstance(m, AssistantMessage) and not m.tool_calls
        )

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(run(Path(directory)))
