"""A streamed turn's lifecycle over real sockets: early headers, keep-alives, and disconnects.

The bot service runs under uvicorn on loopback in the test's event loop (so the test can look
at its runtime: the conversation locks, the upstream slots), in front of the mock Z.AI server
in its thread. The client that disconnects is a raw socket, closed by the test: a real close,
seen by uvicorn as ``http.disconnect``.

At each point a client can leave (waiting for the first text, mid-text, during a tool round)
the turn must be cancelled: the upstream connection closed (the mock's in-flight count back to
0), the conversation's lock and the upstream slot released (the next turn on the same
conversation answers at once, with ``LLM_MAX_CONCURRENCY=1`` and a 1 s queue timeout), and
nothing of the turn stored.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from support import wait_for

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.listening import listen
from generic_framework.mock.fixture import Fixture
from generic_framework.mock.server import MockServer
from generic_framework.mock.sse import completion_to_events
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UpstreamProbe
from generic_framework.service.server import uvicorn_config
from generic_framework.service.streaming import KEEPALIVE
from generic_framework.store import SQLiteStore
from generic_framework.tools import tool

CHAT = "/api/paas/v4/chat/completions"
CID = "c-lifecycle"
TOOL_RUNS: list[str] = []


@tool
async def slow_tool(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: how long to wait.
    """
    TOOL_RUNS.append("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        TOOL_RUNS.append("cancelled")
        raise
    TOOL_RUNS.append("finished")
    return "waited"


TOOLS = [slow_tool.to_wire()]


def _completion(content: str = "", calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "cmpl-1",
        "created": 1767950000,
        "model": "glm-4.7",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _fixture(name: str, question: str, body: dict[str, Any], **extra: Any) -> Fixture:
    """One exchange answering ``question``, streamed or not, with faults in ``extra``."""
    request = {
        "model": "glm-4.7",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
    }
    response: dict[str, Any] = {"status": 200, "events": completion_to_events(body)}
    exchange = {"request": {"method": "POST", "path": CHAT, "body": request}, "response": response}
    return Fixture.model_validate(
        {"version": 1, "name": name, "user_input": question, "exchanges": [{**exchange, **extra}]}
    )


SLOW_CALL = {
    "id": "call_1",
    "type": "function",
    "index": 0,
    "function": {"name": "slow_tool", "arguments": '{"seconds": 30}'},
}
FIXTURES = [
    _fixture(
        "slow", "slow?", _completion("Slow but sure."), faults=[{"kind": "delay", "ms": 30_000}]
    ),
    _fixture(
        "stalled",
        "stalled?",
        _completion("The first words arrive, and then nothing more for a long while."),
        faults=[{"kind": "stall_stream", "after_events": 2, "seconds": 30, "times": None}],
    ),
    _fixture("tool", "tool?", _completion("", [SLOW_CALL])),
    _fixture("next", "next?", _completion("Here at once.")),
]


@pytest.fixture(scope="module")
def mock() -> AsyncIterator[MockServer]:
    with MockServer(FIXTURES) as server:
        yield server


def _report(mock: MockServer) -> dict[str, Any]:
    return httpx.get(f"{mock.url}/mock/report", timeout=30).json()  # type: ignore[no-any-return]


@asynccontextmanager
async def _served(app: Starlette, settings: Settings) -> AsyncIterator[int]:
    """The app under uvicorn on an ephemeral loopback port, in this event loop."""
    sockets = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn_config(app, settings, "127.0.0.1", 0, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=sockets))
    while not server.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.01)
    try:
        yield sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def _reachable(host: str, port: int, seconds: float) -> None:
    """A readiness probe that never dials out."""


class Stream:
    """A streamed request on a raw socket: what arrived so far, and the socket to close."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.seen = b""
        self._read = 0  # how far earlier calls of read_until looked

    async def read_until(self, wanted: bytes, seconds: float = 30.0) -> None:
        """Read until ``wanted`` arrives after what earlier calls found."""
        async with asyncio.timeout(seconds):
            while (found := self.seen.find(wanted, self._read)) < 0:
                data = await self.reader.read(4096)
                assert data, f"the stream ended before {wanted!r}: {self.seen!r}"
                self.seen += data
        self._read = found + len(wanted)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


class Bot:
    """The service with one persona over the mock, and what a test checks on it."""

    def __init__(self, runtime: Runtime, store: SQLiteStore, port: int) -> None:
        self.runtime = runtime
        self.store = store
        self.port = port

    async def open_stream(self, question: str) -> Stream:
        """POST a streamed turn on a raw socket."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        body = json.dumps({"persona": "probe", "content": question, "stream": True}).encode()
        head = (
            f"POST /v1/conversations/{CID}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
        return Stream(reader, writer)

    async def answers_at_once(self) -> None:
        """The next turn on the conversation is answered and stored at once: a slot still held
        would make it wait the 1 s queue timeout and answer 503, a lock still held would make
        it wait for good (the time bound only catches a hang on a busy machine)."""
        started = time.monotonic()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.port}", timeout=30
        ) as client:
            response = await client.post(
                f"/v1/conversations/{CID}/messages", json={"persona": "probe", "content": "next?"}
            )
        assert response.status_code == 200, response.text
        assert response.json()["content"] == "Here at once."
        assert time.monotonic() - started < 10
        turns = await self.store.turns(CID)
        assert turns is not None and len(turns) == 1  # only this turn: nothing of the other
        assert [m.content for m in turns[0].messages] == ["next?", "Here at once."]


@pytest.fixture
async def bot(tmp_path: Path, mock: MockServer) -> AsyncIterator[Bot]:
    httpx.post(f"{mock.url}/mock/reset", timeout=30)
    TOOL_RUNS.clear()
    settings = Settings.defaults(
        api_key="mock-key",
        base_url=mock.base_url,
        data_dir=tmp_path,
        personas_dir=tmp_path,
        llm_max_concurrency=1,
        llm_queue_timeout=1.0,
        llm_max_retries=0,
        bot_stream_grace=0.2,
        bot_stream_keepalive=0.1,
    )
    store = SQLiteStore(tmp_path / "conversations.sqlite3")
    async with Runtime(settings, store=store) as runtime:
        persona = Persona("probe", "", [slow_tool], runtime=runtime, tools_always=True)
        probe = UpstreamProbe(settings, connect=_reachable)
        app = create_app(runtime=runtime, personas={"probe": persona}, upstream_probe=probe)
        async with _served(app, settings) as port:
            yield Bot(runtime, store, port)
    await store.aclose()


async def _leave(bot: Bot, mock: MockServer, stream: Stream) -> None:
    """Close the client's socket; the turn must end with nothing held and nothing stored."""
    assert _report(mock)["in_flight"] == 1  # the upstream call was running when we left
    await stream.close()
    await wait_for(lambda: _report(mock)["in_flight"] == 0, "the upstream connection to close")
    await wait_for(lambda: bot.runtime.client.in_flight == 0, "the upstream slot")
    await wait_for(lambda: len(bot.runtime.locks) == 0, "the conversation's lock")
    assert await bot.store.turns(CID) is None
    await bot.answers_at_once()


async def test_leaving_before_the_first_text(bot: Bot, mock: MockServer) -> None:
    started = time.monotonic()
    stream = await bot.open_stream("slow?")
    await stream.read_until(b'"content":""')
    # The upstream is silent; the headers and the opening chunk came when the 0.2 s grace
    # ended, not with the answer the mock holds back 30 s (a busy machine may take seconds).
    assert stream.seen.startswith(b"HTTP/1.1 200 ")
    assert time.monotonic() - started < 10
    await stream.read_until(KEEPALIVE)
    await _leave(bot, mock, stream)


async def test_leaving_mid_text(bot: Bot, mock: MockServer) -> None:
    stream = await bot.open_stream("stalled?")
    await stream.read_until(b"The first")
    await stream.read_until(KEEPALIVE)  # the upstream stalls; the stream does not
    assert b"a long while" not in stream.seen
    await _leave(bot, mock, stream)


async def test_leaving_during_a_tool_round(bot: Bot, mock: MockServer) -> None:
    stream = await bot.open_stream("tool?")
    await stream.read_until(b'"round_started"')
    await wait_for(lambda: TOOL_RUNS == ["started"], "the tool to start")
    await stream.read_until(KEEPALIVE)
    # The model's call is over (the mock answered it); the tool is what runs now.
    assert _report(mock)["in_flight"] == 0
    await stream.close()
    await wait_for(lambda: TOOL_RUNS == ["started", "cancelled"], "the tool to be cancelled")
    await wait_for(lambda: len(bot.runtime.locks) == 0, "the conversation's lock")
    assert bot.runtime.client.in_flight == 0
    assert await bot.store.turns(CID) is None
    await bot.answers_at_once()
