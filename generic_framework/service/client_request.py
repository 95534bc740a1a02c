"""An OpenAI client's request, read into a persona's turn: the question, its history, its options.

Agent frameworks (openai-agents, LangChain, pydantic-ai, ``llm``) send more than messages:
sampling settings, an output format, their own tools, and, after the model called one of those
tools, the results as ``role: "tool"`` messages. :func:`client_turn` reads all of it
(docs/design/0612):

- The turn's question is the **last user message**. What follows it, assistant messages with
  ``tool_calls`` and the ``tool`` messages answering them, is the turn's continuation: the
  client's tool rounds, sent on to the model as they are. The last message must be the user's
  or a tool result.
- ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop``,
  ``response_format``, ``tools`` / ``tool_choice`` and ``user`` become
  :class:`~generic_framework.core.options.TurnOptions`, unless the persona file pins the
  parameter (``client_parameters``): ``ignore`` drops the client's value, ``refuse`` answers 400
  naming it.
- ``user`` is never sent as it is: :func:`user_pseudonym` is the one derivation of the
  ``user_id`` Z.AI sees.

Everything refused is a :class:`~generic_framework.service.errors.ServiceError` 400 naming the
parameter, raised before anything is sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from generic_framework.core.history import HistoryItem
from generic_framework.core.options import (
    NO_OPTIONS,
    JsonSchemaFormat,
    TurnOptions,
    schema_problem,
)
from generic_framework.core.spec import ClientParameter, ParameterRule
from generic_framework.service.errors import ServiceError
from generic_framework.service.requests import content_text, earlier_messages, user_content
from generic_framework.service.schemas import ChatCompletionRequest, ChatMessageIn
from generic_framework.wire.messages import (
    AssistantMessage,
    FunctionDefinition,
    FunctionToolSpec,
    ToolCall,
    ToolMessage,
)

__all__ = ["ClientTurn", "client_turn", "user_pseudonym"]

USER_ID_PREFIX = "u-"


def user_pseudonym(user: str) -> str:
    """The ``user_id`` Z.AI is sent for a client's ``user``: a SHA-256 digest, never the value.

    The one derivation of an end user's pseudonym: stable (the same ``user`` gives the same id,
    so Z.AI can tell one user's requests apart), 42 characters (Z.AI takes 6 to 128), and not
    the raw value, which may be an e-mail address or an account name.
    """
    digest = hashlib.sha256(b"generic-framework user\x00" + user.encode("utf-8")).hexdigest()
    return USER_ID_PREFIX + digest[:40]


@dataclass(frozen=True, slots=True)
class ClientTurn:
    """What a request asks of the persona.

    Attributes:
        text: the question (the last user message).
        history: the messages before it (``None`` with ``conversation_id``).
        options: the client's options, as the persona's pins allow.
        include_usage: ``stream_options.include_usage``.
        images: the URLs of the question's image parts (checked by the turn service).
    """

    text: str
    history: list[HistoryItem] | None
    options: TurnOptions
    include_usage: bool = False
    images: tuple[str, ...] = ()


def _refuse(param: str, message: str, code: str = "unsupported_parameter") -> ServiceError:
    return ServiceError(400, f"{param}: {message}", param=param, code=code)


def _question_index(messages: Sequence[ChatMessageIn]) -> int:
    """The index of the turn's question: the last user message, after which only the client's
    tool rounds (assistant tool calls, tool results) may follow, ending with a tool result."""
    last = messages[-1]
    if last.role == "user":
        return len(messages) - 1
    if last.role != "tool":
        raise ServiceError(
            400,
            "the last message must have role 'user' (or 'tool': the results of the tools "
            "the model called)",
            param="messages",
            code="invalid_role",
        )
    for index in range(len(messages) - 1, -1, -1):
        role = messages[index].role
        if role == "user":
            return index
        if role not in ("assistant", "tool"):
            raise ServiceError(
                400,
                f"messages[{index}]: only assistant tool calls and tool results may follow "
                "the last user message",
                param="messages",
                code="invalid_role",
            )
    raise ServiceError(400, "there is no user message", param="messages", code="invalid_role")


def _continuation(
    messages: Sequence[ChatMessageIn], start: int
) -> tuple[AssistantMessage | ToolMessage, ...]:
    """The client's tool rounds after the question, as wire messages."""
    out: list[AssistantMessage | ToolMessage] = []
    for index in range(start, len(messages)):
        message = messages[index]
        where = f"messages[{index}]"
        text = content_text(message.content, where)
        extra = message.model_extra or {}
        try:
            if message.role == "assistant":
                calls = [ToolCall.model_validate(call) for call in extra.get("tool_calls") or ()]
                if not calls:
                    raise ValueError(
                        "an assistant message after the question must carry tool_calls"
                    )
                out.append(AssistantMessage(content=text or None, tool_calls=calls))
            else:
                call_id = extra.get("tool_call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise ValueError("a tool message needs its tool_call_id")
                out.append(ToolMessage(content=text, tool_call_id=call_id))
        except (ValueError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise ServiceError(
                400, f"{where}: {detail}", param="messages", code="invalid_message"
            ) from None
    return tuple(out)


class _Pinned:
    """The client's parameters as the persona's pins allow them."""

    def __init__(self, pins: Mapping[ClientParameter, ParameterRule]) -> None:
        self.pins: dict[str, str] = {str(name): rule for name, rule in pins.items()}

    def get(self, name: str, value: Any, *, pin: str | None = None) -> Any:
        """``value`` of parameter ``name`` (pinned as ``pin``), or None if the persona drops it."""
        if value is None:
            return None
        rule = self.pins.get(pin or name, "accept")
        if rule == "refuse":
            raise _refuse(
                name,
                "this persona does not take it from the client (client_parameters in its "
                "persona file); leave it out",
                "parameter_pinned",
            )
        return None if rule == "ignore" else value


def _max_tokens(body: ChatCompletionRequest) -> int | None:
    both = body.max_tokens, body.max_completion_tokens
    if None not in both and both[0] != both[1]:
        raise _refuse("max_completion_tokens", "differs from max_tokens; send one of them")
    return body.max_completion_tokens or body.max_tokens


def _tools(body: ChatCompletionRequest, persona_rounds: int | None) -> tuple[FunctionToolSpec, ...]:
    if not body.tools or body.tool_choice == "none":
        return ()
    if persona_rounds == 0:
        raise _refuse("tools", "this persona takes no tools (max_tool_rounds = 0)")
    specs = []
    names: set[str] = set()
    for index, tool in enumerate(body.tools):
        function = tool.function
        if function.name == "web_search" or function.name in names:
            reason = "is the built-in web search's" if function.name == "web_search" else "is twice"
            raise _refuse(f"tools[{index}].function.name", f"{function.name!r} {reason}")
        names.add(function.name)
        definition = FunctionDefinition(
            name=function.name, description=function.description, parameters=function.parameters
        )
        specs.append(FunctionToolSpec(function=definition))
    return tuple(specs)


def _output(body: ChatCompletionRequest) -> tuple[bool, JsonSchemaFormat | None]:
    """``(json_object, json_schema)`` of ``response_format``."""
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return False, None
    if fmt.type == "json_object":
        return True, None
    if fmt.json_schema is None:
        raise _refuse("response_format.json_schema", "is required with type 'json_schema'")
    problem = schema_problem(fmt.json_schema.schema_)
    if problem is not None:
        raise _refuse("response_format.json_schema.schema", f"not a valid JSON Schema: {problem}")
    return False, JsonSchemaFormat(name=fmt.json_schema.name, schema=fmt.json_schema.schema_)


def client_turn(
    body: ChatCompletionRequest,
    *,
    pins: Mapping[ClientParameter, ParameterRule],
    max_chars: int,
    allow_system: bool,
    max_tool_rounds: int | None = None,
) -> ClientTurn:
    """Read ``body`` into the persona's turn (see the module docstring). Whether the persona's
    model takes the ``reasoning_effort`` asked for is the turn service's check, when it admits
    the turn (:class:`~generic_framework.turns.OptionRefused`).

    Raises:
        ServiceError: 400 naming the parameter or message at fault.
    """
    messages = body.messages
    question = _question_index(messages)
    text, images = user_content(messages[: question + 1], max_chars)
    continuation = _continuation(messages, question + 1)
    options = _options(body, _Pinned(pins), max_tool_rounds, continuation)
    if body.conversation_id is not None and (options.client_tools or continuation):
        raise _refuse(
            "conversation_id",
            "a stored conversation cannot hold the client's tool rounds; send the client's "
            "tools (and their results) without conversation_id",
        )
    history = None
    if body.conversation_id is None:
        history = earlier_messages(messages[: question + 1], max_chars, allow_system=allow_system)
    include = bool(body.stream_options and body.stream_options.include_usage)
    return ClientTurn(
        text,
        history,
        NO_OPTIONS if options == NO_OPTIONS else options,
        include_usage=include,
        images=images,
    )


def _options(
    body: ChatCompletionRequest,
    pinned: _Pinned,
    max_tool_rounds: int | None,
    continuation: tuple[AssistantMessage | ToolMessage, ...],
) -> TurnOptions:
    """The client's parameters as :class:`TurnOptions`, as the persona's pins allow them."""
    tools = pinned.get("tools", _tools(body, max_tool_rounds) or None) or ()
    fmt = pinned.get("response_format", body.response_format)
    json_object, json_schema = _output(body) if fmt is not None else (False, None)
    stop = pinned.get("stop", body.stop)
    user = pinned.get("user", body.user)
    return TurnOptions(
        temperature=pinned.get("temperature", body.temperature),
        top_p=pinned.get("top_p", body.top_p),
        max_tokens=pinned.get(
            "max_completion_tokens" if body.max_completion_tokens else "max_tokens",
            _max_tokens(body),
            pin="max_tokens",
        ),
        stop=stop if isinstance(stop, str) else (stop[0] if stop else None),
        user_id=user_pseudonym(user) if user else None,
        reasoning_effort=body.reasoning_effort,
        json_object=json_object,
        json_schema=json_schema,
        client_tools=tools,
        tool_choice="auto" if tools and body.tool_choice == "auto" else None,
        continuation=continuation,
    )
