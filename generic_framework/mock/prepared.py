"""Recorded exchanges prepared for serving: keys, response bytes in both forms, fault schedule.

Everything a response needs is computed once, when fixtures are loaded: the normalised key of the
recorded request, the answer as JSON bytes and as SSE frames (a completion recorded one way can
be served the other), the functions the answer calls, and the faults split into delays and the
ordered failure schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generic_framework.mock.fixture import DelayFault, Exchange, Fault, MatchOptions
from generic_framework.mock.normalize import RequestKey, canonical_text, chat_shape
from generic_framework.mock.sse import (
    completion_to_events,
    dumps,
    events_to_completion,
    render_event,
)

__all__ = ["JSON_TYPE", "SSE_TYPE", "PreparedExchange", "prepare", "request_key", "request_kind"]

JSON_TYPE = b"application/json; charset=UTF-8"
SSE_TYPE = b"text/event-stream;charset=UTF-8"
_SKIPPED_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "connection", "content-encoding", "content-type"}
)
# The HTTP status an error frame of a stream gets when a non-streaming request asks for it.
_STATUS_FOR_CODE = {"1113": 429, "1302": 429, "1303": 429, "1305": 429, "1312": 429, "1301": 400}


def request_kind(path: str) -> str:
    """``chat``, ``web_search``, ``reader`` (the Web Reader API), ``mcp`` (an MCP endpoint's
    JSON-RPC request) or ``other``."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/web_search"):
        return "web_search"
    if path.endswith("/paas/v4/reader"):
        return "reader"
    if path.endswith("/mcp"):
        return "mcp"
    return "other"


def _called_functions(response: dict[str, Any] | None) -> frozenset[str]:
    if not isinstance(response, dict):
        return frozenset()
    names: set[str] = set()
    for choice in response.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            function = call.get("function") or {}
            if call.get("type", "function") == "function" and function.get("name"):
                names.add(function["name"])
    return frozenset(names)


@dataclass(slots=True)
class PreparedExchange:
    """One recorded exchange, ready to be served.

    Attributes:
        index: its position in the fixture.
        kind: ``chat``, ``web_search``, ``reader``, ``mcp`` or ``other``.
        path: the recorded request's path (which MCP server a ``tools/call`` went to).
        key: the normalised key of the recorded request.
        stream: whether the recorded request streamed.
        required_functions: functions the recorded answer calls; a request must offer them.
        status: HTTP status of the JSON form.
        headers: response headers (without content type and length).
        json_body: the JSON form's bytes.
        sse_frames: the SSE form's frames, or None when the answer is not a completion.
        tool_stream_frames: for a completion recorded as JSON with tool calls, the SSE form
            with each call's arguments in fragments, served to requests asking for
            ``tool_stream``; None otherwise (a recorded stream is served as recorded).
        delays: delay faults.
        failures: failure faults, in the order they apply.
    """

    index: int
    kind: str
    path: str
    key: RequestKey
    stream: bool
    required_functions: frozenset[str]
    status: int
    headers: list[tuple[bytes, bytes]]
    json_body: bytes
    sse_frames: list[bytes] | None
    tool_stream_frames: list[bytes] | None
    delays: list[DelayFault]
    failures: list[Fault]

    def failure_for(self, attempt: int) -> Fault | None:
        """The failure fault for the ``attempt``-th try (0-based), or None to answer normally."""
        used = 0
        for fault in self.failures:
            times = getattr(fault, "times", 1)
            if times is None or attempt < used + times:
                return fault
            used += times
        return None

    def delay_for(self, attempt: int) -> float:
        """Seconds to wait before answering the ``attempt``-th try."""
        return sum(
            fault.ms / 1000 for fault in self.delays if fault.times is None or attempt < fault.times
        )


def request_key(kind: str, method: str, path: str, body: Any, options: MatchOptions) -> RequestKey:
    """The normalised key of a request of ``kind`` (chat keys depend on ``options``)."""
    if kind == "chat":
        return chat_shape(body if isinstance(body, dict) else {}).key(options)
    if kind == "web_search":
        query = body.get("search_query") if isinstance(body, dict) else None
        return ("web_search", str(query or "").strip())
    if kind == "reader":
        url = body.get("url") if isinstance(body, dict) else None
        return ("reader", str(url or "").strip())
    if kind == "mcp":
        return _mcp_key(body)
    return ("other", method, path)


def _mcp_key(message: Any) -> RequestKey:
    """An MCP request's key: method, tool name, and the search query (else the arguments),
    as the Web Search API is matched by its query: ids and options differ between runs."""
    message = message if isinstance(message, dict) else {}
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    query = arguments.get("search_query")
    detail = str(query).strip() if query is not None else canonical_text(arguments)
    return ("mcp", str(message.get("method", "")), str(params.get("name", "")), detail)


def _json_form(exchange: Exchange) -> tuple[int, bytes]:
    response = exchange.response
    if response.events is None:
        return response.status, dumps(response.body)
    body = events_to_completion(response.events)
    if "error" in body:
        code = str(body["error"].get("code", ""))
        return _STATUS_FOR_CODE.get(code, 500), dumps(body)
    return response.status, dumps(body)


def _sse_form(exchange: Exchange) -> list[bytes] | None:
    response = exchange.response
    if response.status != 200:
        return None
    if response.events is not None:
        return [render_event(event) for event in response.events]
    body = response.body
    if isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]:
        return [render_event(event) for event in completion_to_events(body)]
    return None


def _tool_stream_form(exchange: Exchange) -> list[bytes] | None:
    response, body = exchange.response, exchange.response.body
    if response.status != 200 or response.events is not None or not isinstance(body, dict):
        return None
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict) or not message.get("tool_calls"):
        return None
    return [render_event(event) for event in completion_to_events(body, tool_stream=True)]


def prepare(exchange: Exchange, index: int, options: MatchOptions) -> PreparedExchange:
    """Precompute everything needed to match and serve ``exchange``."""
    request = exchange.request
    kind = request_kind(request.path)
    body = request.body or {}
    status, json_body = _json_form(exchange)
    answer = exchange.response.body
    if exchange.response.events is not None:
        answer = events_to_completion(exchange.response.events)
    return PreparedExchange(
        index=index,
        kind=kind,
        path=request.path,
        key=request_key(kind, request.method, request.path, body, options),
        stream=body.get("stream") is True,
        required_functions=_called_functions(answer),
        status=status,
        headers=[
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in exchange.response.headers.items()
            if name.lower() not in _SKIPPED_HEADERS
        ],
        json_body=json_body,
        sse_frames=_sse_form(exchange),
        tool_stream_frames=_tool_stream_form(exchange),
        delays=[fault for fault in exchange.faults if isinstance(fault, DelayFault)],
        failures=[fault for fault in exchange.faults if not isinstance(fault, DelayFault)],
    )
