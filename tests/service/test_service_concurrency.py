"""One turn at a time per conversation; a global cap on upstream calls that queues, never fails.

Real personas bound to one :class:`~generic_framework.runtime.Runtime` answer through the app,
against a scripted upstream that holds each call until the test releases it. The service adds
no lock of its own: the personas hold the runtime's locks for their turns, and ``DELETE`` takes
the same lock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.store import SQLiteStore

Client = Callable[..., httpx.AsyncClient]


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "1",
            "model": "glm-4.7",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()


def _stream(text: str) -> bytes:
    """The same answer as Z.AI streams it: one content chunk, the finish with usage, [DONE]."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    ]
    frames = [f"data: {json.dumps({'id': '1', 'model': 'glm-4.7', **c})}\n\n" for c in chunks]
    return ("".join(frames) + "data: [DONE]\n\n").encode()


class GatedUpstream:
    """A model whose every call waits for its question's gate; answers ``answer to <q>``."""

    def __init__(self) -> None:
        self.arrived: asyncio.Queue[str] = asyncio.Queue()
        self.gates: dict[str, asyncio.Event] = {}
        self.seen: dict[str, list[str]] = {}
        self.running = 0
        self.max_running = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        messages: list[dict[str, Any]] = body["messages"]
        question = messages[-1]["content"]
        self.seen[question] = [str(m.get("content")) for m in messages]
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await self.arrived.put(question)
            await self.gates.setdefault(question, asyncio.Event()).wait()
        finally:
            self.running -= 1
        answer = f"answer to {question}"
        if body.get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, content=_stream(answer), headers=headers)
        return httpx.Response(200, content=_completion(answer))

    def release(self, question: str) -> None:
        self.gates.setdefault(question, asyncio.Event()).set()


@pytest.fixture
async def upstream() -> GatedUpstream:
    return GatedUpstream()


@pytest.fixture
async def bot(
    settings_for: Callable[..., Settings], store: SQLiteStore, upstream: GatedUpstream
) -> AsyncIterator[httpx.AsyncClient]:
    """The app over two real personas sharing one runtime (and so one store and one lock set)."""
    transport = httpx.MockTransport(upstream)
    async with Runtime(settings_for(), store=store, transport=transport) as runtime:
        personas = {name: Persona(name, "Be brief.", runtime=runtime) for name in ("scout", "aria")}
        app = create_app(runtime=runtime, personas=personas)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client:
            yield client
        assert len(runtime.locks) == 0


async def _post(
    client: httpx.AsyncClient, conversation: str, text: str, persona: str, stream: bool = False
) -> httpx.Response:
    return await client.post(
        f"/v1/conversations/{conversation}/messages",
        json={"persona": persona, "content": text, "stream": stream},
    )


async def _settle() -> None:
    """Give every ready task many chances to run."""
    for _ in range(50):
        await asyncio.sleep(0)


@pytest.mark.parametrize("stream", [False, True])
async def test_turns_on_one_conversation_queue_in_arrival_order(
    bot: httpx.AsyncClient, upstream: GatedUpstream, stream: bool
) -> None:
    first = asyncio.create_task(_post(bot, "c", "first", "scout", stream))
    assert await upstream.arrived.get() == "first"
    # Another persona on the same conversation waits: one lock system for every persona.
    second = asyncio.create_task(_post(bot, "c", "second", "aria", stream))
    other = asyncio.create_task(_post(bot, "d", "other", "scout", stream))
    # Another conversation is not blocked by the running turn...
    assert await upstream.arrived.get() == "other"
    upstream.release("other")
    assert (await other).status_code == 200
    # ...but the second turn of "c" has not started while the first runs.
    await _settle()
    assert upstream.arrived.empty()
    assert upstream.running == 1
    upstream.release("first")
    assert (await first).status_code == 200
    assert await upstream.arrived.get() == "second"
    upstream.release("second")
    assert (await second).status_code == 200
    # The second turn saw the first one, and both are stored, in order, nothing lost.
    assert upstream.seen["second"][-3:] == ["first", "answer to first", "second"]
    stored = (await bot.get("/v1/conversations/c")).json()["messages"]
    assert [(m["turn"], m["persona"], m["role"], m["content"]) for m in stored] == [
        (1, "scout", "user", "first"),
        (1, "scout", "assistant", "answer to first"),
        (2, "aria", "user", "second"),
        (2, "aria", "assistant", "answer to second"),
    ]


async def test_many_racing_turns_on_one_conversation_are_all_stored(
    bot: httpx.AsyncClient, upstream: GatedUpstream
) -> None:
    questions = [f"q{i}" for i in range(8)]
    for question in questions:
        upstream.release(question)
    responses = await asyncio.gather(
        *(_post(bot, "race", q, ("scout", "aria")[i % 2]) for i, q in enumerate(questions))
    )
    assert [r.status_code for r in responses] == [200] * len(questions)
    assert upstream.max_running == 1
    stored = (await bot.get("/v1/conversations/race")).json()["messages"]
    users = [m["content"] for m in stored if m["role"] == "user"]
    assert sorted(users) == questions
    assert [m["turn"] for m in stored] == [n for n in range(1, 9) for _ in range(2)]


async def test_delete_waits_for_the_running_turn(
    bot: httpx.AsyncClient, upstream: GatedUpstream
) -> None:
    turn = asyncio.create_task(_post(bot, "c", "first", "scout"))
    await upstream.arrived.get()
    delete = asyncio.create_task(bot.delete("/v1/conversations/c"))
    await _settle()
    assert not delete.done()
    upstream.release("first")
    assert (await turn).status_code == 200
    # The delete ran after the turn was stored, so it found and removed the whole turn.
    assert (await delete).status_code == 204
    assert (await bot.get("/v1/conversations/c")).status_code == 404


async def test_excess_upstream_calls_wait_for_a_slot(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> None:
    settings = settings_for(llm_max_concurrency=2)
    arrived: asyncio.Queue[str] = asyncio.Queue()
    release = asyncio.Event()
    in_flight = peak = 0

    async def upstream(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        body = json.loads(request.content)
        await arrived.put(body["messages"][-1]["content"])
        await release.wait()
        in_flight -= 1
        return httpx.Response(200, content=_completion("ok"))

    transport = httpx.MockTransport(upstream)
    async with Runtime(settings, store=store, transport=transport) as runtime:
        personas = {name: Persona(name, "Be brief.", runtime=runtime) for name in ("scout", "aria")}
        app = create_app(runtime=runtime, personas=personas)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost"
        ) as client:
            requests = [
                asyncio.create_task(
                    client.post(
                        "/v1/chat/completions",
                        json={
                            "model": ("scout", "aria")[i % 2],
                            "messages": [{"role": "user", "content": f"q{i}"}],
                        },
                    )
                )
                for i in range(6)
            ]
            await arrived.get()
            await arrived.get()
            # Give the other four every chance to slip past the cap before the first two finish.
            await asyncio.sleep(0.1)
            assert arrived.qsize() == 0
            release.set()
            responses = await asyncio.gather(*requests)
    assert [r.status_code for r in responses] == [200] * 6
    assert peak == 2
