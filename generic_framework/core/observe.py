"""One turn, observed: its metrics, its spans and its log line, from one :class:`TurnWatch`.

The persona makes a watch when a turn starts and hands it to the turn
(:attr:`~generic_framework.core.turn.Turn.watch`); the engine tells it about each model call
and each tool call, the persona about the first text and the end. Everything is counted on
the watch as plain integers and written once, when the turn ends: the metrics of
:class:`~generic_framework.telemetry.metrics.Metrics`, the ``invoke_agent`` span with its
``chat`` and ``execute_tool`` children (only when tracing is on), and one log line on the
``generic_framework.turn`` logger (only when INFO is enabled) with the turn's id, persona,
hashed conversation, Z.AI request ids and outcome.
"""

from __future__ import annotations

import asyncio
import logging
import os
from time import perf_counter
from typing import TYPE_CHECKING, Any

from generic_framework.core.reply import Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.core.tooling import CallOutcome, ToolPlan
from generic_framework.telemetry import Telemetry
from generic_framework.telemetry.logs import conversation_hash
from generic_framework.tools.search import SEARCH_TOOL_NAME
from generic_framework.wire.errors import redact
from generic_framework.wire.messages import ChatCompletion, ChatRequest, ToolCall

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["TurnWatch"]

turn_logger = logging.getLogger("generic_framework.turn")


class TurnWatch:
    """Counts what one turn does and reports it when the turn ends.

    Args:
        telemetry: the runtime's metrics and tracing.
        spec: the persona (resolved): its name and model label everything.
        plan: the turn's tools; a tool the model names outside it is counted as ``unknown``.
        conversation_id: hashed before it is written anywhere.
        stream: whether the turn streams (only streamed turns have a time to first text).
    """

    __slots__ = (
        "_client_search",
        "_conversation_id",
        "_id",
        "_metrics",
        "_plan",
        "_span",
        "_tracing",
        "awaiting_text",
        "builtin_searches",
        "cached",
        "calls",
        "client_searches",
        "completion",
        "model",
        "persona",
        "prompt",
        "reasoning",
        "request_ids",
        "started",
        "stream",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        spec: PersonaSpec,
        plan: ToolPlan,
        conversation_id: str | None,
        *,
        stream: bool,
    ) -> None:
        self.started = perf_counter()
        self._metrics = telemetry.metrics
        self._tracing = telemetry.tracing
        self.persona = spec.name
        self.model = spec.model or ""
        self._plan = plan
        self._client_search = spec.web_search.mode == "client"
        self._conversation_id = conversation_id
        self.stream = self.awaiting_text = stream
        self.calls = self.prompt = self.completion = self.cached = self.reasoning = 0
        self.builtin_searches = self.client_searches = 0
        self.request_ids: list[str] = []
        self._id: str | None = None
        self._span: Span | None = None
        if self._tracing is not None:
            self._span = self._tracing.turn(
                self.persona,
                self.model,
                conversation_hash(conversation_id),
                self.turn_id,
                stream=stream,
            )

    @property
    def turn_id(self) -> str:
        """A random id for this turn (made on first use: most turns are never logged)."""
        if self._id is None:
            self._id = os.urandom(8).hex()
        return self._id

    # ------------------------------------------------------------------ model calls

    def call_started(self, request: ChatRequest, *, stream: bool) -> Span | None:
        """A model call starts; returns its span (``None`` when tracing is off)."""
        self.calls += 1
        if self._tracing is None or self._span is None:
            return None
        tools = len(request.tools) if request.tools else 0
        return self._tracing.model_call(
            self._span, request.model, stream=stream, tools=tools, messages=request.messages
        )

    def call_done(self, span: Span | None, completion: ChatCompletion) -> None:
        """A model call answered: its usage, request id and server-side search are counted."""
        usage = completion.usage
        if usage is not None:
            self.prompt += usage.prompt_tokens
            self.completion += usage.completion_tokens
            self.cached += usage.cached_tokens
            self.reasoning += usage.reasoning_tokens
        request_id = completion.request_id or completion.id
        if request_id:
            self.request_ids.append(request_id)
        if completion.web_search:
            self.builtin_searches += 1
        if span is not None and self._tracing is not None:
            self._tracing.model_done(span, _response_attributes(completion), completion.message)

    def call_failed(self, span: Span | None, exc: BaseException) -> None:
        """A model call raised (or its stream was abandoned)."""
        request_id = getattr(exc, "request_id", None)
        if request_id:
            self.request_ids.append(request_id)
        if span is not None and self._tracing is not None:
            self._tracing.failed(span, exc)

    # ------------------------------------------------------------------ tools and text

    def tool_done(self, call: ToolCall, outcome: CallOutcome) -> None:
        """A tool call ended (reported as it ends, in completion order)."""
        name = outcome.name
        builtin = self._plan.builtin_search and name == "web_search"
        known = name in self._plan.functions or builtin
        self._metrics.tool_call(self.persona, name if known else "unknown", outcome.ok)
        if self._client_search and name == SEARCH_TOOL_NAME and outcome.ok:
            self.client_searches += 1
        if self._span is not None:
            self._tool_span(self._span, call, outcome, name if known else "unknown", builtin)

    def _tool_span(
        self, parent: Span, call: ToolCall, outcome: CallOutcome, name: str, builtin: bool
    ) -> None:
        if self._tracing is None:
            return
        attributes = {
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            # Built-in web_search runs on Z.AI's side: an "extension" in the GenAI conventions.
            "gen_ai.tool.type": "extension" if builtin else "function",
        }
        self._tracing.tool_call(
            parent,
            attributes,
            seconds=outcome.ms / 1000.0,
            error=None if outcome.ok else (outcome.result.error or "failed"),
            arguments=call.function.arguments,
            result=outcome.result.content,
        )

    def first_text(self) -> None:
        """The turn's first text delta is out (streamed turns)."""
        self.awaiting_text = False
        self._metrics.first_text(self.persona, perf_counter() - self.started)

    # ------------------------------------------------------------------ the end

    def finished(self, reply: Reply) -> None:
        """The turn ended with ``reply``."""
        self._end(reply.stop_reason, None)

    def failed(self, exc: BaseException) -> None:
        """The turn raised ``exc``, or was abandoned (``cancelled``)."""
        cancelled = isinstance(exc, GeneratorExit | asyncio.CancelledError)
        self._end("cancelled" if cancelled else "error", exc)

    def _end(self, outcome: str, exc: BaseException | None) -> None:
        seconds = perf_counter() - self.started
        metrics = self._metrics
        metrics.turn(self.persona, outcome, seconds, self.calls)
        metrics.tokens(
            self.persona,
            self.model,
            prompt=self.prompt,
            completion=self.completion,
            cached=self.cached,
            reasoning=self.reasoning,
        )
        if self.builtin_searches:
            metrics.web_searches(self.persona, "builtin", self.builtin_searches)
        if self.client_searches:
            metrics.web_searches(self.persona, "client", self.client_searches)
        if self._span is not None and self._tracing is not None:
            if exc is None:
                self._tracing.turn_done(self._span, self._turn_attributes(outcome))
            else:
                self._span.set_attributes(self._turn_attributes(outcome))
                self._tracing.failed(self._span, exc)
        # INFO for failed turns too: the error itself reaches the caller (a CLI line, an HTTP
        # error), and a WARNING here would print a second line on the CLI's stderr.
        if turn_logger.isEnabledFor(logging.INFO):
            self._log(outcome, seconds, exc)

    def _turn_attributes(self, outcome: str) -> dict[str, Any]:
        return {
            "generic_framework.stop_reason": outcome,
            "generic_framework.rounds": self.calls,
            "generic_framework.web_searches": self.builtin_searches + self.client_searches,
            "gen_ai.usage.input_tokens": self.prompt,
            "gen_ai.usage.output_tokens": self.completion,
            "gen_ai.usage.cache_read.input_tokens": self.cached,
            "gen_ai.usage.reasoning.output_tokens": self.reasoning,
            "zai.request_ids": list(self.request_ids),
        }

    def _log(self, outcome: str, seconds: float, exc: BaseException | None) -> None:
        fields: dict[str, Any] = {
            "event": "turn",
            "turn_id": self.turn_id,
            "persona": self.persona,
            "model": self.model,
            "conversation": conversation_hash(self._conversation_id),
            "request_id": self.request_ids[-1] if self.request_ids else None,
            "request_ids": list(self.request_ids),
            "outcome": outcome,
            "stream": self.stream,
            "rounds": self.calls,
            "duration_ms": round(seconds * 1000.0, 1),
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "cached_tokens": self.cached,
            "reasoning_tokens": self.reasoning,
            "web_searches": self.builtin_searches + self.client_searches,
        }
        if exc is not None:
            fields["error_type"] = type(exc).__name__
            fields["error"] = redact(str(exc), 300)
        turn_logger.info(
            "turn %s persona=%s conversation=%s outcome=%s rounds=%d duration_ms=%.0f "
            "tokens=%d+%d request_id=%s",
            fields["turn_id"],
            self.persona,
            fields["conversation"],
            outcome,
            self.calls,
            fields["duration_ms"],
            self.prompt,
            self.completion,
            fields["request_id"],
            extra=fields,
        )


def _response_attributes(completion: ChatCompletion) -> dict[str, Any]:
    """The ``gen_ai.response.*`` and usage attributes of a model call's span."""
    attributes: dict[str, Any] = {
        "gen_ai.response.model": completion.model,
        "gen_ai.response.id": completion.id,
        "gen_ai.response.finish_reasons": [completion.finish_reason or ""],
    }
    request_id = completion.request_id or completion.id
    if request_id:
        attributes["zai.request_id"] = request_id
    usage = completion.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    if completion.web_search:
        attributes["generic_framework.web_search.results"] = len(completion.web_search)
    return attributes
