"""The upstream budget of one process (LocalSlots) and how the client uses a budget."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from support import RecordingSlots

from generic_framework.config import Settings
from generic_framework.errors import StoreUnavailableError
from generic_framework.service.errors import map_exception
from generic_framework.wire import retry
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import UpstreamBusyError
from generic_framework.wire.messages import ChatRequest, UserMessage
from generic_framework.wire.slots import CONTINUING, LocalSlots

REQUEST = ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")])
ANSWER = {
    "id": "r1",
    "model": "glm-4.7",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                                   "content": "hello"}}],
}  # fmt: skip


async def test_local_slots_queue_then_refuse_with_retry_after() -> None:
    slots = LocalSlots(1, wait=0.2)
    held = await slots.acquire()
    started = time.monotonic()
    with pytest.raises(UpstreamBusyError) as busy:
        await slots.acquire()
    assert time.monotonic() - started >= 0.19
    assert not busy.value.retryable and busy.value.retry_after and busy.value.retry_after >= 1
    waiter = asyncio.ensure_future(slots.acquire())
    await held.release()
    await held.release()  # twice does not free a second slot
    second = await asyncio.wait_for(waiter, 1)
    with pytest.raises(UpstreamBusyError):
        await slots.acquire()
    await second.release()


async def test_the_later_calls_of_a_turn_under_way_go_before_first_calls() -> None:
    slots = LocalSlots(1, wait=5.0)
    held = await slots.acquire()
    order: list[str] = []

    async def call(name: str, continuing: bool) -> None:
        CONTINUING.set(continuing)  # in this task's own context
        lease = await slots.acquire()
        order.append(name)
        await lease.release()

    first = asyncio.ensure_future(call("first call", False))
    await asyncio.sleep(0)  # one scheduling step: the task runs until it waits in line
    later = asyncio.ensure_future(call("next round", True))
    await asyncio.sleep(0)
    await held.release()
    await asyncio.wait_for(asyncio.gather(first, later), 2)
    assert order == ["next round", "first call"]


async def test_a_waiter_that_gave_up_is_skipped_and_no_slot_is_lost() -> None:
    slots = LocalSlots(2, wait=5.0)
    leases = [await slots.acquire(), await slots.acquire()]
    quitter = asyncio.ensure_future(slots.acquire())
    await asyncio.sleep(0)
    patient = asyncio.ensure_future(slots.acquire())
    await asyncio.sleep(0)
    quitter.cancel()
    await leases[0].release()  # goes past the cancelled waiter to the patient one
    leases[0] = await asyncio.wait_for(patient, 1)
    with pytest.raises(asyncio.CancelledError):
        await quitter
    for lease in leases:
        await lease.release()
    again = [await asyncio.wait_for(slots.acquire(), 1) for _ in range(2)]  # both free again
    for lease in again:
        await lease.release()


async def test_a_call_waiting_for_a_slot_keeps_no_encoded_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[bytes] = []
    to_wire = ChatRequest.to_wire

    def counted(request: ChatRequest) -> bytes:
        encoded.append(to_wire(request))
        return encoded[-1]

    monkeypatch.setattr(ChatRequest, "to_wire", counted)
    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=ANSWER)

    slots = LocalSlots(1, wait=5.0)
    settings = Settings.defaults(api_key="k", base_url="https://zai.test/api/paas/v4")
    transport = httpx.MockTransport(answer)
    async with GLMClient(settings, transport=transport, slots=slots) as client:
        held = await slots.acquire()
        call = asyncio.ensure_future(client.chat(REQUEST))
        while client.queued == 0:  # the call is in line
            await asyncio.sleep(0)
        assert encoded == [] and sent == []
        await held.release()
        assert (await asyncio.wait_for(call, 2)).message.content == "hello"
    assert sent == encoded == [to_wire(REQUEST)]  # encoded once, when the slot was its


async def test_a_local_pause_holds_every_new_call() -> None:
    slots = LocalSlots(4, wait=2.0)
    await slots.pause(0.3)
    started = time.monotonic()
    lease = await slots.acquire()
    assert time.monotonic() - started >= 0.28
    await lease.release()
    await slots.pause(5.0)
    with pytest.raises(UpstreamBusyError, match="1302"):
        await slots.acquire()  # a pause beyond the wait fails at once
    await (await slots.acquire(respect_pause=False)).release()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_1302_pauses_the_budget_and_its_own_retry_skips_the_pause(
    stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_sleep(seconds: float) -> None:
        pass

    retry.set_testing(False)
    monkeypatch.setattr(retry, "sleep", no_sleep)
    error = {"error": {"code": "1302", "message": "concurrency"}}
    responses = iter(
        [
            httpx.Response(429, json=error, headers={"Retry-After": "3"}),
            httpx.Response(200, json=ANSWER),
        ]
    )
    transport = httpx.MockTransport(lambda request: next(responses))
    slots = RecordingSlots()
    settings = Settings.defaults(api_key="k", base_url="https://zai.test/api/paas/v4")
    async with GLMClient(settings, transport=transport, slots=slots) as client:
        if stream:
            events = [e async for e in client.chat_stream(REQUEST)]
            assert events
        else:
            assert (await client.chat(REQUEST)).message.content == "hello"
    assert slots.calls == [
        ("acquire", True), ("pause", 3.0), "release", ("acquire", False), "release",
    ]  # fmt: skip


def test_the_service_answers_503_with_retry_after_for_a_busy_budget_or_database() -> None:
    busy = map_exception(UpstreamBusyError("no slot", retry_after=5.0))
    assert (busy.status, busy.code, busy.headers) == (503, "upstream_busy", {"Retry-After": "5"})
    down = map_exception(StoreUnavailableError("down", retry_after=2.0))
    assert (down.status, down.code, down.headers) == (
        503,
        "store_unavailable",
        {"Retry-After": "2"},
    )
    assert down.type == "server_error"
