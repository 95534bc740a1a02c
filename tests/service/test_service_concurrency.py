"""One turn at a time per conversation; a global cap on upstream calls that queues, never fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
from service_fakes import GatedPersona

from generic_framework.config import Settings
from generic_framework.core.history import ConversationStore
from generic_framework.core.persona import Persona
from generic_framework.service import create_app
from generic_framework.wire.client import GLMClient

Client = Callable[..., httpx.AsyncClient]


async def _post(client: httpx.AsyncClient, conversation: str, text: str) -> httpx.Response:
    return await client.post(
        f"/v1/conversations/{conversation}/messages", json={"persona": "scout", "content": text}
    )


async def test_turns_on_one_conversation_queue_in_arrival_order(client_for: Client) -> None:
    persona = GatedPersona()
    async with client_for({"scout": persona}) as client:
        first = asyncio.create_task(_post(client, "c", "first"))
        assert await persona.started.get() == "first"
        second = asyncio.create_task(_post(client, "c", "second"))
        other = asyncio.create_task(_post(client, "d", "other"))
        # Another conversation is not blocked by the running turn...
        assert await persona.started.get() == "other"
        persona.gates["other"].set()
        assert (await other).status_code == 200
        # ...but the second turn of "c" has not started while the first runs.
        assert persona.started.empty()
        assert persona.running == 1
        persona.gates["first"].set()
        assert await persona.started.get() == "second"
        persona.gates["second"].set()
        responses = [await first, await second]
    assert [r.status_code for r in responses] == [200, 200]
    assert persona.order == ["other", "first", "second"]


async def test_delete_waits_for_the_running_turn(client_for: Client) -> None:
    persona = GatedPersona()
    async with client_for({"scout": persona}) as client:
        turn = asyncio.create_task(_post(client, "c", "first"))
        await persona.started.get()
        delete = asyncio.create_task(client.delete("/v1/conversations/c"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not delete.done()
        persona.gates["first"].set()
        assert (await turn).status_code == 200
        assert (await delete).status_code == 404  # the fake stores nothing


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


async def test_excess_upstream_calls_wait_for_a_slot(
    settings_for: Callable[..., Settings], store: ConversationStore
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

    glm = GLMClient(settings, transport=httpx.MockTransport(upstream))
    personas = {
        name: Persona(name, "Be brief.", settings=settings, client=glm, store=store)
        for name in ("scout", "aria")
    }
    app = create_app(settings, personas=personas, store=store, client=glm)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://bot"
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
    await glm.aclose()
    assert [r.status_code for r in responses] == [200] * 6
    assert peak == 2
