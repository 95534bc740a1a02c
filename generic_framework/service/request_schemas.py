"""Request bodies of the bot service: the OpenAI-compatible chat request and the service's own.

:class:`ChatCompletionRequest` (``POST /v1/chat/completions``) and its parts accept, and ignore,
fields they do not know, because OpenAI clients send many optional parameters; each parameter
Z.AI cannot honour is refused by a validator that says why, and the JSON Schema published for
it lists only the values accepted. The service's own endpoints (:class:`TurnRequest`,
:class:`RenameRequest`) forbid unknown fields. They are apart from the response models of
:mod:`~generic_framework.service.schemas` (which re-exports them) because they are the one
place where what a client sends is judged; a response model only shapes what leaves.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from generic_framework.limits import ConversationId, ReasoningEffort
from generic_framework.store.base import TITLE_MAX, check_title

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "TITLE_PATTERN",
    "ChatCompletionRequest",
    "ChatMessageIn",
    "FunctionIn",
    "JsonSchemaIn",
    "RenameRequest",
    "ResponseFormatIn",
    "StreamOptionsIn",
    "ToolIn",
    "TurnRequest",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]

MAX_OUTPUT_TOKENS = 131072
"""The largest ``max_tokens`` Z.AI documents (docs/protocol.md §2.1)."""


def _schema(document: dict[str, Any]) -> WithJsonSchema:
    return WithJsonSchema(document)


def _one_of(*values: Any) -> dict[str, Any]:
    """A nullable field whose only accepted value is one of ``values``."""
    return {"enum": [*values, None]}


_STOP: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 1},
        {"type": "null"},
    ]
}
_NO_BIAS: dict[str, Any] = {"anyOf": [{"type": "object", "maxProperties": 0}, {"type": "null"}]}


def _refused(kind: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(kind, message)


class JsonSchemaIn(BaseModel):
    """``response_format.json_schema``: a named JSON Schema for the answer."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(default="output", min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(alias="schema")
    strict: StrictBool | None = None
    description: str | None = None


class ResponseFormatIn(BaseModel):
    """``response_format``: ``text``, ``json_object``, or ``json_schema`` with its schema."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaIn | None = None


class StreamOptionsIn(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk with the usage and no choice."""

    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool | None = None


class FunctionIn(BaseModel):
    """The function of a client tool: Z.AI's name rule, a JSON-Schema for its arguments."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: StrictBool | None = None


class ToolIn(BaseModel):
    """One client tool: only functions (the model calls them; the client runs them)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["function"]
    function: FunctionIn


class ChatMessageIn(BaseModel):
    """One message of an OpenAI chat request. ``content`` may be text or a list of parts."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``: OpenAI's request; ``model`` names a persona.

    The messages before the last are the turn's history. ``conversation_id`` is an extension:
    when set, the server-held history of that conversation is used (the request's earlier
    messages are ignored) and the turn is stored. ``sources_footer`` (an extension) turns the
    reply's "Sources:" list on or off for this request; ``BOT_SOURCES_FOOTER`` decides when it
    is absent.
    """

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    # No cap on the count: the body limit bounds it, and the persona keeps HISTORY_TURNS.
    messages: list[ChatMessageIn] = Field(json_schema_extra={"minItems": 1})
    stream: StrictBool = False
    conversation_id: ConversationId | None = None
    sources_footer: StrictBool | None = None
    # Honoured (sent to Z.AI), within Z.AI's ranges (docs/protocol.md §2.1).
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, ge=0.01, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    stop: Annotated[str | list[str] | None, _schema(_STOP)] = None
    response_format: ResponseFormatIn | None = None
    # The persona's model must take it (wire/profiles.py), as LLM_REASONING_EFFORT must.
    reasoning_effort: ReasoningEffort | None = None
    stream_options: StreamOptionsIn | None = None
    user: str | None = Field(default=None, max_length=256)
    tools: list[ToolIn] | None = Field(default=None, max_length=128)
    tool_choice: Annotated[str | dict[str, Any] | None, _schema(_one_of("auto", "none"))] = None
    # Accepted when harmless (docs/service.md lists them); refused when they would change the
    # answer.
    # The document gives only the accepted values; the validators say why another is refused.
    n: Annotated[int | None, _schema(_one_of(1))] = None
    logprobs: Annotated[StrictBool | None, _schema(_one_of(False))] = None
    top_logprobs: Annotated[int | None, _schema(_one_of(0))] = None
    presence_penalty: Annotated[float | None, _schema(_one_of(0))] = None
    frequency_penalty: Annotated[float | None, _schema(_one_of(0))] = None
    logit_bias: Annotated[dict[str, Any] | None, _schema(_NO_BIAS)] = None
    parallel_tool_calls: StrictBool | None = None
    store: StrictBool | None = None
    metadata: dict[str, Any] | None = None
    seed: int | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n is not None and n != 1:
            raise _refused("unsupported", "only 1 is supported (the service answers one choice)")
        return n

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: bool | None) -> bool | None:
        if value:
            raise _refused("unsupported", "is not supported (Z.AI returns no log probabilities)")
        return value

    @field_validator("top_logprobs")
    @classmethod
    def _no_top_logprobs(cls, value: int | None) -> int | None:
        if value:
            raise _refused("unsupported", "is not supported (Z.AI returns no log probabilities)")
        return value

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _no_penalty(cls, value: float | None) -> float | None:
        if value:
            raise _refused("unsupported", "only 0 is supported (Z.AI has no penalties)")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _no_bias(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            raise _refused("unsupported", "is not supported (Z.AI has no logit bias)")
        return value

    @field_validator("stop")
    @classmethod
    def _one_stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        words = [value] if isinstance(value, str) else value or []
        if len(words) > 1:
            raise _refused("unsupported", "Z.AI takes one stop sequence; send at most one")
        if any(not word for word in words):
            raise _refused("empty_stop", "a stop sequence must not be empty")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _auto_or_none(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if value is not None and value not in ("auto", "none"):
            raise _refused(
                "unsupported",
                "only 'auto' and 'none' are supported (Z.AI documents 'auto' only; a forced "
                "tool cannot be honoured)",
            )
        return value

    @field_validator("messages")
    @classmethod
    def _some_messages(cls, messages: list[ChatMessageIn]) -> list[ChatMessageIn]:
        if not messages:
            raise PydanticCustomError(
                "empty_messages",
                "must not be empty (send at least one message; the last one must have role 'user')",
            )
        return messages


TITLE_PATTERN = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
"""A conversation title: one line with at least one character that is not a space."""


class RenameRequest(BaseModel):
    """``PATCH /v1/conversations/{id}``: the conversation's own title (one line, 1 to 200
    characters once surrounding spaces are dropped), which lists show instead of its first
    input."""

    model_config = ConfigDict(extra="forbid")

    # The schema says what check_title accepts; the validator says it in words.
    title: str = Field(
        json_schema_extra={"minLength": 1, "maxLength": TITLE_MAX, "pattern": TITLE_PATTERN}
    )

    @field_validator("title")
    @classmethod
    def _a_title(cls, title: str) -> str:
        try:
            return check_title(title)
        except ValueError as exc:
            raise PydanticCustomError("invalid_title", str(exc)) from None


class TurnRequest(BaseModel):
    """``POST /v1/conversations/{id}/messages``: one user message to a persona."""

    model_config = ConfigDict(extra="forbid")

    persona: str = Field(min_length=1, max_length=200)
    # Text, or OpenAI content parts: text and image_url (a data: or https: picture).
    content: str | list[dict[str, Any]]
    stream: StrictBool = False
