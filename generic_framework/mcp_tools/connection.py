"""One MCP server's session: started on first use, reused across turns, restarted after a loss.

The SDK's client is a stack of anyio context managers (the child process or HTTP client, the
transport's task group, the session), which must be entered and left by one task. A turn of a
service runs in a request's task, the next turn in another, and the runtime closes in a third;
so each :class:`MCPConnection` keeps one *holder* task that enters the client, reports it ready,
and waits to be told to stop. Calls from any task go through the session's memory streams.

Failures never escape as exceptions of the SDK: every one becomes an :class:`MCPFailure` whose
text tells the model (and the log) what happened. A lost connection (the child died, the
endpoint went away) marks the session broken; the next use stops what is left of it and starts a
new one. A server that fails to start is not tried again for :data:`RESTART_BACKOFF` seconds,
so a broken server costs one failed start per few seconds, not one per turn.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any

from generic_framework.mcp_tools import sdk
from generic_framework.mcp_tools.spec import MCPServerSpec
from generic_framework.mcp_tools.stderr import StderrPipe
from generic_framework.redaction import redact
from generic_framework.tools.base import ToolError

if TYPE_CHECKING:
    import httpx2
    from mcp import Client

__all__ = ["MIN_START_TIMEOUT", "RESTART_BACKOFF", "Listing", "MCPConnection", "MCPFailure"]

logger = logging.getLogger("generic_framework.mcp")

RESTART_BACKOFF = 5.0
"""Seconds after a failed start during which the server is not started again."""

MIN_START_TIMEOUT = 30.0
"""Starting a server (spawn, handshake, ``tools/list``) may take at least this long, whatever
the call timeout: an interpreter importing the SDK, or ``npx`` fetching a package, is slower
than a tool call should be."""

_STOP_TIMEOUT = 15.0  # the SDK's own stdio shutdown is bounded at about 6.5 s
_CALL_GRACE = 2.0  # the SDK times a call out itself; this outer bound only catches a hang
_HTTP_ERRORS_KEPT = 64
_TEXT_LIMIT = 2000
_BODY_SHOWN = 300
_GENERIC = "Server returned an error response"  # the SDK's text for any HTTP error status


class MCPFailure(ToolError):
    """An MCP server could not answer; ``str(failure)`` is the sentence the model reads.

    Attributes:
        kind: ``start`` (the server did not start), ``timeout``, ``closed`` (the connection
            was lost), ``unreachable``, ``expired`` (an HTTP server forgot the session),
            ``refused`` (the server answered with an error), or ``other``.
    """

    def __init__(self, text: str, *, kind: str = "other") -> None:
        super().__init__(redact(text, _TEXT_LIMIT))
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Listing:
    """The tools a session listed, and which session (1, 2... per restart) listed them."""

    tools: tuple[Any, ...]
    generation: int


class MCPConnection:
    """The session with one MCP server (a spec whose ``${VAR}`` references are expanded).

    Args:
        server: the server.
        timeout: seconds for each call when the spec sets none; starting may take that long,
            and at least :data:`MIN_START_TIMEOUT`.
    """

    def __init__(self, server: MCPServerSpec, *, timeout: float) -> None:
        self.server = server
        self.timeout = server.timeout or timeout
        self.start_timeout = max(self.timeout, MIN_START_TIMEOUT)
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._listing: Listing | None = None
        self._known: Listing | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future[Client] | None = None
        self._stderr: StderrPipe | None = None
        self._broken = False
        self._failed: tuple[float, str] | None = None
        self._generation = 0
        self._http_errors: dict[str, str] = {}
        self._last_http_error: str | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"MCPConnection(name={self.server.name!r}, transport={self.server.transport!r})"

    @property
    def name(self) -> str:
        """The server's name."""
        return self.server.name

    @property
    def running(self) -> bool:
        """True while a session is open and not known to be broken (or ended)."""
        client = self._client
        return client is not None and not self._broken and not sdk.session_ended(client)

    @property
    def known(self) -> Listing | None:
        """The tools of the last session that started (kept while the server is down)."""
        return self._known

    async def listing(self) -> Listing:
        """The server's tools (the session is started first when needed).

        Raises:
            MCPFailure: the server could not be started or listed.
        """
        await self._session()
        if self._listing is None:  # pragma: no cover - set together with the client
            raise MCPFailure(f"the MCP server {self.name!r} listed no tools")
        return self._listing

    async def call(
        self, tool: str, arguments: dict[str, Any], *, seconds: float | None = None
    ) -> Any:
        """Call ``tool`` and return its ``CallToolResult`` (``is_error`` results included).

        Raises:
            MCPFailure: the call could not be made or answered (start failure, timeout, lost
                connection, an error answer such as HTTP 401).
        """
        limit = seconds or self.timeout
        for attempt in (1, 2):
            client = await self._session()
            generation = self._generation
            try:
                async with asyncio.timeout(limit + _CALL_GRACE):
                    return await client.call_tool(tool, arguments, read_timeout_seconds=limit)
            except Exception as exc:
                if self._closed:  # the runtime closed under the call: not the server's fault
                    closed = f"the MCP server {self.name!r} was closed with its runtime"
                    raise MCPFailure(closed, kind="closed") from None
                failure = self._call_failure(exc, tool, arguments, limit)
                if failure.kind in ("closed", "unreachable", "expired"):
                    self._mark_broken(generation, str(failure))
                # An expired HTTP session refused the call unrun: once more on a new session.
                if failure.kind != "expired" or attempt == 2:
                    raise failure from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Stop the session (and a stdio server's process); later uses fail. Idempotent."""
        self._closed = True
        async with self._lock:
            await self._stop_holder()

    # ------------------------------------------------------------------ the session

    async def _session(self) -> Client:
        if self._closed:
            raise MCPFailure(f"the MCP server {self.name!r} was closed with its runtime")
        client = self._client
        if client is not None and not self._broken:
            if not sdk.session_ended(client):
                return client
            # Died between two uses (nothing was in flight): restart before the next request.
            self._mark_broken(
                self._generation,
                f"the MCP server {self.name!r} stopped since its last use; it is restarted",
            )
        async with self._lock:
            if self._closed:
                raise MCPFailure(f"the MCP server {self.name!r} was closed with its runtime")
            if self._client is not None and not self._broken:
                return self._client
            await self._stop_holder()
            if self._failed is not None and monotonic() - self._failed[0] < RESTART_BACKOFF:
                raise MCPFailure(self._failed[1], kind="start")
            return await self._start()

    async def _start(self) -> Client:
        await sdk.ensure_imported()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        self._ready, self._stop, self._last_http_error = ready, stop, None
        self._holder = asyncio.create_task(self._hold(ready, stop), name=repr(self))
        try:
            async with asyncio.timeout(self.start_timeout):
                client = await asyncio.shield(ready)
                tools = await sdk.list_all_tools(client)
        except Exception as exc:
            await self._stop_holder()
            failure = self._start_failure(exc)
            self._failed = (monotonic(), str(failure))
            logger.warning("%s", failure)
            raise failure from None
        except BaseException:
            await self._stop_holder()
            raise
        self._generation += 1
        self._client, self._broken, self._failed = client, False, None
        self._listing = self._known = Listing(tuple(tools), self._generation)
        logger.info(
            "MCP server %r started (%s, session %d): %d tool(s): %s",
            self.name,
            self.server.transport,
            self._generation,
            len(tools),
            ", ".join(tool.name for tool in tools) or "none",
        )
        return client

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """The holder task: enter the client, hand it over, keep it until told to stop."""
        pipe = StderrPipe(self.name) if self.server.transport == "stdio" else None
        self._stderr = pipe
        try:
            async with AsyncExitStack() as stack:
                if pipe is not None:
                    stack.callback(pipe.close)
                    await pipe.start()
                client = await sdk.open_client(
                    self.server,
                    stack,
                    seconds=self.timeout,
                    errlog=pipe.file if pipe is not None else sys.stderr,
                    on_response=self._note_http,
                )
                if pipe is not None:
                    pipe.spawned()
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.debug("MCP server %r: the session ended with %s", self.name, exc)
        finally:
            if not ready.done():
                ready.cancel()

    async def _stop_holder(self) -> None:
        """Tell the holder to leave the client (which stops a child process) and wait."""
        holder, stop, ready = self._holder, self._stop, self._ready
        self._holder = self._stop = self._ready = None
        self._client, self._listing = None, None
        if holder is None:
            return
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), _STOP_TIMEOUT)
        except TimeoutError:
            holder.cancel()
            with suppress(asyncio.CancelledError):
                await holder
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()  # retrieved: a failed start was reported through _start already

    def _mark_broken(self, generation: int, why: str) -> None:
        if generation == self._generation and not self._broken:
            self._broken = True
            logger.warning("%s", why)

    # ------------------------------------------------------------------ what went wrong

    async def _note_http(self, response: httpx2.Response) -> None:
        """Keep the HTTP status (and the server's message) of failed requests: the SDK reports
        only a generic error. The body is read here; the SDK gets it from httpx2's cache."""
        # GET opens the optional server-to-client stream; a 405 there is a normal answer.
        if response.status_code < 400 or response.request.method != "POST":
            return
        status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        with suppress(Exception):
            detail = sdk.error_detail(await response.aread(), _BODY_SHOWN)
            if detail:
                status = f"{status}: {detail}"
        self._last_http_error = status
        signature = sdk.request_signature(response.request.content)
        if signature is not None:
            if len(self._http_errors) >= _HTTP_ERRORS_KEPT:
                self._http_errors.clear()
            self._http_errors[signature] = status

    def _start_failure(self, exc: Exception) -> MCPFailure:
        if isinstance(exc, TimeoutError):
            why = f"it did not start and list its tools within {self.start_timeout:g} seconds"
        elif self._last_http_error is not None:
            why = f"it answered {self._last_http_error}"
        else:
            why = sdk.describe(exc)
        tail = self._stderr.summary() if self._stderr is not None else ""
        if tail:
            why += f"; its stderr ended with: {tail}"
        return MCPFailure(f"the MCP server {self.name!r} could not be started: {why}", kind="start")

    def _call_failure(
        self, exc: Exception, tool: str, arguments: dict[str, Any], limit: float
    ) -> MCPFailure:
        kind = sdk.classify(exc)
        server = f"the MCP server {self.name!r}"
        if kind == "timeout":
            text = f"{server} did not answer {tool!r} within {limit:g} seconds"
        elif kind in ("closed", "unreachable"):
            text = (
                f"the connection to {server} was lost during the call ({sdk.describe(exc)}; "
                "the server may have crashed or stopped); it is restarted for the next call"
            )
        else:
            signature = sdk.call_signature("tools/call", {"name": tool, "arguments": arguments})
            status = self._http_errors.pop(signature, None)
            detail = sdk.describe(exc)
            if status is not None and status.startswith("HTTP 404"):
                # The spec's answer to a request on a session the server no longer knows.
                text = f"{server} no longer knows the session ({status}); a new one is opened"
                return MCPFailure(text, kind="expired")
            if status is not None:
                text = f"{server} refused the call with {status}"
                if _GENERIC not in detail:
                    text += f" ({detail})"
                if " 401 " in f"{status} " or " 403 " in f"{status} ":
                    text += "; check the credentials sent to it (the Authorization header)"
            elif kind == "refused":
                text = f"{server} answered the call with an error: {detail}"
            else:
                text = f"{server} failed during the call: {detail}"
        return MCPFailure(text, kind=kind)
