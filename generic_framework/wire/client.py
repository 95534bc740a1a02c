"""GLMClient: the only place in generic_framework that does HTTP.

One shared :class:`httpx.AsyncClient` (owned, or borrowed and then never closed), Bearer auth,
the timeouts from :class:`~generic_framework.config.Settings`, the retry policy of
:mod:`generic_framework.wire.retry`, and one translation of every failure into the error tree of
:mod:`generic_framework.wire.errors`. Bodies are parsed once, here, into the wire types of
:mod:`generic_framework.wire.messages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from time import perf_counter
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel

from generic_framework.config import Settings
from generic_framework.wire.direct import DirectSend
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    GLMError,
    RateLimitError,
    ResponseValidationError,
    redact,
    register_secret,
)
from generic_framework.wire.messages import (
    ChatCompletion,
    ChatRequest,
    StreamCompleted,
    StreamEvent,
    WebSearchResponse,
)
from generic_framework.wire.pool import ShardedTransport
from generic_framework.wire.responses import check_finish, is_document, parse_model, status_error
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
        # Headers set on our own client cost nothing per request; httpx re-normalises headers
        # passed per request (about a tenth of a mock round trip's CPU). A borrowed client is
        # left as it was given, so its requests carry the headers themselves.
        self._headers: dict[str, str] | None = None if http_client is None else headers
        # Several small pools instead of one big one: httpcore's bookkeeping grows with the
        # pool (docs/design/0701-connection-pool-shards.md).
        own = None
        if http_client is None:
            own = transport or ShardedTransport(s.llm_max_connections, proxy=_proxy_for(s.base_url))
        self._http = http_client or httpx.AsyncClient(
            transport=own,
            headers=headers,
            timeout=httpx.Timeout(
                s.llm_timeout, connect=s.llm_connect_timeout, pool=s.llm_pool_timeout
            ),
        )
        # Our own client's requests go straight to its transport (docs/design/0702).
        self._direct = DirectSend(self._http, own) if own is not None else None
        self._chat_url = f"{s.base_url}/chat/completions"
        self._search_url = f"{s.base_url}/web_search"
        # Parsed once for the direct path: httpx checks a URL string character by character on
        # every request. A borrowed client gets the strings (it may be another httpx-like
        # library, such as httpx2, with URL types of its own).
        self._parsed = {url: httpx.URL(url) for url in (self._chat_url, self._search_url)}
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
        if self._direct is not None:
            self._direct.usable = False  # so a late request meets httpx's "client closed"
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
        body = request.to_wire()
        _log_payload("chat request", body)

        paused: list[bool] = []

        async def attempt() -> ChatCompletion:
            completion = await self._exchange("chat", self._chat_url, body, ChatCompletion, paused)
            check_finish(completion.finish_reason, completion.id)
            return completion

        return await self._policy.call(attempt, on_retry=self._retried("chat"))

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream a completion: text and reasoning deltas, then one :class:`StreamCompleted`.

        The request is retried only until its first event has reached the caller; after that a
        broken, stalled (past ``LLM_TIMEOUT``) or failing stream raises a typed error.
        """
        body = request.model_copy(update={"stream": True}).to_wire()
        _log_payload("stream request", body)
        # Each attempt takes a concurrency slot (no slot is held while waiting to retry); the
        # successful one keeps it until the stream is finished or abandoned.
        paused: list[bool] = []
        response, events, lease, started = await self._policy.call(
            lambda: self._open_stream(body, paused), on_retry=self._retried("chat_stream")
        )
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
            check_finish(completion.finish_reason, completion.id)
            yield StreamCompleted(completion=completion)
        finally:
            try:
                await events.aclose()
                await response.aclose()
            finally:
                await self._give(lease)
                self._observer.upstream_duration("chat_stream", perf_counter() - started)

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
        body = json.dumps(payload, ensure_ascii=False).encode()

        paused: list[bool] = []

        async def attempt() -> WebSearchResponse:
            return await self._exchange(
                "web_search", self._search_url, body, WebSearchResponse, paused
            )

        return await self._policy.call(attempt, on_retry=self._retried("web_search"))

    # ------------------------------------------------------------------ transport

    async def _exchange(
        self, endpoint: str, url: str, body: bytes, model: type[_M], paused: list[bool]
    ) -> _M:
        """One attempt: a slot, the POST, the parsed body; its outcome goes to the observer."""
        lease = await self._take(paused)
        started = perf_counter()
        try:
            response = await self._send(url, body)
        except GLMError as exc:
            self._failed(endpoint, exc, perf_counter() - started)
            await self._pause_after(exc, paused)
            raise
        finally:
            await self._give(lease)
        seconds = perf_counter() - started
        try:
            result = parse_model(response, model)
        except GLMError as exc:
            self._failed(endpoint, exc, seconds)
            raise
        self._observer.upstream_response(endpoint, "200", "")
        self._observer.upstream_duration(endpoint, seconds)
        return result

    def _failed(self, endpoint: str, exc: GLMError, seconds: float | None) -> None:
        self._observer.upstream_response(endpoint, status_label(exc), exc.code or "")
        if seconds is not None:
            self._observer.upstream_duration(endpoint, seconds)

    def _retried(self, endpoint: str) -> Callable[[BaseException], None]:
        observer = self._observer
        return lambda exc: observer.upstream_retry(endpoint, type(exc).__name__)

    def _request(self, url: str, body: bytes) -> httpx.Request:
        """The POST of ``body`` to ``url``, with the client's headers and timeouts."""
        if self._direct is not None and self._direct.usable:
            return self._direct.request(self._parsed[url], body)
        return self._http.build_request("POST", url, content=body, headers=self._headers)

    async def _dispatch(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Send ``request``: straight to our own transport when possible, else via httpx."""
        if self._direct is not None and self._direct.usable:
            return await self._direct.send(request, stream=stream)
        return await self._http.send(request, stream=stream)

    async def _send(self, url: str, body: bytes) -> httpx.Response:
        """POST once and read the whole body; failures become typed errors."""
        request = self._request(url, body)
        response = await _translate(lambda: self._dispatch(request), _budget(request))
        if response.status_code >= 400:
            raise status_error(response.status_code, response.headers, response.content)
        return response

    async def _take(self, paused: list[bool]) -> SlotLease:
        """A slot of the upstream budget (counted as queued, then in flight)."""
        self._queued += 1
        try:
            lease = await self._slots.acquire(respect_pause=not paused)
        finally:
            self._queued -= 1
        self._in_flight += 1
        return lease

    async def _give(self, lease: SlotLease) -> None:
        self._in_flight -= 1
        await lease.release()

    async def _pause_after(self, exc: GLMError, paused: list[bool]) -> None:
        # 1302 means "too many concurrent requests for this key": every caller of the budget
        # (every replica with PostgreSQL) waits, not only this one (docs/design/0315).
        # ``paused`` is the call's own note that it set a pause: its retry waits out the same
        # Retry-After in the retry policy, so it does not wait for the pause a second time.
        if isinstance(exc, RateLimitError) and exc.code == "1302":
            paused.append(True)
            await self._slots.pause(self._policy.pause_for(exc))

    async def _open_stream(
        self, body: bytes, paused: list[bool]
    ) -> tuple[httpx.Response, AsyncGenerator[str, None], SlotLease, float]:
        """Take a slot and open the stream (and say when); on failure give the slot back."""
        lease = await self._take(paused)
        started = perf_counter()
        try:
            response, events = await self._first_event(body)
        except BaseException as exc:
            try:
                if isinstance(exc, GLMError):
                    self._failed("chat_stream", exc, perf_counter() - started)
                    await self._pause_after(exc, paused)
            finally:
                await self._give(lease)
            raise
        # Counted once the first event is in; its duration when the stream ends (chat_stream).
        self._observer.upstream_response("chat_stream", "200", "")
        return response, events, lease, started

    async def _first_event(self, body: bytes) -> tuple[httpx.Response, AsyncGenerator[str, None]]:
        """Open the stream and read up to its first event, so failures before it are retried."""
        request = self._request(self._chat_url, body)
        response = await _translate(lambda: self._dispatch(request, stream=True), _budget(request))
        events: AsyncGenerator[str, None] | None = None
        try:
            if response.status_code >= 400:
                raw = await _translate(response.aread, read_timeout(response))
                raise status_error(response.status_code, response.headers, raw)
            if is_document(response):
                await _translate(response.aread, read_timeout(response))
                events = replay(parse_model(response, ChatCompletion))
            else:
                events = event_data(response)
            first = await _translate(events.__anext__)
            check_error_frame(first)
        except BaseException as exc:
            if events is not None:
                await events.aclose()
            await response.aclose()
            if isinstance(exc, StopAsyncIteration):
                raise APIConnectionError("the stream closed before its first event") from None
            raise
        return response, _prepend(first, events)


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


def _log_payload(label: str, body: bytes) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: %s", label, redact(body.decode("utf-8", errors="replace"), limit=4000))
