"""One turn, observed: its metrics, its spans and its log line, from one :class:`TurnWatch`.

The persona makes a watch when a turn starts and hands it to the turn
(:attr:`~generic_framework.core.turn.Turn.watch`); the loop tells it about each model call,
the first streamed text and each recorded round, the persona about the end. The numbers are
counted once, in the watch's :class:`~generic_framework.core.account.TurnAccount` (which the
reply and the stored record read too), and written out when the turn ends: the metrics of
:class:`~generic_framework.telemetry.metrics.Metrics`, the ``invoke_agent`` span with its
``chat`` and ``execute_tool`` children (only when tracing is on), and one log line on the
``generic_framework.turn`` logger (only when INFO is enabled) with the turn's id, persona,
hashed conversation, Z.AI request ids and outcome.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from generic_framework.core.account import TurnAccount
from generic_framework.core.hooks import TurnHooks
from generic_framework.core.reply import ToolResult
from generic_framework.core.spec import PersonaSpec
from generic_framework.core.tooling import ToolPlan
from generic_framework.redaction import redact
from generic_framework.telemetry import Telemetry
from generic_framework.telemetry.logs import conversation_hash
from generic_framework.tools.search import SEARCH_TOOL_NAME
from generic_framework.wire.messages import ChatCompletion, ChatRequest, ToolCall

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["TurnWatch"]

turn_logger = logging.getLogger("generic_framework.turn")


class TurnWatch:
    """Keeps one turn's :class:`TurnAccount` and reports it when the turn ends.

    The loop tells the watch about each model call and each tool round; the watch writes the
    numbers into :attr:`account` (its only writer) and opens and ends the spans. When the turn
    ends, the metrics, the turn's span attributes and its log line are all read from the
    account, as the reply and the stored record are.

    Args:
        telemetry: the runtime's metrics and tracing.
        spec: the persona (resolved): its name and model label everything.
        plan: the turn's tools; a tool the model names outside it is counted as ``unknown``.
        conversation_id: hashed before it is written anywhere.
        stream: whether the turn streams (only streamed turns have a time to first text).
        user: the asker's user id, hashed before it is written (the log line's ``user``).
        hooks: the turn's lifecycle hooks (:class:`~generic_framework.core.hooks.TurnHooks`),
            fired as the account is written.
    """

    __slots__ = (
        "_conversation_id",
        "_id",
        "_metrics",
        "_plan",
        "_span",
        "_tracing",
        "_user",
        "account",
        "hooks",
        "model",
        "persona",
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
        user: str | None = None,
        hooks: TurnHooks | None = None,
    ) -> None:
        self.account = TurnAccount()
        self.hooks = hooks
        self._user = user
        self._metrics = telemetry.metrics
        self._tracing = telemetry.tracing
        self.persona = spec.name
        self.model = spec.model or ""
        self._plan = plan
        self._conversation_id = conversation_id
        self.stream = stream
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

    def began(self) -> None:
        """The turn holds its conversation (or needs none) and begins."""
        self.account.begin()
        if self.hooks is not None:
            self.hooks.on_start(self.persona, self.account)

    # ------------------------------------------------------------------ model calls

    def call_started(self, request: ChatRequest, *, stream: bool) -> Span | None:
        """A model call starts; returns its span (``None`` when tracing is off)."""
        self.account.calls += 1
        if self._tracing is None or self._span is None:
            return None
        tools = len(request.tools) if request.tools else 0
        return self._tracing.model_call(
            self._span, request.model, stream=stream, tools=tools, messages=request.messages
        )

    def call_done(self, span: Span | None, completion: ChatCompletion) -> None:
        """A model call answered: its usage, request id and server-side search are counted."""
        self.account.answered(completion)
        if self.hooks is not None:
            self.hooks.on_model_call(self.account, completion)
        if span is not None and self._tracing is not None:
            self._tracing.model_done(span, _response_attributes(completion), completion.message)

    def call_failed(self, span: Span | None, exc: BaseException) -> None:
        """A model call raised (or its stream was abandoned)."""
        request_id = getattr(exc, "request_id", None)
        if request_id:
            self.account.request_ids.append(request_id)
        if span is not None and self._tracing is not None:
            self._tracing.failed(span, exc)

    def context_overflow(self, outcome: str) -> None:
        """A call was refused as too long (1261): ``trimmed`` (sent again without the oldest
        history turns) or ``failed`` (the turn gets the error)."""
        self._metrics.context_overflow(self.persona, outcome)

    def text_started(self) -> None:
        """A streamed text delta is out; the first one of the turn is timed."""
        self.account.text_started()

    # ------------------------------------------------------------------ tool rounds

    def round_done(
        self,
        ms: float,
        calls: Sequence[ToolCall] = (),
        results: Sequence[ToolResult] = (),
        tools_started: float = 0.0,
    ) -> None:
        """A round was recorded: its time, and its tool calls with their results.

        ``tools_started`` is the ``perf_counter()`` at which the round's tools started (they
        start together), so each tool's span starts there and lasts its own duration.
        """
        account, plan = self.account, self._plan
        account.round_ms.append(ms)
        for call, result in zip(calls, results, strict=True):
            name = result.name
            builtin = plan.builtin_search and name == "web_search"
            label = name if builtin or name in plan.functions else "unknown"
            account.tool_ended(label, result.ok)
            if result.ok and name == SEARCH_TOOL_NAME and plan.search_mode is not None:
                account.searched(plan.search_mode)
            if self.hooks is not None:
                self.hooks.on_tool_call(account, call, result)
            if self._span is not None:
                self._tool_span(self._span, call, result, label, builtin, tools_started)

    def _tool_span(
        self,
        parent: Span,
        call: ToolCall,
        result: ToolResult,
        name: str,
        builtin: bool,
        started: float,
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
            start_ns=time.time_ns() - int((perf_counter() - started) * 1e9),
            seconds=result.duration_ms / 1000.0,
            error=None if result.ok else (result.error or "failed"),
            arguments=call.function.arguments,
            result=result.content,
        )

    # ------------------------------------------------------------------ the end

    def finished(self, stop_reason: str) -> None:
        """The turn ended with a reply that stopped for ``stop_reason``."""
        self._end(stop_reason, None)

    def failed(self, exc: BaseException) -> None:
        """The turn raised ``exc``, or was abandoned (``cancelled``)."""
        cancelled = isinstance(exc, GeneratorExit | asyncio.CancelledError)
        self._end("cancelled" if cancelled else "error", exc)

    def _end(self, outcome: str, exc: BaseException | None) -> None:
        account = self.account
        account.end()
        self._count(outcome)
        if self.hooks is not None:
            self.hooks.on_end(account, outcome)
        if self._span is not None and self._tracing is not None:
            if exc is None:
                self._tracing.turn_done(self._span, self._turn_attributes(outcome))
            else:
                self._span.set_attributes(self._turn_attributes(outcome))
                self._tracing.failed(self._span, exc)
        # INFO for failed turns too: the error itself reaches the caller (a CLI line, an HTTP
        # error), and a WARNING here would print a second line on the CLI's stderr.
        if turn_logger.isEnabledFor(logging.INFO):
            self._log(outcome, exc)

    def _count(self, outcome: str) -> None:
        """The account into the metrics."""
        account, metrics, persona = self.account, self._metrics, self.persona
        metrics.turn(persona, outcome, account.seconds, account.calls)
        metrics.tokens(
            persona,
            self.model,
            prompt=account.prompt,
            completion=account.completion,
            cached=account.cached,
            reasoning=account.reasoning,
        )
        for mode, count in account.searches.items():
            metrics.web_searches(persona, mode, count)
        for (tool, ok), count in account.tools.items():
            metrics.tool_call(persona, tool, ok, count)
        if self.stream and account.first_text is not None:
            metrics.first_text(persona, account.first_text)

    def _turn_attributes(self, outcome: str) -> dict[str, Any]:
        account = self.account
        return {
            "generic_framework.stop_reason": outcome,
            "generic_framework.rounds": account.calls,
            "generic_framework.web_searches": account.web_searches,
            "gen_ai.usage.input_tokens": account.prompt,
            "gen_ai.usage.output_tokens": account.completion,
            "gen_ai.usage.cache_read.input_tokens": account.cached,
            "gen_ai.usage.reasoning.output_tokens": account.reasoning,
            "zai.request_ids": list(account.request_ids),
        }

    def _log(self, outcome: str, exc: BaseException | None) -> None:
        account = self.account
        fields: dict[str, Any] = {
            "event": "turn",
            "turn_id": self.turn_id,
            "persona": self.persona,
            "model": self.model,
            "conversation": conversation_hash(self._conversation_id),
            "user": conversation_hash(self._user),
            "request_id": account.request_ids[-1] if account.request_ids else None,
            "request_ids": list(account.request_ids),
            "outcome": outcome,
            "stream": self.stream,
            "rounds": account.calls,
            "duration_ms": round(account.seconds * 1000.0, 1),
            "lock_wait_ms": round(account.waited * 1000.0, 1),
            "prompt_tokens": account.prompt,
            "completion_tokens": account.completion,
            "cached_tokens": account.cached,
            "reasoning_tokens": account.reasoning,
            "web_searches": account.web_searches,
            "web_searches_by_mode": dict(account.searches),
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
            account.calls,
            fields["duration_ms"],
            account.prompt,
            account.completion,
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
