"""Everything that touches the official ``mcp`` SDK: opening a client, and what its errors mean.

Importing the SDK takes about half a second, so nothing here imports it with the package:
:func:`ensure_imported` imports it in a worker thread the first time a persona needs an MCP
server (an application that never uses one never pays for it), and the functions below import
what they use from the already loaded modules.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal, TextIO

from generic_framework import __version__
from generic_framework.mcp_tools.spec import MCPServerSpec

if TYPE_CHECKING:
    import httpx2
    from mcp import Client
    from mcp_types import Tool

__all__ = [
    "ErrorKind",
    "call_signature",
    "classify",
    "describe",
    "ensure_imported",
    "error_detail",
    "leaf",
    "list_all_tools",
    "open_client",
    "request_signature",
    "session_ended",
]

ErrorKind = Literal["timeout", "closed", "unreachable", "refused", "other"]
ResponseHook = Callable[["httpx2.Response"], Awaitable[None]]

_MODULES = ("httpx2", "mcp", "mcp.client.streamable_http", "mcp.shared.exceptions", "mcp_types")
_MAX_PAGES = 20
_loaded: set[str] = set()


def _import_all() -> None:
    for name in _MODULES:
        importlib.import_module(name)


async def ensure_imported() -> None:
    """Import the SDK in a worker thread, once, so the event loop never waits for it."""
    if "sdk" not in _loaded:
        await asyncio.to_thread(_import_all)
        _loaded.add("sdk")


def _command(command: str) -> str:
    """``python`` and ``python3`` run this interpreter: a persona's Python server then sees the
    packages installed next to generic_framework, whatever ``python`` is on ``PATH``."""
    return sys.executable if command in ("python", "python3") else command


async def open_client(
    server: MCPServerSpec,
    stack: AsyncExitStack,
    *,
    seconds: float,
    errlog: TextIO,
    on_response: ResponseHook,
) -> Client:
    """Start ``server`` (spawn it, or open its HTTP endpoint) and enter a connected ``Client``.

    Everything entered is pushed on ``stack``: closing it closes the session, stops the child
    (stdin closed, then SIGTERM and SIGKILL to its process group, each bounded) or ends the HTTP
    session. The handshake is the SDK's ``auto`` mode: ``server/discover``, falling back to
    ``initialize`` for servers of the 2024-2025 protocol revisions (Z.AI's among them).
    """
    import httpx2
    from mcp import Client, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    if server.command is not None:
        parameters = StdioServerParameters(
            command=_command(server.command),
            args=list(server.args),
            env=dict(server.env) or None,
            cwd=server.cwd,
        )
        transport: Any = stdio_client(parameters, errlog=errlog)
    else:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(server.headers),
                # One HTTP request may wait this long; the call's own timeout is shorter.
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [on_response]},
            )
        )
        transport = streamable_http_client(str(server.url), http_client=http)
    client = Client(
        transport,
        mode="auto",
        client_info=Implementation(name="generic-framework", version=__version__),
        read_timeout_seconds=seconds,
        cache=None,
    )
    return await stack.enter_async_context(client)


def session_ended(client: Client) -> bool:
    """True when the client's transport has ended (a stdio child exited, the stream closed).

    The SDK has no public way to ask; its JSON-RPC dispatcher keeps a ``_closed`` flag, read here
    defensively: where it is missing this says False, and the next call finds out instead.
    """
    try:
        dispatcher = client.session._dispatcher
    except RuntimeError:  # the client has left its context
        return True
    return bool(getattr(dispatcher, "_closed", False))


async def list_all_tools(client: Client) -> list[Tool]:
    """Every tool the server lists, following ``nextCursor`` for at most 20 pages."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def call_signature(method: str, params: Any) -> str:
    """A key for one request: its method and canonical params (JSON-RPC ids differ per try)."""
    return method + " " + json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def request_signature(body: bytes) -> str | None:
    """:func:`call_signature` of a JSON-RPC request body, or None when it is not one."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    params = message.get("params") or {}
    if isinstance(params, dict):
        params = {key: value for key, value in params.items() if key != "_meta"}
    return call_signature(str(message["method"]), params)


def error_detail(body: bytes, limit: int) -> str:
    """The message of an error body: Z.AI's ``{"error": {"message"}}``, a JSON-RPC error,
    ``{"message"}``, or the start of the text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:limit]
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg")
        if message:
            return str(message)[:limit]
    return (error if isinstance(error, str) else text)[:limit]


def leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def classify(exc: BaseException) -> ErrorKind:
    """What an error from the SDK or its transports means for the connection.

    ``timeout``: the server did not answer in time (the session may still be fine).
    ``closed``: the connection is gone (the child died, the stream ended): restart it.
    ``unreachable``: the HTTP endpoint could not be reached: reconnect next time.
    ``refused``: the server answered the request with an error; the session is fine.
    """
    import anyio
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    exc = leaf(exc)
    if isinstance(exc, MCPError):
        if exc.code == REQUEST_TIMEOUT:
            return "timeout"
        if exc.code == CONNECTION_CLOSED:
            return "closed"
        return "refused"
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        return "timeout"
    if isinstance(
        exc,
        anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream | EOFError,
    ):
        return "closed"
    if isinstance(exc, httpx2.TransportError | ConnectionError):
        return "unreachable"
    return "other"


def describe(exc: BaseException) -> str:
    """A short text for an error: the server's message for a protocol error, else its type."""
    from mcp.shared.exceptions import MCPError

    exc = leaf(exc)
    if isinstance(exc, MCPError):
        return f"{exc.message} (JSON-RPC error {exc.code})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
