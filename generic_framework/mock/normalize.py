"""Normalised request shapes: what two requests must share to get the same recorded answer.

A chat request is reduced to its messages (role, content, tool_call ids, tool names and
canonical arguments, reasoning_content, tool_call_id) and to what it offers: whether any tools
are offered, and whether the built-in web_search is among them. Everything else is volatile and
ignored unless a fixture's :class:`MatchOptions` say otherwise: ``model`` and ``thinking``
(``exact`` compares them); always ignored: ``stream``, ``tool_stream``, ``temperature``,
``request_id``, ``user_id``, ``stream_options``, tool schemas and the web_search options.
A picture (an ``image_url`` part with a ``data:`` URL) is compared by the SHA-256 of its bytes,
so a fixture records it as ``"url": "sha256:<hex>"`` instead of the whole base64. Text is
compared after stripping surrounding whitespace; ``None`` and ``""`` are the same; JSON
text (tool arguments, tool results) is compared in canonical form, so key order and spacing do
not matter.

:class:`MatchOptions` decide whether system messages and earlier turns take part (see
``docs/design/0402-request-matching.md``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from generic_framework.mock.fixture import MatchOptions

__all__ = ["ChatShape", "MessageKey", "canonical_text", "chat_shape", "describe_difference"]

MessageKey = tuple[Any, ...]
RequestKey = tuple[Any, ...]


def canonical_text(value: Any) -> str:
    """Text in a comparable form: stripped, ``None`` as ``""``, JSON in canonical form."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _canonical_string(value)


# Tool arguments and results recur in every later round of a turn and in every replay.
@lru_cache(maxsize=8192)
def _canonical_string(value: str) -> str:
    text = value.strip()
    if text[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text


def _plain_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return canonical_text([_by_hash(part) for part in value])
    return canonical_text(value)


def _by_hash(part: Any) -> Any:
    """An image part compared by its picture: a ``data:`` URL as ``sha256:<hex of its
    bytes>``, the form a fixture may record it in (docs/design/0401); others as they are."""
    image = part.get("image_url") if isinstance(part, dict) else None
    url = image.get("url") if isinstance(image, dict) else None
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        return part
    try:
        data = base64.b64decode(url.partition(",")[2], validate=True)
    except (binascii.Error, ValueError):
        return part
    return {**part, "image_url": {"url": "sha256:" + hashlib.sha256(data).hexdigest()}}


def _call_key(call: Any) -> tuple[str, str, str, str]:
    if not isinstance(call, dict):
        return ("", "", "", canonical_text(call))
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    return (
        str(call.get("id") or ""),
        str(call.get("type") or "function"),
        str(function.get("name") or ""),
        canonical_text(function.get("arguments")),
    )


def message_key(message: Any) -> MessageKey:
    """The comparable form of one message."""
    if not isinstance(message, dict):
        return ("?", canonical_text(message))
    role = message.get("role")
    if role == "assistant":
        calls = message.get("tool_calls") or ()
        return (
            "assistant",
            _plain_text(message.get("content")),
            _plain_text(message.get("reasoning_content")),
            tuple(_call_key(call) for call in calls),
        )
    if role == "tool":
        return (
            "tool",
            str(message.get("tool_call_id") or ""),
            canonical_text(message.get("content")),
        )
    return (str(role), _plain_text(message.get("content")))


def _tools_offered(tools: Any) -> tuple[bool, frozenset[str], tuple[str, ...]]:
    web_search = False
    functions: set[str] = set()
    others: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "web_search":
            web_search = True
        elif kind == "function":
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            functions.add(str(name))
        else:
            others.append(str(kind))
    return web_search, frozenset(functions), tuple(sorted(others))


def turn_start(messages: list[Any]) -> int:
    """Index where the current turn begins: just after the last answered turn.

    A turn ends with an assistant message that makes no tool calls; everything after the last
    such message (the user message, tool rounds, a forced-answer instruction) is the turn.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and not message.get("tool_calls")
        ):
            return index + 1
    return 0


@dataclass(slots=True)
class ChatShape:
    """A chat request reduced to what matching looks at.

    Attributes:
        messages: the raw message list (for diffs and offsets).
        web_search: whether the built-in web_search tool is offered.
        functions: the names of the offered function tools.
        other_tools: the types of any other offered tools (retrieval, mcp).
        stream: whether the request asked for SSE.
        thinking: the ``thinking`` object in canonical JSON (``""`` when absent).
        model: the model id, lower case.
    """

    messages: list[Any]
    web_search: bool
    functions: frozenset[str]
    other_tools: tuple[str, ...]
    stream: bool
    thinking: str = ""
    model: str = ""
    _keys: dict[tuple[str, ...], tuple[RequestKey, tuple[int, ...]]] = field(default_factory=dict)

    def key(self, options: MatchOptions) -> RequestKey:
        """The hashable key under ``options`` (cached per option set)."""
        return self.keyed(options)[0]

    def keyed(self, options: MatchOptions) -> tuple[RequestKey, tuple[int, ...]]:
        """The key under ``options`` and, per compared message, its index in the request."""
        signature = options.signature
        cached = self._keys.get(signature)
        if cached is None:
            cached = self._build(options)
            self._keys[signature] = cached
        return cached

    def _compared(self, options: MatchOptions) -> list[int]:
        start = turn_start(self.messages) if options.history == "ignore" else 0
        positions = []
        for index, message in enumerate(self.messages):
            is_system = isinstance(message, dict) and message.get("role") == "system"
            if options.system == "exact" and is_system:
                positions.append(index)  # system messages count even before the turn
            elif index >= start and not is_system:
                positions.append(index)
        return positions

    def _build(self, options: MatchOptions) -> tuple[RequestKey, tuple[int, ...]]:
        positions = self._compared(options)
        keys = tuple(message_key(self.messages[index]) for index in positions)
        if options.tools == "exact":
            offered: Any = (tuple(sorted(self.functions)), self.other_tools)
        else:
            offered = bool(self.web_search or self.functions or self.other_tools)
        thinking = self.thinking if options.thinking == "exact" else None
        model = self.model if options.model == "exact" else None
        return ("chat", keys, self.web_search, offered, thinking, model), tuple(positions)


def chat_shape(body: dict[str, Any]) -> ChatShape:
    """Reduce a parsed chat request body to a :class:`ChatShape`."""
    messages = body.get("messages")
    web_search, functions, others = _tools_offered(body.get("tools"))
    return ChatShape(
        messages=messages if isinstance(messages, list) else [],
        web_search=web_search,
        functions=functions,
        other_tools=others,
        stream=body.get("stream") is True,
        thinking=canonical_text(body.get("thinking")),
        model=str(body.get("model") or "").strip().lower(),
    )


def _show(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MESSAGE_FIELDS = ("role", "content", "reasoning_content", "tool_calls")
_TOOL_FIELDS = ("role", "tool_call_id", "content")
_CALL_FIELDS = ("id", "type", "function.name", "function.arguments")


def _field_difference(where: str, names: tuple[str, ...], want: MessageKey, got: MessageKey) -> str:
    for position, name in enumerate(names, start=1):
        if want[position] != got[position]:
            return f"{where}.{name}: expected {_show(want[position])}, got {_show(got[position])}"
    return ""


def _message_difference(index: int, expected: MessageKey, actual: MessageKey) -> str:
    where = f"messages[{index}]"
    if expected[0] != actual[0]:
        return f"{where}.role: expected {expected[0]!r}, got {actual[0]!r}"
    if expected[0] == "assistant":
        text = _field_difference(where, _MESSAGE_FIELDS[1:3], expected, actual)
        return text or _calls_difference(where, expected[3], actual[3])
    names = _TOOL_FIELDS[1:] if expected[0] == "tool" else _MESSAGE_FIELDS[1:2]
    return _field_difference(where, names, expected, actual) or f"{where}: differs"


def _calls_difference(where: str, expected: tuple[Any, ...], actual: tuple[Any, ...]) -> str:
    if len(expected) != len(actual):
        return f"{where}.tool_calls: expected {len(expected)} call(s), got {len(actual)}"
    for number, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for position, name in enumerate(_CALL_FIELDS):
            if want[position] != got[position]:
                return (
                    f"{where}.tool_calls[{number}].{name}: expected {_show(want[position])}, "
                    f"got {_show(got[position])}"
                )
    return f"{where}.tool_calls: differ"


def _tools_difference(expected: RequestKey, actual: RequestKey) -> str:
    if expected[2] != actual[2]:
        offered = "offers" if expected[2] else "does not offer"
        return f"tools: the recorded request {offered} the built-in web_search, this one " + (
            "does" if actual[2] else "does not"
        )
    if isinstance(expected[3], bool):
        offered = "offers" if expected[3] else "does not offer"
        return f"tools: the recorded request {offered} tools, this one " + (
            "does" if actual[3] else "does not"
        )
    (want, want_other), (got, got_other) = expected[3], actual[3]
    if want != got:
        return f"tools: expected function tools {_show(want)}, got {_show(got)}"
    return f"tools: expected other tools {_show(want_other)}, got {_show(got_other)}"


def common_prefix(expected: RequestKey, actual: RequestKey) -> int:
    """How many leading messages two request keys share."""
    count = 0
    for want, got in zip(expected[1], actual[1], strict=False):
        if want != got:
            break
        count += 1
    return count


def common_suffix(expected: RequestKey, actual: RequestKey) -> int:
    """How many trailing messages two request keys share."""
    count = 0
    for want, got in zip(reversed(expected[1]), reversed(actual[1]), strict=False):
        if want != got:
            break
        count += 1
    return count


def describe_difference(
    expected: RequestKey, actual: RequestKey, positions: tuple[int, ...]
) -> str:
    """The first difference between a recorded request key and an incoming one, in words.

    ``positions`` maps each compared message of the incoming key to its index in the request,
    so the text points into what the client actually sent.
    """
    want, got = expected[1], actual[1]
    prefix = common_prefix(expected, actual)

    def where(number: int) -> int:
        if number < len(positions):
            return positions[number]
        return positions[-1] + 1 + number - len(positions) if positions else number

    if prefix < len(want) and prefix < len(got):
        return _message_difference(where(prefix), want[prefix], got[prefix])
    if len(want) != len(got):
        extra = got[prefix] if len(got) > len(want) else want[prefix]
        verb = "has an extra" if len(got) > len(want) else "is missing the"
        return (
            f"messages: the request {verb} message {where(prefix)} "
            f"(role {extra[0]!r}); expected {len(want)} compared message(s), got {len(got)}"
        )
    if expected[2:4] != actual[2:4]:
        return _tools_difference(expected, actual)
    for position, name in ((4, "thinking"), (5, "model")):
        if expected[position] != actual[position]:
            want, got = expected[position] or "(absent)", actual[position] or "(absent)"
            return f"{name}: expected {want}, got {got}"
    return "no difference in the compared fields"
