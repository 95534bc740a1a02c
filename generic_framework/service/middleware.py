"""Pure ASGI middleware: bearer-token auth on ``/v1/*`` and the request-body limit.

Both are plain ASGI callables rather than Starlette ``BaseHTTPMiddleware`` so that streamed
responses pass through untouched and a refused request costs no task.
"""

from __future__ import annotations

import asyncio
import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from generic_framework.service.errors import error_body

__all__ = ["BearerAuthMiddleware", "BodyLimitMiddleware"]


async def _send_error(
    send: Send,
    status: int,
    message: str,
    *,
    type_: str,
    code: str,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    body = json.dumps(error_body(message, type_=type_, code=code)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every path under ``/v1``, and on ``also``.

    The comparison is constant-time (:func:`hmac.compare_digest`). ``/``, ``/static``,
    ``/healthz``, ``/readyz`` and ``/openapi.json`` stay public: the page must load before it can
    ask for the token, and probes carry no credentials. ``also`` names exact paths that need
    the token too (``/metrics``, unless ``BOT_METRICS_PUBLIC``). With no token configured the
    middleware is not installed at all (the service then refuses to bind beyond loopback).
    """

    def __init__(self, app: ASGIApp, token: str, also: tuple[str, ...] = ()) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._also = frozenset(also)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        guarded = path == "/v1" or path.startswith("/v1/") or path in self._also
        if scope["type"] != "http" or not guarded:
            await self.app(scope, receive, send)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        await _send_error(
            send,
            401,
            "missing or invalid bearer token; send the header Authorization with the value "
            "'Bearer <BOT_API_TOKEN>'",
            type_="authentication_error",
            code="invalid_api_key",
            headers=((b"www-authenticate", b'Bearer realm="generic-framework"'),),
        )

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                # The scheme is case-insensitive (RFC 9110 §11.1); the token is not.
                presented = b"Bearer " + token.strip() if scheme.lower() == b"bearer" else value
                return hmac.compare_digest(presented, self._expected)
        return False


class BodyLimitMiddleware:
    """Answer 413 to a body over ``max_body`` bytes and 408 to one that arrives too slowly.

    The limit is enforced while reading: a ``Content-Length`` over the limit is refused at once,
    but the header is never trusted to be honest (or present, with chunked encoding), so the
    bytes are counted as they arrive. The body is read whole (the service's bodies are small
    JSON documents) and handed to the application from memory.
    """

    def __init__(self, app: ASGIApp, max_body: int, read_timeout: float = 30.0) -> None:
        self.app = app
        self.max_body = max_body
        self.read_timeout = read_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body:
            await self._too_large(send)
            return
        try:
            async with asyncio.timeout(self.read_timeout):
                body = await self._read(receive)
        except TimeoutError:
            await _send_error(
                send,
                408,
                f"the request body did not arrive within {self.read_timeout:g} s",
                type_="invalid_request_error",
                code="request_timeout",
            )
            return
        if body is None:
            await self._too_large(send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None once it exceeds the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        await _send_error(
            send,
            413,
            f"the request body is larger than BOT_MAX_BODY ({self.max_body} bytes)",
            type_="invalid_request_error",
            code="request_too_large",
        )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then waits on the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
