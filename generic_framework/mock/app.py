"""The mock Z.AI server as an ASGI app: routes, validation, replay and faults.

Routes (docs/protocol.md §1, §10):

- ``POST /api/paas/v4/chat/completions`` and ``POST /api/coding/paas/v4/chat/completions``:
  JSON, or SSE when the request says ``"stream": true``.
- ``POST /api/paas/v4/web_search`` (and the coding twin): the Web Search API.
- ``POST /api/paas/v4/reader`` (and the coding twin): the Web Reader API.
- ``/api/mcp/web_reader/mcp``: the Web Reader MCP server (tool ``webReader``), the same way.
- ``/api/mcp/web_search_prime/mcp``: the Web Search MCP server of the Coding Plan, streamable
  HTTP (:mod:`generic_framework.mock.mcp_endpoint`); its ``tools/call`` requests are answered
  from the fixtures like the routes above.
- ``GET /healthz``; ``GET /mock/report`` (fixtures served, never served, unmatched requests,
  API requests in flight now and at most);
  ``GET /mock/fixtures`` (names, descriptions, user inputs); ``GET /mock/examples?persona=&
  endpoint=`` (``{"examples": [...]}``: the questions it has answers for, best first, which a
  bot pointed at it offers on its page; ``&faults=1``: the failure demonstrations instead);
  ``POST /mock/reset``.
- Any other path answers from a fixture that recorded that method and path, else 404/1222.

The chat and web-search routes are plain ASGI callables looked up in a dict: the request body is
parsed once, checked (:mod:`generic_framework.mock.validation`), normalised once, and answered
with bytes computed when the fixtures were loaded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from generic_framework.mock.asgi import (
    Message,
    Receive,
    Scope,
    Send,
    read_body,
    send_bytes,
    send_error,
)
from generic_framework.mock.catalog import Catalog, Incoming, Selection
from generic_framework.mock.faults import (
    RAW_SEND,
    RandomFailures,
    drop,
    drop_mid_body,
    http_error,
    sleep_unless_disconnected,
)
from generic_framework.mock.fixture import (
    BreakStreamFault,
    DropConnectionFault,
    Fixture,
    HTTPErrorFault,
    MalformedBodyFault,
    StallStreamFault,
    load_fixtures,
)
from generic_framework.mock.mcp_endpoint import MCP_READER_PATH, MCP_SEARCH_PATH, MCPEndpoint
from generic_framework.mock.prepared import JSON_TYPE, SSE_TYPE, PreparedExchange
from generic_framework.mock.validation import (
    MockError,
    check_auth,
    validate_chat,
    validate_reader,
    validate_web_search,
)

__all__ = [
    "CHAT_PATHS",
    "CODING_PREFIX",
    "GENERAL_PREFIX",
    "MCP_READER_PATH",
    "MCP_SEARCH_PATH",
    "MockApp",
    "RandomFailures",
    "create_app",
    "resolve_fixtures",
]

FixtureSource = str | Path | Sequence[Fixture | str | Path] | None

GENERAL_PREFIX = "/api/paas/v4"
CODING_PREFIX = "/api/coding/paas/v4"
CHAT_PATHS = (f"{GENERAL_PREFIX}/chat/completions", f"{CODING_PREFIX}/chat/completions")
SEARCH_PATHS = (f"{GENERAL_PREFIX}/web_search", f"{CODING_PREFIX}/web_search")
READER_PATHS = (f"{GENERAL_PREFIX}/reader", f"{CODING_PREFIX}/reader")
_ADMIN_PATHS = frozenset(
    {"/healthz", "/mock/report", "/mock/reset", "/mock/fixtures", "/mock/examples"}
)


def resolve_fixtures(fixtures: FixtureSource) -> list[Fixture]:
    """Fixtures from ``None`` (the bundled set), a path, or a mix of paths and fixtures."""
    if fixtures is None:
        return load_fixtures()
    if isinstance(fixtures, str | Path):
        return load_fixtures(fixtures)
    loaded: list[Fixture] = []
    for item in fixtures:
        loaded.extend([item] if isinstance(item, Fixture) else load_fixtures(item))
    return loaded


class _InFlight:
    """One API request, counted in flight until the last message of its answer is handed over.

    The count falls *before* that message goes to the server: once it is sent, the client (in
    another thread or process) may read the whole answer and ask for the report, or send its
    next request, before this coroutine runs again. Counting down after the send let a client
    see its finished request still in flight, or one request more than it ever had at once.
    """

    def __init__(self, catalog: Catalog, send: Send) -> None:
        self._catalog = catalog
        self._send = send
        self._counted = True
        catalog.enter()

    async def send(self, message: Message) -> None:
        """Pass ``message`` on, having counted the request out first if it ends the answer."""
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.leave()
        await self._send(message)

    def leave(self) -> None:
        """Count the request out (once), whether its answer ended or its client went away."""
        if self._counted:
            self._counted = False
            self._catalog.leave()


class MockApp:
    """The mock server's ASGI app. Build it with :func:`create_app`.

    Attributes:
        catalog: the loaded fixtures, their progress and the served log.
        api_keys: accepted keys, or None to accept any non-empty key.
        latency: seconds added before every answer.
        failures: the random failure injector (``fail_rate``), or None.
    """

    def __init__(
        self,
        fixtures: Sequence[Fixture],
        *,
        api_keys: Iterable[str] | None = None,
        latency_ms: float = 0,
        fail_rate: float = 0.0,
        fail_seed: int = 0,
    ) -> None:
        self.catalog = Catalog(fixtures)
        self.api_keys = frozenset(api_keys) if api_keys is not None else None
        self.latency = max(latency_ms, 0) / 1000
        self.failures = RandomFailures(fail_rate, fail_seed) if fail_rate > 0 else None
        self._mcp = MCPEndpoint(self.api_keys, self._answer_mcp)
        self._mcp_reader = MCPEndpoint(self.api_keys, self._answer_mcp, reader=True)
        self._routes: dict[str, Callable[[Scope, Receive, Send], Awaitable[None]]] = {
            **dict.fromkeys(CHAT_PATHS, self._chat),
            **dict.fromkeys(SEARCH_PATHS, self._web_search),
            **dict.fromkeys(READER_PATHS, self._reader),
            MCP_SEARCH_PATH: self._mcp_search,
            MCP_READER_PATH: self._mcp_read,
        }
        self._admin = Starlette(
            routes=[
                Route("/healthz", self._healthz),
                Route("/mock/report", self._report),
                Route("/mock/fixtures", self._fixtures),
                Route("/mock/examples", self._examples),
                Route("/mock/reset", self._reset, methods=["POST"]),
            ]
        )

    @property
    def fixtures(self) -> list[Fixture]:
        """The loaded fixtures, in load order."""
        return [state.fixture for state in self.catalog.states]

    def set_fixtures(self, fixtures: Sequence[Fixture]) -> None:
        """Replace the loaded fixtures (progress and logs start afresh)."""
        self.catalog = Catalog(fixtures)

    def end_mcp_sessions(self) -> None:
        """Forget the Web Search MCP endpoint's sessions (a server restart, as clients see it)."""
        self._mcp.end_sessions()
        self._mcp_reader.end_sessions()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        scope[RAW_SEND] = send
        path = scope["path"]
        handler = self._routes.get(path)
        if handler is not None:
            await handler(scope, receive, send)
        elif path in _ADMIN_PATHS:
            await self._admin(scope, receive, send)
        else:
            await self._other(scope, receive, send)

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------ API routes

    async def _parse(self, scope: Scope, receive: Receive, check: Callable[[Any], Any]) -> Incoming:
        if scope["method"] != "POST":
            raise MockError(405, "1212", f"Method {scope['method']} is not supported here.")
        raw = await read_body(receive)
        check_auth(scope["headers"], self.api_keys)
        try:
            body = json.loads(raw)
        except ValueError:
            raise MockError(
                400, "1210", "API request parameter is invalid: the body is not valid JSON"
            ) from None
        return Incoming.parse("POST", scope["path"], check(body))

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        models = self.catalog.models
        await self._handle(
            scope, receive, send, lambda body: validate_chat(body, known_models=models)
        )

    async def _web_search(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send, validate_web_search)

    async def _reader(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send, validate_reader)

    async def _mcp_search(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._mcp(scope, receive, send, self.catalog)

    async def _mcp_read(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._mcp_reader(scope, receive, send, self.catalog)

    async def _answer_mcp(
        self, scope: Scope, receive: Receive, send: Send, selection: Selection, body: bytes
    ) -> None:
        await self._answer(scope, receive, send, False, selection, body=body)

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, check: Callable[[Any], Any]
    ) -> None:
        counted = _InFlight(self.catalog, send)
        try:
            await self._handle_counted(scope, receive, counted.send, check)
        finally:
            counted.leave()

    async def _handle_counted(
        self, scope: Scope, receive: Receive, send: Send, check: Callable[[Any], Any]
    ) -> None:
        try:
            request = await self._parse(scope, receive, check)
        except MockError as error:
            self.catalog.note_rejected()
            await send_error(send, error)
            return
        if self.failures is not None and self.failures.next():
            self.catalog.note_injected()
            if self.latency:
                await asyncio.sleep(self.latency)
            await send_error(send, self.failures.error)
            return
        try:
            selection = self.catalog.select(request)
        except MockError as error:
            await send_error(send, error)
            return
        await self._answer(
            scope, receive, send, request.stream, selection, fragments=request.tool_stream
        )

    async def _other(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await read_body(receive)
            if scope["path"].startswith("/api/"):
                check_auth(scope["headers"], self.api_keys)
            request = Incoming.parse(scope["method"], scope["path"], None)
            selection = self.catalog.select(request)
        except MockError as error:
            if error.code not in {"1001", "1002"}:
                error = MockError(404, "1222", f"API does not exist: {scope['path']}")
            await send_error(send, error)
            return
        await self._answer(scope, receive, send, False, selection)

    # ------------------------------------------------------------------ answers

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        stream: bool,
        selection: Selection,
        body: bytes | None = None,
        *,
        fragments: bool = False,
    ) -> None:
        """Serve the selected exchange after its delay, unless the client left meanwhile.

        ``fragments``: the request asked for ``tool_stream``, so a completion recorded as JSON
        streams its tool calls' arguments in pieces."""
        delay = self.latency + selection.delay
        if delay and await sleep_unless_disconnected(receive, delay):
            return  # the client gave up while the answer was delayed: nothing to send
        frames = selection.exchange.sse_frames
        if fragments and selection.exchange.tool_stream_frames is not None:
            frames = selection.exchange.tool_stream_frames
        await self._serve(scope, receive, send, stream, selection, body, frames)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        stream: bool,
        selection: Selection,
        body: bytes | None,
        frames: list[bytes] | None,
    ) -> None:
        """Serve the selected exchange: its faults, else its recorded response (or ``body``),
        streamed as ``frames`` when the request streams."""
        exchange, failure = selection.exchange, selection.failure
        served = (
            b"x-mock-fixture",
            f"{selection.state.fixture.name}#{exchange.index}".encode(),
        )
        if isinstance(failure, HTTPErrorFault):
            await send_error(send, http_error(failure))
        elif isinstance(failure, DropConnectionFault):
            if failure.after_bytes:
                await drop_mid_body(scope, receive, send, exchange.json_body, failure.after_bytes)
            else:
                await drop(scope, receive, send)
        elif isinstance(failure, MalformedBodyFault):
            await self._malformed(send, exchange, failure, stream)
        elif stream and frames is not None:
            await self._stream(scope, receive, send, frames, selection, served)
        elif isinstance(failure, BreakStreamFault):
            await drop(scope, receive, send)
        else:
            if isinstance(failure, StallStreamFault) and await sleep_unless_disconnected(
                receive, failure.seconds
            ):
                return
            await send_bytes(
                send,
                exchange.status,
                JSON_TYPE,
                exchange.json_body if body is None else body,
                [*exchange.headers, served],
            )

    @staticmethod
    async def _malformed(
        send: Send, exchange: PreparedExchange, fault: MalformedBodyFault, stream: bool
    ) -> None:
        if fault.body is not None:
            broken = fault.body.encode()
        else:
            broken = exchange.json_body[: max(1, len(exchange.json_body) // 2)]
        if fault.content_type is not None:
            await send_bytes(send, fault.status, fault.content_type.encode(), broken)
        elif stream and exchange.sse_frames is not None:
            frames = b"data: " + broken + b"\n\ndata: [DONE]\n\n"
            await send_bytes(send, fault.status, SSE_TYPE, frames)
        else:
            await send_bytes(send, fault.status, JSON_TYPE, broken)

    @staticmethod
    async def _stream(
        scope: Scope,
        receive: Receive,
        send: Send,
        frames: list[bytes],
        selection: Selection,
        served: tuple[bytes, bytes],
    ) -> None:
        exchange = selection.exchange
        failure = selection.failure
        cut = -1
        if isinstance(failure, BreakStreamFault | StallStreamFault):
            cut = min(failure.after_events, len(frames) - 1)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", SSE_TYPE),
                    (b"cache-control", b"no-cache"),
                    *exchange.headers,
                    served,
                ],
            }
        )
        for number, frame in enumerate(frames):
            if number == cut:
                if isinstance(failure, BreakStreamFault):
                    await drop(scope, receive, send)
                    return
                assert isinstance(failure, StallStreamFault)
                if await sleep_unless_disconnected(receive, failure.seconds):
                    return
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # ------------------------------------------------------------------ admin routes

    async def _healthz(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "fixtures": len(self.catalog.states)})

    async def _report(self, request: Request) -> JSONResponse:
        return JSONResponse(self.catalog.report())

    async def _reset(self, request: Request) -> JSONResponse:
        self.catalog.reset()
        return JSONResponse({"status": "reset"})

    async def _examples(self, request: Request) -> JSONResponse:
        persona = request.query_params.get("persona") or None
        endpoint = request.query_params.get("endpoint") or None
        faults = request.query_params.get("faults") in ("1", "true")
        found = self.catalog.questions(persona, endpoint, faults=faults)
        return JSONResponse({"examples": found})

    async def _fixtures(self, request: Request) -> JSONResponse:
        return JSONResponse(
            [
                {
                    "name": fixture.name,
                    "description": fixture.description,
                    "persona": fixture.persona,
                    "user_input": fixture.user_input,
                    "endpoint": fixture.endpoint,
                    "exchanges": len(fixture.exchanges),
                }
                for fixture in self.fixtures
            ]
        )


def create_app(
    fixtures: FixtureSource = None,
    *,
    api_keys: Iterable[str] | None = None,
    latency_ms: float = 0,
    fail_rate: float = 0.0,
    fail_seed: int = 0,
) -> MockApp:
    """Build the mock server's ASGI app.

    Args:
        fixtures: ``None`` for the bundled fixtures, a file or directory, or a sequence of
            :class:`Fixture` objects and paths.
        api_keys: the accepted API keys; ``None`` accepts any non-empty key.
        latency_ms: milliseconds to wait before every answer.
        fail_rate: the fraction of valid API requests answered with HTTP 503 / 1305 (see
            :class:`RandomFailures`).
        fail_seed: the seed of those failures.

    Raises:
        FixtureError: a fixture file is invalid or two fixtures share a name.
        ValueError: ``fail_rate`` is outside 0-1.
    """
    return MockApp(
        resolve_fixtures(fixtures),
        api_keys=api_keys,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        fail_seed=fail_seed,
    )
