"""The SSE decoder (any split of the bytes gives the same events) and the stream assembler."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generic_framework.wire.messages import ChatCompletionChunk
from generic_framework.wire.sse import DONE, SSEDecoder, StreamAssembler

PAYLOADS = Path(__file__).parent / "payloads"
FIXTURES = [
    "stream_plain.sse",
    "stream_tool_calls.sse",
    "stream_tool_fragments.sse",
    "stream_with_sources.sse",
    "stream_network_error.sse",
    "stream_error_frame.sse",
]

line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=30,
)
events_strategy = st.lists(st.lists(line_text, min_size=1, max_size=3), max_size=8)
newline_strategy = st.sampled_from([b"\n", b"\r\n", b"\r"])


def decode(pieces: Iterable[bytes]) -> list[str]:
    decoder = SSEDecoder()
    out: list[str] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    out.extend(decoder.flush())
    return out


def cut(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p % (len(data) + 1) for p in points})
    edges = [0, *marks, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def encode(events: list[list[str]], newline: bytes, comments: bool) -> bytes:
    out = b""
    for lines in events:
        if comments:
            out += b": note" + newline
        for line in lines:
            out += b"data: " + line.encode() + newline
        out += newline
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=events_strategy,
    newline=newline_strategy,
    comments=st.booleans(),
    points=st.lists(st.integers(min_value=0), max_size=40),
)
def test_any_split_gives_the_same_events(
    events: list[list[str]], newline: bytes, comments: bool, points: list[int]
) -> None:
    data = encode(events, newline, comments)

    assert decode(cut(data, points)) == ["\n".join(lines) for lines in events]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FIXTURES), points=st.lists(st.integers(min_value=0), max_size=60))
def test_fixture_streams_survive_any_split(name: str, points: list[int]) -> None:
    data = (PAYLOADS / name).read_bytes()  # read directly: hypothesis cannot take fixtures

    assert decode(cut(data, points)) == decode([data])


@pytest.mark.parametrize("name", FIXTURES)
def test_byte_at_a_time_equals_whole(sse: Callable[[str], bytes], name: str) -> None:
    data = sse(name)
    whole = decode([data])

    assert decode(data[i : i + 1] for i in range(len(data))) == whole
    assert whole[-1] == DONE or name == "stream_error_frame.sse"


def test_multibyte_characters_split_inside_a_character() -> None:
    data = "data: Olá, Ñandú 你好 🙂\n\n".encode()

    assert decode(data[i : i + 1] for i in range(len(data))) == ["Olá, Ñandú 你好 🙂"]


def test_field_rules() -> None:
    data = (
        b": comment\n"
        b"event: ignored\n"
        b"id: 7\n"
        b"data:no space\n"
        b"data:  two spaces\n"
        b"data\n"
        b"\n"
        b"\n\n"
        b"retry: 10\n\n"
    )

    assert decode([data]) == ["no space\n two spaces\n"]


def test_final_event_without_blank_line_is_flushed() -> None:
    assert decode([b'data: {"error": {"code": "1305"}}']) == ['{"error": {"code": "1305"}}']
    assert decode([b"data: tail\r"]) == ["tail"]
    assert decode([b""]) == []


def test_crlf_split_between_cr_and_lf() -> None:
    assert decode([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == ["a", "b"]


# ---------------------------------------------------------------- the assembler


def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> ChatCompletionChunk:
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if finish:
        choice["finish_reason"] = finish
    return ChatCompletionChunk.model_validate(
        {"id": "s9", "model": "glm-4.7", "choices": [choice], **top}
    )


def fold(chunks: Iterable[ChatCompletionChunk]) -> StreamAssembler:
    assembler = StreamAssembler()
    for item in chunks:
        assembler.add(item)
    return assembler


def test_fragments_without_id_or_name_join_the_call_of_their_index() -> None:
    calls = [
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "function": {"name": "second", "arguments": '{"y"'},
        },
        {
            "index": 0,
            "id": "call_a",
            "type": "function",
            "function": {"name": "first", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": '{"x": '}},
        {"index": 1, "function": {"arguments": ": 2}"}},
        {"index": 0, "id": None, "function": {"name": None, "arguments": "1}"}},
    ]
    assembler = fold([chunk({"tool_calls": [c]}) for c in calls] + [chunk({}, "tool_calls")])

    message = assembler.completion().message

    assert message.tool_calls is not None
    assert [(c.index, c.id, c.function.name) for c in message.tool_calls] == [
        (0, "call_a", "first"),
        (1, "call_b", "second"),
    ]
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [{"x": 1}, {"y": 2}]


def test_later_fragments_never_overwrite_the_id_and_a_repeated_name_is_kept_once() -> None:
    calls = [
        {"index": 0, "id": "call_a", "function": {"name": "first", "arguments": "{"}},
        {"index": 0, "id": "call_other", "function": {"name": "first", "arguments": "}"}},
    ]
    message = fold([chunk({"tool_calls": calls}), chunk({}, "tool_calls")]).completion().message

    assert message.tool_calls is not None
    assert (message.tool_calls[0].id, message.tool_calls[0].function.name) == ("call_a", "first")
    assert message.tool_calls[0].function.arguments == "{}"


def test_call_without_any_id_gets_a_stable_one() -> None:
    calls = [{"index": 3, "function": {"name": "f", "arguments": "{}"}}]
    message = fold([chunk({"tool_calls": calls}), chunk({}, "tool_calls")]).completion().message

    assert message.tool_calls is not None
    assert message.tool_calls[0].id == "call_3"


def test_usage_and_sources_from_whichever_chunk_carries_them() -> None:
    source = {"title": "t", "link": "https://a.example", "refer": "ref_1"}
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    early = chunk({"content": "A"}, web_search=[source])  # result_sequence "before"
    assembler = fold([early, chunk({"content": "B"}), chunk({"content": ""}, "stop", usage=usage)])

    completion = assembler.completion()

    assert assembler.finished
    assert completion.message.content == "AB"
    assert completion.message.reasoning_content is None
    assert completion.web_search is not None
    assert completion.web_search[0].refer == "ref_1"
    assert completion.usage is not None
    assert completion.usage.total_tokens == 7
    assert completion.model == "glm-4.7"
    assert completion.id == "s9"


def test_add_returns_the_text_for_live_display() -> None:
    assembler = StreamAssembler()

    assert assembler.add(chunk({"reasoning_content": "hm"})) == (None, "hm")
    assert assembler.add(chunk({"content": "yo"})) == ("yo", None)
    assert assembler.add(chunk({"content": ""}, "stop")) == (None, None)
    assert not StreamAssembler().finished
