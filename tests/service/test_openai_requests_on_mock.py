"""What an OpenAI client asks for reaches Z.AI (the mock), and what it cannot have is refused.

The official ``openai`` client talks to the service in-process; the service's personas call the
mock over loopback through :class:`~openai_support.Upstream`, which keeps each request body.
Covered: ``url_citation`` annotations (plain and streamed), sampling settings and ``stop``,
``user`` as a pseudonym, ``response_format`` (``json_object``; ``json_schema`` checked with one
corrective call), ``stream_options.include_usage``, client tools handed back as ``tool_calls``
and continued from ``role: "tool"`` messages, refused and ignored parameters, persona pins,
``GET /v1/models/{id}``, and a client's history cleaned as the stored history is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai_support import Upstream, answer_body, calls_body, fixture, persona_file

from generic_framework.config import Settings
from generic_framework.core.options import CORRECTION
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.mock.fixture import Fixture
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.client_request import user_pseudonym
from generic_framework.store.users import BOOTSTRAP_USER, pseudonym

Connect = Callable[..., tuple[openai.AsyncOpenAI, Upstream]]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
QUESTION = {"role": "user", "content": "What is the weather in Nanaimo?"}
CALL = ("call_w1", "get_weather", {"city": "Nanaimo"})
CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_w1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Nanaimo"}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_w1", "content": "Light rain, 9 C"}
ANSWER = "Light rain and 9 degrees in Nanaimo."
BROKEN_SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}}


def _client_tool_fixture() -> Fixture:
    return fixture(
        "client_tool",
        [
            ([QUESTION], calls_body([CALL], 0)),
            ([QUESTION, CALL_MESSAGE, RESULT], answer_body(ANSWER, 1)),
        ],
        tools=[WEATHER_TOOL],
    )


@pytest.fixture
async def connect(tmp_path: Path) -> AsyncIterator[Connect]:
    """``connect(mock, personas)``: an openai client to the service, and what reached the mock."""
    clients: list[httpx.AsyncClient] = []
    runtimes: list[Runtime] = []

    def make(mock: MockServer, personas: Path) -> tuple[openai.AsyncOpenAI, Upstream]:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=mock.base_url,
            personas_dir=personas,
            data_dir=tmp_path / "data",
        )
        upstream = Upstream()
        runtimes.append(Runtime(settings, transport=upstream))
        transport = httpx.ASGITransport(app=create_app(runtime=runtimes[-1]))
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://localhost"))
        client = openai.AsyncOpenAI(
            api_key="unused", base_url="http://localhost/v1", http_client=clients[-1]
        )
        return client, upstream

    yield make
    for client in clients:
        await client.aclose()
    for runtime in runtimes:
        await runtime.aclose()


def _bundled(*names: str) -> list[Path]:
    return [p for p in bundled_fixture_paths() if p.stem in names]


# ---------------------------------------------------------------------------- annotations


async def test_a_web_answer_carries_url_citations_at_its_markers(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer(_bundled("web_search_nanaimo")) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        completion = await client.chat.completions.create(
            model="tutor",
            messages=[{"role": "user", "content": "// what's the weather in Nanaimo?"}],
        )
    message = completion.choices[0].message
    content = message.content or ""
    annotations = message.annotations or []
    assert [a.type for a in annotations] == ["url_citation"] * 3
    assert [
        content[a.url_citation.start_index : a.url_citation.end_index] for a in annotations
    ] == [
        "[1]",
        "[2]",
        "[3]",
    ]
    assert [a.url_citation.url for a in annotations] == [
        "https://weather.example.ca/city/nanaimo",
        "https://www.forecast.example.com/ca/bc/nanaimo/hourly",
        "https://news.example.org/vancouver-island-weather",
    ]
    assert all(a.url_citation.title for a in annotations)
    # Beside the footer and the top-level web_search, which stay as they were.
    assert "\n\nSources:\n1. [" in content
    assert len((completion.model_extra or {})["web_search"]) == 3


async def test_a_streamed_web_answer_carries_them_on_its_last_chunk(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer(_bundled("web_search_nanaimo_stream")) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        stream = await client.chat.completions.create(
            model="tutor",
            messages=[{"role": "user", "content": "// what's the weather in Nanaimo?"}],
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    shown = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop"
    annotations = (last.delta.model_extra or {})["annotations"]
    assert annotations, "the last chunk carries the annotations"
    for annotation in annotations:
        cited = annotation["url_citation"]
        assert annotation["type"] == "url_citation"
        assert shown[cited["start_index"] : cited["end_index"]] in {"[1]", "[2]", "[3]"}
        assert cited["url"].startswith("https://")
    assert all(not (c.choices and (c.choices[0].delta.model_extra or {}).get("annotations"))
               for c in chunks[:-1])  # fmt: skip


# ---------------------------------------------------------------------------- settings


async def test_sampling_settings_stop_and_a_pseudonymous_user_reach_the_model(
    tmp_path: Path, connect: Connect
) -> None:
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            temperature=0.2,
            top_p=0.5,
            max_completion_tokens=300,
            stop="END",
            user="alice@example.org",
            response_format={"type": "json_object"},
        )
        await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],
            max_tokens=40,
            stop=["FIN"],  # type: ignore[list-item]
        )
    sent, second = upstream.bodies
    assert sent["temperature"] == 0.2
    assert sent["top_p"] == 0.5
    assert sent["max_tokens"] == 300
    assert sent["stop"] == ["END"]
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["user_id"] == user_pseudonym("alice@example.org")
    assert "alice" not in json.dumps(sent)
    assert 6 <= len(sent["user_id"]) <= 128
    assert second["max_tokens"] == 40
    assert second["stop"] == ["FIN"]
    assert "temperature" not in second  # the persona sets none: Z.AI's default


async def test_the_harmless_fields_clients_always_send_are_accepted_and_not_sent(
    tmp_path: Path, connect: Connect
) -> None:
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        completion = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            n=1,
            parallel_tool_calls=True,
            store=False,
            metadata={"run": "7"},
            presence_penalty=0,
            frequency_penalty=0.0,
            seed=7,
            logprobs=False,
        )
    assert completion.choices[0].message.content == ANSWER
    for field in ("n", "parallel_tool_calls", "store", "metadata", "seed", "logprobs"):
        assert field not in upstream.bodies[0]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"temperature": 5}, "temperature"),
        ({"temperature": 1.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": 200000}, "max_completion_tokens"),
        ({"stop": ["a", "b"]}, "stop"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"tool_choice": "required", "tools": [WEATHER_TOOL]}, "tool_choice"),
        ({"max_tokens": 10, "max_completion_tokens": 20}, "max_completion_tokens"),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools.0.function.name"),
        ({"response_format": BROKEN_SCHEMA}, "response_format.json_schema.schema"),
        ({"reasoning_effort": "high"}, "reasoning_effort"),  # GLM-4.7 takes none
        ({"reasoning_effort": "ultra"}, "reasoning_effort"),
    ],
)  # fmt: skip
async def test_what_cannot_be_honoured_is_a_400_naming_the_parameter(
    tmp_path: Path, connect: Connect, extra: dict[str, Any], param: str
) -> None:
    async with MockServer([]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                **extra,
            )
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == param
    assert param.split(".", maxsplit=1)[0] in error["message"]
    assert upstream.bodies == []


async def test_reasoning_effort_is_sent_as_the_nearest_the_model_takes(
    tmp_path: Path, connect: Connect
) -> None:
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p", extra='model = "glm-5.3"'))
        for asked in ("low", "medium", "minimal", "xhigh", None):
            extra = {"reasoning_effort": asked} if asked else {}
            await client.chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                **extra,  # type: ignore[arg-type]
            )
    # GLM-5.3 takes low, high and max: medium (as near low as high) goes up, minimal down to
    # low, xhigh up to max; none asked is the documented default, high, never GLM-5.3's max.
    sent = [body["reasoning_effort"] for body in upstream.bodies]
    assert sent == ["low", "high", "low", "max", "high"]


async def test_reasoning_effort_to_a_model_that_takes_none_is_refused(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p", extra='model = "glm-4.7"'))
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                reasoning_effort="medium",
            )
    assert upstream.bodies == []
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["message"] == (
        "reasoning_effort: reasoning_effort=medium: GLM-4.7 (the persona's model=glm-4.7) "
        "takes no reasoning_effort (GLM-5.2 and later do); leave it unset"
    )


async def test_include_usage_adds_the_usage_chunk(tmp_path: Path, connect: Connect) -> None:
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        stream = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        plain = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            stream=True,
        )
        without = [chunk async for chunk in plain]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert all(chunk.choices for chunk in without)


# ---------------------------------------------------------------------------- client tools


async def test_client_tools_come_back_as_tool_calls_and_the_results_continue_the_turn(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([_client_tool_fixture()]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        first = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            tools=[WEATHER_TOOL],  # type: ignore[list-item]
            tool_choice="auto",
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        calls = choice.message.tool_calls or []
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [CALL]  # type: ignore[union-attr]
        second = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION, CALL_MESSAGE, RESULT],  # type: ignore[list-item]
            tools=[WEATHER_TOOL],  # type: ignore[list-item]
        )
        report = mock.report()
    assert second.choices[0].message.content == ANSWER
    assert second.choices[0].finish_reason == "stop"
    assert report["fixtures"][0]["served"] == [1, 1]
    # The client's tool only: the persona's own "calculate" stays out of such a request.
    offered = [t["function"]["name"] for t in upstream.bodies[0]["tools"]]
    assert offered == ["get_weather"]
    assert upstream.bodies[0]["tool_choice"] == "auto"
    assert upstream.bodies[1]["messages"][-1] == RESULT


async def test_a_web_question_offers_the_built_in_search_beside_the_client_tools(
    tmp_path: Path, connect: Connect
) -> None:
    web = {"role": "user", "content": "What is the weather in Nanaimo?"}
    search = {"type": "web_search", "web_search": {"enable": True, "search_result": True}}
    found = fixture("client_tool_web", [([web], calls_body([CALL]))], tools=[search, WEATHER_TOOL])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        await client.chat.completions.create(
            model="tutor",
            messages=[{"role": "user", "content": "// What is the weather in Nanaimo?"}],
            tools=[WEATHER_TOOL],  # type: ignore[list-item]
        )
    kinds = [t["type"] for t in upstream.bodies[0]["tools"]]
    assert kinds == ["web_search", "function"]
    assert upstream.bodies[0]["tools"][1]["function"]["name"] == "get_weather"


async def test_client_tool_calls_stream_too(tmp_path: Path, connect: Connect) -> None:
    async with MockServer([_client_tool_fixture()]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        stream = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            tools=[WEATHER_TOOL],  # type: ignore[list-item]
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    deltas = [
        c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    assert len(deltas) == 1
    (call,) = deltas[0]
    assert (call.index, call.id, call.function.name) == (0, "call_w1", "get_weather")  # type: ignore[union-attr]
    assert json.loads(call.function.arguments or "") == {"city": "Nanaimo"}  # type: ignore[union-attr]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_client_tools_with_a_stored_conversation_are_refused(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                tools=[WEATHER_TOOL],  # type: ignore[list-item]
                extra_body={"conversation_id": "c1"},
            )
    assert isinstance(caught.value.body, dict) and caught.value.body["param"] == "conversation_id"
    assert upstream.bodies == []


# ---------------------------------------------------------------------------- json_schema

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "Weather", "schema": SCHEMA}}
GOOD = '{"city": "Nanaimo", "celsius": 9}'
BAD = '{"city": "Nanaimo"}'
PROBLEM = "at the top level: 'celsius' is a required property"


def _schema_fixture(second: str) -> Fixture:
    correction = {"role": "user", "content": CORRECTION.format(problem=PROBLEM)}
    found = fixture(
        "json_schema",
        [
            ([QUESTION], answer_body(BAD, 0)),
            ([QUESTION, {"role": "assistant", "content": BAD}, correction], answer_body(second, 1)),
        ],
    )
    body = found.exchanges[1].request.body
    assert body is not None
    del body["tools"]  # the corrective call offers no tools
    return found


async def test_a_json_schema_answer_is_checked_and_corrected_once(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([_schema_fixture(f"```json\n{GOOD}\n```")]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        completion = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            response_format=SCHEMA_FORMAT,  # type: ignore[arg-type]
        )
        report = mock.report()
    assert json.loads(completion.choices[0].message.content or "") == {
        "city": "Nanaimo",
        "celsius": 9,
    }
    assert report["fixtures"][0]["served"] == [1, 1]
    first = upstream.bodies[0]
    assert first["response_format"] == {"type": "json_object"}
    instructions = [m["content"] for m in first["messages"] if m["role"] == "system"]
    assert any(json.dumps(SCHEMA, sort_keys=True) in text for text in instructions)


async def test_a_streamed_json_schema_answer_shows_only_the_checked_text(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([_schema_fixture(GOOD)]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        stream = await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            response_format=SCHEMA_FORMAT,  # type: ignore[arg-type]
            stream=True,
        )
        shown = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert json.loads(shown) == {"city": "Nanaimo", "celsius": 9}


async def test_an_answer_that_stays_off_schema_is_a_clear_error(
    tmp_path: Path, connect: Connect
) -> None:
    async with MockServer([_schema_fixture('{"town": "Nanaimo"}')]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        with pytest.raises(openai.APIStatusError) as caught:
            await client.with_options(max_retries=0).chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                response_format=SCHEMA_FORMAT,  # type: ignore[arg-type]
            )
    assert caught.value.status_code == 502
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "output_schema_mismatch"
    assert "Weather" in error["message"] and "required" in error["message"]


# ---------------------------------------------------------------------------- pins, models


async def test_a_persona_file_pins_parameters(tmp_path: Path, connect: Connect) -> None:
    pins = '[client_parameters]\ntemperature = "refuse"\ntop_p = "ignore"\nuser = "ignore"\n'
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p", extra=pins))
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="tutor",
                messages=[QUESTION],  # type: ignore[list-item]
                temperature=0.3,
            )
        await client.chat.completions.create(
            model="tutor",
            messages=[QUESTION],  # type: ignore[list-item]
            top_p=0.4,
            user="bob",
        )
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == "temperature"
    assert caught.value.body["code"] == "parameter_pinned"
    (sent,) = upstream.bodies
    # The client's `user` is ignored: the caller's own pseudonym goes (the bootstrap admin's).
    assert "top_p" not in sent and sent["user_id"] == pseudonym(BOOTSTRAP_USER)


async def test_one_model_is_answered_by_its_id(tmp_path: Path, connect: Connect) -> None:
    async with MockServer([]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        model = await client.models.retrieve("tutor")
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("nobody")
    assert (model.id, model.object) == ("tutor", "model")


# ---------------------------------------------------------------------------- history


async def test_a_client_history_is_sent_as_the_stored_history_is(
    tmp_path: Path, connect: Connect
) -> None:
    follow_up = {"role": "user", "content": "And tomorrow?"}
    earlier = [
        {"role": "user", "content": "weather in Nanaimo?"},
        {"role": "assistant", "content": "Light rain [1]."},
    ]
    found = fixture("cleaned", [([*earlier, follow_up], answer_body("Sunny."))], history="exact")
    footer = "\n\nSources:\n1. [Nanaimo weather](https://weather.example.org/nanaimo)"
    async with MockServer([found]) as mock:
        client, _ = connect(mock, persona_file(tmp_path / "p"))
        completion = await client.chat.completions.create(
            model="tutor",
            messages=[
                {"role": "user", "content": "  // weather in Nanaimo?"},
                {"role": "assistant", "content": "Light rain [1]." + footer},
                follow_up,
            ],  # type: ignore[list-item]
        )
        report = mock.report()
    assert completion.choices[0].message.content == "Sunny."
    assert report["unmatched_requests"] == []
    assert report["fixtures"][0]["served"] == [1]


async def test_an_earlier_client_tool_round_is_no_part_of_the_history(
    tmp_path: Path, connect: Connect
) -> None:
    big = {**RESULT, "content": "x" * 50_000}  # over BOT_MAX_MESSAGE_CHARS: a tool's output
    found = fixture("plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        client, upstream = connect(mock, persona_file(tmp_path / "p"))
        completion = await client.chat.completions.create(
            model="tutor",
            messages=[
                {"role": "user", "content": "Weather yesterday?"},
                CALL_MESSAGE,
                big,
                {"role": "assistant", "content": "It rained."},
                QUESTION,
            ],  # type: ignore[list-item]
        )
    assert completion.choices[0].message.content == ANSWER
    roles = [m["role"] for m in upstream.bodies[0]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
