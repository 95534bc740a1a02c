"""The mock's MCP endpoints: Z.AI's Coding Plan search and reader routes, replayed from fixtures.

``/api/mcp/web_reader/mcp`` (the Web Reader server, tool ``webReader`` taking ``url``) works
the same way as the search endpoint described below; its ``tools/call`` requests are matched
by tool name and arguments.

``/api/mcp/web_search_prime/mcp`` on the mock's own port speaks MCP's streamable HTTP transport
the way a server of the 2024-2025 protocol revisions does (docs/protocol.md §6b):

- every request needs ``Authorization: Bearer <key>`` (401 with Z.AI's error body otherwise);
- ``initialize`` opens a session and answers with an ``Mcp-Session-Id`` header, which every
  later request must carry (400 without it, 404 for an unknown one); ``DELETE`` ends it;
  ``GET`` (a server-to-client stream) is 405, as the transport allows;
- notifications get 202; ``ping`` an empty result; other methods (``server/discover`` of newer
  clients among them) the JSON-RPC error -32601, so clients fall back to the handshake;
- ``tools/list`` lists the tool names the loaded fixtures call (``web_search_prime`` when none
  does), with Z.AI's arguments;
- ``tools/call`` is answered from the fixtures like any other request: the exchange whose
  recorded request has the same tool name and ``search_query`` (the arguments, for another
  tool), its recorded JSON-RPC response sent with the request's id. The fixtures' faults apply:
  ``http_error`` (status 401 reproduces "Api key not found" on call), ``delay`` (a slow search),
  and a recorded result text of ``"[]"`` is an empty result. A call no fixture answers gets a
  JSON-RPC error naming the closest fixture, so the client shows why.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from generic_framework.mock.asgi import Receive, Scope, Send, read_body, send_bytes, send_error
from generic_framework.mock.catalog import Catalog, Incoming, Selection
from generic_framework.mock.prepared import JSON_TYPE
from generic_framework.mock.sse import dumps
from generic_framework.mock.validation import MockError, check_auth

__all__ = [
    "DEFAULT_TOOL_NAME",
    "MCP_READER_PATH",
    "MCP_SEARCH_PATH",
    "READER_INPUT_SCHEMA",
    "READER_TOOL_NAME",
    "SEARCH_INPUT_SCHEMA",
    "SUPPORTED_VERSIONS",
    "MCPEndpoint",
    "with_id",
]

MCP_SEARCH_PATH = "/api/mcp/web_search_prime/mcp"
MCP_READER_PATH = "/api/mcp/web_reader/mcp"
DEFAULT_TOOL_NAME = "web_search_prime"
READER_TOOL_NAME = "webReader"
SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
SEARCH_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "search_query": {
            "type": "string",
            "description": "The search query; 70 characters or fewer work best.",
        },
        "count": {"type": "integer", "minimum": 1, "maximum": 50},
        "content_size": {"type": "string", "enum": ["medium", "high"]},
        "location": {"type": "string", "enum": ["cn", "us"]},
        "search_domain_filter": {"type": "string"},
        "search_recency_filter": {
            "type": "string",
            "enum": ["oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"],
        },
    },
    "required": ["search_query"],
}
READER_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "The URL of the page to read."},
        "return_format": {"type": "string", "enum": ["markdown", "text"]},
        "retain_images": {"type": "boolean"},
    },
    "required": ["url"],
}
_SEARCH_DESCRIPTION = (
    "Search the web; results as JSON (title, link, content, media, publish_date, refer)."
)
_READER_DESCRIPTION = "Read a web page: its title, main content, metadata and links."
_SESSION = b"mcp-session-id"
_SESSIONS_KEPT = 10_000
_METHOD_NOT_FOUND = -32601
_INVALID_REQUEST = -32600
_PARSE_ERROR = -32700

AnswerFunction = Callable[[Scope, Receive, Send, Selection, bytes], Awaitable[None]]
"""Serves a selected exchange (faults included) with the given success body."""


def with_id(body: bytes, rpc_id: Any) -> bytes:
    """A recorded JSON-RPC response with the id of the request it now answers."""
    message = json.loads(body)
    if isinstance(message, dict):
        message["id"] = rpc_id
    return dumps(message)


def _rpc(rpc_id: Any, *, result: Any = None, error: tuple[int, str] | None = None) -> bytes:
    if error is not None:
        return dumps(
            {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": error[0], "message": error[1]}}
        )
    return dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


class MCPEndpoint:
    """One MCP route of a mock app: the Web Search server, or (``reader=True``) the Web Reader
    server at :data:`MCP_READER_PATH`, whose one tool is ``webReader`` taking ``url``.

    Args:
        api_keys: accepted keys (``None``: any non-empty key).
        answer: the app's way of serving a selected exchange with a given body.
        reader: serve the Web Reader server instead of the Web Search one.
    """

    def __init__(
        self, api_keys: frozenset[str] | None, answer: AnswerFunction, *, reader: bool = False
    ) -> None:
        self.api_keys = api_keys
        self._answer = answer
        self._sessions: set[str] = set()
        self._lock = threading.Lock()
        self.path = MCP_READER_PATH if reader else MCP_SEARCH_PATH
        self._default = READER_TOOL_NAME if reader else DEFAULT_TOOL_NAME
        self._schema = READER_INPUT_SCHEMA if reader else SEARCH_INPUT_SCHEMA
        self._description = _READER_DESCRIPTION if reader else _SEARCH_DESCRIPTION
        self._server = "web-reader" if reader else "web-search-prime"

    def tools(self, catalog: Catalog) -> list[dict[str, Any]]:
        """The listed tools: every tool name the fixtures call on this server, else the
        server's own tool (``web_search_prime``, or ``webReader``)."""
        names: list[str] = []
        for state in catalog.states:
            for exchange in state.exchanges:
                name = exchange.key[2] if exchange.kind == "mcp" else None
                if name and exchange.path == self.path and name not in names:
                    names.append(str(name))
        return [
            {"name": name, "description": self._description, "inputSchema": self._schema}
            for name in names or [self._default]
        ]

    def end_sessions(self) -> None:
        """Forget every session, as a restarted server does (later requests on them get 404)."""
        with self._lock:
            self._sessions.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send, catalog: Catalog) -> None:
        """Answer one HTTP request to the endpoint."""
        method = scope["method"]
        if method not in ("POST", "DELETE"):
            allow = [(b"allow", b"POST, DELETE")]
            await send_bytes(send, 405, b"text/plain", b"Method Not Allowed", allow)
            return
        try:
            raw = await read_body(receive)
            check_auth(scope["headers"], self.api_keys)
        except MockError as error:
            catalog.note_rejected()
            await send_error(send, error)
            return
        if method == "DELETE":
            await self._end_session(scope, send)
            return
        await self._post(scope, receive, send, catalog, raw)

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, catalog: Catalog, raw: bytes
    ) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            await send_bytes(send, 400, JSON_TYPE, _rpc(None, error=(_PARSE_ERROR, "Parse error")))
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            error = (_INVALID_REQUEST, "Invalid Request: one JSON-RPC message per POST")
            await send_bytes(send, 400, JSON_TYPE, _rpc(None, error=error))
            return
        if message["method"] == "initialize":
            await self._initialize(send, message)
        elif "id" not in message:
            await send_bytes(send, 202, JSON_TYPE, b"")
        elif await self._session_ok(scope, send, message["id"]):
            await self._request(scope, receive, send, catalog, message)

    async def _initialize(self, send: Send, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        version = asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]
        session = uuid.uuid4().hex
        with self._lock:
            if len(self._sessions) >= _SESSIONS_KEPT:
                self._sessions.clear()
            self._sessions.add(session)
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": f"{self._server} (generic_framework mock)", "version": "1"},
        }
        body = _rpc(message.get("id"), result=result)
        await send_bytes(send, 200, JSON_TYPE, body, [(_SESSION, session.encode())])

    async def _session_ok(self, scope: Scope, send: Send, rpc_id: Any) -> bool:
        session = _header(scope, _SESSION)
        if session is None:
            error = (_INVALID_REQUEST, "Bad Request: the Mcp-Session-Id header is required")
            await send_bytes(send, 400, JSON_TYPE, _rpc(rpc_id, error=error))
            return False
        with self._lock:
            known = session in self._sessions
        if not known:
            error = (_INVALID_REQUEST, "Session not found")
            await send_bytes(send, 404, JSON_TYPE, _rpc(rpc_id, error=error))
        return known

    async def _end_session(self, scope: Scope, send: Send) -> None:
        session = _header(scope, _SESSION)
        with self._lock:
            known = session in self._sessions
            self._sessions.discard(session or "")
        await send_bytes(send, 200 if known else 404, b"text/plain", b"")

    async def _request(
        self, scope: Scope, receive: Receive, send: Send, catalog: Catalog, message: dict[str, Any]
    ) -> None:
        rpc_id, method = message["id"], message["method"]
        if method == "tools/list":
            body = _rpc(rpc_id, result={"tools": self.tools(catalog)})
        elif method == "ping":
            body = _rpc(rpc_id, result={})
        elif method != "tools/call":
            body = _rpc(rpc_id, error=(_METHOD_NOT_FOUND, f"Method not found: {method}"))
        else:
            try:
                selection = catalog.select(Incoming.parse("POST", scope["path"], message))
            except MockError as error:
                body = _rpc(rpc_id, error=(-32000, f"{error.code}: {error.message}"))
            else:
                answer = with_id(selection.exchange.json_body, rpc_id)
                await self._answer(scope, receive, send, selection, answer)
                return
        await send_bytes(send, 200, JSON_TYPE, body)
