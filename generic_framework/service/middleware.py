"""Pure ASGI middleware: what a browser may send and the request-body limit (who is asking:
service/callers.py).

All are plain ASGI callables rather than Starlette ``BaseHTTPMiddleware`` so that streamed
responses pass through untouched and a refused request costs no task.

Safe without a token (docs/design/0603): a web page on another site can make the browser send
"simple" requests (a form POST, ``text/plain`` fetches) to the loopback service, and a DNS
rebinding attack can even read the answers. Three checks refuse what only a browser tricked by
another site would send:

- :class:`HostAllowlistMiddleware`: the ``Host`` must be a loopback name or address, or a name
  of ``BOT_ALLOWED_HOSTS`` (400 ``host_not_allowed``), which defeats DNS rebinding.
- :class:`OriginCheckMiddleware`: a request with an ``Origin`` header must come from the bot's
  own origin or one of ``BOT_CORS_ORIGINS`` (403 ``origin_not_allowed``).
- :class:`JsonOnlyMiddleware`: a state-changing request without ``Authorization`` must be
  ``application/json`` (415), a type no cross-site request can carry without a CORS preflight.

API clients with ``BOT_API_TOKEN`` (an ``Authorization`` header, no ``Origin``) pass all three
as before, unless ``BOT_ALLOWED_HOSTS`` is set, which turns the Host check on with a token too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Iterable

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from generic_framework.service.errors import error_body

__all__ = [
    "PROBE_PATHS",
    "BodyLimitMiddleware",
    "HostAllowlistMiddleware",
    "JsonOnlyMiddleware",
    "OriginCheckMiddleware",
    "host_name",
]

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
"""Paths the Host check leaves open: probes (Docker, HAProxy's ``httpchk``, Kubernetes) name
the container by address or send no Host at all, and these paths change nothing."""
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


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


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def host_name(host: str) -> tuple[str, int | None]:
    """The lower-case name and the port of a ``Host`` value (``[::1]:8080`` -> ``::1``, 8080).

    Raises:
        ValueError: the port is not a number.
    """
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        name, _, port = host.partition(":")
    return name.removesuffix("."), int(port) if port else None


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostAllowlistMiddleware:
    """Answer 400 ``host_not_allowed`` to a ``Host`` that is not loopback or in ``allowed``.

    Loopback names (``localhost``, ``127.0.0.0/8``, ``[::1]``, any port) are always allowed;
    ``allowed`` adds names (any port); ``*`` allows any. ``open_paths`` (:data:`PROBE_PATHS` by
    default) are not checked.
    """

    def __init__(
        self, app: ASGIApp, allowed: Iterable[str] = (), open_paths: Iterable[str] = PROBE_PATHS
    ) -> None:
        self.app = app
        self.allowed = frozenset(allowed)
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.open_paths or self._ok(scope):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        shown = "no Host header" if host is None else f"the Host header {host[:100]!r}"
        await _send_error(
            send,
            400,
            f"{shown} is not allowed: this service answers to localhost, 127.0.0.1 and [::1]; "
            "add the name it is reached by to BOT_ALLOWED_HOSTS (comma-separated)",
            type_="invalid_request_error",
            code="host_not_allowed",
        )

    def _ok(self, scope: Scope) -> bool:
        host = _header(scope, b"host")
        if host is None:
            return False
        try:
            name, _ = host_name(host)
        except ValueError:
            return False
        return "*" in self.allowed or name in self.allowed or _is_loopback(name)


def _origin_parts(origin: str) -> tuple[str, str, int | None] | None:
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or not rest or "/" in rest:
        return None
    try:
        name, port = host_name(rest)
    except ValueError:
        return None
    return scheme, name, port if port is not None else _DEFAULT_PORTS[scheme]


def _own_origin(scope: Scope) -> tuple[str, str, int | None] | None:
    """The bot's origin as the request names it: its scheme (``X-Forwarded-Proto`` behind a
    TLS proxy) and its ``Host``. A browser cannot forge either header on a cross-site request
    without a CORS preflight, so trusting them here lets no other site through."""
    host = _header(scope, b"host")
    if host is None:
        return None
    forwarded = _header(scope, b"x-forwarded-proto")
    scheme = (forwarded or str(scope.get("scheme", "http"))).split(",")[0].strip().lower()
    return _origin_parts(f"{scheme}://{host}")


class OriginCheckMiddleware:
    """Answer 403 ``origin_not_allowed`` to a request whose ``Origin`` is another site's.

    Without an ``Origin`` header (API clients, same-origin GETs) nothing is checked. The bot's
    own origin (same scheme, host and port as the request's ``Host``) and the origins of
    ``allowed`` (``BOT_CORS_ORIGINS``; ``*`` allows any) pass. ``Origin: null`` (a sandboxed
    frame, a file) is another site.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.any = "*" in allowed
        self.allowed = {parts for o in allowed if (parts := _origin_parts(o)) is not None}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None or self.any or self._ok(scope, origin):
            await self.app(scope, receive, send)
            return
        await _send_error(
            send,
            403,
            f"requests from the web origin {origin[:100]!r} are not allowed: only the bot's "
            "own page may call it from a browser; list other origins in BOT_CORS_ORIGINS",
            type_="permission_error",
            code="origin_not_allowed",
        )

    def _ok(self, scope: Scope, origin: str) -> bool:
        parts = _origin_parts(origin)
        return parts is not None and (parts == _own_origin(scope) or parts in self.allowed)


class JsonOnlyMiddleware:
    """Answer 415 to a state-changing request without ``Authorization`` that is not JSON.

    ``POST``, ``PUT`` and ``PATCH`` need ``Content-Type: application/json``; so does a
    ``DELETE`` that has a body or a content type (a bare ``DELETE`` cannot be sent across sites
    without a CORS preflight anyway). Form posts and ``text/plain`` fetches, which another site
    can make a browser send without asking, are refused before the body is read. A request with
    ``Authorization`` cannot come from such a page, so token clients are not checked. A method
    no route takes at that path, or a path no route has, is left to the router's 405 or 404:
    nothing would change state, and the answer names what is wrong.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._ok(scope) or not _routed(scope):
            await self.app(scope, receive, send)
            return
        kind = _header(scope, b"content-type")
        got = "no Content-Type" if kind is None else f"Content-Type {kind[:100]!r}"
        await _send_error(
            send,
            415,
            f"this request must be sent as JSON with Content-Type: application/json (got {got})",
            type_="invalid_request_error",
            code="unsupported_media_type",
        )

    @staticmethod
    def _ok(scope: Scope) -> bool:
        method = scope.get("method", "GET")
        if method not in _STATE_CHANGING or _header(scope, b"authorization") is not None:
            return True
        kind = _header(scope, b"content-type")
        if kind is None and method == "DELETE":
            has_body = _header(scope, b"transfer-encoding") or (_content_length(scope) or 0) > 0
            return not has_body
        media = (kind or "").split(";")[0].strip().lower()
        return media == "application/json"


def _routed(scope: Scope) -> bool:
    """True when a route of the application takes this method at this path (true as well
    outside a Starlette application, whose routes are not known here)."""
    routes = getattr(getattr(scope.get("app"), "router", None), "routes", None)
    if routes is None:
        return True
    return any(route.matches(scope)[0] is Match.FULL for route in routes)


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
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
