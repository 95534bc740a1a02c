"""OpenTelemetry spans after the GenAI conventions, read back from an in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from telemetry_support import REPO, Bot, settings

from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.telemetry import Telemetry
from generic_framework.telemetry.logs import conversation_hash
from generic_framework.telemetry.tracing import tracing_requested
from generic_framework.tools import tool
from generic_framework.wire.errors import AuthenticationError


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    yield memory
    memory.clear()


def traced(exporter: InMemorySpanExporter, *, capture: bool = False) -> Telemetry:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Telemetry.create(
        tracer_provider=provider, capture_content=capture, process_metrics=False
    )


@tool(inline=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def completion(n: int, content: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"2026010909req{n}",
        "request_id": f"2026010909req{n}",
        "model": "glm-4.7-answering",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 100 * n, "completion_tokens": 10 * n, "total_tokens": 110 * n,
                  "prompt_tokens_details": {"cached_tokens": 5 * n},
                  "completion_tokens_details": {"reasoning_tokens": n}},
    }  # fmt: skip


SECRET_QUESTION = "what is 2 plus 40, dear secret diary?"


async def run_tool_turn(tmp_path: Path, telemetry: Telemetry) -> None:
    call = {"id": "call_7", "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 40}'}}  # fmt: skip
    script = [completion(1, "", [call]), completion(2, "42")]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=script.pop(0))

    runtime = Runtime(
        settings(tmp_path), transport=httpx.MockTransport(answer), telemetry=telemetry
    )
    async with runtime:
        persona = Persona("adder", "Add.", tools=[add], tools_always=True, runtime=runtime)
        reply = await persona.respond(SECRET_QUESTION, conversation_id="user-42")
    assert reply.content == "42"


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


async def test_a_turn_is_a_span_with_model_and_tool_children(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    await run_tool_turn(tmp_path, traced(exporter))
    spans = by_name(exporter.get_finished_spans())
    assert sorted(spans) == ["chat glm-4.7", "execute_tool add", "invoke_agent adder"]
    (turn,), calls, (tool_span,) = (
        spans["invoke_agent adder"], spans["chat glm-4.7"], spans["execute_tool add"],
    )  # fmt: skip
    assert len(calls) == 2
    assert turn.parent is None
    for child in (*calls, tool_span):
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id

    t = dict(turn.attributes or {})
    assert t["gen_ai.operation.name"] == "invoke_agent"
    assert t["gen_ai.system"] == t["gen_ai.provider.name"] == "z.ai"
    assert t["gen_ai.agent.name"] == "adder"
    assert t["gen_ai.request.model"] == "glm-4.7"
    assert t["gen_ai.conversation.id"] == conversation_hash("user-42") != "user-42"
    assert t["gen_ai.usage.input_tokens"] == 300 and t["gen_ai.usage.output_tokens"] == 30
    assert t["generic_framework.stop_reason"] == "completed"
    assert t["generic_framework.rounds"] == 2
    assert list(t["zai.request_ids"]) == ["2026010909req1", "2026010909req2"]

    first = dict(calls[0].attributes or {})
    assert calls[0].kind is SpanKind.CLIENT
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.system"] == "z.ai"
    assert first["gen_ai.request.model"] == "glm-4.7"
    assert first["gen_ai.response.model"] == "glm-4.7-answering"
    assert first["gen_ai.response.id"] == first["zai.request_id"] == "2026010909req1"
    assert list(first["gen_ai.response.finish_reasons"]) == ["tool_calls"]
    assert first["gen_ai.usage.input_tokens"] == 100
    assert first["gen_ai.usage.output_tokens"] == 10
    assert first["gen_ai.usage.cache_read.input_tokens"] == 5
    assert first["gen_ai.usage.reasoning.output_tokens"] == 1

    tool_attributes = dict(tool_span.attributes or {})
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "add"
    assert tool_attributes["gen_ai.tool.call.id"] == "call_7"
    assert tool_attributes["gen_ai.tool.type"] == "function"
    assert tool_span.status.status_code is StatusCode.UNSET
    assert calls[0].end_time is not None and tool_span.start_time is not None
    assert calls[0].end_time <= tool_span.start_time  # the tool ran after the call answered

    # No content unless asked for: neither the question nor the answer is on any span.
    text = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    assert "secret diary" not in text
    assert "gen_ai.input.messages" not in text and "gen_ai.tool.call.arguments" not in text


async def test_content_is_recorded_only_when_enabled(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    await run_tool_turn(tmp_path, traced(exporter, capture=True))
    spans = by_name(exporter.get_finished_spans())
    first = dict(spans["chat glm-4.7"][0].attributes or {})
    assert SECRET_QUESTION in str(first["gen_ai.input.messages"])
    last = dict(spans["chat glm-4.7"][1].attributes or {})
    assert json.loads(str(last["gen_ai.output.messages"]))[0]["content"] == "42"
    tool_attributes = dict(spans["execute_tool add"][0].attributes or {})
    assert json.loads(str(tool_attributes["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 40}
    assert tool_attributes["gen_ai.tool.call.result"] == "42"


async def test_a_failed_call_marks_its_spans_with_the_error_and_request_id(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "1002", "message": "bad key"}}
        return httpx.Response(401, json=body, headers={"x-request-id": "zai-req-401"})

    runtime = Runtime(
        settings(tmp_path), transport=httpx.MockTransport(refuse), telemetry=traced(exporter)
    )
    async with runtime:
        persona = Persona("adder", "Add.", runtime=runtime)
        with pytest.raises(AuthenticationError):
            await persona.respond("hello")
    spans = by_name(exporter.get_finished_spans())
    for span in (spans["invoke_agent adder"][0], spans["chat glm-4.7"][0]):
        attributes = dict(span.attributes or {})
        assert span.status.status_code is StatusCode.ERROR
        assert attributes["error.type"] == "AuthenticationError"
        assert attributes["zai.request_id"] == "zai-req-401"
    assert dict(spans["invoke_agent adder"][0].attributes or {})[
        "generic_framework.stop_reason"
    ] == ("error")


async def test_a_streamed_turn_through_the_service(
    bot: Bot, exporter: InMemorySpanExporter
) -> None:
    async with bot(telemetry=traced(exporter)) as (client, _):
        body = {
            "model": "scout",
            "stream": True,
            "messages": [{"role": "user", "content": "// what's the weather in Nanaimo?"}],
        }
        response = await client.post("/v1/chat/completions", json=body)  # fmt: skip
    assert response.text.endswith("data: [DONE]\n\n")
    spans = by_name(exporter.get_finished_spans())
    (turn,), (call,) = spans["invoke_agent scout"], spans["chat glm-4.7"]
    assert dict(turn.attributes or {})["gen_ai.request.stream"] is True
    attributes = dict(call.attributes or {})
    assert attributes["gen_ai.request.stream"] is True
    assert attributes["generic_framework.web_search.results"] == 3
    assert attributes["gen_ai.usage.input_tokens"] == 1450
    assert dict(turn.attributes or {})["generic_framework.web_searches"] == 1


def test_tracing_is_off_without_a_provider() -> None:
    # This process imported OpenTelemetry (these tests) but installed no global provider.
    assert Telemetry.create(process_metrics=False).tracing is None


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
        ({"OTEL_SERVICE_NAME": "bot"}, False),
    ],
)
def test_which_variables_turn_tracing_on(environ: dict[str, str], wanted: bool) -> None:
    assert tracing_requested(environ) is wanted


_SCRIPT = """
import asyncio, json, logging, os, sys
{prelude}
import httpx
from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.telemetry.tracing import setup_tracing

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
enabled = setup_tracing(os.environ)
answer = {{"id": "r1", "model": "glm-4.7", "usage": {{"prompt_tokens": 7, "completion_tokens": 1}},
          "choices": [{{"index": 0, "finish_reason": "stop",
                        "message": {{"role": "assistant", "content": "hi"}}}}]}}

async def main():
    settings = Settings.defaults(api_key="k", base_url="http://zai.test/v4", data_dir={data!r})
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
    async with Runtime(settings, transport=transport) as runtime:
        reply = await Persona("p", "Be brief.", runtime=runtime).respond("hello")
    print("RESULT", json.dumps({{"enabled": enabled, "reply": reply.content,
                      "otel_imported": "opentelemetry.trace" in sys.modules}}))

asyncio.run(main())
"""


def run_script(
    tmp_path: Path, env: dict[str, str], prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    script = _SCRIPT.format(prelude=prelude, data=str(tmp_path / "data"))
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip


def result_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    found: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return found


def test_the_entry_point_exports_spans_when_the_variables_say_so(tmp_path: Path) -> None:
    done = run_script(tmp_path, {"OTEL_TRACES_EXPORTER": "console"})
    assert result_of(done) == {"enabled": True, "reply": "hi", "otel_imported": True}
    assert '"name": "invoke_agent p"' in done.stdout
    assert '"gen_ai.system": "z.ai"' in done.stdout
    assert '"service.name": "generic-framework"' in done.stdout


def test_without_variables_opentelemetry_is_not_even_imported(tmp_path: Path) -> None:
    done = run_script(tmp_path, {})
    assert result_of(done) == {"enabled": False, "reply": "hi", "otel_imported": False}


def test_without_the_extra_the_variables_only_warn(tmp_path: Path) -> None:
    # As if the otel extra were not installed: importing opentelemetry fails.
    prelude = "sys.modules['opentelemetry'] = None"
    done = run_script(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, prelude)
    assert result_of(done) == {"enabled": False, "reply": "hi", "otel_imported": False}
    assert "the otel extra is not installed" in done.stderr
