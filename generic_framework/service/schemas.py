"""Request and response bodies of the bot service, as pydantic models.

They validate what arrives, shape what leaves, and are the source of ``/openapi.json``. This
module holds the response models; the request bodies are
:mod:`~generic_framework.service.request_schemas`'s (the OpenAI-compatible endpoint accepts and
ignores fields it does not know, the service's own endpoints forbid them) and are re-exported
here, so every body keeps importing from one place. Booleans are strict (``"stream": "yes"`` is
a 400, not ``true``), and conversation ids follow the one rule of
:mod:`generic_framework.limits` (``CONVERSATION_ID_PATTERN`` is re-exported).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from generic_framework.core.reply import Citation
from generic_framework.limits import CONVERSATION_ID_PATTERN
from generic_framework.service.request_schemas import (
    MAX_OUTPUT_TOKENS,
    TITLE_PATTERN,
    ChatCompletionRequest,
    ChatMessageIn,
    FunctionIn,
    JsonSchemaIn,
    RenameRequest,
    ResponseFormatIn,
    StreamOptionsIn,
    ToolIn,
    TurnRequest,
)
from generic_framework.wire.messages import WebSearchResult

__all__ = [
    "CONVERSATION_ID_PATTERN",
    "MAX_OUTPUT_TOKENS",
    "TITLE_PATTERN",
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

FinishReason = Literal["stop", "length", "content_filter", "tool_calls"]


class RenamedOut(BaseModel):
    """The answer of ``PATCH /v1/conversations/{id}``: the title as stored."""

    id: str
    title: str


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
    # Each kept picture: turn, sha256, mime, and its url (an https picture) or description;
    # its bytes are at /v1/conversations/{id}/pictures/{sha256}.
    pictures: list[dict[str, Any]] = Field(default_factory=list)


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
