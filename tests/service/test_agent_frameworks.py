"""Real OpenAI-compatible clients drive a persona through the service, against the mock.

openai-agents (a function tool that runs in the client, and an ``output_type``), LangChain's
``ChatOpenAI`` (invoke, stream, ``bind_tools``) and the ``llm`` command line, each as its users
run it. The fixtures compare what reached the mock, so a served exchange proves what the
client's request became upstream: the tool result in the second request, the cleaned history
of ``llm -c``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from openai_support import Upstream, answer_body, calls_body, fixture, persona_file
from pydantic import BaseModel
from service_processes import served_in_thread

from generic_framework.config import Settings
from generic_framework.mock import MockServer
from generic_framework.runtime import Runtime
from generic_framework.service import create_app

agents = pytest.importorskip("agents")
langchain_openai = pytest.importorskip("langchain_openai")

QUESTION = {"role": "user", "content": "What is the weather in Nanaimo?"}
CALL_ID = "call_w1"
TOOL_RESULT = "Light rain, 9 C"
ANSWER = "Light rain and 9 degrees in Nanaimo."
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
SEARCH = {"type": "web_search", "web_search": {"enable": True, "search_result": True}}
Serve = Callable[[MockServer], httpx.AsyncClient]


def _tool_round_fixture() -> Any:
    call_message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Nanaimo"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": CALL_ID, "content": TOOL_RESULT}
    return fixture(
        "client_tool_round",
        [
            ([QUESTION], calls_body([(CALL_ID, "get_weather", {"city": "Nanaimo"})], 0)),
            ([QUESTION, call_message, result], answer_body(ANSWER, 1)),
        ],
        tools=[WEATHER_TOOL],
    )


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Serve]:
    """``serve(mock)``: an httpx client to the service (in-process) over ``mock``."""
    runtimes: list[Runtime] = []
    clients: list[httpx.AsyncClient] = []

    def make(mock: MockServer) -> httpx.AsyncClient:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=mock.base_url,
            personas_dir=persona_file(tmp_path / "personas"),
            data_dir=tmp_path / "data",
        )
        runtimes.append(Runtime(settings, transport=Upstream()))
        app = create_app(runtime=runtimes[-1])
        clients.append(httpx.AsyncClient(transport=httpx.ASGITransport(app=app)))
        return clients[-1]

    yield make
    for client in clients:
        await client.aclose()
    for runtime in runtimes:
        await runtime.aclose()


def _agents_model(http: httpx.AsyncClient) -> Any:
    import openai

    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(
        api_key="unused", base_url="http://localhost/v1", http_client=http, max_retries=0
    )
    return agents.OpenAIChatCompletionsModel(model="tutor", openai_client=client)


@pytest.mark.parametrize("streamed", [False, True])
async def test_openai_agents_runs_its_own_tool_and_the_model_reads_the_result(
    serve: Serve, streamed: bool
) -> None:
    ran: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return TOOL_RESULT

    async with MockServer([_tool_round_fixture()]) as mock:
        agent = agents.Agent(
            name="Tutor",
            instructions="Answer briefly.",
            tools=[get_weather],
            model=_agents_model(serve(mock)),
        )
        if streamed:
            run = agents.Runner.run_streamed(agent, QUESTION["content"])
            async for _ in run.stream_events():
                pass
            final = run.final_output
        else:
            final = (await agents.Runner.run(agent, QUESTION["content"])).final_output
        report = mock.report()
    assert ran == ["Nanaimo"]
    assert final == ANSWER
    # Exchange 2 answers only a request that carries the tool's result after its call.
    assert report["fixtures"][0]["served"] == [1, 1]
    assert report["unmatched_requests"] == []


class Weather(BaseModel):
    city: str
    celsius: float


async def test_openai_agents_gets_its_output_type(serve: Serve) -> None:
    found = fixture("agents_output", [([QUESTION], answer_body('{"city":"Nanaimo","celsius":9}'))])
    async with MockServer([found]) as mock:
        http = serve(mock)
        agent = agents.Agent(
            name="Tutor", instructions="Answer briefly.", output_type=Weather,
            model=_agents_model(http),
        )  # fmt: skip
        result = await agents.Runner.run(agent, QUESTION["content"])
    assert result.final_output == Weather(city="Nanaimo", celsius=9)


def _chat_openai(http: httpx.AsyncClient) -> Any:
    return langchain_openai.ChatOpenAI(
        model="tutor",
        base_url="http://localhost/v1",
        api_key="unused",
        http_async_client=http,
        max_retries=0,
        temperature=0.3,
    )


async def test_langchain_invokes_and_streams(serve: Serve) -> None:
    found = fixture("langchain_plain", [([QUESTION], answer_body(ANSWER))])
    async with MockServer([found]) as mock:
        chat = _chat_openai(serve(mock))
        message = await chat.ainvoke(QUESTION["content"])
        chunks = [chunk async for chunk in chat.astream(QUESTION["content"])]
    assert message.content == ANSWER
    assert "".join(str(chunk.content) for chunk in chunks) == ANSWER
    usage = [chunk.usage_metadata for chunk in chunks if chunk.usage_metadata]
    assert usage and usage[-1]["total_tokens"] == 15


async def test_langchain_bind_tools_gets_the_call(serve: Serve) -> None:
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return TOOL_RESULT

    async with MockServer([_tool_round_fixture()]) as mock:
        chat = _chat_openai(serve(mock)).bind_tools([get_weather])
        message = await chat.ainvoke(QUESTION["content"])
        chunks = [chunk async for chunk in chat.astream(QUESTION["content"])]
    expected = [
        {"name": "get_weather", "args": {"city": "Nanaimo"}, "id": CALL_ID, "type": "tool_call"}
    ]
    assert message.tool_calls == expected
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.tool_calls == expected


def _llm(home: Path, *args: str) -> str:
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "llm"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_llm_continues_a_conversation_with_a_clean_history(tmp_path: Path) -> None:
    web = {"role": "user", "content": "weather in Nanaimo?"}
    follow_up = {"role": "user", "content": "And tomorrow?"}
    source = {"title": "Nanaimo weather", "link": "https://weather.example.org/nanaimo",
              "content": "Rain.", "media": "Example", "refer": "ref_1"}  # fmt: skip
    found = fixture(
        "llm_continued",
        [
            ([web], answer_body("Light rain [ref_1].", 0, web_search=[source])),
            ([web, {"role": "assistant", "content": "Light rain [1]."}, follow_up],
             answer_body("Sunny.", 1)),
        ],
        tools=[SEARCH, WEATHER_TOOL],
        history="exact",
    )  # fmt: skip
    plain = found.exchanges[1].request.body
    assert plain is not None
    plain["tools"] = [WEATHER_TOOL]  # no "//": the persona's own function only
    home = tmp_path / "llm"
    home.mkdir()
    with MockServer([found]) as mock:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=mock.base_url,
            personas_dir=persona_file(tmp_path / "personas"),
            data_dir=tmp_path / "data",
        )
        config = uvicorn.Config(create_app(settings), port=0, log_level="warning", lifespan="on")
        with served_in_thread(config) as (host, port):
            (home / "extra-openai-models.yaml").write_text(
                f"- model_id: tutor\n  model_name: tutor\n  api_base: http://{host}:{port}/v1\n"
                "  api_key_name: tutor\n",
                encoding="utf-8",
            )
            (home / "keys.json").write_text(json.dumps({"tutor": "unused"}), encoding="utf-8")
            first = _llm(home, "-m", "tutor", "// weather in Nanaimo?")
            second = _llm(home, "-c", "And tomorrow?")
        report = mock.report()
    assert first.startswith("Light rain [1].")
    assert "Sources:\n1. [Nanaimo weather](https://weather.example.org/nanaimo)" in first
    assert second.strip() == "Sunny."
    # Exchange 2 is served only to a request whose history reads as the stored one would:
    # the question without "//", the answer without its Sources footer.
    assert report["fixtures"][0]["served"] == [1, 1]
