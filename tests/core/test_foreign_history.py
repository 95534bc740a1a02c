"""A caller's history (OpenAI-style dicts) given to respond() and stream() instead of a store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, completion, make_settings

from generic_framework.core.events import Done
from generic_framework.core.history import foreign_history
from generic_framework.core.loader import load_spec
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import AssistantMessage, SystemMessage, UserMessage

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]

EARLIER = [
    {"role": "system", "content": "Answer in French."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Bonjour !"},
    {"role": "user", "content": [{"type": "text", "text": "Two "}, {"type": "text", "text": "?"}]},
    {"role": "assistant", "content": "Deux."},
]


def roles_and_text(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in body["messages"]]


def test_the_dicts_split_into_system_messages_and_history() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    split = foreign_history(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
            {"role": "assistant", "content": "a"},
            {"role": "system", "content": "   "},
        ]
    )
    assert split.system == (SystemMessage(content="Be brief."),)
    # The caller's tool round is not replayed: its tools are not the persona's.
    assert split.messages == (
        UserMessage(content="q"),
        AssistantMessage(content=None),
        AssistantMessage(content="a"),
    )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"role": "robot", "content": "x"}], r"history\[0\]\.role must be one of"),
        (["hello"], r"history\[0\] must be a message object"),
        ([{"role": "user", "content": "  "}], r"history\[0\]: the user message is empty"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "must be an object with"),
        ([{"role": "user", "content": [{"type": "audio"}]}], "only text and image_url"),
        (
            [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            "only text content parts",
        ),
        ([{"role": "user", "content": 5}], "must be a string or a list of text parts"),
        ([{"role": "user", "content": "\udcff"}], "must be UTF-8 text"),
    ],
)
def test_bad_messages_are_refused_by_index(items: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        foreign_history(items)


async def test_history_and_client_system_reach_the_model_after_the_own_prompt(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("Trois."), completion("Trois."))
    runtime = Runtime(make_settings(tmp_path), client=client_for(s))
    persona = Persona("p", "You are P.", runtime=runtime)
    reply = await persona.respond("And three?", history=EARLIER)
    assert reply.content == "Trois."
    events = [e async for e in persona.stream("And three?", history=EARLIER)]
    assert isinstance(events[-1], Done)
    expected = [
        ("system", "You are P."),
        ("system", "Answer in French."),
        ("user", "Hi"),
        ("assistant", "Bonjour !"),
        ("user", "Two ?"),
        ("assistant", "Deux."),
        ("user", "And three?"),
    ]
    assert [roles_and_text(body) for body in s.requests] == [expected, expected]
    # A stateless turn stores nothing.
    assert await runtime.store.turns("anything") is None


async def test_a_long_history_is_trimmed_to_history_turns_oldest_first(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("ok"))
    runtime = Runtime(make_settings(tmp_path, history_turns=2), client=client_for(s))
    persona = Persona("p", "S.", runtime=runtime)
    many: list[dict[str, Any]] = []
    for n in range(1, 401):
        many += [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]
    await persona.respond("now", history=many)
    sent = roles_and_text(s.requests[0])
    assert [text for _, text in sent] == ["S.", "q399", "a399", "q400", "a400", "now"]


async def test_a_history_is_sanitised_like_a_stored_one(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("ok"))
    persona = Persona("p", "S.", runtime=Runtime(make_settings(tmp_path), client=client_for(s)))
    messy = [
        {"role": "assistant", "content": "a greeting before any question"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "a"},
    ]
    await persona.respond("now", history=messy)
    assert roles_and_text(s.requests[0]) == [
        ("system", "S."),
        ("user", "q"),
        ("assistant", "a"),
        ("user", "now"),
    ]


async def test_history_with_a_conversation_id_is_a_clear_error(tmp_path: Path) -> None:
    persona = Persona("p", "S.", runtime=Runtime(make_settings(tmp_path)))
    with pytest.raises(ValueError, match="not both"):
        await persona.respond("hi", conversation_id="c1", history=[])
    with pytest.raises(ValueError, match="not both"):
        await anext(persona.stream("hi", conversation_id="c1", history=[]))


async def test_a_persona_can_refuse_client_system_messages(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    (tmp_path / "strict.toml").write_text(
        'system_prompt = "Only I decide."\nallow_client_system = false\n', encoding="utf-8"
    )
    spec = load_spec(tmp_path / "strict.toml")
    assert spec.allow_client_system is False
    s = script(completion("ok"))
    runtime = Runtime(make_settings(tmp_path), client=client_for(s))
    persona = Persona.from_spec(spec, runtime=runtime)
    with pytest.raises(ValueError, match="allow_client_system = false"):
        await persona.respond("hi", history=EARLIER)
    # Without system messages its history is accepted.
    await persona.respond("hi", history=EARLIER[1:])
    assert len(s.requests) == 1
