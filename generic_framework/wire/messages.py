"""Pydantic models of the Z.AI chat-completions wire format (docs/protocol.md §2-§4, §6).

Parsed once at the edge by :class:`~generic_framework.wire.client.GLMClient`; the rest of the
library works on these values. Every response model tolerates unknown fields (Z.AI adds fields
freely), a missing ``object`` field, ``content`` that is ``""``, ``"\\n\\n"`` or null beside
``tool_calls``, and ``arguments`` sent either as a JSON string (real traffic) or as an object
(the OpenAPI spec).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

__all__ = [
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatRequest",
    "Choice",
    "ChunkChoice",
    "CompletionTokensDetails",
    "ContentDelta",
    "Delta",
    "FunctionCall",
    "FunctionDefinition",
    "FunctionToolSpec",
    "Message",
    "PromptTokensDetails",
    "ReaderResponse",
    "ReaderResult",
    "ReasoningDelta",
    "StreamCompleted",
    "StreamEvent",
    "SystemMessage",
    "Thinking",
    "ToolCall",
    "ToolCallDelta",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "WebSearchConfig",
    "WebSearchResponse",
    "WebSearchResult",
    "WebSearchToolSpec",
]


class _Wire(BaseModel):
    """Base of wire models: unknown fields are kept, so nothing the server sends is lost."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --------------------------------------------------------------------------- tool calls


class FunctionCall(_Wire):
    """The function part of a tool call; ``arguments`` is always kept as a JSON string."""

    name: str = ""
    arguments: str = ""

    @field_validator("name", mode="before")
    @classmethod
    def _null_name_as_empty(cls, value: Any) -> Any:
        # OpenAI-compatible servers send "name": null on later tool_stream fragments.
        return "" if value is None else value

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_as_json_text(cls, value: Any) -> Any:
        # The OpenAPI types arguments as an object; real traffic sends a JSON string (§3).
        if value is None:
            return ""
        if isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
        return value


class ToolCall(_Wire):
    """One tool call in an assistant message (type ``function``, ``web_search``, ``mcp``...)."""

    id: str
    type: str = "function"
    function: FunctionCall = Field(default_factory=FunctionCall)
    index: int | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _null_type_is_function(cls, value: Any) -> Any:
        return "function" if value is None else value


class ToolCallDelta(_Wire):
    """A fragment of a tool call in a stream; fragments are assembled by ``index``."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    index: int = 0
    id: str | None = None
    type: str | None = None
    function: FunctionCall | None = None


# --------------------------------------------------------------------------- messages


class SystemMessage(_Wire):
    """The persona's instructions."""

    role: Literal["system"] = "system"
    content: str


class UserMessage(_Wire):
    """What the user said (a string; vision content arrays are passed through untouched)."""

    role: Literal["user"] = "user"
    content: str | list[Any]


class AssistantMessage(_Wire):
    """The model's answer: text, tool calls, or both, with its reasoning when it thought."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None

    @property
    def has_tool_calls(self) -> bool:
        """True when the message carries at least one tool call."""
        return bool(self.tool_calls)

    @model_serializer(mode="wrap")
    def _null_content_beside_calls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Beside tool_calls, empty content goes out as an explicit null, never "" and never
        # missing: "content and tool_calls cannot both be empty" (docs/protocol.md §2.2).
        data: dict[str, Any] = handler(self)
        if self.tool_calls and data.get("content") is None:
            data["content"] = None
        return data


class ToolMessage(_Wire):
    """The answer to one tool call, tied to it by ``tool_call_id``."""

    role: Literal["tool"] = "tool"
    content: str
    tool_call_id: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


# --------------------------------------------------------------------------- tools


class FunctionDefinition(_Wire):
    """A function the model may call: name, description and a JSON-Schema for its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class FunctionToolSpec(_Wire):
    """``{"type": "function", "function": {...}}``."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


class WebSearchConfig(_Wire):
    """Options of the built-in server-side web search tool (docs/protocol.md §2.3)."""

    enable: bool = True
    search_engine: str = "search_pro_jina"
    search_result: bool = True
    search_query: str | None = None
    require_search: bool | None = None
    search_prompt: str | None = None
    count: int | None = Field(default=None, ge=1, le=50)
    search_domain_filter: str | None = None
    search_recency_filter: Literal["oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"] | None = (
        None
    )
    content_size: Literal["medium", "high"] | None = None
    result_sequence: Literal["before", "after"] | None = None


class WebSearchToolSpec(_Wire):
    """``{"type": "web_search", "web_search": {...}}``: run by Z.AI, never by us."""

    type: Literal["web_search"] = "web_search"
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)


ToolSpec = Annotated[FunctionToolSpec | WebSearchToolSpec, Field(discriminator="type")]


class Thinking(_Wire):
    """``{"type": "enabled"|"disabled", "clear_thinking": bool}`` (docs/protocol.md §9)."""

    type: Literal["enabled", "disabled"] = "enabled"
    clear_thinking: bool | None = None


class ChatRequest(_Wire):
    """The body of ``POST /chat/completions``. ``None`` fields are never sent."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec] | None = None
    tool_choice: str | None = None
    stream: bool = False
    tool_stream: bool | None = None
    thinking: Thinking | None = None
    reasoning_effort: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    response_format: dict[str, str] | None = None
    request_id: str | None = None
    user_id: str | None = None

    def to_wire(self) -> bytes:
        """Serialise to the JSON body Z.AI expects, dropping unset (``None``) fields."""
        return self.model_dump_json(exclude_none=True).encode()


# --------------------------------------------------------------------------- responses


class PromptTokensDetails(_Wire):
    """Prompt-side token details."""

    cached_tokens: int = 0


class CompletionTokensDetails(_Wire):
    """Completion-side token details."""

    reasoning_tokens: int = 0


class Usage(_Wire):
    """Token counts for one call (or summed over a turn's rounds)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens served from Z.AI's cache."""
        return self.prompt_tokens_details.cached_tokens if self.prompt_tokens_details else 0

    @property
    def reasoning_tokens(self) -> int:
        """Completion tokens spent thinking."""
        details = self.completion_tokens_details
        return details.reasoning_tokens if details else 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            prompt_tokens_details=PromptTokensDetails(
                cached_tokens=self.cached_tokens + other.cached_tokens
            ),
            completion_tokens_details=CompletionTokensDetails(
                reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens
            ),
        )


class WebSearchResult(_Wire):
    """One source from ``web_search[]`` or from the Web Search API; empty strings are common."""

    title: str = ""
    link: str = ""
    content: str = ""
    media: str = ""
    icon: str = ""
    refer: str = ""
    publish_date: str = ""

    @field_validator("*", mode="before")
    @classmethod
    def _none_as_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class Choice(_Wire):
    """One choice of a non-streaming completion."""

    index: int = 0
    finish_reason: str | None = None
    message: AssistantMessage = Field(default_factory=AssistantMessage)


class ChatCompletion(_Wire):
    """A whole chat completion (non-streaming, or assembled from a stream)."""

    id: str = ""
    request_id: str | None = None
    created: int | None = None
    model: str = ""
    object: str | None = None
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None
    web_search: list[WebSearchResult] | None = None
    content_filter: list[dict[str, Any]] | None = None

    @property
    def message(self) -> AssistantMessage:
        """The first choice's message (Z.AI returns exactly one choice)."""
        return self.choices[0].message if self.choices else AssistantMessage()

    @property
    def finish_reason(self) -> str | None:
        """The first choice's finish_reason."""
        return self.choices[0].finish_reason if self.choices else None


class Delta(_Wire):
    """The incremental part of a stream chunk."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(_Wire):
    """One choice of a stream chunk; ``finish_reason`` only on the last one."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    index: int = 0
    delta: Delta = Field(default_factory=Delta)
    finish_reason: str | None = None


class ChatCompletionChunk(_Wire):
    """One ``data:`` frame of a streamed completion."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    id: str = ""
    created: int | None = None
    model: str = ""
    object: str | None = None
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: Usage | None = None
    web_search: list[WebSearchResult] | None = None


class WebSearchResponse(_Wire):
    """The Web Search API's answer (``POST {base}/web_search``)."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    id: str = ""
    created: int | None = None
    request_id: str | None = None
    search_intent: list[dict[str, Any]] | None = None
    search_result: list[WebSearchResult] = Field(default_factory=list)


class ReaderResult(_Wire):
    """The page the Web Reader read: its text (markdown by default), title and address."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    content: str = ""
    title: str = ""
    url: str = ""
    description: str = ""

    @field_validator("content", "title", "url", "description", mode="before")
    @classmethod
    def _none_as_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class ReaderResponse(_Wire):
    """The Web Reader API's answer (``POST {base}/reader``; docs/protocol.md §6c)."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    id: str = ""
    created: int | None = None
    request_id: str | None = None
    reader_result: ReaderResult | None = None


# --------------------------------------------------------------------------- stream events


class ContentDelta(BaseModel):
    """A piece of answer text from a stream."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    text: str


class ReasoningDelta(BaseModel):
    """A piece of ``reasoning_content`` from a stream."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    text: str


class StreamCompleted(BaseModel):
    """The end of a stream: the whole completion, assembled (tool calls by index, usage,
    ``web_search[]`` from the final chunk)."""

    model_config = ConfigDict(defer_build=True)  # not on a non-streamed answer's path

    completion: ChatCompletion


StreamEvent = ContentDelta | ReasoningDelta | StreamCompleted
