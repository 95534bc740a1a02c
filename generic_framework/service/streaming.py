"""Streamed turns: persona events as OpenAI ``chat.completion.chunk`` server-sent events.

:func:`event_stream` waits for the turn's first event before committing to a 200 stream, so a
failure before anything was produced (the upstream refused, timed out, was rate limited) is
raised to the app's exception handler and gets its proper status and body. Once the headers
went out, a failure becomes a ``data: {"error": {...}}`` frame and the stream ends without
``[DONE]`` (what OpenAI's and Z.AI's clients raise on).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.reply import Reply
from generic_framework.service.errors import map_exception
from generic_framework.service.mapping import (
    completion_id,
    finish_reason,
    reply_citations,
    reply_usage,
    reply_web_search,
)
from generic_framework.service.schemas import (
    ChatCompletionChunkOut,
    ChunkChoiceOut,
    ChunkDeltaOut,
    ProgressOut,
    ReplySummaryOut,
)
from generic_framework.wire.errors import ToolLoopError

__all__ = ["SSE_HEADERS", "StreamWriter", "event_stream", "sse_body"]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""No caching, and no buffering by a reverse proxy (nginx honours ``X-Accel-Buffering``)."""


class StreamWriter:
    """Encodes persona events as ``chat.completion.chunk`` SSE frames of one completion."""

    def __init__(self, model: str, conversation_id: str | None = None) -> None:
        self.id = completion_id()
        self.created = int(time.time())
        self.model = model
        self.conversation_id = conversation_id

    def _frame(self, choice: ChunkChoiceOut, **extra: Any) -> bytes:
        chunk = ChatCompletionChunkOut(
            id=self.id, created=self.created, model=self.model, choices=[choice], **extra
        )
        return b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"

    def start(self) -> bytes:
        """The opening chunk: the assistant role and empty content, as OpenAI sends."""
        delta = ChunkDeltaOut(role="assistant", content="")
        return self._frame(ChunkChoiceOut(delta=delta), conversation_id=self.conversation_id)

    def event(self, event: PersonaEvent) -> bytes:
        """The frame for one persona event."""
        if isinstance(event, TextDelta):
            delta = ChunkDeltaOut(role="assistant", content=event.text)
            return self._frame(ChunkChoiceOut(delta=delta))
        if isinstance(event, RoundStarted):
            progress = ProgressOut(event="round_started", round=event.round, tools=event.tools)
            return self._frame(ChunkChoiceOut(), progress=progress)
        if isinstance(event, ToolFinished):
            progress = ProgressOut(
                event="tool_finished", name=event.name, ok=event.ok, ms=round(event.ms, 1)
            )
            return self._frame(ChunkChoiceOut(), progress=progress)
        return self.done(event.reply)

    def done(self, reply: Reply) -> bytes:
        """The last chunk: ``finish_reason``, ``usage``, ``web_search`` and the stored reply."""
        summary = ReplySummaryOut(
            content=reply.content,
            citations=reply_citations(reply),
            stop_reason=reply.stop_reason,
        )
        choice = ChunkChoiceOut(finish_reason=finish_reason(reply))
        return self._frame(
            choice,
            usage=reply_usage(reply),
            web_search=reply_web_search(reply),
            reply=summary,
            conversation_id=self.conversation_id,
        )

    @staticmethod
    def error(exc: Exception) -> bytes:
        """The error frame for a failure after the stream started (see :func:`map_exception`)."""
        return b"data: " + json.dumps(map_exception(exc).body()).encode() + b"\n\n"


async def sse_body(
    writer: StreamWriter, first: PersonaEvent, events: AsyncGenerator[PersonaEvent, None]
) -> AsyncIterator[bytes]:
    """The SSE body: opening chunk, one frame per event, ``[DONE]``; closes ``events``.

    Closing the turn's event generator ends the turn, which releases its conversation's lock,
    also when the client disconnects mid-stream (the turn is then cancelled, nothing stored).
    """
    try:
        yield writer.start()
        yield writer.event(first)
        if not isinstance(first, Done):
            async for event in events:
                yield writer.event(event)
                if isinstance(event, Done):
                    break
        yield b"data: [DONE]\n\n"
    except Exception as exc:
        yield writer.error(exc)
    finally:
        with anyio.CancelScope(shield=True):
            await events.aclose()


async def _first_event(events: AsyncGenerator[PersonaEvent, None]) -> PersonaEvent:
    """The turn's first event; on any failure the generator is closed and the error raised."""
    try:
        first = await anext(events, None)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await events.aclose()
        raise
    if first is None:
        raise ToolLoopError("the turn ended without a reply")
    return first


async def event_stream(
    events: AsyncGenerator[PersonaEvent, None], model: str, conversation_id: str | None
) -> StreamingResponse:
    """A 200 ``text/event-stream`` of the turn's ``events``, once its first event is there.

    Raises:
        Exception: whatever the turn raised before its first event (for the exception handler).
    """
    first = await _first_event(events)
    writer = StreamWriter(model, conversation_id)
    return StreamingResponse(
        sse_body(writer, first, events), media_type="text/event-stream", headers=SSE_HEADERS
    )
