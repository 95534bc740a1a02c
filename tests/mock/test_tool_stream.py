"""``tool_stream``: the mock streams a call's arguments in fragments when asked, the bundled
fixture records such a stream, and the real persona joins the fragments by index."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from mock_helpers import (
    chat,
    completion,
    exchange,
    function_tool,
    make_fixture,
    system,
    tool_call,
    user,
)

from generic_framework.config import Settings
from generic_framework.core.events import Done
from generic_framework.mock import Fixture, MockServer, bundled_fixture_paths
from generic_framework.mock.sse import events_to_completion, parse_sse
from generic_framework.runtime import Runtime

REPO = Path(__file__).resolve().parents[2]
ARGUMENTS = {"expression": "2 ** 40 / 7 + sqrt(1764)"}


def recorded() -> Fixture:
    call = tool_call("call_1", "calculate", ARGUMENTS)
    return make_fixture(
        "calls",
        exchange(
            chat(system(), user("compute"), tools=[function_tool("calculate")]),
            completion(calls=[call]),
        ),
    )


def call_fragments(text: str) -> list[dict[str, Any]]:
    return [
        fragment
        for event in parse_sse(text)
        if isinstance(event, dict)
        for choice in event.get("choices", [])
        for fragment in choice["delta"].get("tool_calls") or []
    ]


def test_a_json_recording_streams_arguments_in_fragments_on_request(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(recorded())
    body = chat(
        system(), user("compute"), tools=[function_tool("calculate")], stream=True, tool_stream=True
    )
    answer = http.post("/api/paas/v4/chat/completions", json=body)
    fragments = call_fragments(answer.text)
    assert len(fragments) > 2
    assert fragments[0]["id"] == "call_1"
    assert all("id" not in f and f["index"] == 0 for f in fragments[1:])
    joined = events_to_completion(parse_sse(answer.text))["choices"][0]["message"]["tool_calls"]
    assert json.loads(joined[0]["function"]["arguments"]) == ARGUMENTS
    without = chat(system(), user("compute"), tools=[function_tool("calculate")], stream=True)
    whole = call_fragments(http.post("/api/paas/v4/chat/completions", json=without).text)
    assert len(whole) == 1 and json.loads(whole[0]["function"]["arguments"]) == ARGUMENTS


async def test_the_persona_joins_the_fragments_of_the_bundled_recording(tmp_path: Path) -> None:
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(
            api_key="test-key-0123456789",
            base_url=server.base_url,
            personas_dir=REPO / "personas",
            data_dir=tmp_path,
        )
        async with Runtime(settings) as runtime:
            scout = runtime.persona("scout")
            events = [e async for e in scout.stream("// how many seconds are in a leap year?")]
        report = server.report()
    done = events[-1]
    assert isinstance(done, Done)
    reply = done.reply
    assert reply.content == "A leap year has 31,622,400 seconds (366 x 24 x 60 x 60)."
    assert reply.rounds[0].tool_calls[0].arguments == '{"expression":"366 * 24 * 60 * 60"}'
    assert reply.rounds[0].results[0].ok
    (served,) = [f for f in report["fixtures"] if f["name"] == "tool_stream_fragments"]
    assert served["served"] == [1, 1]
