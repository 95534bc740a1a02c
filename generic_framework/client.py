"""GLMClient: the only place in generic_framework that does HTTP.

One shared :class:`httpx.AsyncClient` (owned, or borrowed and then never closed), Bearer auth,
the timeouts from :class:`~generic_framework.config.Settings`, the retry policy of
:mod:`generic_framework.retry`, and one translation of every failure into the error tree of
:mod:`generic_framework.errors`. Bodies are parsed once, here, into the wire types of
:mod:`generic_framework.messages`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from generic_framework.config import Settings
from generic_framework.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    ContentFilterError,
    GLMError,
    ResponseValidationError,
    ServerError,
    error_for,
    redact,
)
from generic_framework.messages import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatRequest,
    ContentDelta,
    ReasoningDelta,
    StreamCompleted,
    StreamEvent,
    WebSearchResponse,
)
from generic_framework.retry import RetryPolicy, parse_retry_after
from generic_framework.sse import DONE, SSEDecoder, StreamAssembler

__all__ = ["GLMClient"]

logger = logging.getLogger("generic_framework.client")

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")
_USER_AGENT = "generic-framework/0.1"


class GLMClient:
    """Async client for Z.AI's chat-completions and Web Search APIs.

    Args:
        settings: where the endpoint, key, timeouts, retries and pool size come from.
        http_client: an ``httpx.AsyncClient`` to borrow; it is never closed by this client.
        transport: an httpx transport for the owned client (tests, recording).

    Use it as an async context manager, or call :meth:`aclose` when done.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        s = self.settings
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(
                s.llm_timeout, connect=s.llm_connect_timeout, pool=s.llm_pool_timeout
            ),
            limits=httpx.Limits(
                max_connections=s.llm_max_connections,
                max_keepalive_connections=s.llm_max_connections,
            ),
        )
        key = s.api_key.get_secret_value() if s.api_key is not None else ""
        self._headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept-Language": "en-US,en",
            "User-Agent": _USER_AGENT,
        }
        self._chat_url = f"{s.base_url}/chat/completions"
        self._search_url = f"{s.base_url}/web_search"
        self._policy = RetryPolicy(max_retries=s.llm_max_retries, deadline=s.llm_retry_deadline)
        self._slots = asyncio.Semaphore(s.llm_max_concurrency)

    def __repr__(self) -> str:
        return f"GLMClient(base_url={self.settings.base_url!r}, model={self.settings.llm_model!r})"

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

        async def attempt() -> ChatCompletion:
            async with self._slots:
                response = await self._send(self._chat_url, body)
            completion = _parse_model(response, ChatCompletion)
            _check_finish(completion.finish_reason, completion.id)
            return completion

        return await self._policy.call(attempt)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream a completion: text and reasoning deltas, then one :class:`StreamCompleted`.

        The request is retried only until its first event has reached the caller; after that a
        broken, stalled (past ``LLM_TIMEOUT``) or failing stream raises a typed error.
        """
        body = request.model_copy(update={"stream": True}).to_wire()
        _log_payload("stream request", body)
        async with self._slots:
            response, events = await self._policy.call(lambda: self._open_stream(body))
            try:
                assembler = StreamAssembler()
                async for data in events:
                    event = _fold_event(assembler, data)
                    if event is not None:
                        yield event
                    if data == DONE:
                        break
                if not assembler.finished:
                    raise APIConnectionError("the stream ended before its final chunk")
                completion = assembler.completion()
                _check_finish(completion.finish_reason, completion.id)
                yield StreamCompleted(completion=completion)
            finally:
                await response.aclose()

    async def web_search(
        self,
        query: str,
        *,
        count: int | None = None,
        recency: str | None = None,
        engine: str | None = None,
        domain_filter: str | None = None,
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
        body = json.dumps(payload, ensure_ascii=False).encode()

        async def attempt() -> WebSearchResponse:
            async with self._slots:
                response = await self._send(self._search_url, body)
            return _parse_model(response, WebSearchResponse)

        return await self._policy.call(attempt)

    # ------------------------------------------------------------------ transport

    async def _send(self, url: str, body: bytes) -> httpx.Response:
        """POST once and read the whole body; failures become typed errors."""
        response = await _translate(
            lambda: self._http.post(url, content=body, headers=self._headers)
        )
        if response.status_code >= 400:
            raise _status_error(response.status_code, response.headers, response.content)
        return response

    async def _open_stream(self, body: bytes) -> tuple[httpx.Response, AsyncIterator[str]]:
        """Open the stream and read up to its first event, so failures before it are retried."""
        request = self._http.build_request(
            "POST", self._chat_url, content=body, headers=self._headers
        )
        response = await _translate(lambda: self._http.send(request, stream=True))
        try:
            if response.status_code >= 400:
                raw = await _translate(response.aread)
                raise _status_error(response.status_code, response.headers, raw)
            events = _sse_events(response)
            first = await _translate(events.__anext__)
        except StopAsyncIteration:
            await response.aclose()
            raise APIConnectionError("the stream closed before its first event") from None
        except BaseException:
            await response.aclose()
            raise
        _check_error_frame(first)
        return response, _prepend(first, events)


# ---------------------------------------------------------------------- helpers


async def _translate(call: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``call``; turn httpx's transport exceptions into ours (``raise ... from``)."""
    try:
        return await call()
    except httpx.TimeoutException as exc:
        raise APITimeoutError(f"timed out talking to Z.AI ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise APIConnectionError(f"connection to Z.AI failed ({type(exc).__name__})") from exc


async def _sse_events(response: httpx.Response) -> AsyncIterator[str]:
    decoder = SSEDecoder()
    async for piece in response.aiter_bytes():
        for data in decoder.feed(piece):
            yield data
    for data in decoder.flush():
        yield data


async def _prepend(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    yield first
    while True:
        try:
            data = await _translate(rest.__anext__)
        except StopAsyncIteration:
            return
        _check_error_frame(data)
        yield data


def _check_error_frame(data: str) -> None:
    """Raise the typed error of a ``data: {"error": ...}`` frame (ZAI-PROTOCOL §4)."""
    if data.startswith('{"error"') or (data.startswith("{") and '"error"' in data[:20]):
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            err = payload["error"]
            raise error_for(None, _code(err.get("code")), str(err.get("message", "stream error")))


def _fold_event(assembler: StreamAssembler, data: str) -> StreamEvent | None:
    if data == DONE:
        return None
    try:
        chunk = ChatCompletionChunk.model_validate_json(data)
    except ValidationError as exc:
        raise ResponseValidationError("a stream chunk was not valid JSON", body=data) from exc
    text, reasoning = assembler.add(chunk)
    if text:
        return ContentDelta(text=text)
    if reasoning:
        return ReasoningDelta(text=reasoning)
    return None


def _check_finish(finish_reason: str | None, request_id: str | None) -> None:
    if finish_reason == "sensitive":
        raise ContentFilterError(
            "the answer was blocked by content moderation", request_id=request_id
        )
    if finish_reason == "network_error":
        raise ServerError(
            "Z.AI reported an inference failure (network_error)", request_id=request_id
        )


def _parse_model(response: httpx.Response, model: type[_M]) -> _M:
    """Validate a 200 body; unwrap the ``{code, msg, success, data}`` envelope if present."""
    raw = response.content
    try:
        return model.model_validate_json(raw)
    except ValidationError:
        pass
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise _invalid(response, raw, "the response body is not JSON") from exc
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        raise _status_error(response.status_code, response.headers, raw)
    if isinstance(payload, dict) and "success" in payload and "msg" in payload:
        if payload.get("success") is not True:
            raise error_for(response.status_code, _code(payload.get("code")), str(payload["msg"]))
        payload = payload.get("data")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise _invalid(response, raw, f"the response is not a valid {model.__name__}") from exc


def _invalid(response: httpx.Response, raw: bytes, message: str) -> ResponseValidationError:
    return ResponseValidationError(
        message,
        body=raw.decode("utf-8", errors="replace"),
        status_code=response.status_code,
        request_id=response.headers.get("x-request-id"),
    )


def _status_error(status: int, headers: httpx.Headers, raw: bytes) -> GLMError:
    """Build the typed error for an HTTP error response (Z.AI body, envelope, or anything)."""
    code = None
    text = raw.decode("utf-8", errors="replace")
    message = text.strip()[:300] or f"HTTP {status} with an empty body"
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict):
            code, message = _code(err.get("code")), str(err.get("message", message))
        elif "msg" in payload:
            code, message = _code(payload.get("code")), str(payload["msg"])
    elif "<html" in text[:500].lower():
        message = f"HTTP {status} with an HTML page (a proxy or gateway error?)"
    error: APIStatusError = error_for(
        status,
        code,
        message,
        request_id=headers.get("x-request-id"),
        retry_after=parse_retry_after(headers),
    )
    return error


def _code(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def _api_engine(chat_engine: str) -> str:
    """The chat tool's engine names differ from the Web Search API's (ZAI-PROTOCOL §0.3)."""
    return "search-prime" if chat_engine in {"search_pro_jina", "search_prime"} else chat_engine


def _log_payload(label: str, body: bytes) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: %s", label, redact(body.decode("utf-8", errors="replace"), limit=4000))
