"""Server-sent events in Z.AI's layout, and conversion between a completion and its stream.

Z.AI's stream (docs/protocol.md §4): ``data: <json>\\n\\n`` frames, no ``event:`` lines, ``role`` on
every delta except tool-call-only ones, no ``finish_reason`` key before the last chunk, which
carries ``finish_reason``, ``usage`` and the top-level ``web_search[]``; then ``data: [DONE]``.

A fixture recorded without streaming can answer a streaming request (and the other way round):
:func:`completion_to_events` splits a completion into chunks in that layout (a request with
``tool_stream: true`` gets each call's arguments in fragments), and
:func:`events_to_completion` assembles a stream into one completion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from generic_framework.wire.sse import ToolCallFragments

__all__ = [
    "DONE",
    "completion_to_events",
    "dumps",
    "events_to_completion",
    "parse_sse",
    "render_event",
]

DONE = "[DONE]"
_WORDS_PER_CHUNK = 3
_ARGUMENT_CHARS = 12
_WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, as Z.AI writes them."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def render_event(event: dict[str, Any] | str) -> bytes:
    """One SSE frame for an event (a JSON object, or the ``[DONE]`` marker)."""
    payload = event.encode() if isinstance(event, str) else dumps(event)
    return b"data: " + payload + b"\n\n"


def parse_sse(text: str) -> list[dict[str, Any] | str]:
    """Parse an SSE body into its ``data:`` payloads (JSON objects, or raw strings).

    Comment lines and other fields are skipped; multi-line data is joined with newlines.
    """
    events: list[dict[str, Any] | str] = []
    for block in re.split(r"\r?\n\r?\n", text):
        data = [
            line[5:].removeprefix(" ") for line in block.splitlines() if line.startswith("data:")
        ]
        if not data:
            continue
        payload = "\n".join(data)
        try:
            parsed = json.loads(payload)
        except ValueError:
            events.append(payload)
            continue
        events.append(parsed if isinstance(parsed, dict) else payload)
    return events


def _pieces(text: str | None) -> list[str]:
    if not text:
        return []
    words = _WORD_BOUNDARY.split(text)
    return [
        "".join(words[start : start + _WORDS_PER_CHUNK])
        for start in range(0, len(words), _WORDS_PER_CHUNK)
    ]


def _argument_pieces(arguments: Any) -> list[str]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    if not text:
        return [""]
    return [text[start : start + _ARGUMENT_CHARS] for start in range(0, len(text), _ARGUMENT_CHARS)]


def _call_fragments(call: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """One call as ``tool_stream`` sends it: id, type and name on the first fragment only,
    the arguments in pieces, every fragment with the call's ``index`` (docs/protocol.md §4)."""
    function = call.get("function") or {}
    pieces = _argument_pieces(function.get("arguments"))
    first = {
        "id": call.get("id"),
        "index": index,
        "type": call.get("type", "function"),
        "function": {"name": function.get("name"), "arguments": pieces[0]},
    }
    rest = [{"index": index, "function": {"arguments": piece}} for piece in pieces[1:]]
    return [first, *rest]


def completion_to_events(
    body: dict[str, Any], *, tool_stream: bool = False
) -> list[dict[str, Any] | str]:
    """Split a chat completion into stream chunks (reasoning, content, calls, final), then DONE.

    Each tool call is one chunk, as Z.AI streams calls without ``tool_stream``; with
    ``tool_stream`` its arguments come in fragments of a few characters, one chunk each.
    """
    base = {
        "id": body.get("id", ""),
        "created": body.get("created"),
        "object": "chat.completion.chunk",
        "model": body.get("model", ""),
    }
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    events: list[dict[str, Any] | str] = []

    def chunk(delta: dict[str, Any]) -> None:
        events.append({**base, "choices": [{"index": 0, "delta": delta}]})

    for piece in _pieces(message.get("reasoning_content")):
        chunk({"role": "assistant", "reasoning_content": piece})
    for piece in _pieces(message.get("content")):
        chunk({"role": "assistant", "content": piece})
    for number, call in enumerate(message.get("tool_calls") or ()):
        index = call.get("index", number)
        if tool_stream:
            for fragment in _call_fragments(call, index):
                chunk({"tool_calls": [fragment]})
        else:
            chunk({"tool_calls": [{**call, "index": index}]})
    final: dict[str, Any] = {
        **base,
        "choices": [
            {
                "index": 0,
                "finish_reason": choice.get("finish_reason") or "stop",
                "delta": {"role": "assistant", "content": ""},
            }
        ],
    }
    for extra in ("usage", "web_search"):
        if body.get(extra) is not None:
            final[extra] = body[extra]
    events.append(final)
    events.append(DONE)
    return events


def _add_fragment(calls: ToolCallFragments, fragment: dict[str, Any]) -> None:
    """Fold one ``tool_calls`` fragment in with the client's rule (see ToolCallFragments)."""
    function = fragment.get("function") or {}
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    calls.add(
        int(fragment.get("index", len(calls.calls))),
        id=fragment.get("id"),
        type=fragment.get("type"),
        name=function.get("name"),
        arguments=arguments,
    )


def _call_dicts(calls: ToolCallFragments) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": call.type,
            "index": index,
            "function": {"name": call.name, "arguments": "".join(call.arguments)},
        }
        for index, call in calls.in_order()
    ]


class _Assembly:
    """What a stream's events add up to; one event at a time."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls = ToolCallFragments()
        self.head: dict[str, Any] = {}
        self.tail: dict[str, Any] = {}
        self.finish: str | None = None

    def add(self, event: dict[str, Any]) -> None:
        if not self.head and event.get("id"):
            self.head = {key: event.get(key) for key in ("id", "created", "model")}
        for choice in event.get("choices") or ():
            self._add_choice(choice)
        self.tail.update({k: event[k] for k in ("usage", "web_search") if event.get(k) is not None})

    def _add_choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        self.content.append(delta.get("content") or "")
        self.reasoning.append(delta.get("reasoning_content") or "")
        for fragment in delta.get("tool_calls") or ():
            _add_fragment(self.calls, fragment)
        self.finish = choice.get("finish_reason") or self.finish

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if any(self.reasoning):
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls.calls:
            message["tool_calls"] = _call_dicts(self.calls)
        return {
            "id": self.head.get("id", ""),
            "request_id": self.head.get("id", ""),
            "created": self.head.get("created"),
            "model": self.head.get("model", ""),
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": self.finish, "message": message}],
            **self.tail,
        }


def events_to_completion(events: Sequence[dict[str, Any] | str]) -> dict[str, Any]:
    """Assemble stream events into the completion a non-streaming request would get.

    An ``{"error": ...}`` frame makes the result that error body instead.
    """
    assembly = _Assembly()
    for event in events:
        if not isinstance(event, dict):
            continue
        if "error" in event and not event.get("choices"):
            return {"error": event["error"]}
        assembly.add(event)
    return assembly.completion()
