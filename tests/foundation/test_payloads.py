"""Every payload shape Z.AI sends (or accepts) parses into the wire types, and round-trips."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import TypeAdapter

from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatRequest,
    FunctionToolSpec,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    WebSearchResponse,
    WebSearchResult,
    WebSearchToolSpec,
)

Load = Callable[[str], dict[str, Any]]


def test_plain_answer_keeps_reasoning_and_usage_details(payload: Load) -> None:
    completion = ChatCompletion.model_validate(payload("answer_plain.json")["body"])

    assert completion.message.content == "Takk fyrir!"
    assert completion.message.reasoning_content is not None
    assert completion.message.reasoning_content.startswith("Icelandic for thank you")
    assert completion.finish_reason == "stop"
    assert completion.object == "chat.completion"
    assert completion.request_id == completion.id
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (28, 19)
    assert completion.usage.total_tokens == 47
    assert completion.usage.cached_tokens == 4
    assert completion.usage.reasoning_tokens == 14
    assert completion.web_search is None


def test_parallel_tool_calls_keep_their_index_and_json_arguments(payload: Load) -> None:
    completion = ChatCompletion.model_validate(payload("answer_parallel_tools.json")["body"])
    calls = completion.message.tool_calls

    assert completion.finish_reason == "tool_calls"
    assert completion.message.has_tool_calls
    assert completion.message.content == "Let me convert that three ways."
    assert calls is not None
    assert [call.index for call in calls] == [0, 1, 2]
    assert [call.id for call in calls] == [
        "call_-5512093384720016641",
        "call_-5512093384720016640",
        "call_-5512093384720016639",
    ]
    assert {call.function.name for call in calls} == {"convert_currency"}
    assert [json.loads(call.function.arguments)["to_code"] for call in calls] == [
        "JPY",
        "KRW",
        "THB",
    ]


def test_follow_up_request_parses_into_typed_messages_and_round_trips(payload: Load) -> None:
    body = payload("followup_after_tools.json")["request"]["body"]
    request = ChatRequest.model_validate(body)

    kinds = [type(message) for message in request.messages]
    assert kinds == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolMessage,
        ToolMessage,
        ToolMessage,
    ]
    assistant = request.messages[2]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.reasoning_content is not None
    assert assistant.tool_calls is not None
    call_ids = [call.id for call in assistant.tool_calls]
    tool_ids = [m.tool_call_id for m in request.messages[3:] if isinstance(m, ToolMessage)]
    assert tool_ids == call_ids
    assert request.thinking is not None
    assert request.thinking.clear_thinking is False
    assert isinstance(request.tools[0] if request.tools else None, FunctionToolSpec)

    wire = json.loads(request.to_wire())
    assert wire.pop("stream") is False  # the one field to_wire adds: its default
    assert wire == body


def test_follow_up_response_is_a_plain_final_answer(payload: Load) -> None:
    completion = ChatCompletion.model_validate(payload("followup_after_tools.json")["body"])

    assert completion.finish_reason == "stop"
    assert completion.message.tool_calls is None
    assert completion.message.content is not None
    assert "6,512 JPY" in completion.message.content


def test_web_search_answer_carries_top_level_sources(payload: Load) -> None:
    fixture = payload("answer_with_sources.json")
    request = ChatRequest.model_validate(fixture["request"]["body"])
    completion = ChatCompletion.model_validate(fixture["body"])

    assert request.tools is not None
    tool = request.tools[0]
    assert isinstance(tool, WebSearchToolSpec)
    assert tool.web_search.search_result is True
    assert completion.finish_reason == "stop"
    assert completion.message.tool_calls is None
    assert completion.web_search is not None
    assert [source.refer for source in completion.web_search] == ["ref_1", "ref_2"]
    second = completion.web_search[1]
    assert (second.media, second.icon, second.publish_date) == ("", "", "")
    assert second.link.startswith("https://")


def test_web_search_answer_without_sources_has_no_web_search(payload: Load) -> None:
    completion = ChatCompletion.model_validate(payload("answer_without_sources.json")["body"])

    assert completion.web_search is None
    assert completion.message.content


def test_error_body_code_is_a_string(payload: Load) -> None:
    fixture = payload("error_concurrency.json")

    assert fixture["status"] == 429
    assert fixture["body"]["error"]["code"] == "1302"


@pytest.mark.parametrize(
    ("name", "intents", "request_id"),
    [("search_api_bigmodel.json", 1, "travel-desk-0007"), ("search_api_zai.json", None, None)],
)
def test_web_search_api_variants_parse(
    payload: Load, name: str, intents: int | None, request_id: str | None
) -> None:
    response = WebSearchResponse.model_validate(payload(name)["body"])

    assert response.id
    assert response.created is not None
    assert response.request_id == request_id
    assert (len(response.search_intent) if response.search_intent else None) == intents
    assert response.search_result
    assert all(isinstance(item, WebSearchResult) for item in response.search_result)
    assert response.search_result[0].refer == "ref_1"


def test_web_search_result_accepts_null_fields() -> None:
    result = WebSearchResult.model_validate({"title": "t", "link": None, "publish_date": None})

    assert (result.link, result.publish_date, result.media) == ("", "", "")


def test_envelopes_hold_ordinary_payloads(payload: Load) -> None:
    chat = payload("envelope_success.json")["body"]
    search = payload("envelope_search_success.json")["body"]
    quota = payload("envelope_quota.json")["body"]
    failure = payload("envelope_failure.json")["body"]

    assert ChatCompletion.model_validate(chat["data"]).message.content == "Wrapped hello."
    assert WebSearchResponse.model_validate(search["data"]).search_result[0].refer == "ref_2"
    assert quota["success"] is True
    assert quota["data"]["limits"][0]["type"] == "TOKENS_LIMIT"
    assert (failure["success"], failure["code"]) == (False, 1001)
    assert failure["msg"]


def test_mcp_search_result_text_is_double_encoded_sources(payload: Load) -> None:
    text = payload("mcp_search_result.json")["body"]["result"]["content"][0]["text"]
    items = json.loads(json.loads(text))
    results = TypeAdapter(list[WebSearchResult]).validate_python(items)

    assert results[0].refer == "ref_1"
    assert results[0].media == ""


# ---------------------------------------------------------------- real-world variations


def _tool_answer(payload: Load) -> dict[str, Any]:
    return copy.deepcopy(payload("answer_parallel_tools.json")["body"])


def test_unknown_fields_are_kept_everywhere(payload: Load) -> None:
    body = _tool_answer(payload)
    body["brand_new_top"] = {"x": 1}
    body["choices"][0]["logprobs"] = None
    body["choices"][0]["message"]["annotations"] = []
    body["choices"][0]["message"]["tool_calls"][0]["extra_flag"] = True
    body["choices"][0]["message"]["tool_calls"][0]["function"]["strict"] = False
    body["usage"]["server_tool_use"] = {"web_search_requests": 0}
    body["content_filter"] = [{"role": "assistant", "level": 0}]

    completion = ChatCompletion.model_validate(body)

    assert completion.model_extra == {"brand_new_top": {"x": 1}}
    assert completion.choices[0].model_extra == {"logprobs": None}
    assert completion.message.model_extra == {"annotations": []}
    calls = completion.message.tool_calls
    assert calls is not None
    assert calls[0].model_extra == {"extra_flag": True}
    assert calls[0].function.model_extra == {"strict": False}
    assert completion.usage is not None
    assert completion.usage.model_extra == {"server_tool_use": {"web_search_requests": 0}}
    assert completion.content_filter == [{"role": "assistant", "level": 0}]


def test_missing_object_field_is_accepted(payload: Load) -> None:
    body = payload("answer_plain.json")["body"]
    del body["object"]

    assert ChatCompletion.model_validate(body).object is None


@pytest.mark.parametrize("content", ["", "\n\n", None])
def test_empty_content_beside_tool_calls(payload: Load, content: str | None) -> None:
    body = _tool_answer(payload)
    body["choices"][0]["message"]["content"] = content

    completion = ChatCompletion.model_validate(body)

    assert completion.message.content == content
    assert completion.message.tool_calls is not None
    assert len(completion.message.tool_calls) == 3


def test_content_key_absent_beside_tool_calls(payload: Load) -> None:
    body = _tool_answer(payload)
    del body["choices"][0]["message"]["content"]

    assert ChatCompletion.model_validate(body).message.content is None


def test_arguments_as_string_are_kept_verbatim(payload: Load) -> None:
    body = _tool_answer(payload)
    raw = body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]

    calls = ChatCompletion.model_validate(body).message.tool_calls

    assert calls is not None
    assert calls[0].function.arguments == raw


@pytest.mark.parametrize("arguments", [{"amount": 40, "to_code": "JPY"}, {}, [1, "two"]])
def test_arguments_as_object_become_json_text(payload: Load, arguments: object) -> None:
    body = _tool_answer(payload)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments

    calls = ChatCompletion.model_validate(body).message.tool_calls

    assert calls is not None
    assert isinstance(calls[0].function.arguments, str)
    assert json.loads(calls[0].function.arguments) == arguments


def test_null_arguments_become_empty_text(payload: Load) -> None:
    body = _tool_answer(payload)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = None

    calls = ChatCompletion.model_validate(body).message.tool_calls

    assert calls is not None
    assert calls[0].function.arguments == ""


def test_assistant_echo_with_null_content_sends_an_explicit_null() -> None:
    adapter: TypeAdapter[Message] = TypeAdapter(Message)
    message = adapter.validate_python(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}],
        }
    )
    request = ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi"), message])

    wire = json.loads(request.to_wire())

    assert wire["messages"][1] == {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
        "content": None,
    }


# ---------------------------------------------------------------- stream fixtures


def _frames(raw: bytes) -> list[str]:
    lines = raw.decode().split("\n")
    return [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]


@pytest.mark.parametrize(
    "name",
    [
        "stream_plain.sse",
        "stream_tool_calls.sse",
        "stream_tool_fragments.sse",
        "stream_with_sources.sse",
        "stream_network_error.sse",
        "stream_sensitive.sse",
        "stream_no_final_chunk.sse",
    ],
)
def test_every_stream_frame_parses_as_a_chunk(sse: Callable[[str], bytes], name: str) -> None:
    frames = _frames(sse(name))
    chunks = [ChatCompletionChunk.model_validate_json(f) for f in frames if f != "[DONE]"]

    assert frames[-1] == "[DONE]"
    assert chunks
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks[:-1])
    last = chunks[-1]
    if name != "stream_no_final_chunk.sse":
        assert last.choices[0].finish_reason is not None


def test_last_stream_chunk_carries_usage_and_sources(sse: Callable[[str], bytes]) -> None:
    frames = _frames(sse("stream_with_sources.sse"))
    last = ChatCompletionChunk.model_validate_json(frames[-2])

    assert last.usage is not None
    assert last.usage.reasoning_tokens == 6
    assert last.web_search is not None
    assert [item.refer for item in last.web_search] == ["ref_1", "ref_2"]
    assert last.choices[0].delta.content == ""


@pytest.mark.parametrize("name", ["stream_error_frame.sse", "stream_error_frame_first.sse"])
def test_error_frames_carry_a_string_code(sse: Callable[[str], bytes], name: str) -> None:
    frame = json.loads(_frames(sse(name))[-1])

    assert frame == {"error": {"code": "1305", "message": "Service busy, try again shortly"}}
