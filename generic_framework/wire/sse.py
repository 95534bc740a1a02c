"""Server-sent events: an incremental decoder and the assembly of GLM stream chunks.

:class:`SSEDecoder` takes bytes in whatever pieces the network delivers and yields the ``data``
payload of each complete event; any split of the same byte stream yields the same events.
:class:`StreamAssembler` folds :class:`~generic_framework.wire.messages.ChatCompletionChunk` values
into one :class:`~generic_framework.wire.messages.ChatCompletion`: text and reasoning concatenated,
``tool_stream`` fragments joined by ``index`` (id and name kept from the first fragment that has
them), and ``usage`` / ``web_search[]`` taken from the chunk that carries them (the last one).

The functions at the end connect the two to an ``httpx`` response: :func:`event_data` reads the
``data`` of each event with an idle bound, :func:`check_error_frame` turns an
``{"error": ...}`` frame into its typed error, :func:`fold_chunk` turns a frame into stream
events, and :func:`replay` presents a whole completion as a stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from typing import cast

import httpx
from pydantic import ValidationError

from generic_framework.wire.errors import ResponseValidationError, error_for
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChunkChoice,
    ContentDelta,
    Delta,
    FunctionCall,
    ReasoningDelta,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    Usage,
    WebSearchResult,
)

__all__ = [
    "DONE",
    "PartialCall",
    "SSEDecoder",
    "StreamAssembler",
    "ToolCallFragments",
    "check_error_frame",
    "event_data",
    "fold_chunk",
    "read_timeout",
    "replay",
]

DONE = "[DONE]"


class SSEDecoder:
    """Incremental SSE parser that yields each event's ``data`` (multi-line data joined by \\n).

    Comment lines (``:``) and fields other than ``data`` are ignored; ``\\r\\n``, ``\\r`` and
    ``\\n`` line endings are all accepted.
    """

    __slots__ = ("_buffer", "_data", "_has_data")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> Iterator[str]:
        """Add bytes; yield the data of every event they complete."""
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            # A lone trailing \r may be the first half of \r\n: keep it for the next chunk.
            keep_cr = buffer.endswith(b"\r")
            if keep_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buffer += b"\r"
        *lines, self._buffer = buffer.split(b"\n")
        for raw in lines:
            event = self._line(raw)
            if event is not None:
                yield event

    def flush(self) -> Iterator[str]:
        """End of stream: yield a final event that was not followed by a blank line."""
        rest, self._buffer = self._buffer.rstrip(b"\r"), b""
        if rest:
            self._line(rest)
        if self._has_data:
            yield self._take()

    def _line(self, raw: bytes) -> str | None:
        if not raw:
            return self._take() if self._has_data else None
        if raw.startswith(b":"):
            return None
        name, _, value = raw.partition(b":")
        if name == b"data":
            text = value.decode("utf-8", errors="replace")
            self._data.append(text[1:] if text.startswith(" ") else text)
            self._has_data = True
        return None

    def _take(self) -> str:
        data = "\n".join(self._data)
        self._data.clear()
        self._has_data = False
        return data


@dataclass(slots=True)
class PartialCall:
    """One tool call being assembled from stream fragments."""

    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallFragments:
    """Tool calls assembled from stream fragments, by ``index``: the one rule for every stream.

    Used by :class:`StreamAssembler` (the client) and by the mock when it turns a recorded
    stream back into a completion, so both read a stream the same way:

    - the first non-empty ``id`` of an index is kept (later fragments may omit or repeat it);
    - ``type`` is the last one given (``function`` when none is);
    - a ``name`` equal to the name so far is a repeat and ignored; any other piece is appended,
      so a name split across fragments comes out whole;
    - ``arguments`` pieces are concatenated in order.
    """

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[int, PartialCall] = {}

    def add(
        self,
        index: int,
        *,
        id: str | None = None,
        type: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
    ) -> None:
        """Fold one fragment in."""
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = PartialCall()
        if id and not call.id:
            call.id = id
        if type:
            call.type = type
        if name and name != call.name:
            call.name += name
        if arguments:
            call.arguments.append(arguments)

    def in_order(self) -> list[tuple[int, PartialCall]]:
        """The calls sorted by index."""
        return sorted(self.calls.items())


@dataclass(slots=True)
class StreamAssembler:
    """Accumulates stream chunks into a completion; see the module docstring."""

    id: str = ""
    model: str = ""
    created: int | None = None
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: ToolCallFragments = field(default_factory=ToolCallFragments)
    finish_reason: str | None = None
    usage: Usage | None = None
    web_search: list[WebSearchResult] | None = None

    def add(self, chunk: ChatCompletionChunk) -> tuple[str | None, str | None]:
        """Fold one chunk in; return its (content, reasoning) text, if any, for live display."""
        self.id = self.id or chunk.id
        self.model = self.model or chunk.model
        self.created = self.created or chunk.created
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.web_search:
            self.web_search = chunk.web_search
        text = reasoning = None
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text = delta.content
                self.content.append(text)
            if delta.reasoning_content:
                reasoning = delta.reasoning_content
                self.reasoning.append(reasoning)
            if delta.tool_calls:
                for fragment in delta.tool_calls:
                    self._add_call(fragment)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return text, reasoning

    def _add_call(self, fragment: ToolCallDelta) -> None:
        function = fragment.function
        self.calls.add(
            fragment.index,
            id=fragment.id,
            type=fragment.type,
            name=function.name if function is not None else None,
            arguments=function.arguments if function is not None else None,
        )

    @property
    def finished(self) -> bool:
        """True once a chunk carried a finish_reason."""
        return self.finish_reason is not None

    def completion(self) -> ChatCompletion:
        """The assembled completion."""
        tool_calls = [
            ToolCall(
                id=call.id or f"call_{index}",
                type=call.type,
                index=index,
                function=FunctionCall(name=call.name, arguments="".join(call.arguments)),
            )
            for index, call in self.calls.in_order()
        ]
        message = AssistantMessage(
            content="".join(self.content),
            reasoning_content="".join(self.reasoning) or None,
            tool_calls=tool_calls or None,
        )
        return ChatCompletion(
            id=self.id,
            request_id=self.id or None,
            created=self.created,
            model=self.model,
            object="chat.completion",
            choices=[Choice(index=0, finish_reason=self.finish_reason, message=message)],
            usage=self.usage,
            web_search=self.web_search,
        )


# ---------------------------------------------------------------------- over httpx


def read_timeout(response: httpx.Response) -> float | None:
    """The read timeout the response's request was sent with (None: no limit)."""
    timeouts = response.request.extensions.get("timeout") or {}
    value = timeouts.get("read")
    return None if value is None else float(value)


async def event_data(response: httpx.Response) -> AsyncGenerator[str, None]:
    """Decode SSE ``data`` payloads; no byte for the read timeout -> ``httpx.ReadTimeout``."""
    decoder = SSEDecoder()
    idle = read_timeout(response)
    pieces = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    try:
        while True:
            try:
                async with asyncio.timeout(idle):
                    piece = await anext(pieces)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"the stream sent nothing for {idle:g}s", request=response.request
                ) from None
            for data in decoder.feed(piece):
                yield data
    finally:
        await pieces.aclose()
    for data in decoder.flush():
        yield data


async def replay(completion: ChatCompletion) -> AsyncGenerator[str, None]:
    """A whole completion (a server that ignored ``stream``) as one final chunk and [DONE]."""
    message = completion.message
    calls = [
        ToolCallDelta(index=i, id=call.id, type=call.type, function=call.function)
        for i, call in enumerate(message.tool_calls or ())
    ]
    delta = Delta(
        role="assistant",
        content=message.content,
        reasoning_content=message.reasoning_content,
        tool_calls=calls or None,
    )
    chunk = ChatCompletionChunk(
        id=completion.id,
        created=completion.created,
        model=completion.model,
        choices=[ChunkChoice(index=0, delta=delta, finish_reason=completion.finish_reason)],
        usage=completion.usage,
        web_search=completion.web_search,
    )
    yield chunk.model_dump_json(exclude_none=True)
    yield DONE


def check_error_frame(data: str) -> None:
    """Raise the typed error of a ``data: {"error": ...}`` frame; other data passes.

    Z.AI reports most failures inside a 200 stream through ``finish_reason``, but gateways
    and the official SDK also know a frame holding only an error object.
    """
    if not data.startswith("{") or '"error"' not in data[:40]:
        return
    try:
        payload = json.loads(data)
    except ValueError:
        return
    if not isinstance(payload, dict) or "choices" in payload:
        return
    err = payload.get("error")
    if isinstance(err, dict):
        message = str(err.get("message") or "the stream reported an error")
        code = err.get("code")
        raise error_for(None, None if code in (None, "") else str(code), message)
    if isinstance(err, str) and err:
        raise error_for(None, None, err)


def fold_chunk(assembler: StreamAssembler, data: str) -> tuple[StreamEvent, ...]:
    """Parse one frame into ``assembler``; return the events it gives the caller, in order."""
    try:
        chunk = ChatCompletionChunk.model_validate_json(data)
    except ValidationError as exc:
        raise ResponseValidationError("a stream chunk was not valid JSON", body=data) from exc
    text, reasoning = assembler.add(chunk)
    if text and reasoning:  # reasoning comes first in GLM's output order
        return ReasoningDelta(text=reasoning), ContentDelta(text=text)
    if text:
        return (ContentDelta(text=text),)
    if reasoning:
        return (ReasoningDelta(text=reasoning),)
    return ()
