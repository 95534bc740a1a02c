"""The official clients work against the mock unchanged: plain chat, a tool round trip, a stream.

Both the ``openai`` AsyncOpenAI client and the ``zai-sdk`` client are pointed at the running mock
serving the bundled fixtures, and send what a user of those SDKs would write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from openai import AsyncOpenAI
from zai import ZaiClient

from generic_framework.mock import Fixture, MockServer, load_fixtures
from generic_framework.tools import EXAMPLE_TOOLS

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


@pytest.fixture
def bundled() -> dict[str, Fixture]:
    return {fixture.name: fixture for fixture in load_fixtures()}


@pytest.fixture
def server(serve: Callable[..., MockServer], bundled: dict[str, Fixture]) -> MockServer:
    return serve(*bundled.values())


def question(fixture: Fixture) -> list[dict[str, Any]]:
    text = fixture.user_input.removeprefix("//").strip()
    return [SYSTEM, {"role": "user", "content": text}]


def offered_tools(fixture: Fixture) -> list[dict[str, Any]]:
    body = fixture.exchanges[0].request.body or {}
    return list(body.get("tools") or [])


def expected_text(fixture: Fixture, exchange: int = 0) -> str:
    body = fixture.exchanges[exchange].response.body
    assert isinstance(body, dict)
    return str(body["choices"][0]["message"]["content"])


async def call_tool(name: str, arguments: str) -> str:
    return (await EXAMPLE_TOOLS[name].run(arguments, time_limit=5)).content


def run_tool(name: str, arguments: str) -> str:
    return asyncio.run(call_tool(name, arguments))


# ------------------------------------------------------------------ openai


async def test_openai_plain_chat(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["plain_answer"]
    async with AsyncOpenAI(api_key="sk-mock", base_url=server.base_url, max_retries=0) as client:
        answer = await client.chat.completions.create(model="glm-4.7", messages=question(fixture))  # type: ignore[arg-type]
    assert answer.choices[0].message.content == expected_text(fixture)
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.total_tokens > 0


async def test_openai_tool_round_trip(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["function_two_rounds"]
    messages: list[Any] = question(fixture)
    tools: Any = offered_tools(fixture)
    async with AsyncOpenAI(api_key="sk-mock", base_url=server.base_url, max_retries=0) as client:
        first = await client.chat.completions.create(
            model="glm-4.7", messages=messages, tools=tools
        )
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        assert message.tool_calls is not None
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            assert call.type == "function"
            output = await call_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        final = await client.chat.completions.create(
            model="glm-4.7", messages=messages, tools=tools
        )
    assert final.choices[0].message.content == expected_text(fixture, 1)


async def test_openai_stream(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["web_search_nanaimo_stream"]
    async with AsyncOpenAI(api_key="sk-mock", base_url=server.base_url, max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="glm-4.7",
            messages=question(fixture),  # type: ignore[arg-type]
            tools=offered_tools(fixture),  # type: ignore[arg-type]
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    events = fixture.exchanges[0].response.events or []
    recorded = "".join(
        e["choices"][0]["delta"].get("content", "") for e in events if isinstance(e, dict)
    )
    assert text == recorded
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.usage is not None
    assert (last.model_extra or {})["web_search"][0]["link"].startswith("https://")


# ------------------------------------------------------------------ zai-sdk


def zai_client(server: MockServer) -> ZaiClient:
    return ZaiClient(api_key="mock-id.mock-secret", base_url=server.base_url, max_retries=0)


def test_zai_plain_chat(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["plain_answer"]
    answer: Any = zai_client(server).chat.completions.create(
        model="glm-4.7", messages=question(fixture)
    )
    assert answer.choices[0].message.content == expected_text(fixture)
    assert answer.usage.total_tokens > 0


def test_zai_tool_round_trip(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["parallel_calls"]
    client = zai_client(server)
    messages: list[Any] = question(fixture)
    tools = offered_tools(fixture)
    first: Any = client.chat.completions.create(model="glm-4.7", messages=messages, tools=tools)
    message = first.choices[0].message
    assert len(message.tool_calls) == 3
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        output = run_tool(call.function.name, call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    final: Any = client.chat.completions.create(model="glm-4.7", messages=messages, tools=tools)
    assert final.choices[0].message.content == expected_text(fixture, 1)


def test_zai_stream(server: MockServer, bundled: dict[str, Fixture]) -> None:
    fixture = bundled["web_search_nanaimo"]  # recorded as JSON, streamed by the mock
    chunks: list[Any] = list(
        zai_client(server).chat.completions.create(
            model="glm-4.7", messages=question(fixture), tools=offered_tools(fixture), stream=True
        )
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text == expected_text(fixture)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert json.loads(chunks[-1].model_dump_json())["web_search"][0]["refer"] == "ref_1"
