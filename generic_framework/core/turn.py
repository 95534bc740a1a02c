"""The state of one user turn while the loop runs, and how it becomes a :class:`Reply`.

Kept apart from :mod:`~generic_framework.core.persona` so the loop reads as the algorithm and
this module as the bookkeeping: rounds, citations, the final assistant message. The turn's
numbers (tokens, searches, tool calls, timings) are in its watch's
:class:`~generic_framework.core.account.TurnAccount`, read here for the reply and the record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING

from generic_framework.core.account import TurnAccount
from generic_framework.core.citations import CitationBook
from generic_framework.core.observe import TurnWatch
from generic_framework.core.options import NO_OPTIONS, TurnOptions
from generic_framework.core.reply import Reply, RoundState, StopReason, ToolCallInfo, ToolResult
from generic_framework.core.tooling import ToolPlan, call_name
from generic_framework.wire.messages import AssistantMessage, ChatCompletion, Message, ToolCall
from generic_framework.wire.model import ChatModel

if TYPE_CHECKING:
    from generic_framework.store.base import TurnRecord
    from generic_framework.store.users import Caller

__all__ = ["Turn", "turn_record"]

logger = logging.getLogger("generic_framework.persona")


def turn_record(
    text: str,
    reply: Reply,
    account: TurnAccount,
    caller: Caller | None = None,
    *,
    offline: bool = False,
) -> TurnRecord:
    """What the store keeps beside a turn's messages: ``text`` as typed (``//`` included),
    the reply's model, stop reason and sources, the numbers of the turn's ``account``
    (the same the reply, the metrics and the log line show), timed from the turn's beginning,
    who asked (``caller``'s user and key ids), and whether the embedded mock answered
    (``offline``)."""
    # Only a stored turn needs the record, and the store is loaded by then: a turn without a
    # conversation loads no store module (docs/design/0704).
    from generic_framework.store.base import TurnRecord

    return TurnRecord(
        input=text,
        model=reply.model,
        stop_reason=reply.stop_reason,
        sources=tuple(reply.citations),
        prompt_tokens=account.prompt,
        completion_tokens=account.completion,
        cached_tokens=account.cached,
        reasoning_tokens=account.reasoning,
        web_searches=account.web_searches,
        rounds=account.calls,
        started_at=account.began_at.isoformat(timespec="milliseconds"),
        duration_ms=round(account.turn_ms, 1),
        round_ms=tuple(round(ms, 1) for ms in account.round_ms),
        user_id=caller.user.id if caller is not None else "",
        key_id=caller.key_id if caller is not None else "",
        offline=offline,
    )


@dataclass(slots=True)
class Turn:
    """One user turn in progress: what it was given, and what it has produced so far.

    Given (explicitly, when the turn starts):
        persona: the persona's name, for log lines.
        model: what answers the turn's model calls (the runtime's
            :class:`~generic_framework.wire.model.ChatModel`: its GLM client, or a scripted
            model).
        plan: the tools this turn offers (chosen by ``//``).
        prefix: system prompt + sanitised history: the same for every round.
        conversation_id: where the turn will be stored, if anywhere.
        options: the caller's options (:class:`~generic_framework.core.options.TurnOptions`).
        upstream_user: the asker's pseudonym, sent as the requests' ``user_id`` over the
            options' (``None``: the options' value, if any, is sent).
        watch: told about each model call and each round; keeps the turn's
            :class:`~generic_framework.core.account.TurnAccount`.

    Produced (appended by the loop):
        new: this turn's messages, starting with the user message.
        citations: the sources found so far, numbered in order.
        rounds: one :class:`RoundState` per model call.
        correction: the messages of a corrective call (a JSON answer that did not match its
            schema, and the request to correct it): sent once, never stored.
    """

    persona: str
    model: ChatModel
    plan: ToolPlan
    prefix: list[Message]
    new: list[Message]
    conversation_id: str | None
    watch: TurnWatch
    options: TurnOptions = NO_OPTIONS
    citations: CitationBook = field(default_factory=CitationBook)
    rounds: list[RoundState] = field(default_factory=list)
    correction: list[Message] = field(default_factory=list)

    @property
    def holds_text(self) -> bool:
        """The answer is streamed only once validated (a JSON schema was asked for)."""
        return self.options.json_schema is not None

    upstream_user: str | None = None

    @property
    def account(self) -> TurnAccount:
        """The turn's numbers (its watch writes them)."""
        return self.watch.account

    def collect(self, completion: ChatCompletion) -> None:
        """Keep a completion's ``web_search[]`` sources as citations."""
        if completion.web_search:
            self.citations.add_server_results(completion.web_search)

    def record_round(
        self,
        completion: ChatCompletion,
        started: float,
        calls: Sequence[ToolCall] = (),
        results: Sequence[ToolResult] = (),
        *,
        most: int,
        tools_started: float = 0.0,
    ) -> None:
        """Add the round's :class:`RoundState` (its calls and their results), count it in the
        account (``tools_started``: when its tools started, for their spans), log it."""
        ms = (perf_counter() - started) * 1000.0
        number = len(self.rounds) + 1
        infos = [
            ToolCallInfo(id=c.id, name=call_name(c), arguments=c.function.arguments) for c in calls
        ]
        usage = completion.usage
        self.rounds.append(
            RoundState(
                number=number,
                tool_calls=infos,
                results=list(results),
                usage=usage,
                finish_reason=completion.finish_reason,
                duration_ms=ms,
            )
        )
        self.watch.round_done(ms, calls, results, tools_started)
        if logger.isEnabledFor(logging.INFO):
            names = ",".join(info.name for info in infos) or "none"
            tokens = usage.total_tokens if usage else 0
            logger.info(
                "%s round %d/%d: tools=%s, %.0f ms, %d tokens",
                *(self.persona, number, most, names, ms, tokens),
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

    def hand_back(
        self, completion: ChatCompletion, calls: Sequence[ToolCall], *, model: str
    ) -> Reply:
        """End the turn with the caller's tool ``calls``, for the caller to run."""
        message = completion.message
        content = self.citations.rewrite(message.content or "")
        self.new.append(AssistantMessage(content=content or None, tool_calls=list(calls)))
        reply = self.reply(content, "tool_calls", completion.model or model, self.new)
        reply.tool_calls = [
            ToolCallInfo(id=c.id, name=call_name(c), arguments=c.function.arguments) for c in calls
        ]
        return reply

    def reply(self, content: str, stop: StopReason, model: str, messages: list[Message]) -> Reply:
        """The :class:`Reply` with the turn's citations and rounds, and the account's usage
        and web searches; the account's clock stops here."""
        account = self.account
        account.end()
        return Reply(
            content=content,
            citations=self.citations.citations,
            rounds=self.rounds,
            usage=account.usage(),
            stop_reason=stop,
            model=model,
            conversation_id=self.conversation_id,
            messages=messages,
            web_searches=account.web_searches,
        )
