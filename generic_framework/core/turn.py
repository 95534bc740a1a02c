"""The state of one user turn while the loop runs, and how it becomes a :class:`Reply`.

Kept apart from :mod:`~generic_framework.core.persona` so the loop reads as the algorithm and
this module as the bookkeeping: usage, rounds, citations, the final assistant message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from time import perf_counter

from generic_framework.core.citations import CitationBook
from generic_framework.core.observe import TurnWatch
from generic_framework.core.reply import Reply, RoundState, StopReason, ToolCallInfo, ToolResult
from generic_framework.core.tooling import ToolPlan, call_name
from generic_framework.store.base import SourceRecord, TurnRecord
from generic_framework.tools.search import SEARCH_TOOL_NAME
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    Message,
    ToolCall,
    Usage,
)

__all__ = ["Turn", "total_usage", "turn_record"]

logger = logging.getLogger("generic_framework.persona")


def total_usage(usages: Sequence[Usage]) -> Usage:
    """The sum of the rounds' token counts (one addition per extra round)."""
    if not usages:
        return Usage()
    total = usages[0]
    for usage in usages[1:]:
        total = total + usage
    return total


def turn_record(text: str, reply: Reply, started_at: datetime, duration_ms: float) -> TurnRecord:
    """What the store keeps beside a turn's messages: ``text`` as typed (``//`` included),
    the reply's model, stop reason, sources and usage, and the timings."""
    usage = reply.usage
    return TurnRecord(
        input=text,
        model=reply.model,
        stop_reason=reply.stop_reason,
        sources=tuple(
            SourceRecord(c.number, c.title, c.url, c.site, c.published, c.snippet, c.ref)
            for c in reply.citations
        ),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        web_searches=reply.web_searches,
        rounds=len(reply.rounds),
        started_at=started_at.isoformat(timespec="milliseconds"),
        duration_ms=round(duration_ms, 1),
        round_ms=tuple(round(r.duration_ms, 1) for r in reply.rounds),
    )


@dataclass(slots=True)
class Turn:
    """One user turn in progress: what it was given, and what it has produced so far.

    Given (explicitly, when the turn starts):
        persona: the persona's name, for log lines.
        client: the client that calls the model.
        plan: the tools this turn offers (chosen by ``//``).
        prefix: system prompt + sanitised history: the same for every round.
        conversation_id: where the turn will be stored, if anywhere.
        watch: told about each model call and tool call (metrics, spans, the turn's log line).

    Produced (appended by the loop):
        new: this turn's messages, starting with the user message.
        citations: the sources found so far, numbered in order.
        rounds: one :class:`RoundState` per model call.
        usages: the token counts of each call.
        web_searches: calls that returned sources, plus client-side ``search_web`` calls.
    """

    persona: str
    client: GLMClient
    plan: ToolPlan
    prefix: list[Message]
    new: list[Message]
    conversation_id: str | None
    watch: TurnWatch
    citations: CitationBook = field(default_factory=CitationBook)
    rounds: list[RoundState] = field(default_factory=list)
    usages: list[Usage] = field(default_factory=list)
    web_searches: int = 0

    def collect(self, completion: ChatCompletion) -> None:
        """Keep a completion's usage and its ``web_search[]`` sources."""
        if completion.usage is not None:
            self.usages.append(completion.usage)
        if completion.web_search:
            self.citations.add_server_results(completion.web_search)
            self.web_searches += 1

    def record_round(
        self,
        completion: ChatCompletion,
        started: float,
        calls: Sequence[ToolCall] = (),
        results: Sequence[ToolResult] = (),
        *,
        most: int,
    ) -> None:
        """Add the round's :class:`RoundState` (its calls and their results) and log it."""
        ms = (perf_counter() - started) * 1000.0
        number = len(self.rounds) + 1
        infos = [
            ToolCallInfo(id=c.id, name=call_name(c), arguments=c.function.arguments) for c in calls
        ]
        self.web_searches += sum(info.name == SEARCH_TOOL_NAME for info in infos)
        self.rounds.append(
            RoundState(
                number=number,
                tool_calls=infos,
                results=list(results),
                usage=completion.usage,
                finish_reason=completion.finish_reason,
                duration_ms=ms,
            )
        )
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "%s round %d/%d: tools=%s, %.0f ms, %d tokens",
                self.persona,
                number,
                most,
                ",".join(info.name for info in infos) or "none",
                ms,
                completion.usage.total_tokens if completion.usage else 0,
            )

    def finish(
        self, completion: ChatCompletion, *, forced: bool, fallback: str, model: str
    ) -> Reply:
        """End the turn with the completion's text (tool calls in it are dropped)."""
        message = completion.message
        if message.tool_calls:
            logger.warning(
                "%s: dropped %d tool call(s) from the answering call",
                self.persona,
                len(message.tool_calls),
            )
        text = (message.content or "").strip() or fallback
        content = self.citations.rewrite(text)
        self.new.append(
            AssistantMessage(content=content, reasoning_content=message.reasoning_content)
        )
        stop: StopReason = "completed"
        if completion.finish_reason == "length":
            stop = "length"
        elif forced:
            stop = "max_rounds"
        return self.reply(content, stop, completion.model or model, self.new)

    def reply(self, content: str, stop: StopReason, model: str, messages: list[Message]) -> Reply:
        """The :class:`Reply` with the turn's citations, rounds and summed usage."""
        return Reply(
            content=content,
            citations=self.citations.citations,
            rounds=self.rounds,
            usage=total_usage(self.usages),
            stop_reason=stop,
            model=model,
            conversation_id=self.conversation_id,
            messages=messages,
            web_searches=self.web_searches,
        )
