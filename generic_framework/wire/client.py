"""GLMClient: the only place in generic_framework that sends requests to Z.AI's REST API.

Chat completions (plain and streamed) and the Web Search API go through here, each attempt
through one method (``GLMClient._attempt``): one shared :class:`httpx.AsyncClient` (owned, or
borrowed and then never closed), Bearer auth, the timeouts from
:class:`~generic_framework.config.Settings`, a slot of the upstream budget
(:mod:`generic_framework.wire.slots`), the retry policy of :mod:`generic_framework.wire.retry`,
and one translation of every failure into the error tree of :mod:`generic_framework.wire.errors`.
Bodies are parsed once, here, into the wire types of :mod:`generic_framework.wire.messages`.

Other HTTP in the package is not Z.AI's REST API and does not come here: MCP servers, Z.AI's
Web Search MCP endpoint among them, are spoken to by the ``mcp`` SDK over its own ``httpx2``
client (:mod:`generic_framework.mcp_tools.sdk`); the recorder is a transport beneath this
client; the service and the mock are servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import httpx
from pydantic import BaseModel

from generic_framework.config import Settings
from generic_framework.errors import GLMError
from generic_framework.redaction import redact, register_secret
from generic_framework.wire.direct import ClientSend, DirectSend, Sender
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    RateLimitError,
    ResponseValidationError,
)
from generic_framework.wire.messages import (
    ChatCompletion,
    ChatRequest,
    ReaderResponse,
    StreamCompleted,
    StreamEvent,
    WebSearchResponse,
)
from generic_framework.wire.pool import ShardedTransport, needs_tls
from generic_framework.wire.responses import (
    check_completion,
    is_document,
    parse_model,
    status_error,
)
from generic_framework.wire.retry import RetryPolicy
from generic_framework.wire.slots import LocalSlots, SlotLease, UpstreamSlots
from generic_framework.wire.sse import (
    DONE,
    StreamAssembler,
    check_error_frame,
    event_data,
    fold_chunk,
    read_timeout,
    replay,
)
from generic_framework.wire.upstream import NO_OBSERVER, UpstreamObserver, status_label

__all__ = ["GLMClient"]

logger = logging.getLogger("generic_framework.wire.client")

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")
_USER_AGENT = "generic-framework/0.1"


class GLMClient:
    """Async client for Z.AI's chat-completions and Web Search APIs.

    Args:
        settings: where the endpoint, key, timeouts, retries and pool size come from;
            :meth:`Settings.defaults` (not the environment) when omitted.
        http_client: an ``httpx.AsyncClient`` to borrow; it is never closed by this client.
        transport: an httpx transport for the owned client (tests, recording).
        observer: told the outcome and duration of every HTTP exchange and every retry (the
            runtime passes its metrics); nothing is recorded when omitted.
        slots: the upstream budget to take a slot from for every attempt (borrowed, never
            closed here); a :class:`~generic_framework.wire.slots.LocalSlots` of
            ``LLM_MAX_CONCURRENCY`` slots and ``LLM_QUEUE_TIMEOUT`` seconds when omitted.

    Use it as an async context manager, or call :meth:`aclose` when done.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        observer: UpstreamObserver | None = None,
        slots: UpstreamSlots | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.defaults()
        s = self.settings
        key = s.api_key.get_secret_value() if s.api_key is not None else ""
        # The key is sent from here: from now on no error text or log line may show it.
        register_secret(key)
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept-Language": "en-US,en",
            "User-Agent": _USER_AGENT,
        }
        self._owns_http = http_client is None
        # The one sender of every request, chosen here: a borrowed client is used as it was
        # given (its requests carry our headers); our own goes straight to its transport.
        self._sender: Sender
        if http_client is None:
            self._http, self._sender = _own_client(s, headers, transport)
        else:
            self._http, self._sender = http_client, ClientSend(http_client, headers)
        self._chat_url = f"{s.base_url}/chat/completions"
        self._search_url = f"{s.base_url}/web_search"
        self._reader_url = f"{s.base_url}/reader"
        self._policy = RetryPolicy(max_retries=s.llm_max_retries, deadline=s.llm_retry_deadline)
        self._slots = slots or LocalSlots(s.llm_max_concurrency, s.llm_queue_timeout)
        self._observer = observer if observer is not None else NO_OBSERVER
        self._in_flight = 0
        self._queued = 0

    def __repr__(self) -> str:
        base_url = redact(self.settings.base_url)
        return f"GLMClient(base_url={base_url!r}, model={self.settings.llm_model!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this object owns it."""
        if self._owns_http:
            await self._http.aclose()

    @property
    def in_flight(self) -> int:
        """Calls holding one of the ``LLM_MAX_CONCURRENCY`` slots now."""
        return self._in_flight

    @property
    def queued(self) -> int:
        """Calls waiting for a slot now."""
        return self._queued

    # ------------------------------------------------------------------ public API

    async def chat(self, request: ChatRequest) -> ChatCompletion:
        """Send one chat-completions request and return the validated completion.

        Raises:
            GLMError: a subclass saying what failed; transient failures are retried first.
        """
        if request.stream:
            request = request.model_copy(update={"stream": False})
        call = _Call("chat", self._chat_url, request=request)
        return await self._policy.call(
            lambda: self._fetch(call, ChatCompletion, check_completion),  # no frame of its own
            on_retry=self._retried(call),
        )

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream a completion: text and reasoning deltas, then one :class:`StreamCompleted`.

        The request is retried only until its first event has reached the caller; after that a
        broken, stalled (past ``LLM_TIMEOUT``) or failing stream raises a typed error.
        """
        streamed = request.model_copy(update={"stream": True})
        call = _Call("chat_stream", self._chat_url, request=streamed, stream=True)
        # Each attempt takes a slot (none is held while waiting to retry); the successful one
        # keeps it until the stream is finished or abandoned.
        exchange = await self._policy.call(
            lambda: self._attempt(call, _first_event), on_retry=self._retried(call)
        )
        events = exchange.value
        try:
            assembler = StreamAssembler()
            async for data in events:
                if data == DONE:
                    await _drain(events)
                    break
                for event in fold_chunk(assembler, data):
                    yield event
            if not assembler.finished:
                raise APIConnectionError("the stream ended before its final chunk")
            completion = assembler.completion()
            check_completion(completion)
            yield StreamCompleted(completion=completion)
        finally:
            try:
                await events.aclose()
            finally:
                await self._finish(call, exchange)

    async def web_search(
        self,
        query: str,
        *,
        count: int | None = None,
        recency: str | None = None,
        engine: str | None = None,
        domain_filter: str | None = None,
        content_size: str | None = None,
    ) -> WebSearchResponse:
        """Call the Web Search API (``POST {base}/web_search``) and return its results."""
        payload: dict[str, Any] = {
            "search_query": query,
            "search_engine": engine or _api_engine(self.settings.web_search_engine),
            "count": count or self.settings.web_search_count,
            "search_recency_filter": recency or self.settings.web_search_recency,
        }
        if domain_filter:
            payload["search_domain_filter"] = domain_filter
        if content_size:
            payload["content_size"] = content_size
        call = _Call(
            "web_search", self._search_url, json.dumps(payload, ensure_ascii=False).encode()
        )
        return await self._policy.call(
            lambda: self._fetch(call, WebSearchResponse), on_retry=self._retried(call)
        )

    async def read_url(self, url: str) -> ReaderResponse:
        """Call the Web Reader API (``POST {base}/reader``): one page's text as markdown, with
        its title (docs/protocol.md §6c). Images are left out of the text."""
        payload = {"url": url, "return_format": "markdown", "retain_images": False}
        call = _Call("reader", self._reader_url, json.dumps(payload, ensure_ascii=False).encode())
        return await self._policy.call(
            lambda: self._fetch(call, ReaderResponse), on_retry=self._retried(call)
        )

    # ------------------------------------------------------------------ one attempt

    async def _attempt(
        self, call: _Call, read: Callable[[httpx.Response], Awaitable[_T]]
    ) -> _Exchange[_T]:
        """One attempt of ``call``, streamed or plain: a slot, the POST, its status, ``read``.

        A failure is reported to the observer (status and duration), a 1302 pauses the budget,
        and the response is closed and the slot given back before the error propagates. A
        success is reported as "200"; the exchange returned holds its slot and response until
        :meth:`_finish`.
        """
        self._queued += 1  # waiting for a slot (taken here: no frame of its own while waiting)
        try:
            lease = await self._slots.acquire(respect_pause=not call.paused)
        finally:
            self._queued -= 1
        self._in_flight += 1
        started = perf_counter()
        response: httpx.Response | None = None
        try:
            request = self._sender.request(call.url, call.encoded())
            response = await _translate(
                lambda: self._sender.send(request, stream=call.stream), _budget(request)
            )
            if response.status_code >= 400:
                raw = await _translate(response.aread, read_timeout(response))
                raise status_error(response.status_code, response.headers, raw)
            value = await read(response)
        except BaseException as exc:
            await self._abandon(call, exc, response, lease, started)
            raise
        self._observer.upstream_response(call.endpoint, "200", "")
        return _Exchange(value, response, lease, started)

    async def _fetch(
        self, call: _Call, model: type[_M], check: Callable[[_M], None] | None = None
    ) -> _M:
        """One plain attempt: the body parsed into ``model``, the slot given back at once;
        then ``check`` (a completion's finish reason) sees the answer."""

        async def parse(response: httpx.Response) -> _M:
            return parse_model(response, model)

        exchange = await self._attempt(call, parse)
        await self._finish(call, exchange)
        if check is not None:
            check(exchange.value)
        return exchange.value

    async def _finish(self, call: _Call, exchange: _Exchange[Any]) -> None:
        """The end of a successful exchange: response closed, slot given back, duration told."""
        try:
            await exchange.response.aclose()
        finally:
            await self._give(exchange.lease)
            self._observer.upstream_duration(call.endpoint, perf_counter() - exchange.started)

    async def _abandon(
        self,
        call: _Call,
        exc: BaseException,
        response: httpx.Response | None,
        lease: SlotLease,
        started: float,
    ) -> None:
        """The end of a failed attempt: observed, a 1302's pause set, response and slot freed."""
        try:
            if isinstance(exc, GLMError):
                self._observer.upstream_response(call.endpoint, status_label(exc), exc.code or "")
                self._observer.upstream_duration(call.endpoint, perf_counter() - started)
                await self._pause_after(exc, call)
        finally:
            try:
                if response is not None:
                    await response.aclose()
            finally:
                await self._give(lease)

    def _retried(self, call: _Call) -> Callable[[BaseException], None]:
        observer, endpoint = self._observer, call.endpoint
        return lambda exc: observer.upstream_retry(endpoint, type(exc).__name__)

    async def _give(self, lease: SlotLease) -> None:
        self._in_flight -= 1
        await lease.release()

    async def _pause_after(self, exc: GLMError, call: _Call) -> None:
        # 1302 means "too many concurrent requests for this key": every caller of the budget
        # (every replica with PostgreSQL) waits, not only this one (docs/design/0315). The call
        # notes that it set the pause: its retry waits out the same Retry-After in the retry
        # policy, so it does not wait for the pause a second time.
        if isinstance(exc, RateLimitError) and exc.code == "1302":
            call.paused = True
            await self._slots.pause(self._policy.pause_for(exc))


@dataclass(slots=True)
class _Call:
    """One logical call, across its attempts: where it goes, what it sends, what it did."""

    endpoint: str
    """The observer's name for it: ``chat``, ``chat_stream``, ``web_search`` or ``reader``."""
    url: str
    body: bytes = b""
    request: ChatRequest | None = None
    """A chat request, made the ``body`` once an attempt holds a slot (:meth:`encoded`)."""
    stream: bool = False
    """Read the answer as it comes (the attempt ends at the first event) instead of whole."""
    paused: bool = False
    """An attempt got a 1302 and paused the budget: later attempts do not wait for that pause
    (the retry policy already waits out the same Retry-After)."""

    def encoded(self) -> bytes:
        """The body to send (the chat request encoded the first time it is asked for)."""
        if self.request is not None:
            self.body, self.request = self.request.to_wire(), None
            if logger.isEnabledFor(logging.DEBUG):
                text = redact(self.body.decode("utf-8", errors="replace"), limit=4000)
                logger.debug("%s request: %s", self.endpoint, text)
        return self.body


@dataclass(slots=True)
class _Exchange(Generic[_T]):
    """A successful attempt: what ``read`` made of the answer, and what it still holds."""

    value: _T
    response: httpx.Response
    lease: SlotLease
    started: float


async def _first_event(response: httpx.Response) -> AsyncGenerator[str, None]:
    """Read a stream up to its first event (so failures before it are retried); all its events.

    A server that ignored ``stream`` and answered with a whole completion is replayed as one.
    """
    if is_document(response):
        await _translate(response.aread, read_timeout(response))
        events = replay(parse_model(response, ChatCompletion))
    else:
        events = event_data(response)
    try:
        first = await _translate(events.__anext__)
        check_error_frame(first)
    except BaseException as exc:
        await events.aclose()
        if isinstance(exc, StopAsyncIteration):
            raise APIConnectionError("the stream closed before its first event") from None
        raise
    return _prepend(first, events)


# ---------------------------------------------------------------------- helpers


async def _translate(call: Callable[[], Awaitable[_T]], budget: float | None = None) -> _T:
    """Await ``call`` (within ``budget`` seconds); turn httpx's exceptions into ours."""
    try:
        if budget is None:
            return await call()
        try:
            async with asyncio.timeout(budget):
                return await call()
        except TimeoutError as exc:
            raise httpx.TimeoutException(f"no complete answer within {budget:g}s") from exc
    except httpx.TimeoutException as exc:
        raise APITimeoutError(f"timed out talking to Z.AI ({_describe(exc)})") from exc
    except httpx.DecodingError as exc:
        raise ResponseValidationError(
            f"the response body could not be decoded ({_describe(exc)})"
        ) from exc
    except httpx.RequestError as exc:
        raise APIConnectionError(f"connection to Z.AI failed ({_describe(exc)})") from exc


def _own_client(
    s: Settings, headers: dict[str, str], transport: httpx.AsyncBaseTransport | None
) -> tuple[httpx.AsyncClient, Sender]:
    """Our own client, and the sender that hands its requests straight to its transport.

    Several small pools instead of one big one: httpcore's bookkeeping grows with the pool
    (docs/design/0701). Headers set on the client cost nothing per request; httpx re-normalises
    headers passed per request. The direct send is docs/design/0702.
    """
    if transport is None:
        proxy = _proxy_for(s.base_url)
        tls = needs_tls(s.base_url, proxy)  # a plain-http upstream loads no CA bundle
        transport = ShardedTransport(s.llm_max_connections, proxy=proxy, tls=tls)
    timeout = httpx.Timeout(s.llm_timeout, connect=s.llm_connect_timeout, pool=s.llm_pool_timeout)
    client = httpx.AsyncClient(transport=transport, headers=headers, timeout=timeout)
    return client, DirectSend(client, transport)


def _describe(exc: Exception) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {redact(detail, limit=200)}" if detail else type(exc).__name__


def _budget(request: httpx.Request) -> float | None:
    """The longest one exchange may take: pool + connect + write + read timeouts.

    httpx enforces its timeouts inside its connection pool only; this bound also holds for
    transports that enforce none (ASGI apps, mocks), so no request can hang forever.
    """
    timeouts = request.extensions.get("timeout") or {}
    total = 0.0
    for name in ("pool", "connect", "write", "read"):
        value = timeouts.get(name)
        if value is None:
            return None
        total += float(value)
    return total


async def _prepend(first: str, rest: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    try:
        yield first
        while True:
            try:
                data = await _translate(rest.__anext__)
            except StopAsyncIteration:
                return
            check_error_frame(data)
            yield data
    finally:
        await rest.aclose()


def _api_engine(chat_engine: str) -> str:
    """The chat tool's engine names differ from the Web Search API's (docs/protocol.md §0.3)."""
    return "search-prime" if chat_engine in {"search_pro_jina", "search_prime"} else chat_engine


async def _drain(events: AsyncIterator[str], seconds: float = 1.0) -> None:
    """Read what follows ``[DONE]`` (normally only the end of the chunked body), so the
    connection goes back to the pool instead of being closed; give up quickly if it lingers."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(seconds):
            async for _ in events:
                pass


def _proxy_for(base_url: str) -> str | None:
    """The proxy the environment sets for ``base_url`` (``HTTPS_PROXY``, ``NO_PROXY``...)."""
    parts = urllib.parse.urlsplit(base_url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)
