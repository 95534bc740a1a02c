"""The API key never appears in an error's text or in any log record, whatever upstream echoes."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.errors import GLMError
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import ResponseValidationError
from generic_framework.wire.messages import ChatRequest, UserMessage

MakeClient = Callable[..., tuple[GLMClient, Any]]

SSE = {"content-type": "text/event-stream"}


def leaks(key: str) -> list[tuple[str, httpx.Response | Exception]]:
    """Upstream answers and transport failures that all repeat the key back at us."""
    chunk = {"id": "s", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    first = f"data: {json.dumps(chunk)}\n\n"
    return [
        (
            "401 echo",
            httpx.Response(
                401, json={"error": {"code": "1002", "message": f"Token {key} is invalid"}}
            ),
        ),
        (
            "429 bearer echo",
            httpx.Response(
                429, json={"error": {"code": "1113", "message": f"Authorization: Bearer {key}"}}
            ),
        ),
        ("400 text echo", httpx.Response(400, text=f"bad request from api_key={key}")),
        ("200 not json", httpx.Response(200, text=f"<pre>{key}</pre>")),
        (
            "200 error object",
            httpx.Response(200, json={"error": {"message": f"key {key} blocked"}}),
        ),
        (
            "envelope failure",
            httpx.Response(200, json={"code": 1002, "msg": f"bad key {key}", "success": False}),
        ),
        (
            "stream error frame",
            httpx.Response(
                200,
                headers=SSE,
                text=first + f'data: {{"error": {{"code": "1214", "message": "{key}"}}}}\n\n',
            ),
        ),
        ("stream bad chunk", httpx.Response(200, headers=SSE, text=first + f"data: {{{key}\n\n")),
        ("transport", httpx.ConnectError(f"could not reach host with Bearer {key}")),
    ]


def texts_of(error: BaseException) -> list[str]:
    out = [str(error), repr(error), *map(str, error.args)]
    if isinstance(error, GLMError):
        out.append(error.message)
    if isinstance(error, ResponseValidationError):
        out.append(error.body)
    return out


async def test_key_never_in_errors_or_logs(
    make_client: MakeClient, fake_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []

    for name, step in leaks(fake_key):
        # Every failure is tried twice so the retry log line sees it too (when retryable).
        client, _ = make_client(step, step, llm_max_retries=1)
        request = ChatRequest(
            model="glm-4.7", messages=[UserMessage(content=f"my key is {fake_key}")]
        )
        with pytest.raises(GLMError) as caught:
            if name.startswith("stream"):
                async for _ in client.chat_stream(request):
                    pass
            else:
                await client.chat(request)
        errors.append(caught.value)

    assert len(errors) == len(leaks(fake_key))
    for error in errors:
        for text in texts_of(error):
            assert fake_key not in text, (type(error).__name__, text)
            assert fake_key.partition(".")[0] not in text
    assert caplog.records  # the DEBUG payload lines and the retry warnings were captured
    for record in caplog.records:
        assert fake_key not in record.getMessage()
        assert fake_key.partition(".")[2] not in record.getMessage()


async def test_key_of_any_shape_is_kept_out(make_client: MakeClient) -> None:
    odd_key = "team-key:with-odd-shape"
    client, _ = make_client(
        httpx.Response(401, json={"error": {"code": "1000", "message": f"rejected {odd_key}"}}),
        api_key=odd_key,
    )

    with pytest.raises(GLMError) as caught:
        await client.chat(ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")]))

    for text in texts_of(caught.value):
        assert odd_key not in text


async def _echo_server() -> AsyncIterator[int]:
    """A real HTTP server on 127.0.0.1 that answers 503 quoting the request's headers."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        length = next(
            (
                int(line.split(":")[1])
                for line in head.split("\r\n")
                if line.lower().startswith("content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        body = json.dumps({"error": {"code": "500", "message": "you sent: " + head}}).encode()
        writer.write(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async for port in _echo_server():
        yield port


async def test_real_socket_exchange_logs_no_key(
    echo_port: int, fake_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = Settings.defaults(
        api_key=fake_key, base_url=f"http://127.0.0.1:{echo_port}/api/paas/v4", llm_max_retries=1
    )

    async with GLMClient(settings) as client:
        with pytest.raises(GLMError) as caught:
            await client.chat(ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")]))

    assert caught.value.status_code == 503
    assert "you sent" in caught.value.message  # the echo really came back
    assert "authorization" in caught.value.message.lower()
    for text in texts_of(caught.value):
        assert fake_key not in text
    names = {record.name.split(".")[0] for record in caplog.records}
    assert {"httpx", "httpcore", "generic_framework"} <= names
    for record in caplog.records:
        assert fake_key not in record.getMessage()
