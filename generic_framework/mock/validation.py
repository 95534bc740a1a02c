"""What the mock rejects before it looks for a recorded answer, with Z.AI's codes.

Every rejection is ``{"error": {"code": "<string>", "message": "..."}}`` (docs/protocol.md §7):

- 401 ``1001``: no ``Authorization`` header, or an empty one.
- 401 ``1002``: a key outside the accepted set (any non-empty key is accepted by default).
- 400 ``1213``: a required field (``model``, ``messages``, ``search_query``) is missing.
- 400 ``1214``: a malformed history: a tool message without the assistant call it answers, a
  call left unanswered, an answer given twice, an assistant message with neither content nor
  tool_calls, no user message, an unknown role; a bad function name; an unknown tool type.
- 400 ``1210``: a parameter out of range: ``temperature`` or ``top_p`` outside 0-1,
  ``max_tokens`` below 1, more than 128 tools; a body that is not a JSON object;
  ``thinking.type: "disabled"`` for a model that always thinks (GLM-5.3, by the model table of
  :mod:`generic_framework.wire.profiles`), with the real service's message; an ``image_url``
  content part sent to a model the table says cannot see.
- 400 ``1211``: a model neither the model table nor any loaded fixture knows (checked only
  when the caller passes the known models: the app does, fixture loading does not).

Z.AI's own messages are generic ("The messages parameter is illegal"); the mock appends which
message broke which rule, because the mock exists to find such bugs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from generic_framework.wire.profiles import PROFILES

__all__ = [
    "MAX_TOOLS",
    "TOOL_TYPES",
    "MockError",
    "check_auth",
    "validate_chat",
    "validate_messages",
    "validate_reader",
    "validate_web_search",
]

MAX_TOOLS = 128
TOOL_TYPES = frozenset({"function", "web_search", "retrieval", "mcp"})
_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MESSAGES_ILLEGAL = "The messages parameter is illegal. Please check the documentation."


@dataclass
class MockError(Exception):
    """A response the mock sends instead of a recorded one.

    Attributes:
        status: the HTTP status.
        code: the business code, as a string.
        message: the human-readable message.
        extra: more fields for ``error`` (the no-match diagnostics use this).
        headers: extra response headers (``Retry-After``).
    """

    status: int
    code: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"code": ..., "message": ..., **extra}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def _bad_messages(detail: str) -> MockError:
    return MockError(400, "1214", f"{_MESSAGES_ILLEGAL} ({detail})")


def check_auth(headers: Iterable[tuple[bytes, bytes]], api_keys: frozenset[str] | None) -> None:
    """Check the ``Authorization`` header (``Bearer <key>`` or a bare key).

    Raises:
        MockError: 401 with code 1001 (missing) or 1002 (not an accepted key).
    """
    value = ""
    for name, raw in headers:
        if name == b"authorization":
            value = raw.decode("latin-1").strip()
            break
    token = value[7:].strip() if value[:7].lower() == "bearer " else value
    if not token or token.lower() == "bearer":
        raise MockError(
            401, "1001", "Authentication parameter not received in Header, unable to authenticate"
        )
    if api_keys is not None and token not in api_keys:
        raise MockError(
            401,
            "1002",
            "Authorization Token is invalid, please ensure that the Authorization Token is "
            "correctly provided.",
        )


def _check_range(body: dict[str, Any], name: str, low: float, high: float | None) -> None:
    value = body.get(name)
    if value is None:
        return
    in_range = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and low <= value
        and (high is None or value <= high)
    )
    if not in_range:
        limit = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise MockError(
            400, "1210", f"API request parameter is invalid: {name} must be {limit}, got {value!r}"
        )


def _check_tool(number: int, tool: Any) -> None:
    if not isinstance(tool, dict) or tool.get("type") not in TOOL_TYPES:
        kind = tool.get("type") if isinstance(tool, dict) else tool
        raise MockError(
            400,
            "1214",
            f"The tools parameter is illegal: tools[{number}].type {kind!r} is not one of "
            f"{', '.join(sorted(TOOL_TYPES))}",
        )
    if tool["type"] != "function":
        return
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise MockError(
            400,
            "1214",
            f"The tools parameter is illegal: tools[{number}].function.name {name!r} must match "
            "^[a-zA-Z0-9_-]{1,64}$",
        )


def _check_parameters(body: dict[str, Any]) -> None:
    _check_range(body, "temperature", 0.0, 1.0)
    _check_range(body, "top_p", 0.0, 1.0)
    _check_range(body, "max_tokens", 1, None)
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise MockError(400, "1214", "The tools parameter is illegal: it must be a list")
    if len(tools) > MAX_TOOLS:
        raise MockError(
            400,
            "1210",
            f"API request parameter is invalid: at most {MAX_TOOLS} tools, got {len(tools)}",
        )
    for number, tool in enumerate(tools):
        _check_tool(number, tool)


def _call_ids(index: int, calls: Any) -> list[str]:
    if not isinstance(calls, list):
        raise _bad_messages(f"messages[{index}].tool_calls must be a list")
    ids: list[str] = []
    for number, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            raise _bad_messages(f"messages[{index}].tool_calls[{number}] has no id")
        ids.append(call_id)
    return ids


def _has_text(value: Any) -> bool:
    return bool(value.strip()) if isinstance(value, str) else bool(value)


class _History:
    """Walks a message list once, tracking which tool calls still wait for their answer."""

    def __init__(self) -> None:
        self.pending: dict[str, int] = {}
        self.answered: set[str] = set()
        self.has_user = False

    def close_pending(self, index: int) -> None:
        if self.pending:
            call_id, origin = next(iter(self.pending.items()))
            raise _bad_messages(
                f"messages[{origin}] made tool call {call_id!r}, which is left unanswered"
                + (f" before messages[{index}]" if index >= 0 else "")
            )

    def visit(self, index: int, message: Any) -> None:
        if not isinstance(message, dict):
            raise _bad_messages(f"messages[{index}] is not an object")
        role = message.get("role")
        if role != "tool":
            self.close_pending(index)
        if role == "user":
            if not _has_text(message.get("content")):
                raise _bad_messages(f"messages[{index}]: input cannot be empty")
            self.has_user = True
        elif role == "system":
            if not isinstance(message.get("content"), str):
                raise _bad_messages(f"messages[{index}].content must be a string")
        elif role == "assistant":
            self.visit_assistant(index, message)
        elif role == "tool":
            self.visit_tool(index, message)
        else:
            raise _bad_messages(f"messages[{index}].role {role!r} is unknown")

    def visit_assistant(self, index: int, message: dict[str, Any]) -> None:
        calls = message.get("tool_calls")
        if not calls and not _has_text(message.get("content")):
            raise _bad_messages(f"messages[{index}]: content and tool_calls cannot both be empty")
        for call_id in _call_ids(index, calls) if calls else ():
            self.pending[call_id] = index

    def visit_tool(self, index: int, message: dict[str, Any]) -> None:
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _bad_messages(f"messages[{index}] is a tool message without tool_call_id")
        if not isinstance(message.get("content"), str):
            raise _bad_messages(f"messages[{index}].content of a tool message must be a string")
        # Pending first: a later assistant message may make a call with an id seen in an
        # earlier turn (a recorded tool round replayed twice in one conversation).
        if call_id not in self.pending and call_id in self.answered:
            raise _bad_messages(f"messages[{index}] answers tool call {call_id!r} a second time")
        if call_id not in self.pending:
            raise _bad_messages(
                f"messages[{index}] answers tool call {call_id!r}, but no preceding assistant "
                "message made that call"
            )
        del self.pending[call_id]
        self.answered.add(call_id)


def validate_messages(messages: Any) -> None:
    """Check a message list the way Z.AI does (400/1214 on the first problem).

    Raises:
        MockError: the list is missing, empty, or breaks a history rule.
    """
    if messages is None:
        raise MockError(400, "1213", "The messages parameter was not received.")
    if not isinstance(messages, list) or not messages:
        raise _bad_messages("messages must be a non-empty list")
    history = _History()
    for index, message in enumerate(messages):
        history.visit(index, message)
    history.close_pending(-1)
    if not history.has_user:
        raise _bad_messages("there is no user message")


_ALWAYS_THINKS = (
    "This model always engages in thinking and cannot be disabled; please use low, high, or max"
)


def _check_model(body: dict[str, Any], known_models: frozenset[str] | None) -> None:
    model = str(body["model"]).strip().lower()
    profile = PROFILES.get(model)
    if profile is None and known_models is not None and model not in known_models:
        raise MockError(
            400,
            "1211",
            f"Unknown Model, please check the model code. ({body['model']!r} is neither in the "
            "model table nor in a loaded fixture)",
        )
    thinking = body.get("thinking")
    refused = isinstance(thinking, dict) and thinking.get("type") == "disabled"
    if refused and profile is not None and not profile.thinking_off:
        raise MockError(400, "1210", _ALWAYS_THINKS)
    if profile is not None and not profile.vision and _has_picture(body.get("messages")):
        raise MockError(
            400,
            "1210",
            f"API request parameter is invalid: {body['model']} does not take image content "
            "(image_url parts go to a vision model)",
        )


def _has_picture(messages: Any) -> bool:
    """Whether any message's content list has an ``image_url`` part."""
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "image_url":
                return True
    return False


def validate_chat(body: Any, *, known_models: frozenset[str] | None = None) -> dict[str, Any]:
    """Check a chat-completions body; return it as a dict when it passes.

    Args:
        known_models: the model ids (lower case) the fixtures record besides the model
            table's; given, any other model is refused with 1211.

    Raises:
        MockError: 400 with 1210, 1211, 1213 or 1214 (see the module docstring).
    """
    if not isinstance(body, dict):
        raise MockError(
            400, "1210", "API request parameter is invalid: the body must be a JSON object"
        )
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise MockError(400, "1213", "The model parameter was not received.")
    _check_model(body, known_models)
    _check_parameters(body)
    validate_messages(body.get("messages"))
    return body


def _with_text(body: Any, field: str) -> dict[str, Any]:
    """``body`` if it is a JSON object whose ``field`` is a non-blank string (1210, else 1213)."""
    if not isinstance(body, dict):
        raise MockError(
            400, "1210", "API request parameter is invalid: the body must be a JSON object"
        )
    value = body.get(field)
    if not isinstance(value, str) or not value.strip():
        raise MockError(400, "1213", f"The {field} parameter was not received.")
    return body


def validate_reader(body: Any) -> dict[str, Any]:
    """Check a Web Reader API body (``url`` is required).

    Raises:
        MockError: 400 with 1210 or 1213.
    """
    return _with_text(body, "url")


def validate_web_search(body: Any) -> dict[str, Any]:
    """Check a Web Search API body (``search_query`` is required).

    Raises:
        MockError: 400 with 1210 or 1213.
    """
    checked = _with_text(body, "search_query")
    _check_range(checked, "count", 1, 50)
    return checked
