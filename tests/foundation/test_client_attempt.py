"""One attempt path for plain and streamed calls: the same metrics, pauses and slot releases.

Every call of GLMClient (chat, chat_stream, web_search) makes its attempts through one method;
these tests hold a plain and a streamed call to the same outcome for the same upstream answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support import RecordingSlots

from generic_framework.config import Settings
from generic_framework.wire import retry
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import ChatRequest, ContentDelta, UserMessage

REQUEST = ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")])
BASE_URL = "https://zai.test/api/paas/v4"
SSE_HEADERS = {"content-type": "text/event-stream"}
Load = Callable[[str], Any]


class RecordingObserver:
    """An observer that records every report, durations as the word "duration"."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, ...]] = []

    def upstream_response(self, endpoint: str, status: str, code: str) -> None:
        self.reports.append((endpoint, "response", status, code))

    def upstream_duration(self, endpoint: str, seconds: float) -> None:
        assert seconds >= 0
        self.reports.append((endpoint, "duration"))

    def upstream_retry(self, endpoint: str, reason: str) -> None:
        self.reports.append((endpoint, "retry", reason))


def _client(
    *answers: httpx.Response, slots: RecordingSlots, observer: RecordingObserver
) -> GLMClient:
    steps = iter(answers)
    settings = Settings.defaults(api_key="k", base_url=BASE_URL)
    transport = httpx.MockTransport(lambda request: next(steps))
    return GLMClient(settings, transport=transport, slots=slots, observer=observer)


def _streamed(sse: Load) -> httpx.Response:
    return httpx.Response(200, headers=SSE_HEADERS, content=sse("stream_plain.sse"))


def _ok(stream: bool, payload: Load, sse: Load) -> httpx.Response:
    return (
        _streamed(sse) if stream else httpx.Response(200, json=payload("answer_plain.json")["body"])
    )


async def _call(client: GLMClient, stream: bool) -> None:
    if stream:
        assert [event async for event in client.chat_stream(REQUEST)]
    else:
        assert (await client.chat(REQUEST)).message.content


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_then_good_attempt_reports_the_same_either_way(
    stream: bool, payload: Load, sse: Load
) -> None:
    slots, observer = RecordingSlots(), RecordingObserver()
    failure = httpx.Response(500, json={"error": {"code": "500", "message": "boom"}})
    async with _client(
        failure, _ok(stream, payload, sse), slots=slots, observer=observer
    ) as client:
        await _call(client, stream)
        assert (client.in_flight, client.queued) == (0, 0)

    endpoint = "chat_stream" if stream else "chat"
    assert observer.reports == [
        (endpoint, "response", "500", "500"),
        (endpoint, "duration"),
        (endpoint, "retry", "ServerError"),
        (endpoint, "response", "200", ""),
        (endpoint, "duration"),
    ]
    assert slots.calls == [("acquire", True), "release", ("acquire", True), "release"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_1302_inside_a_200_answer_pauses_the_budget_either_way(
    stream: bool, payload: Load, sse: Load, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_sleep(seconds: float) -> None:
        pass

    retry.set_testing(False)
    monkeypatch.setattr(retry, "sleep", no_sleep)
    error = {"error": {"code": "1302", "message": "too many concurrent requests"}}
    if stream:
        frame = f"data: {json.dumps(error)}\n\n".encode()
        refusal = httpx.Response(200, headers=SSE_HEADERS, content=frame)
    else:
        refusal = httpx.Response(200, json=error)
    slots, observer = RecordingSlots(), RecordingObserver()
    async with _client(
        refusal, _ok(stream, payload, sse), slots=slots, observer=observer
    ) as client:
        await _call(client, stream)

    # No Retry-After: the pause is the first backoff; the call's own retry does not wait for it.
    assert slots.calls == [
        ("acquire", True), ("pause", 0.5), "release", ("acquire", False), "release",
    ]  # fmt: skip
    # Reported as a failed exchange with its code (the status: "200" for a body, "error" for a
    # stream's frame, which has none of its own), then retried.
    assert [report[1] for report in observer.reports] == [
        "response", "duration", "retry", "response", "duration",
    ]  # fmt: skip
    assert (observer.reports[0][3], observer.reports[2][2]) == ("1302", "RateLimitError")


async def test_a_stream_closed_after_its_first_event_gives_its_slot_back(sse: Load) -> None:
    slots, observer = RecordingSlots(), RecordingObserver()
    async with _client(_streamed(sse), slots=slots, observer=observer) as client:
        events = client.chat_stream(REQUEST)
        async for event in events:
            if isinstance(event, ContentDelta):
                break
        assert client.in_flight == 1  # the slot is kept while the stream is open
        await events.aclose()  # type: ignore[attr-defined]
        assert client.in_flight == 0

    assert slots.calls == [("acquire", True), "release"]
    assert observer.reports == [
        ("chat_stream", "response", "200", ""),
        ("chat_stream", "duration"),
    ]


async def test_every_call_makes_its_attempts_through_one_method(
    payload: Load, sse: Load, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, bool]] = []
    attempt = GLMClient._attempt

    async def spy(self: GLMClient, call: Any, read: Any) -> Any:
        seen.append((call.endpoint, call.stream))
        return await attempt(self, call, read)

    monkeypatch.setattr(GLMClient, "_attempt", spy)
    search = payload("search_api_zai.json")["body"]
    answers = (
        _ok(False, payload, sse),
        _ok(True, payload, sse),
        httpx.Response(200, json=search),
    )
    async with _client(*answers, slots=RecordingSlots(), observer=RecordingObserver()) as client:
        await _call(client, stream=False)
        await _call(client, stream=True)
        await client.web_search("harbour ferry late sailing")

    assert seen == [("chat", False), ("chat_stream", True), ("web_search", False)]
