"""Request and response bodies of the bot service, as pydantic models.

They validate what arrives, shape what leaves, and are the source of ``/openapi.json``.
Request models of the OpenAI-compatible endpoint accept (and ignore) fields they do not know,
because OpenAI clients send many optional parameters; the service's own endpoints forbid them.
Booleans are strict (``"stream": "yes"`` is a 400, not ``true``), and conversation ids follow
the one rule of :mod:`generic_framework.limits` (``CONVERSATION_ID_PATTERN`` is re-exported).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    WithJsonSchema,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from generic_framework.core.reply import Citation
from generic_framework.limits import CONVERSATION_ID_PATTERN, ConversationId
from generic_framework.store.base import TITLE_MAX, check_title
from generic_framework.wire.messages import WebSearchResult

__all__ = [
    "CONVERSATION_ID_PATTERN",
    "MAX_OUTPUT_TOKENS",
    "AnnotationOut",
    "BotInfoOut",
    "ChatCompletionChunkOut",
    "ChatCompletionOut",
    "ChatCompletionRequest",
    "ChatMessageIn",
    "ChoiceOut",
    "ChunkChoiceOut",
    "ChunkDeltaOut",
    "ConversationListOut",
    "ConversationOut",
    "ConversationSummaryOut",
    "ErrorDetail",
    "ErrorOut",
    "FinishReason",
    "FunctionCallOut",
    "FunctionIn",
    "HealthOut",
    "JsonSchemaIn",
    "MessageOut",
    "ModelListOut",
    "ModelOut",
    "ProgressOut",
    "ReadyOut",
    "RenameRequest",
    "RenamedOut",
    "ReplySummaryOut",
    "ResponseFormatIn",
    "StreamOptionsIn",
    "ToolCallDeltaOut",
    "ToolCallOut",
    "ToolIn",
    "TurnOut",
    "TurnRecordOut",
    "TurnRequest",
    "UrlCitationOut",
    "UsageOut",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "content_filter", "tool_calls"]

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
    stream_options: StreamOptionsIn | None = None
    user: str | None = Field(default=None, max_length=256)
    tools: list[ToolIn] | None = Field(default=None, max_length=128)
    tool_choice: Annotated[str | dict[str, Any] | None, _schema(_one_of("auto", "none"))] = None
    # Accepted when harmless (README lists them); refused when they would change the answer.
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


class RenamedOut(BaseModel):
    """The answer of ``PATCH /v1/conversations/{id}``: the title as stored."""

    id: str
    title: str


class TurnRequest(BaseModel):
    """``POST /v1/conversations/{id}/messages``: one user message to a persona."""

    model_config = ConfigDict(extra="forbid")

    persona: str = Field(min_length=1, max_length=200)
    content: str
    stream: StrictBool = False


class UsageOut(BaseModel):
    """Token counts in OpenAI's shape."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class UrlCitationOut(BaseModel):
    """OpenAI's ``url_citation``: ``content[start_index:end_index]`` is the ``[n]`` marker."""

    url: str
    title: str
    start_index: int
    end_index: int


class AnnotationOut(BaseModel):
    """One annotation of an answer (OpenAI's shape): a cited source and where it is cited."""

    type: Literal["url_citation"] = "url_citation"
    url_citation: UrlCitationOut


class FunctionCallOut(BaseModel):
    """The function of a tool call: its name and its arguments as JSON text."""

    name: str
    arguments: str


class ToolCallOut(BaseModel):
    """A call of one of the client's tools, for the client to run."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class ToolCallDeltaOut(ToolCallOut):
    """A whole tool call in a streamed chunk (OpenAI's delta shape, with ``index``)."""

    index: int


class MessageOut(BaseModel):
    """The assistant message of a completion; ``content`` is null beside tool calls only."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    annotations: list[AnnotationOut] = Field(default_factory=list)
    tool_calls: list[ToolCallOut] | None = None

    @model_serializer(mode="wrap")
    def _calls_only_when_made(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("tool_calls") is None:
            data.pop("tool_calls", None)
        return data


class ChoiceOut(BaseModel):
    """The single choice of a completion."""

    index: int = 0
    message: MessageOut
    finish_reason: FinishReason


class ChatCompletionOut(BaseModel):
    """A non-streamed completion; ``web_search``, ``citations`` and ``stop_reason`` are extras."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut
    web_search: list[WebSearchResult] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    stop_reason: str
    conversation_id: str | None = None


class ChunkDeltaOut(BaseModel):
    """The incremental part of a chunk."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDeltaOut] | None = None
    annotations: list[AnnotationOut] | None = None


class ChunkChoiceOut(BaseModel):
    """The single choice of a chunk; ``finish_reason`` only on the last one."""

    index: int = 0
    delta: ChunkDeltaOut = Field(default_factory=ChunkDeltaOut)
    finish_reason: FinishReason | None = None


class ProgressOut(BaseModel):
    """Tool progress, carried by a chunk with an empty delta (an extension field).

    ``round_started``: the model asked for ``tools`` in model call ``round``.
    ``tool_finished``: tool ``name`` ended after ``ms`` milliseconds, ``ok`` or not.
    """

    event: Literal["round_started", "tool_finished"]
    round: int | None = None
    tools: list[str] | None = None
    name: str | None = None
    ok: bool | None = None
    ms: float | None = None


class ReplySummaryOut(BaseModel):
    """The final answer as stored: ``[ref_N]`` markers rewritten to ``[n]``."""

    content: str
    citations: list[Citation] = Field(default_factory=list)
    stop_reason: str


class ChatCompletionChunkOut(BaseModel):
    """One ``data:`` frame of a streamed answer (OpenAI ``chat.completion.chunk``).

    Extensions: ``progress`` on tool-progress chunks; ``web_search`` (Z.AI's shape),
    ``usage`` and ``reply`` on the last chunk. With ``stream_options.include_usage`` one more
    chunk follows it, with no choice and the usage, as OpenAI sends it.
    """

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoiceOut]
    usage: UsageOut | None = None
    web_search: list[WebSearchResult] | None = None
    progress: ProgressOut | None = None
    reply: ReplySummaryOut | None = None
    conversation_id: str | None = None


class TurnOut(BaseModel):
    """The answer of ``POST /v1/conversations/{id}/messages``."""

    conversation_id: str
    persona: str
    content: str
    citations: list[Citation] = Field(default_factory=list)
    web_search: list[WebSearchResult] = Field(default_factory=list)
    rounds: list[dict[str, Any]] = Field(default_factory=list)
    usage: UsageOut
    stop_reason: str
    model: str = ""


class TurnRecordOut(BaseModel):
    """One stored turn's record: what was typed, the sources, the usage and the timings.

    ``input`` is ``null`` (and the rest empty) for turns stored before records were kept.
    """

    turn: int
    persona: str
    created_at: str
    input: str | None = None
    model: str = ""
    stop_reason: str = ""
    citations: list[Citation] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    web_searches: int = 0
    rounds: int = 0
    started_at: str = ""
    duration_ms: float = 0.0
    answer: str | None = None


class ConversationOut(BaseModel):
    """A stored conversation: its messages in order, as sent to the model, and each turn's
    record (sources, usage, timings), so a page can restore it with its sources.

    ``persona`` is the persona of the latest turn; each turn's ``input`` is what was typed
    (``//`` kept) and its ``answer`` the final answer shown (``[n]`` markers, no tool rounds).
    """

    id: str
    persona: str = ""
    messages: list[dict[str, Any]]
    turns: list[TurnRecordOut] = Field(default_factory=list)


class ConversationSummaryOut(BaseModel):
    """One conversation of ``GET /v1/conversations``."""

    id: str
    persona: str
    title: str
    created_at: str
    updated_at: str
    turns: int


class ConversationListOut(BaseModel):
    """``GET /v1/conversations``: newest first; ``next_before`` (when the page is full) is the
    ``before`` of the next page."""

    object: Literal["list"] = "list"
    data: list[ConversationSummaryOut]
    next_before: str | None = None


class ModelOut(BaseModel):
    """One persona, listed as a model."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "generic-framework"
    description: str = ""


class ModelListOut(BaseModel):
    """``GET /v1/models``."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


class BotInfoOut(BaseModel):
    """``GET /v1/bot``: whether answers are recorded ones, the persona to offer first, and
    (offline) the questions that have recorded answers: the default persona's, and each
    persona's own."""

    model_config = ConfigDict(extra="forbid")

    offline: bool
    default_persona: str | None
    examples: list[str]
    persona_examples: dict[str, list[str]]


class HealthOut(BaseModel):
    """``GET /healthz``."""

    status: Literal["ok"] = "ok"


class ReadyOut(BaseModel):
    """``GET /readyz``: each check's verdict. 503 unless the store and the personas pass; a
    failing upstream is listed in ``degraded`` (absent when nothing is) and keeps the 200.
    503 ``draining`` while the service is stopping (SIGTERM), whatever the checks say."""

    status: Literal["ready", "not ready", "draining"]
    checks: dict[str, str]
    degraded: list[Literal["upstream"]] = Field(default_factory=list)


class ErrorDetail(BaseModel):
    """OpenAI's error object."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorOut(BaseModel):
    """Every error response."""

    error: ErrorDetail
