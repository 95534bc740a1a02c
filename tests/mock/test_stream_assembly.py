"""The client and the mock assemble streamed tool calls with one rule (ToolCallFragments)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from generic_framework.mock.sse import events_to_completion
from generic_framework.wire.sse import StreamAssembler, fold_chunk


def _chunk(tool_calls: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": {"role": "assistant", "tool_calls": tool_calls}}
    if finish:
        choice["finish_reason"] = finish
    return {"id": "c1", "created": 1, "model": "glm-4.7", "choices": [choice]}


def _final() -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "glm-4.7",
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}],
    }


def _client_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assembler = StreamAssembler()
    for event in events:
        fold_chunk(assembler, json.dumps(event))
    message = assembler.completion().message
    return [
        {"id": c.id, "type": c.type, "name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or []
    ]


def _mock_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    message = events_to_completion(events)["choices"][0]["message"]
    return [
        {
            "id": c["id"],
            "type": c["type"],
            "name": c["function"]["name"],
            "arguments": c["function"]["arguments"],
        }
        for c in message.get("tool_calls", [])
    ]


def _fragment(index: int, **fields: Any) -> dict[str, Any]:
    function = {k: fields.pop(k) for k in ("name", "arguments") if k in fields}
    return {"index": index, **fields, **({"function": function} if function else {})}


SPLIT_NAME = [
    _chunk([_fragment(0, id="call_a", type="function", name="calcu")]),
    _chunk([_fragment(0, name="late", arguments='{"expression": ')]),
    _chunk([_fragment(0, arguments='"2+2"}')]),
    _chunk([_fragment(1, id="call_b", type="function", name="current_time", arguments="{}")]),
    _chunk([_fragment(1, name="current_time")]),  # a repeated whole name is not appended
    _final(),
]


def test_a_name_split_across_fragments_is_assembled_the_same_by_both() -> None:
    expected = [
        {"id": "call_a", "type": "function", "name": "calculate",
         "arguments": '{"expression": "2+2"}'},
        {"id": "call_b", "type": "function", "name": "current_time", "arguments": "{}"},
    ]  # fmt: skip
    assert _client_calls(SPLIT_NAME) == expected
    assert _mock_calls(SPLIT_NAME) == expected


@pytest.mark.parametrize("later_id", [None, "call_other"])
def test_the_first_id_of_an_index_is_kept(later_id: str | None) -> None:
    events = [
        _chunk([_fragment(0, id="call_first", type="function", name="lookup", arguments="{")]),
        _chunk([_fragment(0, **({"id": later_id} if later_id else {}), arguments="}")]),
        _final(),
    ]
    assert _client_calls(events) == _mock_calls(events)
    assert _client_calls(events)[0]["id"] == "call_first"


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    name=st.from_regex(r"[a-z][a-z_]{2,20}", fullmatch=True),
    arguments=st.text(min_size=0, max_size=40),
    name_cuts=st.lists(st.integers(1, 20), max_size=3),
    argument_cuts=st.lists(st.integers(0, 40), max_size=4),
    repeat_name=st.booleans(),
)
def test_any_fragmentation_is_read_the_same_by_client_and_mock(
    name: str, arguments: str, name_cuts: list[int], argument_cuts: list[int], repeat_name: bool
) -> None:
    def pieces(text: str, cuts: list[int]) -> list[str]:
        points = sorted({c for c in cuts if 0 < c < len(text)})
        return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]

    name_pieces = pieces(name, name_cuts)
    # The one fragmentation the rule cannot tell from a repeat: a piece equal to the name so
    # far ("ab" + "ab"). No provider splits names like that; see ToolCallFragments.
    assume(all(p != "".join(name_pieces[:i]) for i, p in enumerate(name_pieces) if i))
    fragments = [_fragment(0, id="call_x", type="function")]
    fragments += [_fragment(0, name=piece) for piece in name_pieces]
    if repeat_name and len(pieces(name, name_cuts)) == 1:
        fragments.append(_fragment(0, name=name))
    fragments += [_fragment(0, arguments=piece) for piece in pieces(arguments, argument_cuts)]
    events = [*(_chunk([f]) for f in fragments), _final()]
    client, mock = _client_calls(events), _mock_calls(events)
    assert client == mock
    assert client[0]["name"] == name and client[0]["arguments"] == arguments
