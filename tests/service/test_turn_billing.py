"""A turn that fails or is abandoned after a billed tool round still counts against the caller's
daily limit: the turn service counts from the turn's own account, not from a reply it never had.

The persona ``helper`` has a tool; its first model call asks for it (Z.AI bills the call), and
its second call fails (the JSON endpoint) or stops halfway through its answer while the client
leaves (the streamed one): tests/billed_turns.py. On SQLite and on PostgreSQL, in a real store.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from billed_turns import BILLED, billed_tool_round, fail_after_the_tool, opened_store

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.store import ConversationStore
from generic_framework.store.users import Limits
from generic_framework.testing import FunctionModel
from generic_framework.tools.examples import calculate
from generic_framework.wire.errors import ServerError
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    Choice,
    ContentDelta,
    StreamEvent,
    Usage,
)


class HalfAnswer(FunctionModel):
    """The tool round, then an answer that stops after its first words and never ends."""

    def __init__(self) -> None:
        super().__init__(lambda request: billed_tool_round())

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        if request.messages[-1].role != "tool":
            async for event in super().chat_stream(request):
                yield event
            return
        yield ContentDelta(text="The answer begins ")
        await asyncio.Event().wait()  # the rest never comes: the client leaves first


@dataclass
class World:
    store: ConversationStore
    app: Any
    key: str
    user_id: str


@pytest.fixture(params=["sqlite", "postgres"])
async def open_world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[FunctionModel], Awaitable[World]]]:
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    store = await opened_store(request.param, tmp_path, server)
    runtimes: list[Runtime] = []

    async def make(model: FunctionModel) -> World:
        alice = await store.add_user("alice")
        await store.set_user("alice", limits=Limits(daily_tokens=BILLED))
        key = (await store.create_key(alice.id))[1]
        settings = Settings.defaults(
            api_key="k", data_dir=tmp_path / "data", personas_dir=tmp_path / "p"
        )
        runtime = Runtime(settings, store=store, model=model)
        runtimes.append(runtime)
        helper = Persona(
            "helper", "You help.", tools=[calculate], tools_always=True, runtime=runtime
        )
        app = create_app(runtime=runtime, personas={"helper": helper})
        return World(store, app, key, alice.id)

    yield make
    for runtime in runtimes:
        await runtime.aclose()
    await store.aclose()


def _client(world: World) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=world.app),
        base_url="http://localhost",
        headers={"Authorization": f"Bearer {world.key}"},
    )


ASK = {"model": "helper", "messages": [{"role": "user", "content": "look it up"}]}


async def test_a_json_turn_failing_after_a_billed_round_counts_its_tokens(
    open_world: Callable[[FunctionModel], Awaitable[World]],
) -> None:
    world = await open_world(FunctionModel(fail_after_the_tool))
    async with _client(world) as client:
        failed = await client.post("/v1/chat/completions", json=ASK)
        assert failed.status_code == 502
        me = (await client.get("/v1/me")).json()
        assert me["today"]["tokens"] == BILLED
        assert me["today"]["tokens_left"] == 0
        refused = await client.post("/v1/chat/completions", json=ASK)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "user_daily_tokens"


async def test_a_stream_abandoned_mid_answer_counts_its_billed_tokens(
    open_world: Callable[[FunctionModel], Awaitable[World]],
) -> None:
    model = HalfAnswer()
    world = await open_world(model)
    body = json.dumps({**ASK, "stream": True}).encode()
    sent: list[bytes] = []
    begun = asyncio.Event()  # the frame of the answer's first words went out
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await begun.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))
            if b"The answer begins" in sent[-1]:
                begun.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"authorization", f"Bearer {world.key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }
    async with asyncio.timeout(30):
        await world.app(scope, receive, send)
    assert any(b"The answer begins" in chunk for chunk in sent)
    assert not any(b"[DONE]" in chunk for chunk in sent)
    assert await world.store.usage_today(f"u:{world.user_id}") == (BILLED, 0)
    async with _client(world) as client:
        refused = await client.post("/v1/chat/completions", json=ASK)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "user_daily_tokens"


def describe_then_fail(request: ChatRequest) -> ChatCompletion:
    """The vision model's description (billed), then the persona's answer call fails."""
    if request.model != "glm-4.6v":
        raise ServerError("the answer call failed", status_code=500)
    message = AssistantMessage(content="A red square.")
    return ChatCompletion(
        id="described",
        model="glm-4.6v",
        choices=[Choice(finish_reason="stop", message=message)],
        usage=Usage(prompt_tokens=450, completion_tokens=50, total_tokens=BILLED),
    )


async def test_a_picture_s_description_counts_even_when_the_answer_fails(
    open_world: Callable[[FunctionModel], Awaitable[World]],
) -> None:
    world = await open_world(FunctionModel(describe_then_fail))
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(8)).decode()
    content = [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": png}},
    ]
    ask = {"model": "helper", "messages": [{"role": "user", "content": content}]}
    async with _client(world) as client:
        failed = await client.post("/v1/chat/completions", json=ask)
        assert failed.status_code == 502
        me = (await client.get("/v1/me")).json()
    assert me["today"]["tokens"] == BILLED
