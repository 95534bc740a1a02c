"""Streamed turns: persona events as OpenAI ``chat.completion.chunk`` server-sent events.

A :class:`TurnStream` is the response of a streamed request (docs/design/0607):

1. The turn runs in a task of its own from the start, its events queued for the response.
2. The response waits up to ``grace`` seconds (``BOT_STREAM_GRACE``) for the first event. A
   failure within that window (the upstream refused, was rate limited, no slot was free) is
   raised to the app's exception handler and gets its proper status and body. Otherwise the 200
   headers and the opening chunk go out, at the latest when the window ends.
3. One frame per event: text, progress (``round_started``, ``tool_finished``), then the finish
   chunk and ``[DONE]``. When nothing was sent for ``keepalive`` seconds
   (``BOT_STREAM_KEEPALIVE``: a long web search, a slow tool), an SSE comment
   ``: keep-alive`` is. A failure after the headers becomes a ``data: {"error": {...}}`` frame
   and the stream ends without ``[DONE]`` (what OpenAI's and Z.AI's clients raise on).
4. The response listens for ``http.disconnect`` itself, whatever the server's ASGI version
   (Starlette's ``StreamingResponse`` does so only below ASGI 2.4, and then cancels through an
   anyio scope, which cancels every await of the turn's clean-up again). On a disconnect the
   turn's task is cancelled once: the upstream response is closed, the conversation's lock and
   the upstream slot are released, and nothing of the turn is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from generic_framework.config import Settings
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.reply import Reply
from generic_framework.errors import ToolLoopError
from generic_framework.service.errors import map_exception
from generic_framework.service.mapping import (
    completion_id,
    finish_reason,
    reply_citations,
    reply_tool_calls,
    reply_usage,
    reply_web_search,
)
from generic_framework.service.schemas import (
    AnnotationOut,
    ChatCompletionChunkOut,
    ChunkChoiceOut,
    ChunkDeltaOut,
    ProgressOut,
    ReplySummaryOut,
    ToolCallDeltaOut,
)
from generic_framework.service.sources import sources_footer, url_citations

__all__ = [
    "DONE",
    "KEEPALIVE",
    "SSE_HEADERS",
    "StreamWriter",
    "TurnStream",
    "reply_events",
    "turn_stream",
]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""No caching, and no buffering by a reverse proxy (nginx honours ``X-Accel-Buffering``)."""

KEEPALIVE = b": keep-alive\n\n"
"""An SSE comment: clients ignore it; proxies and load balancers see the connection alive."""

DONE = b"data: [DONE]\n\n"


class StreamWriter:
    """Encodes persona events as ``chat.completion.chunk`` SSE frames of one completion.

    Args:
        model: the persona's name (the API's model id).
        conversation_id: the conversation the turn is stored in, if any.
        footer: send the reply's "Sources:" list as a last content delta (``/v1/chat/
            completions``; see :mod:`~generic_framework.service.sources`).
        include_usage: end with OpenAI's usage chunk (no choice), as
            ``stream_options.include_usage`` asks.

    The last chunk's delta carries ``annotations`` (OpenAI's ``url_citation``) pointing at the
    ``[n]`` markers of the text the stream sent, in the offsets of that text.
    """

    def __init__(
        self,
        model: str,
        conversation_id: str | None = None,
        *,
        footer: bool = False,
        include_usage: bool = False,
    ) -> None:
        self.id = completion_id()
        self.created = int(time.time())
        self.model = model
        self.conversation_id = conversation_id
        self.footer = footer
        self.include_usage = include_usage
        self._sent: list[str] = []

    def _frame(self, choice: ChunkChoiceOut, **extra: Any) -> bytes:
        chunk = ChatCompletionChunkOut(
            id=self.id, created=self.created, model=self.model, choices=[choice], **extra
        )
        return b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"

    def start(self) -> bytes:
        """The opening chunk: the assistant role and empty content, as OpenAI sends."""
        delta = ChunkDeltaOut(role="assistant", content="")
        return self._frame(ChunkChoiceOut(delta=delta), conversation_id=self.conversation_id)

    def text(self, text: str) -> bytes:
        """A content delta."""
        self._sent.append(text)
        return self._frame(ChunkChoiceOut(delta=ChunkDeltaOut(role="assistant", content=text)))

    def event(self, event: PersonaEvent) -> bytes:
        """The frames for one persona event (for ``Done``: the footer, if any, and the end)."""
        if isinstance(event, TextDelta):
            return self.text(event.text)
        if isinstance(event, RoundStarted):
            progress = ProgressOut(event="round_started", round=event.round, tools=event.tools)
            return self._frame(ChunkChoiceOut(), progress=progress)
        if isinstance(event, ToolFinished):
            progress = ProgressOut(
                event="tool_finished", name=event.name, ok=event.ok, ms=round(event.ms, 1)
            )
            return self._frame(ChunkChoiceOut(), progress=progress)
        reply = event.reply
        shown = "".join(self._sent)
        annotations = url_citations(shown, reply.citations)
        footer = sources_footer(reply.citations) if self.footer else ""
        frames = [
            self.text(footer) if footer else b"",
            self.calls(reply),
            self.done(reply, annotations),
        ]
        if self.include_usage:
            frames.append(self.usage(reply))
        return b"".join(frames)

    def calls(self, reply: Reply) -> bytes:
        """The client's tool calls, whole, in one delta (nothing when there are none)."""
        calls = reply_tool_calls(reply)
        if not calls:
            return b""
        deltas = [ToolCallDeltaOut(index=i, **c.model_dump()) for i, c in enumerate(calls)]
        return self._frame(ChunkChoiceOut(delta=ChunkDeltaOut(role="assistant", tool_calls=deltas)))

    def done(self, reply: Reply, annotations: list[AnnotationOut] | None = None) -> bytes:
        """The last chunk: ``finish_reason``, ``annotations``, ``usage``, ``web_search`` and the
        stored reply."""
        summary = ReplySummaryOut(
            content=reply.content,
            citations=reply_citations(reply),
            stop_reason=reply.stop_reason,
        )
        delta = ChunkDeltaOut(annotations=annotations or None)
        choice = ChunkChoiceOut(delta=delta, finish_reason=finish_reason(reply))
        return self._frame(
            choice,
            usage=reply_usage(reply),
            web_search=reply_web_search(reply),
            reply=summary,
            conversation_id=self.conversation_id,
        )

    def usage(self, reply: Reply) -> bytes:
        """OpenAI's usage chunk: no choice, the turn's usage (``include_usage``)."""
        chunk = ChatCompletionChunkOut(
            id=self.id, created=self.created, model=self.model, choices=[], usage=reply_usage(reply)
        )
        return b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"

    @staticmethod
    def error(exc: Exception) -> bytes:
        """The error frame for a failure after the stream started (see :func:`map_exception`)."""
        return b"data: " + json.dumps(map_exception(exc).body()).encode() + b"\n\n"


class _Quiet:
    """Nothing arrived in time (see :func:`_next`)."""


_QUIET = _Quiet()
_Item = PersonaEvent | Exception


async def _run(events: AsyncGenerator[PersonaEvent, None], queue: asyncio.Queue[_Item]) -> None:
    """Run the turn: queue its events up to ``Done``, or the exception that ended it.

    The generator is iterated and closed in this one task; a cancellation arrives once, at the
    turn's current await, and its clean-up (locks, the upstream response) runs undisturbed.
    """
    try:
        async with contextlib.aclosing(events) as running:
            async for event in running:
                await queue.put(event)
                if isinstance(event, Done):
                    return
        await queue.put(ToolLoopError("the turn ended without a reply"))
    except Exception as exc:
        await queue.put(exc)


async def _next(queue: asyncio.Queue[_Item], seconds: float) -> _Item | _Quiet:
    """The next item, or :data:`_QUIET` after ``seconds`` (``Queue.get`` loses nothing)."""
    try:
        async with asyncio.timeout(seconds):
            return await queue.get()
    except TimeoutError:
        return _QUIET


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone (the request's body was read by the endpoint)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _body(send: Send, data: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


class TurnStream(Response):
    """The ``text/event-stream`` response of one streamed turn (see the module docstring).

    Args:
        events: the turn (``persona.stream(...)``), not started yet; this response runs it.
        writer: encodes its events.
        grace: seconds to wait for the first event before the headers go out.
        keepalive: longest silence on the stream, in seconds, before a ``: keep-alive``.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        events: AsyncGenerator[PersonaEvent, None],
        writer: StreamWriter,
        *,
        grace: float,
        keepalive: float,
    ) -> None:
        self.events = events
        self.writer = writer
        self.grace = grace
        self.keepalive = keepalive
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the turn and relay it until ``[DONE]``, a failure, or the client leaving.

        Raises:
            Exception: what the turn raised within the grace window (no byte was sent yet).
        """
        queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=1)
        turn = asyncio.create_task(_run(self.events, queue))
        relay = asyncio.create_task(self._relay(send, queue))
        gone = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait((relay, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (relay, gone, turn):
                task.cancel()
            await asyncio.gather(relay, gone, turn, return_exceptions=True)
        if relay.cancelled() or isinstance(relay.exception(), OSError):
            return  # the client went away (an OSError: while a frame was being written)
        failure = relay.result()
        if failure is not None:
            raise failure

    async def _relay(self, send: Send, queue: asyncio.Queue[_Item]) -> Exception | None:
        """Send the stream; return a failure that came before anything was sent."""
        item = await _next(queue, self.grace)
        if isinstance(item, Exception):
            return item
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await _body(send, self.writer.start())
        if isinstance(item, _Quiet):  # the grace window is over: the opening chunk was sent
            item = await _next(queue, self.keepalive)
        while not await self._emit(send, item):
            item = await _next(queue, self.keepalive)
        return None

    async def _emit(self, send: Send, item: _Item | _Quiet) -> bool:
        """Send what ``item`` calls for; True once the stream is over."""
        if isinstance(item, _Quiet):
            await _body(send, KEEPALIVE)
            return False
        if isinstance(item, Exception):
            await _body(send, self.writer.error(item), more=False)
            return True
        await _body(send, self.writer.event(item))
        if isinstance(item, Done):
            await _body(send, DONE, more=False)
            return True
        return False


def turn_stream(
    events: AsyncGenerator[PersonaEvent, None],
    model: str,
    conversation_id: str | None,
    settings: Settings,
    *,
    footer: bool = False,
    include_usage: bool = False,
) -> TurnStream:
    """The :class:`TurnStream` of a turn's ``events`` (not started: the response runs it),
    with the settings' grace and keep-alive (``BOT_STREAM_GRACE``, ``BOT_STREAM_KEEPALIVE``);
    ``footer`` and ``include_usage`` as ``/v1/chat/completions`` asked."""
    writer = StreamWriter(model, conversation_id, footer=footer, include_usage=include_usage)
    grace, keepalive = settings.bot_stream_grace, settings.bot_stream_keepalive
    return TurnStream(events, writer, grace=grace, keepalive=keepalive)


async def reply_events(reply: Reply) -> AsyncGenerator[PersonaEvent, None]:
    """A turn that already ended, as the events of one: its answer in one delta, then
    ``Done`` (a stored turn's answer streamed again: service/idempotency.py)."""
    if reply.content:
        yield TextDelta(reply.content)
    yield Done(reply)
