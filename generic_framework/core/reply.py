"""What a turn returns: :class:`Reply` with its rounds, citations and usage.

:class:`Citation` is :mod:`generic_framework.citation`'s, re-exported here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from generic_framework.citation import Citation
from generic_framework.wire.messages import Message, Usage

__all__ = ["Citation", "Reply", "RoundState", "StopReason", "ToolCallInfo", "ToolResult"]

StopReason = Literal["completed", "max_rounds", "length", "content_filter", "tool_calls"]


class ToolCallInfo(BaseModel):
    """A tool call as the model made it (``arguments`` is the raw JSON string)."""

    id: str
    name: str
    arguments: str = ""


class ToolResult(BaseModel):
    """What one tool call produced.

    Attributes:
        call_id: the ``tool_call_id`` it answers.
        name: the tool's name.
        ok: False when the model was sent an error text instead of a result.
        content: exactly what the model read in the ``role: "tool"`` message.
        error: the error text when ``ok`` is False.
        duration_ms: how long the call took.
    """

    call_id: str
    name: str
    ok: bool
    content: str
    error: str | None = None
    duration_ms: float = 0.0


class RoundState(BaseModel):
    """One call to the model within a turn, and the tool calls it asked for.

    Attributes:
        number: 1 for the first call of the turn.
        tool_calls: the calls answered in this round (empty for the answering call).
        results: one result per call, in call order.
        usage: the call's token counts, when the server reported them.
        finish_reason: as Z.AI sent it (``stop``, ``tool_calls``, ``length``...).
        duration_ms: the model call plus the tool calls.
    """

    number: int
    tool_calls: list[ToolCallInfo] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    duration_ms: float = 0.0


class Reply(BaseModel):
    """The outcome of one user turn.

    Attributes:
        content: the answer, with ``[ref_N]`` markers rewritten to the citation numbers.
        citations: the sources, numbered 1..n.
        rounds: every call made to the model, in order.
        usage: token counts summed over the rounds.
        stop_reason: ``completed``, ``max_rounds`` (the tool-round cap forced the answer),
            ``length`` (the answer hit ``max_tokens``), ``content_filter``, or ``tool_calls``
            (the model called tools the caller runs: :attr:`tool_calls`).
        model: the model that answered.
        conversation_id: the conversation the turn belongs to, if any.
        messages: the turn's new messages in order (user, assistant tool calls, tool answers,
            final answer), as stored. Empty when nothing was stored: a bare ``//`` or a turn
            stopped by the content filter.
        web_searches: model calls that returned sources (server-side search) plus the
            ``search_web`` calls the search answered (``client`` and ``mcp`` modes).
        tool_calls: the calls of the caller's own tools the model made, for the caller to run
            (:class:`~generic_framework.core.options.TurnOptions` ``client_tools``); empty
            otherwise.
    """

    content: str
    citations: list[Citation] = Field(default_factory=list)
    rounds: list[RoundState] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "completed"
    model: str = ""
    conversation_id: str | None = None
    messages: list[Message] = Field(default_factory=list)
    web_searches: int = 0
    tool_calls: list[ToolCallInfo] = Field(default_factory=list)
