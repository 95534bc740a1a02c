"""Persona: a system prompt, some tools, and the tool loop that answers one user turn.

``respond()`` and ``stream()`` share one loop, :meth:`Persona._loop`, an async generator of
:mod:`~generic_framework.core.events`: ``stream()`` hands its events out as they come,
``respond()`` drains it and returns the :class:`~generic_framework.core.reply.Reply` of the
final ``Done`` event. Only :meth:`Persona._complete` (``client.chat``, for ``respond()``) and
:meth:`Persona._call_llm` (``client.chat_stream``, for ``stream()``) talk to :class:`GLMClient`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from time import perf_counter
from types import TracebackType
from typing import Self, cast

from generic_framework.client import GLMClient
from generic_framework.config import Settings
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.history import ConversationStore
from generic_framework.core.reply import Reply
from generic_framework.core.sanitize import sanitize_history
from generic_framework.core.tooling import (
    BUILTIN_SEARCH_CONFIRMATION,
    CallOutcome,
    ToolPlan,
    build_plans,
    call_name,
    execute,
    tool_result,
)
from generic_framework.core.turn import Turn
from generic_framework.errors import ConfigError, ContentFilterError, ToolLoopError
from generic_framework.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    ContentDelta,
    Message,
    StreamCompleted,
    StreamEvent,
    SystemMessage,
    Thinking,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from generic_framework.tools.base import FunctionTool
from generic_framework.tools.web_search import WebSearch

__all__ = [
    "ASK_FOR_QUESTION",
    "BUILTIN_SEARCH_CONFIRMATION",
    "CONTENT_FILTER_NOTICE",
    "DEFAULT_FINAL_ANSWER_FALLBACK",
    "FORCED_ANSWER_INSTRUCTION",
    "WEB_PREFIX",
    "Persona",
]

logger = logging.getLogger("generic_framework.persona")

WEB_PREFIX = "//"
"""A message starting with this (after leading whitespace) is a web query."""

ASK_FOR_QUESTION = "Please write a question after //, for example: // weather in Nanaimo today"
ASK_FOR_MESSAGE = "Please write a message."
CONTENT_FILTER_NOTICE = "Sorry, this request was blocked by the provider's content filter."
DEFAULT_FINAL_ANSWER_FALLBACK = (
    "Sorry, I could not put an answer together this time. Please try again or rephrase."
)
FORCED_ANSWER_INSTRUCTION = (
    "You have used every tool call available for this question. Do not call any tools. "
    "Answer the question above now, using only the information you already have, and say "
    "briefly if something could not be checked."
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class Persona:
    """A named assistant: system prompt, tools, web-search settings and the tool loop.

    Args:
        name: identifies the persona (``^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$``).
        system_prompt: the instructions sent first in every request.
        tools: function tools (see :func:`~generic_framework.tools.tool`).
        settings: defaults for everything below; ``Settings()`` (the environment) when omitted.
        model: the GLM model id (``LLM_MODEL``).
        temperature: 0.0-1.0 (``LLM_TEMPERATURE``); ``None`` leaves the server default.
        thinking: ``"enabled"``, ``"disabled"`` or a :class:`Thinking` (``LLM_THINKING``).
        max_tool_rounds: tool rounds per turn before the forced final answer
            (``MAX_TOOL_ROUNDS``); 0 turns tools off.
        web_search: how ``//`` messages search (mode, engine, count...); ``False`` is
            ``WebSearch(mode="off")``, ``None`` or ``True`` the settings' defaults.
        tools_always: offer the function tools on messages without ``//`` too.
        description: one line for listings (``generic-framework personas``, ``/v1/models``).
        final_answer_fallback: the reply when the model's final answer is empty.
        client: a shared :class:`GLMClient`; one is created (and closed by :meth:`aclose`)
            when omitted.
        store: a shared :class:`ConversationStore`; one on ``settings.database_path`` is
            created on first use of a ``conversation_id`` when omitted.

    Raises:
        ConfigError: an invalid name, temperature, round cap, thinking value or tool set.
    """

    def __init__(
        self,
        name: str,
        system_prompt: str,
        tools: Iterable[FunctionTool] = (),
        settings: Settings | None = None,
        model: str | None = None,
        temperature: float | None = None,
        thinking: str | Thinking | None = None,
        max_tool_rounds: int | None = None,
        web_search: WebSearch | bool | None = None,
        tools_always: bool = False,
        description: str = "",
        final_answer_fallback: str = DEFAULT_FINAL_ANSWER_FALLBACK,
        client: GLMClient | None = None,
        store: ConversationStore | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ConfigError(f"persona name {name!r} is invalid: use 1-64 letters, digits, ._-")
        self.name = name
        self.system_prompt = system_prompt
        self.description = description
        self.settings = settings if settings is not None else Settings()
        self.model = model or self.settings.llm_model
        self.temperature = _check_temperature(
            temperature if temperature is not None else self.settings.llm_temperature
        )
        self.thinking = _thinking(thinking if thinking is not None else self.settings.llm_thinking)
        rounds = self.settings.max_tool_rounds if max_tool_rounds is None else max_tool_rounds
        if not 0 <= rounds <= 50:
            raise ConfigError(f"max_tool_rounds must be between 0 and 50 (got {rounds})")
        self.max_tool_rounds = rounds
        self.web_search = _web_search(web_search).resolve(self.settings)
        self.tools: tuple[FunctionTool, ...] = tuple(tools)
        self.tools_always = tools_always
        self.final_answer_fallback = final_answer_fallback or DEFAULT_FINAL_ANSWER_FALLBACK
        self._client, self._owns_client = client, client is None
        self._store, self._owns_store = store, store is None
        self._system = [SystemMessage(content=system_prompt)] if system_prompt.strip() else []
        self._forced = UserMessage(content=FORCED_ANSWER_INSTRUCTION)
        self._request = ChatRequest(
            model=self.model, messages=[], thinking=self.thinking, temperature=self.temperature
        )
        self._keep_reasoning = self.settings.is_coding_endpoint or (
            self.thinking is not None and self.thinking.clear_thinking is False
        )
        self._plain_plan, self._web_plan = build_plans(
            name,
            self.tools,
            self.web_search,
            lambda: self.client.web_search,
            tools_always=tools_always,
        )

    def __repr__(self) -> str:
        return f"Persona(name={self.name!r}, model={self.model!r}, tools={len(self.tools)})"

    # ------------------------------------------------------------------ public API

    @property
    def client(self) -> GLMClient:
        """The GLM client (created on first use when none was given)."""
        if self._client is None:
            self._client = GLMClient(self.settings)
        return self._client

    @property
    def store(self) -> ConversationStore:
        """The conversation store (created on first use when none was given)."""
        if self._store is None:
            self._store = ConversationStore(self.settings.database_path)
        return self._store

    async def respond(self, text: str, *, conversation_id: str | None = None) -> Reply:
        """Answer one user message; with ``conversation_id``, in that stored conversation.

        Raises:
            GLMError: the API failed for good (after retries); nothing is stored then.
        """
        reply: Reply | None = None
        async for event in self._run_turn(text, conversation_id, stream=False):
            if isinstance(event, Done):
                reply = event.reply
        if reply is None:
            raise ToolLoopError("the turn ended without a reply")
        return reply

    def stream(
        self, text: str, *, conversation_id: str | None = None
    ) -> AsyncGenerator[PersonaEvent, None]:
        """Answer one user message as a stream of events, ending with ``Done(reply)``.

        Iterate it to the end (or close it with ``aclose()``): the turn holds its
        conversation's lock until the generator finishes.
        """
        return self._run_turn(text, conversation_id, stream=True)

    async def aclose(self) -> None:
        """Close the client and store this persona created itself."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._owns_store and self._store is not None:
            await self._store.aclose()
            self._store = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ the turn

    async def _run_turn(
        self, text: str, conversation_id: str | None, *, stream: bool
    ) -> AsyncGenerator[PersonaEvent, None]:
        """Parse the message, run the loop under the conversation's lock, store, then Done."""
        query, plan = self._parse(text)
        if not query:
            content = ASK_FOR_QUESTION if text.lstrip().startswith(WEB_PREFIX) else ASK_FOR_MESSAGE
            yield Done(Reply(content=content, model=self.model, conversation_id=conversation_id))
            return
        if conversation_id is None:
            async with aclosing(self._loop(self._new_turn(query, plan, [], None), stream)) as run:
                async for event in run:
                    yield event
            return
        store = self.store
        done: Done | None = None
        async with store.lock(conversation_id):
            history = await store.load(conversation_id, self.settings.history_turns)
            turn = self._new_turn(query, plan, history, conversation_id)
            async with aclosing(self._loop(turn, stream)) as run:
                async for event in run:
                    if isinstance(event, Done):
                        done = event
                    else:
                        yield event
            if done is not None and done.reply.messages:
                await store.append_turn(conversation_id, self.name, done.reply.messages)
        if done is not None:
            yield done

    def _parse(self, text: str) -> tuple[str, ToolPlan]:
        """``//`` after leading whitespace marks a web query: strip it, use the web plan."""
        stripped = text.lstrip()
        if stripped.startswith(WEB_PREFIX):
            return stripped[len(WEB_PREFIX) :].strip(), self._web_plan
        return text.strip(), self._plain_plan

    def _new_turn(
        self, query: str, plan: ToolPlan, history: Sequence[Message], conversation_id: str | None
    ) -> Turn:
        # Sanitised once per turn: the history does not change between rounds, and the turn's
        # own messages are built whole by _handle_tool_calls (docs/design/0301).
        safe = sanitize_history(
            history, max_turns=self.settings.history_turns, keep_reasoning=self._keep_reasoning
        )
        return Turn(
            persona=self.name,
            plan=plan,
            prefix=[*self._system, *safe],
            new=[UserMessage(content=query)],
            conversation_id=conversation_id,
        )

    async def _loop(self, turn: Turn, stream: bool) -> AsyncGenerator[PersonaEvent, None]:
        """Run one turn's tool loop, yielding text, tool progress and, last, ``Done``.

        1. Round ``n = tool_rounds + 1`` starts. Offer the turn's tools (chosen by ``//`` when
           the turn began) while ``tool_rounds < max_tool_rounds``; once the cap is reached the
           call carries no tools and one extra instruction to answer from what it has (the
           forced final answer).
        2. Call the model through :meth:`_complete` or, streamed, :meth:`_call_llm`; pass text
           deltas on.
        3. Record the round: usage, finish_reason, duration, and ``web_search[]`` sources as
           citations.
        4. If tools were offered, the response has tool calls and did not stop for
           ``length``: announce the round, run the calls through :meth:`_handle_tool_calls`
           (assistant message, then one tool message per call, in call order), add 1 to
           ``tool_rounds`` and go back to 1.
        5. Otherwise the turn ends: tool calls in this response are dropped (never stored),
           empty text becomes ``final_answer_fallback``, ``[ref_N]`` markers become ``[n]``, and
           ``stop_reason`` is ``length``, ``max_rounds`` (the forced call answered) or
           ``completed``.

        A :class:`ContentFilterError` from any call ends the turn with ``stop_reason
        content_filter`` and a short notice; nothing of that turn is stored. Other errors
        propagate. The loop makes at most ``max_tool_rounds + 1`` calls; it is iterative
        rather than recursive so the cap is one visible counter (docs/design/0300).
        """
        cap = self.max_tool_rounds
        for number in range(1, cap + 2):
            offer = turn.plan.specs if turn.tool_rounds < cap else None
            forced = turn.tool_rounds >= cap > 0
            started = perf_counter()
            completion: ChatCompletion | None = None
            try:
                if not stream:
                    # Nothing to pass on before the completion: one await, no async generator.
                    completion = await self._complete(turn, tools=offer, forced=forced)
                else:
                    answer = self._call_llm(turn, tools=offer, forced=forced)
                    async with aclosing(answer) as items:
                        async for item in items:
                            if isinstance(item, TextDelta):
                                yield item
                            else:
                                completion = item
            except ContentFilterError as exc:
                logger.warning("%s: the content filter stopped the turn (%s)", self.name, exc)
                yield Done(turn.reply(CONTENT_FILTER_NOTICE, "content_filter", self.model, []))
                return
            if completion is None:
                raise ToolLoopError("the model call returned no completion")
            turn.collect(completion)
            message = completion.message
            if offer and message.tool_calls and completion.finish_reason != "length":
                yield RoundStarted(number, [call_name(call) for call in message.tool_calls])
                async with aclosing(self._handle_tool_calls(message, turn)) as progress:
                    async for event in progress:
                        yield event
                turn.tool_rounds += 1
                turn.record_round(completion, started, message.tool_calls, cap + 1)
                continue
            turn.record_round(completion, started, (), cap + 1)
            fallback = self.final_answer_fallback
            yield Done(turn.finish(completion, forced=forced, fallback=fallback, model=self.model))
            return
        raise ToolLoopError(f"the loop ran past its cap of {cap} tool rounds")

    def _request_for(
        self, turn: Turn, *, tools: list[ToolSpec] | None, forced: bool
    ) -> ChatRequest:
        """The round's request, for :meth:`_complete` and :meth:`_call_llm`.

        The request is ``[system, history..., user, this turn's tool rounds...]``. ``tools`` is
        the turn's plan: for a ``//`` message (after :meth:`_parse` stripped the prefix) the
        built-in web_search tool with ``search_result: true`` plus the function tools (or the
        client-side ``search_web`` tool, or only the functions, by ``WEB_SEARCH_MODE``); no
        tools for a plain message unless ``tools_always``. ``forced`` appends the instruction
        to answer now; it is sent once and never stored.
        """
        messages = [*turn.prefix, *turn.new]
        if forced:
            messages.append(self._forced)
        # A shallow copy of the per-persona template: the messages are already validated wire
        # models, so nothing is re-validated or deep-copied per round.
        return self._request.model_copy(update={"messages": messages, "tools": tools})

    async def _complete(
        self, turn: Turn, *, tools: list[ToolSpec] | None, forced: bool
    ) -> ChatCompletion:
        """Send the turn's messages to the model with ``client.chat`` (``respond()``)."""
        return await self.client.chat(self._request_for(turn, tools=tools, forced=forced))

    async def _call_llm(
        self, turn: Turn, *, tools: list[ToolSpec] | None, forced: bool
    ) -> AsyncGenerator[TextDelta | ChatCompletion, None]:
        """Send the turn's messages to the model with ``client.chat_stream`` (``stream()``).

        Yields:
            :class:`TextDelta` pieces, then the completion.
        """
        request = self._request_for(turn, tools=tools, forced=forced)
        # chat_stream is an async generator; closing it early releases the HTTP response.
        stream_events = cast(AsyncGenerator[StreamEvent, None], self.client.chat_stream(request))
        async with aclosing(stream_events) as events:
            async for event in events:
                if isinstance(event, ContentDelta):
                    yield TextDelta(event.text)
                elif isinstance(event, StreamCompleted):
                    yield event.completion

    async def _handle_tool_calls(
        self, message: AssistantMessage, turn: Turn
    ) -> AsyncGenerator[ToolFinished, None]:
        """Answer every tool call of ``message``; append the resulting messages to the turn.

        Appends the assistant message (text, or ``null`` when empty; the tool calls; its
        ``reasoning_content`` echoed unchanged), then exactly one tool message per call in call
        order. Built-in ``web_search`` calls get :data:`BUILTIN_SEARCH_CONFIRMATION`; functions
        run concurrently, each under ``TOOL_TIMEOUT``, and every mistake of the model becomes
        an error text it reads. Yields one :class:`ToolFinished` per call as each ends.
        """
        calls = message.tool_calls or []
        turn.new.append(
            AssistantMessage(
                content=message.content if message.content and message.content.strip() else None,
                reasoning_content=message.reasoning_content,
                tool_calls=[
                    c if c.index is None else c.model_copy(update={"index": None}) for c in calls
                ],
            )
        )
        outcomes: list[CallOutcome | None] = [None] * len(calls)
        limit = self.settings.tool_timeout
        running = execute(calls, turn.plan, time_limit=limit, persona=self.name)
        async with aclosing(running) as finished:
            async for index, outcome in finished:
                outcomes[index] = outcome
                yield ToolFinished(outcome.name, outcome.outcome.ok, outcome.ms)
        turn.results = [
            tool_result(call, outcome, turn.citations)
            for call, outcome in zip(calls, outcomes, strict=True)
            if outcome is not None
        ]
        if len(turn.results) != len(calls):
            raise ToolLoopError("a tool call was left without an answer")
        for call, result in zip(calls, turn.results, strict=True):
            turn.new.append(ToolMessage(content=result.content, tool_call_id=call.id))


def _web_search(value: WebSearch | bool | None) -> WebSearch:
    if isinstance(value, WebSearch):
        return value
    return WebSearch(mode="off") if value is False else WebSearch()


def _thinking(value: str | Thinking | None) -> Thinking | None:
    if value is None or isinstance(value, Thinking):
        return value
    if value in ("enabled", "disabled"):
        return Thinking(type=value)
    raise ConfigError(f"thinking must be 'enabled' or 'disabled' (got {value!r})")


def _check_temperature(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ConfigError(f"temperature must be between 0 and 1 (got {value})")
    return value
