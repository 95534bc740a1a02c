"""Server-sent events: an incremental decoder and the assembly of GLM stream chunks.

:class:`SSEDecoder` takes bytes in whatever pieces the network delivers and yields the ``data``
payload of each complete event; any split of the same byte stream yields the same events.
:class:`StreamAssembler` folds :class:`~generic_framework.messages.ChatCompletionChunk` values
into one :class:`~generic_framework.messages.ChatCompletion`: text and reasoning concatenated,
``tool_stream`` fragments joined by ``index`` (id and name kept from the first fragment that has
them), and ``usage`` / ``web_search[]`` taken from the chunk that carries them (the last one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from generic_framework.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    FunctionCall,
    ToolCall,
    ToolCallDelta,
    Usage,
    WebSearchResult,
)

__all__ = ["DONE", "SSEDecoder", "StreamAssembler"]

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
class _PartialCall:
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StreamAssembler:
    """Accumulates stream chunks into a completion; see the module docstring."""

    id: str = ""
    model: str = ""
    created: int | None = None
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
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
        call = self.calls.get(fragment.index)
        if call is None:
            call = self.calls[fragment.index] = _PartialCall()
        if fragment.id and not call.id:
            call.id = fragment.id
        if fragment.type:
            call.type = fragment.type
        if fragment.function is not None:
            if fragment.function.name and not call.name:
                call.name = fragment.function.name
            if fragment.function.arguments:
                call.arguments.append(fragment.function.arguments)

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
            for index, call in sorted(self.calls.items())
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
