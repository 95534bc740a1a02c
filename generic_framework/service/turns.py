"""Running one turn for an HTTP request, and turning persona events into OpenAI stream chunks.

One turn at a time per conversation: :class:`ConversationLocks` queues turns on the same
conversation id in arrival order (``asyncio.Lock`` is FIFO), across every persona of the
process, so two requests racing on one conversation are both answered and both stored, one
after the other, each seeing the turn before it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio

from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.reply import Citation, Reply
from generic_framework.service.errors import ServiceError, map_exception
from generic_framework.service.schemas import (
    ChatCompletionChunkOut,
    ChatMessageIn,
    ChunkChoiceOut,
    ChunkDeltaOut,
    FinishReason,
    ProgressOut,
    ReplySummaryOut,
    UsageOut,
)
from generic_framework.wire.messages import WebSearchResult

__all__ = [
    "ConversationLocks",
    "PersonaLike",
    "StreamWriter",
    "finish_reason",
    "last_user_text",
    "reply_citations",
    "reply_usage",
    "reply_web_search",
    "sse_body",
    "stream_turn",
]


class PersonaLike(Protocol):
    """What the service needs from a persona (:class:`~generic_framework.core.persona.Persona`)."""

    name: str
    description: str

    async def respond(self, text: str, *, conversation_id: str | None = None) -> Reply:
        """Answer one user message."""
        ...

    def stream(
        self, text: str, *, conversation_id: str | None = None
    ) -> AsyncIterator[PersonaEvent]:
        """Answer one user message as a stream of events."""
        ...


class ConversationLocks:
    """One FIFO lock per conversation id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, conversation_id: str | None) -> AsyncIterator[None]:
        """Hold the conversation's lock for the block; no lock when the id is None."""
        if conversation_id is None:
            yield
            return
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        self._users[conversation_id] = self._users.get(conversation_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[conversation_id] -= 1
            if not self._users[conversation_id]:
                del self._users[conversation_id], self._locks[conversation_id]


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    """The text of an OpenAI message ``content``: a string, or its ``text`` parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ServiceError(
                400, "only text content parts are supported", param="messages", code="unsupported"
            )
        texts.append(part["text"])
    return "".join(texts)


def last_user_text(messages: list[ChatMessageIn], max_chars: int) -> str:
    """The text of the last message, which must be the user's, checked against the limit."""
    last = messages[-1]
    if last.role != "user":
        raise ServiceError(
            400, "the last message must have role 'user'", param="messages", code="invalid_role"
        )
    return checked_text(content_text(last.content), max_chars, param="messages")


def checked_text(text: str, max_chars: int, *, param: str) -> str:
    """``text`` if it is not blank and not longer than ``max_chars`` (BOT_MAX_MESSAGE_CHARS)."""
    if not text.strip():
        raise ServiceError(400, "the message is empty", param=param, code="empty_message")
    if len(text) > max_chars:
        raise ServiceError(
            400,
            f"the message has {len(text)} characters; the limit is {max_chars} "
            "(BOT_MAX_MESSAGE_CHARS)",
            param=param,
            code="message_too_long",
        )
    return text


async def stream_turn(
    persona: PersonaLike, text: str, conversation_id: str | None, locks: ConversationLocks
) -> AsyncGenerator[PersonaEvent, None]:
    """The persona's events for one turn, holding the conversation's lock throughout."""
    async with locks.hold(conversation_id):
        async for event in persona.stream(text, conversation_id=conversation_id):
            yield event


def finish_reason(reply: Reply) -> FinishReason:
    """OpenAI's ``finish_reason`` for a reply's ``stop_reason`` (``max_rounds`` -> ``stop``)."""
    if reply.stop_reason == "length":
        return "length"
    if reply.stop_reason == "content_filter":
        return "content_filter"
    return "stop"


def reply_usage(reply: Reply) -> UsageOut:
    """The reply's token counts, summed over its rounds."""
    u = reply.usage
    return UsageOut(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.total_tokens,
    )


def reply_citations(reply: Reply) -> list[Citation]:
    """The reply's numbered citations."""
    return list(reply.citations)


def reply_web_search(reply: Reply) -> list[WebSearchResult]:
    """The reply's citations in Z.AI's ``web_search[]`` shape (``refer`` = the cited label)."""
    return [
        WebSearchResult(
            title=c.title,
            link=c.url,
            content=c.snippet,
            media=c.site,
            refer=c.ref or f"ref_{c.number}",
            publish_date=c.published,
        )
        for c in reply.citations
    ]


class StreamWriter:
    """Encodes persona events as ``chat.completion.chunk`` SSE frames of one completion."""

    def __init__(self, model: str, conversation_id: str | None = None) -> None:
        self.id = f"chatcmpl-{secrets.token_hex(12)}"
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


async def sse_body(
    writer: StreamWriter, first: PersonaEvent, events: AsyncGenerator[PersonaEvent, None]
) -> AsyncIterator[bytes]:
    """The SSE body: opening chunk, one frame per event, ``[DONE]``.

    A failure after the headers went out becomes a ``data: {"error": {...}}`` frame (what
    OpenAI's and Z.AI's clients raise on) and the stream ends without ``[DONE]``.
    """
    try:
        yield writer.start()
        async for event in _chain((first,), events):
            yield writer.event(event)
            if isinstance(event, Done):
                break
        yield b"data: [DONE]\n\n"
    except Exception as exc:
        error = map_exception(exc)
        yield b"data: " + json.dumps(error.body()).encode() + b"\n\n"
    finally:
        with anyio.CancelScope(shield=True):
            await events.aclose()


async def _chain(
    head: Iterable[PersonaEvent], rest: AsyncIterator[PersonaEvent]
) -> AsyncIterator[PersonaEvent]:
    for event in head:
        yield event
    async for event in rest:
        yield event
