"""The metrics one piece at a time: auth, label bounds, gauges, failures without a status."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from telemetry_support import TOKEN, Bot, samples, settings

from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.telemetry import Telemetry
from generic_framework.telemetry.metrics import Metrics, code_label
from generic_framework.tools import tool
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import APIConnectionError, APITimeoutError
from generic_framework.wire.messages import ChatRequest, UserMessage

REQUEST = ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")])


def answer(content: str = "fine", *, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "req-1",
        "request_id": "req-1",
        "model": "glm-4.7",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def value(metrics: Metrics, name: str, **labels: str) -> float:
    body, _ = metrics.exposition()
    return samples(body.decode()).get((name, frozenset(labels.items())), 0.0)


@pytest.mark.parametrize(
    ("values", "headers", "status"),
    [
        ({"bot_api_token": TOKEN}, {}, 401),
        ({"bot_api_token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"bot_api_token": TOKEN, "bot_metrics_public": True}, {}, 200),
        ({}, {}, 200),  # no token: like /v1, open (and the service binds loopback only)
    ],
)
async def test_metrics_follow_the_v1_auth_rule(
    bot: Bot, values: dict[str, Any], headers: dict[str, str], status: int
) -> None:
    async with bot(**values) as (client, _):
        response = await client.get("/metrics", headers=headers)
        models = await client.get("/v1/models", headers=headers)
    assert response.status_code == status
    if not values.get("bot_metrics_public"):
        assert models.status_code == status  # the same rule as /v1
    if status == 200:
        assert "generic_framework_upstream_in_flight" in response.text


async def test_openmetrics_is_served_to_a_scraper_that_asks(bot: Bot) -> None:
    async with bot() as (client, _):
        accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
        response = await client.get("/metrics", headers=accept)
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_business_codes_are_bounded() -> None:
    assert code_label("1302") == "1302"
    assert code_label(None) == ""
    assert code_label("") == ""
    assert code_label("rate limited, try later") == "other"
    assert code_label("9" * 40) == "other"
    metrics = Metrics(process=False)
    metrics.upstream_response("chat", "429", "Bearer sk-something-long")
    assert value(metrics, "generic_framework_upstream_requests_total",
                 endpoint="chat", status="429", code="other") == 1  # fmt: skip


@pytest.mark.parametrize(
    ("raised", "status", "reason"),
    [
        (httpx.ConnectError("refused"), "connection_error", APIConnectionError.__name__),
        (httpx.ReadTimeout("slow"), "timeout", APITimeoutError.__name__),
    ],
)
async def test_failures_without_a_status_are_named(
    tmp_path: Path, raised: Exception, status: str, reason: str
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise raised

    metrics = Metrics(process=False)
    custom = settings(tmp_path, llm_max_retries=1)
    async with GLMClient(custom, transport=httpx.MockTransport(fail), observer=metrics) as client:
        with pytest.raises(APIConnectionError):
            await client.chat(REQUEST)
    name = "generic_framework_upstream_requests_total"
    assert value(metrics, name, endpoint="chat", status=status, code="") == 2
    retries = "generic_framework_upstream_retries_total"
    assert value(metrics, retries, endpoint="chat", reason=reason) == 1
    count = "generic_framework_upstream_request_duration_seconds_count"
    assert value(metrics, count, endpoint="chat") == 2


async def test_calls_in_flight_and_queued_are_gauges(tmp_path: Path) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        entered.set()
        await release.wait()
        return httpx.Response(200, json=answer())

    metrics = Metrics(process=False)
    custom = settings(tmp_path, llm_max_concurrency=1)
    async with GLMClient(custom, transport=httpx.MockTransport(slow), observer=metrics) as client:
        metrics.watch(client)
        calls = [asyncio.create_task(client.chat(REQUEST)) for _ in range(3)]
        await entered.wait()
        await asyncio.sleep(0)
        assert value(metrics, "generic_framework_upstream_in_flight") == 1
        assert value(metrics, "generic_framework_upstream_queued") == 2
        release.set()
        await asyncio.gather(*calls)
        assert value(metrics, "generic_framework_upstream_in_flight") == 0
        assert value(metrics, "generic_framework_upstream_queued") == 0


@tool(inline=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_tool_names_the_model_invents_are_counted_as_unknown(tmp_path: Path) -> None:
    def call(name: str, arguments: str, id_: str) -> dict[str, Any]:
        return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}

    script = [
        answer("", calls=[call("add", '{"a": 1, "b": 2}', "c1"), call("free text?", "{}", "c2"),
                          call("add", "not json", "c3")]),
        answer("3"),
    ]  # fmt: skip

    def next_answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=script.pop(0))

    telemetry = Telemetry.create(process_metrics=False)
    runtime = Runtime(
        settings(tmp_path), transport=httpx.MockTransport(next_answer), telemetry=telemetry
    )
    async with runtime:
        persona = Persona("counter", "Add.", tools=[add], tools_always=True, runtime=runtime)
        reply = await persona.respond("add 1 and 2")
    assert reply.content == "3"
    name = "generic_framework_tool_calls_total"
    m = telemetry.metrics
    assert value(m, name, persona="counter", tool="add", outcome="ok") == 1
    assert value(m, name, persona="counter", tool="add", outcome="error") == 1
    assert value(m, name, persona="counter", tool="unknown", outcome="error") == 1
    body, _ = m.exposition()
    assert b"free text" not in body
    assert json.dumps(reply.rounds[0].tool_calls[1].name) == '"free text?"'
