"""The ASGI plumbing the mock's routes share: reading a body, sending bytes or a Z.AI error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from generic_framework.mock.prepared import JSON_TYPE
from generic_framework.mock.sse import dumps
from generic_framework.mock.validation import MockError

__all__ = [
    "MAX_BODY",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "read_body",
    "send_bytes",
    "send_error",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 32 * 1024 * 1024


async def read_body(receive: Receive) -> bytes:
    """The whole request body (empty when the client went away).

    Raises:
        MockError: 413 when it is over :data:`MAX_BODY`.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise MockError(
                413, "1210", f"API request parameter is invalid: body over {MAX_BODY} bytes"
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_bytes(
    send: Send,
    status: int,
    content_type: bytes,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """A whole response: status, content type and length, extra headers, the body."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(send: Send, error: MockError) -> None:
    """Z.AI's error body ``{"error": {"code", "message"}}`` with the error's status and headers."""
    headers = [(name.lower().encode(), value.encode()) for name, value in error.headers.items()]
    await send_bytes(send, error.status, JSON_TYPE, dumps(error.body()), headers)
