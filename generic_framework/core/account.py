"""TurnAccount: the numbers of one turn, counted once.

Tokens, web searches by mode, tool calls by outcome, model calls, request ids and timings are
written here, by the turn's :class:`~generic_framework.core.observe.TurnWatch` only, as the
loop reports each model call and each tool round. Everything that shows a turn's numbers reads
this one object: the :class:`~generic_framework.core.reply.Reply`
(:meth:`~generic_framework.core.turn.Turn.reply`), the stored
:class:`~generic_framework.store.base.TurnRecord`
(:func:`~generic_framework.core.turn.turn_record`), the Prometheus metrics, the turn's JSON log
line and its trace span (:class:`~generic_framework.core.observe.TurnWatch`). Two ledgers of one
turn cannot disagree when there is only one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from time import perf_counter
from typing import Literal

from generic_framework.wire.messages import (
    ChatCompletion,
    CompletionTokensDetails,
    PromptTokensDetails,
    Usage,
)

__all__ = ["SearchRoute", "TurnAccount"]

SearchRoute = Literal["builtin", "client", "mcp"]
"""How a web search ran: ``builtin`` (Z.AI searched server-side and sent ``web_search[]``),
``client`` (``search_web`` through the Web Search API), ``mcp`` (``search_web`` through the
Web Search MCP server)."""


class TurnAccount:
    """The ledger of one turn (plain integers: it is written on every model and tool call).

    Attributes:
        started: ``perf_counter()`` when the turn arrived (before its conversation's lock):
            where the metrics and the log line measure from.
        began, began_at: ``perf_counter()`` and the UTC time when the turn held its
            conversation and began: where the stored record measures from, so a stored turn
            never seems to start before the previous turn of its conversation ended.
        ended: ``perf_counter()`` when the reply was made, or the turn failed.
        calls: model calls started (the turn's rounds).
        prompt, completion, cached, reasoning, total: token counts summed over the calls
            (``prompt`` includes ``cached``, ``completion`` includes ``reasoning``).
        searches: web searches by :data:`SearchRoute`. A model call that returned
            ``web_search[]`` sources is one ``builtin`` search; a ``search_web`` call that
            answered is one ``client`` or ``mcp`` search (a call refused before it reached the
            search, bad arguments say, is only an ``error`` tool call).
        tools: tool calls by ``(tool, ok)``; a tool the model named outside the turn's plan is
            counted as ``unknown``.
        request_ids: Z.AI's request ids, in call order (failed calls' too).
        round_ms: each recorded round's duration (the model call plus its tools).
        first_text: seconds from the start to the first streamed text, if any.
    """

    __slots__ = (
        "began",
        "began_at",
        "cached",
        "calls",
        "completion",
        "ended",
        "first_text",
        "prompt",
        "reasoning",
        "request_ids",
        "round_ms",
        "searches",
        "started",
        "tools",
        "total",
    )

    def __init__(self) -> None:
        self.started = self.began = perf_counter()
        self.began_at = datetime.now(UTC)
        self.ended: float | None = None
        self.calls = self.prompt = self.completion = self.cached = self.reasoning = 0
        self.total = 0
        self.searches: dict[SearchRoute, int] = {}
        self.tools: dict[tuple[str, bool], int] = {}
        self.request_ids: list[str] = []
        self.round_ms: list[float] = []
        self.first_text: float | None = None

    # ------------------------------------------------------------------ writing

    def begin(self) -> None:
        """The turn holds its conversation (or needs none) and begins."""
        self.began, self.began_at = perf_counter(), datetime.now(UTC)

    def answered(self, completion: ChatCompletion) -> None:
        """A model call answered: its tokens, its request id, its server-side search."""
        usage = completion.usage
        if usage is not None:
            self.prompt += usage.prompt_tokens
            self.completion += usage.completion_tokens
            self.total += usage.total_tokens
            self.cached += usage.cached_tokens
            self.reasoning += usage.reasoning_tokens
        request_id = completion.request_id or completion.id
        if request_id:
            self.request_ids.append(request_id)
        if completion.web_search:
            self.searched("builtin")

    def searched(self, mode: SearchRoute) -> None:
        """One web search ran in ``mode``."""
        self.searches[mode] = self.searches.get(mode, 0) + 1

    def tool_ended(self, tool: str, ok: bool) -> None:
        """One tool call ended (``tool`` already bounded: a name of the plan, or ``unknown``)."""
        key = (tool, ok)
        self.tools[key] = self.tools.get(key, 0) + 1

    def text_started(self) -> bool:
        """The first streamed text is out; True the first time only."""
        if self.first_text is not None:
            return False
        self.first_text = perf_counter() - self.started
        return True

    def end(self) -> None:
        """The turn's reply is made (or the turn failed); later calls change nothing."""
        if self.ended is None:
            self.ended = perf_counter()

    # ------------------------------------------------------------------ reading

    @property
    def web_searches(self) -> int:
        """Web searches of every mode."""
        return sum(self.searches.values())

    @property
    def seconds(self) -> float:
        """From the turn's arrival to its end (to now while it runs)."""
        end = self.ended if self.ended is not None else perf_counter()
        return end - self.started

    @property
    def waited(self) -> float:
        """Seconds from the turn's arrival to its beginning (its conversation's lock)."""
        return self.began - self.started

    @property
    def turn_ms(self) -> float:
        """Milliseconds from the turn's beginning to its end, as the stored record keeps."""
        return (self.seconds - self.waited) * 1000.0

    def usage(self) -> Usage:
        """The token counts as one :class:`Usage` (what :attr:`Reply.usage` shows)."""
        return Usage(
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            total_tokens=self.total,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=self.cached),
            completion_tokens_details=CompletionTokensDetails(reasoning_tokens=self.reasoning),
        )
