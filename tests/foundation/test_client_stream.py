"""GLMClient.chat_stream(): events, assembly, typed failures, retry only before the first event."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.wire import retry
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    ContentFilterError,
    InsufficientBalanceError,
    RateLimitError,
    ResponseValidationError,
    ServerError,
)
from generic_framework.wire.messages import (
    ChatRequest,
    ContentDelta,
    ReasoningDelta,
    StreamCompleted,
    StreamEvent,
    UserMessage,
)

MakeClient = Callable[..., tuple[GLMClient, Any]]
LoadSSE = Callable[[str], bytes]

REQUEST = ChatRequest(model="glm-4.7", messages=[UserMessage(content="Say thanks.")])
SSE_HEADERS = {"content-type": "text/event-stream;charset=UTF-8"}


class Pieces(httpx.AsyncByteStream):
    """A response body delivered in the given pieces, then ended, broken, or stalled forever."""

    def __init__(
        self, pieces: list[bytes], *, then: BaseException | None = None, stall: bool = False
    ) -> None:
        self.pieces = pieces
        self.then = then
        self.stall = stall
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.then is not None:
            raise self.then
        if self.stall:
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


def sse_response(body: bytes | Pieces, status: int = 200) -> httpx.Response:
    stream = body if isinstance(body, Pieces) else Pieces([body])
    return httpx.Response(status, headers=SSE_HEADERS, stream=stream)


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def collect(client: GLMClient, request: ChatRequest = REQUEST) -> list[StreamEvent]:
    return [event async for event in client.chat_stream(request)]


def texts(events: list[StreamEvent], kind: type[ContentDelta | ReasoningDelta]) -> list[str]:
    return [event.text for event in events if isinstance(event, kind)]


def completed(events: list[StreamEvent]) -> StreamCompleted:
    assert isinstance(events[-1], StreamCompleted)
    assert sum(isinstance(event, StreamCompleted) for event in events) == 1
    return events[-1]


# ---------------------------------------------------------------- the happy shapes


@pytest.mark.parametrize("size", [1, 2, 7, 64, 100_000])
async def test_plain_stream_in_pieces_of_any_size(
    make_client: MakeClient, sse: LoadSSE, size: int
) -> None:
    client, script = make_client(sse_response(Pieces(split(sse("stream_plain.sse"), size))))

    events = await collect(client)

    assert texts(events, ReasoningDelta) == ["Short", " reply", " in Icelandic."]
    assert texts(events, ContentDelta) == ["Takk", " fyrir", "!"]
    completion = completed(events).completion
    assert completion.message.content == "Takk fyrir!"
    assert completion.message.reasoning_content == "Short reply in Icelandic."
    assert completion.finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.cached_tokens, completion.usage.reasoning_tokens) == (4, 9)
    assert completion.id == "20260520083000ab01cd23ef45ab67"
    assert script.bodies[0]["stream"] is True
    assert len(script.requests) == 1


async def test_reasoning_events_come_before_content(make_client: MakeClient, sse: LoadSSE) -> None:
    client, _ = make_client(sse_response(sse("stream_plain.sse")))

    events = await collect(client)

    kinds = [type(event).__name__ for event in events]
    assert kinds == ["ReasoningDelta"] * 3 + ["ContentDelta"] * 3 + ["StreamCompleted"]


async def test_complete_tool_calls_one_per_chunk(make_client: MakeClient, sse: LoadSSE) -> None:
    client, _ = make_client(sse_response(sse("stream_tool_calls.sse")))

    completion = completed(await collect(client)).completion

    calls = completion.message.tool_calls
    assert completion.finish_reason == "tool_calls"
    assert calls is not None
    assert [call.index for call in calls] == [0, 1, 2]
    assert [call.id for call in calls] == [f"call_0a1b2c3d4e5f60718293a4b{i}" for i in range(3)]
    codes = [json.loads(call.function.arguments)["to_code"] for call in calls]
    assert codes == ["JPY", "KRW", "THB"]
    assert completion.message.content == "Converting now."


@pytest.mark.parametrize("size", [1, 5, 33, 100_000])
async def test_tool_stream_fragments_assembled_by_index(
    make_client: MakeClient, sse: LoadSSE, size: int
) -> None:
    raw = sse("stream_tool_fragments.sse")
    client, _ = make_client(sse_response(Pieces(split(raw, size))))

    events = await collect(client, REQUEST.model_copy(update={"tool_stream": True}))

    calls = completed(events).completion.message.tool_calls
    assert calls is not None
    assert [(call.index, call.id, call.function.name) for call in calls] == [
        (0, "call_77aa88bb99cc00dd11ee22ff", "convert_currency"),
        (1, "call_33bb44cc55dd66ee77ff8800", "convert_currency"),
    ]
    assert json.loads(calls[0].function.arguments) == {
        "amount": 40,
        "from_code": "EUR",
        "to_code": "JPY",
    }
    assert json.loads(calls[1].function.arguments) == {
        "amount": 12,
        "from_code": "GBP",
        "to_code": "NOK",
    }
    assert texts(events, ContentDelta) == []


async def test_web_search_and_usage_come_from_the_last_chunk(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    client, _ = make_client(sse_response(sse("stream_with_sources.sse")))

    completion = completed(await collect(client)).completion

    assert completion.web_search is not None
    assert [item.refer for item in completion.web_search] == ["ref_1", "ref_2"]
    assert completion.web_search[1].media == ""
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 1400
    assert completion.message.content == "Yes, a 23:40 sailing runs on Fridays [ref_1]."


async def test_stream_without_done_but_with_a_final_chunk(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    raw = sse("stream_plain.sse").replace(b"data: [DONE]\n\n", b"")
    client, _ = make_client(sse_response(raw))

    assert completed(await collect(client)).completion.finish_reason == "stop"


async def test_chunk_with_reasoning_and_content_gives_both_events(make_client: MakeClient) -> None:
    chunk = {
        "id": "s1",
        "choices": [
            {"index": 0, "delta": {"reasoning_content": "think", "content": "say"}},
        ],
    }
    final = {"id": "s1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(final)}\n\ndata: [DONE]\n\n"
    client, _ = make_client(sse_response(body.encode()))

    events = await collect(client)

    assert [type(e).__name__ for e in events] == [
        "ReasoningDelta",
        "ContentDelta",
        "StreamCompleted",
    ]


async def test_crlf_line_endings(make_client: MakeClient, sse: LoadSSE) -> None:
    raw = sse("stream_plain.sse").replace(b"\n", b"\r\n")
    client, _ = make_client(sse_response(Pieces(split(raw, 3))))

    assert completed(await collect(client)).completion.message.content == "Takk fyrir!"


# ---------------------------------------------------------------- failures inside a 200 stream


async def test_network_error_finish_is_a_server_error_without_retry(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    client, script = make_client(
        sse_response(sse("stream_network_error.sse")), sse_response(sse("stream_plain.sse"))
    )
    seen: list[StreamEvent] = []

    with pytest.raises(ServerError, match="network_error"):
        async for event in client.chat_stream(REQUEST):
            seen.append(event)

    assert texts(seen, ContentDelta) == ["The ferry"]
    assert len(script.requests) == 1


async def test_sensitive_finish_is_a_content_filter_error(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    client, script = make_client(sse_response(sse("stream_sensitive.sse")))

    with pytest.raises(ContentFilterError):
        await collect(client)

    assert len(script.requests) == 1


async def test_error_frame_after_output_is_typed_and_not_retried(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    client, script = make_client(
        sse_response(sse("stream_error_frame.sse")), sse_response(sse("stream_plain.sse"))
    )
    seen: list[StreamEvent] = []

    with pytest.raises(RateLimitError) as caught:
        async for event in client.chat_stream(REQUEST):
            seen.append(event)

    assert texts(seen, ContentDelta) == ["Partial"]
    assert caught.value.code == "1305"
    assert caught.value.message == "Service busy, try again shortly"
    assert len(script.requests) == 1


async def test_error_frame_as_first_event_is_retried(make_client: MakeClient, sse: LoadSSE) -> None:
    first = Pieces([sse("stream_error_frame_first.sse")])
    client, script = make_client(sse_response(first), sse_response(sse("stream_plain.sse")))

    completion = completed(await collect(client)).completion

    assert completion.message.content == "Takk fyrir!"
    assert len(script.requests) == 2
    assert first.closed


async def test_error_frame_with_a_non_retryable_code(make_client: MakeClient) -> None:
    frame = b'data: {"error": {"code": "1113", "message": "no balance"}}\n\n'
    client, script = make_client(sse_response(frame))

    with pytest.raises(InsufficientBalanceError):
        await collect(client)

    assert len(script.requests) == 1


async def test_stream_with_no_final_chunk_is_a_typed_error(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    client, script = make_client(sse_response(sse("stream_no_final_chunk.sse")))

    with pytest.raises(APIConnectionError, match="final chunk"):
        await collect(client)

    assert len(script.requests) == 1


async def test_stream_ending_without_done_or_final_chunk(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    raw = sse("stream_plain.sse")
    cut = raw[: raw.index(b'"finish_reason"')]
    cut = cut[: cut.rindex(b"\n\n") + 2]
    client, _ = make_client(sse_response(cut))

    with pytest.raises(APIConnectionError, match="final chunk"):
        await collect(client)


async def test_invalid_chunk_is_a_validation_error(make_client: MakeClient) -> None:
    client, _ = make_client(sse_response(b"data: {not json}\n\n"))

    with pytest.raises(ResponseValidationError) as caught:
        await collect(client)

    assert caught.value.body == "{not json}"


# ---------------------------------------------------------------- broken and stalled streams


async def test_break_after_the_first_event_is_not_retried(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    raw = sse("stream_plain.sse")
    broken = Pieces([raw[:400]], then=httpx.RemoteProtocolError("peer closed connection"))
    client, script = make_client(sse_response(broken), sse_response(raw))
    seen: list[StreamEvent] = []

    with pytest.raises(APIConnectionError) as caught:
        async for event in client.chat_stream(REQUEST):
            seen.append(event)

    assert seen  # the first event did reach the caller
    assert not isinstance(caught.value, APITimeoutError)
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)
    assert len(script.requests) == 1
    assert broken.closed


@pytest.mark.parametrize("sent", [0, 20], ids=["no-bytes", "half-an-event"])
async def test_break_before_the_first_event_is_retried(
    make_client: MakeClient, sse: LoadSSE, sent: int
) -> None:
    raw = sse("stream_plain.sse")
    broken = Pieces([raw[:sent]] if sent else [], then=httpx.RemoteProtocolError("reset"))
    client, script = make_client(sse_response(broken), sse_response(raw))

    completion = completed(await collect(client)).completion

    assert completion.message.content == "Takk fyrir!"
    assert len(script.requests) == 2
    assert broken.closed


async def test_empty_stream_is_retried_then_typed(make_client: MakeClient) -> None:
    client, script = make_client(sse_response(b""), sse_response(b""), llm_max_retries=1)

    with pytest.raises(APIConnectionError, match="before its first event"):
        await collect(client)

    assert len(script.requests) == 2


async def test_stall_after_first_event_times_out_quickly(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    raw = sse("stream_plain.sse")
    stalled = Pieces([raw[: raw.index(b"\n\n") + 2]], stall=True)
    client, script = make_client(sse_response(stalled), llm_timeout=0.2)
    started = time.monotonic()
    seen: list[StreamEvent] = []

    # The outer bound only turns a regression (a hang) into a quick failure.
    async with asyncio.timeout(5):
        with pytest.raises(APITimeoutError):
            async for event in client.chat_stream(REQUEST):
                seen.append(event)

    assert time.monotonic() - started < 3.0  # 0.2 s, with room for a busy machine, not 5 s
    assert len(seen) == 1
    assert len(script.requests) == 1
    assert stalled.closed


async def test_stall_before_first_event_is_retried(make_client: MakeClient, sse: LoadSSE) -> None:
    client, script = make_client(
        sse_response(Pieces([], stall=True)), sse_response(sse("stream_plain.sse")), llm_timeout=0.1
    )

    async with asyncio.timeout(5):
        completion = completed(await collect(client)).completion

    assert completion.finish_reason == "stop"
    assert len(script.requests) == 2


async def test_transport_that_never_answers_times_out(make_client: MakeClient) -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    client, script = make_client(
        never,
        never,
        llm_timeout=0.05,
        llm_connect_timeout=0.05,
        llm_pool_timeout=0.05,
        llm_max_retries=0,
    )
    started = time.monotonic()

    async with asyncio.timeout(5):
        with pytest.raises(APITimeoutError):
            await collect(client)
        with pytest.raises(APITimeoutError):
            await client.chat(REQUEST)

    assert time.monotonic() - started < 3.0  # two 0.05 s timeouts, with room, not 5 s
    assert len(script.requests) == 2


async def _stalling_server(first: bytes) -> tuple[asyncio.Server, int, asyncio.Event]:
    """A real HTTP server on 127.0.0.1 that sends headers and ``first``, then goes silent."""
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + f"{len(first):x}\r\n".encode() + first + b"\r\n"
        )
        await writer.drain()
        await release.wait()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port, release


async def test_real_socket_stall_is_a_timeout(sse: LoadSSE, fake_key: str) -> None:
    raw = sse("stream_plain.sse")
    server, port, release = await _stalling_server(raw[: raw.index(b"\n\n") + 2])
    settings = Settings.defaults(
        api_key=fake_key, base_url=f"http://127.0.0.1:{port}/api/paas/v4", llm_timeout=0.3
    )
    started = time.monotonic()
    try:
        async with GLMClient(settings) as client, asyncio.timeout(5):
            with pytest.raises(APITimeoutError):
                await collect(client)
    finally:
        release.set()
        server.close()
        await server.wait_closed()

    assert time.monotonic() - started < 3.0  # 0.3 s, with room for a busy machine, not 5 s


# ---------------------------------------------------------------- answers that are not a stream


async def test_error_status_on_open_is_typed(make_client: MakeClient) -> None:
    body = {"error": {"code": "1113", "message": "no balance"}}
    client, script = make_client(httpx.Response(429, json=body))

    with pytest.raises(InsufficientBalanceError):
        await collect(client)

    assert len(script.requests) == 1


async def test_503_then_stream_is_retried(make_client: MakeClient, sse: LoadSSE) -> None:
    client, script = make_client(httpx.Response(503), sse_response(sse("stream_plain.sse")))

    assert completed(await collect(client)).completion.message.content == "Takk fyrir!"
    assert len(script.requests) == 2


async def test_json_completion_instead_of_a_stream_is_replayed(
    make_client: MakeClient, payload: Callable[[str], dict[str, Any]]
) -> None:
    body = payload("answer_parallel_tools.json")["body"]
    client, _ = make_client(httpx.Response(200, json=body))

    events = await collect(client)

    assert texts(events, ReasoningDelta) == [body["choices"][0]["message"]["reasoning_content"]]
    assert texts(events, ContentDelta) == ["Let me convert that three ways."]
    completion = completed(events).completion
    assert completion.finish_reason == "tool_calls"
    assert completion.message.tool_calls is not None
    assert [c.id for c in completion.message.tool_calls] == [
        c["id"] for c in body["choices"][0]["message"]["tool_calls"]
    ]
    assert completion.usage is not None
    assert completion.usage.total_tokens == 335


async def test_json_error_or_envelope_instead_of_a_stream(make_client: MakeClient) -> None:
    client, script = make_client(
        httpx.Response(200, json={"code": 1001, "msg": "no auth header", "success": False})
    )

    with pytest.raises(Exception, match="no auth header"):
        await collect(client)

    assert len(script.requests) == 1


async def test_html_instead_of_a_stream_is_a_validation_error(make_client: MakeClient) -> None:
    page = b"<html><body>Gateway maintenance</body></html>"
    client, script = make_client(
        httpx.Response(200, content=page, headers={"content-type": "text/html"})
    )

    with pytest.raises(ResponseValidationError) as caught:
        await collect(client)

    assert caught.value.body == page.decode()
    assert len(script.requests) == 1


# ---------------------------------------------------------------- resources


async def test_caller_leaving_early_closes_the_response(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    body = Pieces(split(sse("stream_plain.sse"), 50))
    client, _ = make_client(sse_response(body))
    stream = client.chat_stream(REQUEST)

    first = await anext(aiter(stream))
    await stream.aclose()  # type: ignore[attr-defined]

    assert isinstance(first, ReasoningDelta)
    assert body.closed


async def test_concurrency_slot_is_released_after_each_stream(
    make_client: MakeClient, sse: LoadSSE
) -> None:
    raw = sse("stream_plain.sse")
    client, script = make_client(*(sse_response(raw) for _ in range(3)), llm_max_concurrency=1)

    for _ in range(3):
        await asyncio.wait_for(collect(client), timeout=30)  # not the 120 s queue timeout

    assert len(script.requests) == 3


async def test_no_slot_is_held_while_a_stream_waits_to_retry(
    make_client: MakeClient,
    sse: LoadSSE,
    payload: Callable[[str], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = httpx.Response(429, json={"error": {"code": "1302", "message": "busy"}})
    answer = httpx.Response(200, json=payload("answer_plain.json")["body"])
    client, script = make_client(
        busy, answer, sse_response(sse("stream_plain.sse")), llm_max_concurrency=1
    )
    chats: list[str | None] = []

    async def chat_while_waiting(seconds: float) -> None:
        chats.append((await client.chat(REQUEST)).message.content)  # needs the only slot

    monkeypatch.setattr(retry, "sleep", chat_while_waiting)
    async with asyncio.timeout(5):
        events = await collect(client)

    assert chats == ["Takk fyrir!"]
    assert completed(events).completion.message.content == "Takk fyrir!"
    assert len(script.requests) == 3
