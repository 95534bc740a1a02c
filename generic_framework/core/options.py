"""TurnOptions: what a caller asks of one turn's model calls, beside the persona's own settings.

An OpenAI client drives a persona with its own sampling settings, output format and tools
(``POST /v1/chat/completions``; docs/design/0612). :class:`TurnOptions` carries them into
:meth:`Persona.respond() <generic_framework.core.persona.Persona.respond>` and
:meth:`~generic_framework.core.persona.Persona.stream`, and the turn engine applies them to every
request it builds for its one model-call seam (``Persona._call_llm``):

- ``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``user_id``, ``reasoning_effort``: sent
  as given, in place of the persona's values (the caller checked them against Z.AI's ranges and
  the model's table; the wire model checks ``temperature`` again).
- ``json_object``: ``response_format: {"type": "json_object"}``.
- ``json_schema``: sent as ``json_object``, with the schema in one more system message; the
  final answer is parsed and validated against the schema, one corrective call is made when it
  does not match, and :class:`~generic_framework.errors.OutputSchemaError` is raised when the
  second answer does not match either. The text is not streamed before it is validated.
- ``client_tools``: function tools the *caller* runs. They are offered beside the built-in
  ``web_search`` of a ``//`` turn, and the persona's own function tools (and MCP tools, and the
  client-side ``search_web``) are left out, so one round never mixes calls the persona runs with
  calls the caller runs. When the model calls them the turn ends with the calls
  (:attr:`Reply.tool_calls <generic_framework.core.reply.Reply.tool_calls>`, ``stop_reason``
  ``tool_calls``); the caller runs them and sends the results back as ``continuation``.
- ``continuation``: the messages after the turn's user message (assistant tool calls, then one
  tool message per call): the caller's tool rounds, which the next call continues from.
- ``instructions`` and ``tools``: what the turn service adds for the turn's own user, never a
  client: system messages sent after the persona's instructions, and tools the persona runs
  beside its own (a persona's memory: :mod:`generic_framework.memory`). A turn with
  ``client_tools`` leaves ``tools`` out, as it does the persona's own functions.
- ``pictures``: the user message's pictures, checked by the turn service
  (:mod:`generic_framework.pictures`): sent with the message to a model that sees, or as their
  descriptions (written by the vision model first) to one that does not.
- ``settles``: the request's running claim (the service's ``Idempotency-Key``), settled by the
  stored turn in the turn's own transaction (:mod:`~generic_framework.store.keys`), so a
  retry finds the stored turn even when the process died before it finished the claim. It
  goes to the store only: no model call sees it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generic_framework.pictures.parts import Picture
from generic_framework.tools.base import Tool
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    FunctionToolSpec,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from generic_framework.store.keys import ClaimRef

__all__ = [
    "NO_OPTIONS",
    "JsonSchemaFormat",
    "TurnOptions",
    "check_output",
    "correction_messages",
    "is_function_call",
    "schema_instruction",
    "schema_problem",
    "with_content",
]


_RANGES = (("temperature", 0.0, 1.0), ("top_p", 0.01, 1.0), ("max_tokens", 1, 131072))


@dataclass(frozen=True, slots=True)
class JsonSchemaFormat:
    """An output format: one JSON value that validates against ``schema``.

    Attributes:
        name: the schema's name, as the caller gave it (``response_format.json_schema.name``).
        schema: the JSON Schema (draft 2020-12 unless it says otherwise).
    """

    name: str
    schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """Per-turn options of a caller (see the module docstring); ``None`` keeps the persona's."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: str | None = None
    user_id: str | None = None
    reasoning_effort: str | None = None
    json_object: bool = False
    json_schema: JsonSchemaFormat | None = None
    client_tools: tuple[FunctionToolSpec, ...] = ()
    tool_choice: str | None = None
    continuation: tuple[AssistantMessage | ToolMessage, ...] = field(default=())
    instructions: tuple[SystemMessage, ...] = field(default=())
    tools: tuple[Tool, ...] = field(default=())
    pictures: tuple[Picture, ...] = ()
    settles: ClaimRef | None = None

    def __post_init__(self) -> None:
        """Z.AI's ranges (docs/protocol.md §2.1), checked before anything is sent.

        Raises:
            ValueError: naming the option and its range.
        """
        for name, low, high in _RANGES:
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name} must be from {low} to {high} (got {value!r})")
        if self.stop is not None and not self.stop:
            raise ValueError("stop must not be empty")
        if self.tool_choice not in (None, "auto"):
            raise ValueError("tool_choice must be 'auto' (the only choice Z.AI documents)")

    def request_fields(self) -> dict[str, Any]:
        """The :class:`~generic_framework.wire.messages.ChatRequest` fields these options set."""
        fields: dict[str, Any] = {}
        for name in ("temperature", "top_p", "max_tokens", "user_id", "reasoning_effort"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        if self.stop is not None:
            fields["stop"] = [self.stop]
        if self.json_object or self.json_schema is not None:
            fields["response_format"] = {"type": "json_object"}
        return fields


def schema_instruction(output: JsonSchemaFormat) -> SystemMessage:
    """The system message that asks for one JSON value matching ``output``'s schema."""
    schema = json.dumps(output.schema, ensure_ascii=False, sort_keys=True)
    return SystemMessage(
        content=(
            "Answer with a single JSON value and nothing else (no code fence, no comment). "
            f"It must validate against this JSON Schema (named {output.name!r}):\n{schema}"
        )
    )


NO_OPTIONS = TurnOptions()
"""A turn without caller options: the persona's settings alone."""

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)
CORRECTION = (
    "Your previous answer is not valid for the required JSON Schema: {problem}. Answer again "
    "with only the corrected JSON value, matching the schema exactly."
)


def is_function_call(call: ToolCall) -> bool:
    """Whether ``call`` calls a function (a caller's tool), not the built-in ``web_search``."""
    return call.type == "function" and call.function.name not in ("", "web_search")


def check_output(text: str, output: JsonSchemaFormat) -> tuple[str | None, str]:
    """``(problem, json_text)``: what is wrong with ``text`` as an answer for ``output`` (None
    when it validates), and the JSON text itself (a code fence around it removed)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError as exc:
        return f"it is not JSON ({exc})", body
    from jsonschema.exceptions import best_match  # only for turns that ask for a schema

    error = best_match(_validator(output.schema).iter_errors(value))
    if error is None:
        return None, body
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    return f"at {where}: {error.message}", body


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``schema`` as a JSON Schema, or None."""
    from jsonschema import SchemaError

    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        return str(exc.message)
    return None


def _validator_class(schema: Mapping[str, Any]) -> Any:
    """The validator of the schema's ``$schema`` draft; 2020-12 when it names none."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    return validator_for(schema, default=Draft202012Validator)


def _validator(schema: Mapping[str, Any]) -> Any:
    return _validator_class(schema)(schema)


def correction_messages(text: str, problem: str) -> list[Message]:
    """The bad answer and the request to correct it: sent once, never stored."""
    return [
        AssistantMessage(content=text if text.strip() else "(empty)"),
        UserMessage(content=CORRECTION.format(problem=problem)),
    ]


def with_content(completion: ChatCompletion, text: str) -> ChatCompletion:
    """``completion`` whose message's content is ``text``."""
    choices = completion.choices
    if not choices:
        return completion
    message = choices[0].message.model_copy(update={"content": text})
    first = choices[0].model_copy(update={"message": message})
    return completion.model_copy(update={"choices": [first, *choices[1:]]})
