"""The turn engine: one user turn of a persona, from the first model call to the reply.

:class:`TurnEngine` runs the tool loop for a :class:`ResolvedSpec` on a :class:`Turn` that
carries everything the turn is given (model, tool plan, system prompt and history).
Each model answer becomes an explicit next step, :class:`RunTools` or :class:`Finish`
(:func:`next_step`); tool results are returned by the round that produced them, never kept
on the side for a later step to find. The loop returns one :class:`TurnEnd` saying what the
caller should store. Steps are values the loop's methods return; the public events (text, tool
progress) go to the turn's :data:`~generic_framework.core.events.EventSink`, and nothing but
public events ever does. :class:`~generic_framework.core.persona.Persona` is a turn engine bound
to a runtime: ``Persona._call_llm`` (every model call, streamed or not) and
``Persona._handle_tool_calls`` (every tool round) are the seams, and a subclass overriding
either drives ``respond()`` and ``stream()`` alike.

This module is the loop and its seams alone: the step types are
:mod:`~generic_framework.core.steps`'s (re-exported here), and the request and the error of the
context-overflow retry are :mod:`~generic_framework.core.overflow`'s.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Coroutine
from contextlib import aclosing
from time import perf_counter
from typing import Any

from generic_framework.core.events import EventSink, RoundStarted, TextDelta, ToolFinished, ignore
from generic_framework.core.options import (
    NO_OPTIONS,
    check_output,
    correction_messages,
    is_function_call,
    with_content,
)
from generic_framework.core.overflow import too_long, without_oldest_turns
from generic_framework.core.reply import ToolResult
from generic_framework.core.spec import ResolvedSpec
from generic_framework.core.steps import Finish, RunTools, TurnEnd, next_step
from generic_framework.core.tooling import (
    BUILTIN_SEARCH_CONFIRMATION,
    CallOutcome,
    call_name,
    execute,
    tool_result,
)
from generic_framework.core.turn import Turn
from generic_framework.errors import OutputSchemaError, ToolLoopError
from generic_framework.wire.errors import ContentFilterError, ContextTooLongError
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    ContentDelta,
    StreamCompleted,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
    WebSearchToolSpec,
)
from generic_framework.wire.profiles import shape_request
from generic_framework.wire.slots import CONTINUING

__all__ = [
    "BUILTIN_SEARCH_CONFIRMATION",
    "CONTENT_FILTER_NOTICE",
    "FORCED_ANSWER_INSTRUCTION",
    "Finish",
    "RunTools",
    "TurnEnd",
    "TurnEngine",
    "next_step",
]

logger = logging.getLogger("generic_framework.persona")

CONTENT_FILTER_NOTICE = "Sorry, this request was blocked by the provider's content filter."
FORCED_ANSWER_INSTRUCTION = (
    "You have used every tool call available for this question. Do not call any tools. "
    "Answer the question above now, using only the information you already have, and say "
    "briefly if something could not be checked."
)


class TurnEngine:
    """Runs one user turn of a resolved spec (every setting-backed field filled).

    Args:
        spec: the persona, resolved with :meth:`PersonaSpec.resolve
            <generic_framework.core.spec.PersonaSpec.resolve>`.
        tool_timeout: seconds one function tool call may take (``TOOL_TIMEOUT``).
        keep_reasoning: keep ``reasoning_content`` of earlier turns in the history (the coding
            endpoint and ``clear_thinking: false`` want it back).
    """

    def __init__(self, spec: ResolvedSpec, *, tool_timeout: float, keep_reasoning: bool) -> None:
        if not isinstance(spec, ResolvedSpec):
            raise ToolLoopError("a turn engine needs a resolved spec (PersonaSpec.resolve)")
        self.spec = spec
        self.tool_timeout = tool_timeout
        self.keep_reasoning = keep_reasoning
        prompt = spec.system_prompt
        self._system = [SystemMessage(content=prompt)] if prompt.strip() else []
        self._forced = UserMessage(content=FORCED_ANSWER_INSTRUCTION)
        self._most = spec.max_tool_rounds + 1
        # Only the fields the spec sets: every round's copy carries the template's set of
        # set fields, and a small one stays small (the body leaves out None either way).
        chosen = {
            "thinking": spec.thinking,
            "reasoning_effort": spec.reasoning_effort,
            "temperature": spec.temperature,
        }
        self._request = ChatRequest(
            model=spec.model,
            messages=[],
            **{name: value for name, value in chosen.items() if value is not None},
        )

    async def _loop(self, turn: Turn, stream: bool, events: EventSink) -> TurnEnd:
        """Run one turn's tool loop: text and tool progress go to ``events``, and the loop
        returns its end, a :class:`TurnEnd`.

        1. Round ``n`` (1-based) starts. While ``n <= max_tool_rounds`` offer the turn's tools
           (chosen by ``//`` when the turn began); after that the call carries no tools and one
           extra instruction to answer from what it has (the forced final answer).
        2. Call the model through :meth:`_call_llm`, the one model call of both modes
           (:meth:`_complete`; :meth:`_streamed` passes text on, ``[ref_N]`` rewritten).
        3. The account counts the call (tokens, a server-side search); sources become citations.
        4. :func:`next_step` decides. :class:`RunTools`: announce the round, answer every call
           through :meth:`_handle_tool_calls` (assistant message, then one tool message per
           call, in call order), record the round with the results it returned (the account
           counts its tool calls and searches), go back to 1.
        5. :class:`Finish`: empty text becomes ``final_answer_fallback``, ``[ref_N]`` markers
           become ``[n]``, ``stop_reason`` is ``length``, ``max_rounds`` (the forced call
           answered) or ``completed``; the turn ends to be stored. Calls of the caller's own
           tools end the turn too, with the calls (:meth:`_end`).

        Each step is a value returned to the loop (the completion, the :class:`RunTools` or
        :class:`Finish` of :func:`next_step`, the round's results, the :class:`TurnEnd`); only
        the public events (:mod:`~generic_framework.core.events`) go to ``events``.

        A :class:`ContentFilterError` ends the turn with ``stop_reason content_filter`` and a
        notice, not stored; other errors propagate. At most ``max_tool_rounds + 1`` calls.
        """
        cap = self.spec.max_tool_rounds
        for number in range(1, cap + 2):
            offer = turn.plan.specs if number <= cap else None
            forced, started = number > cap > 0, perf_counter()
            request = self._request_for(turn, tools=offer, forced=forced)
            # A later round's call is served before the first calls of other turns.
            continuing = CONTINUING.set(True) if number > 1 else None
            try:
                completion = await self._call(turn, request, stream, events)
            except ContentFilterError as exc:
                return self._filtered(turn, exc)
            finally:
                if continuing is not None:
                    CONTINUING.reset(continuing)
            step = next_step(completion, tools_offered=bool(offer))
            if isinstance(step, RunTools) and not self._hands_back(turn, step):
                await self._run_tools(turn, number, step, started, events)
                # Recorded: the round's response is not held while the next call waits.
                del completion, step
                continue
            return await self._end(turn, step, started, forced, stream, events)
        raise ToolLoopError(f"the loop ran past its cap of {cap} tool rounds")

    def _call(
        self, turn: Turn, request: ChatRequest, stream: bool, events: EventSink
    ) -> Coroutine[Any, Any, ChatCompletion]:
        """Step 2: one model call in the turn's mode, its completion; a streamed call's text
        goes to ``events`` (unless the turn holds it until it is validated). The call itself,
        to be awaited: no frame of its own is kept while the call waits."""
        if not stream:
            return self._complete(turn, request)
        return self._streamed(turn, request, ignore if turn.holds_text else events)

    @staticmethod
    def _hands_back(turn: Turn, step: RunTools) -> bool:
        """Whether the round's calls are the caller's to run
        (:class:`~generic_framework.core.options.TurnOptions` ``client_tools``)."""
        calls = step.message.tool_calls or ()
        return bool(turn.options.client_tools) and any(is_function_call(c) for c in calls)

    async def _end(
        self,
        turn: Turn,
        step: RunTools | Finish,
        started: float,
        forced: bool,
        stream: bool,
        events: EventSink,
    ) -> TurnEnd:
        """Step 5, or the caller's tools called: the turn's end.

        :class:`RunTools` here: the turn ends with the caller's calls, for the caller to run
        (nothing stored). :class:`Finish`: the answer (checked against the caller's JSON schema
        first, when there is one, and then shown at once if it was held back), to be stored.
        """
        if isinstance(step, RunTools):
            calls = [c for c in step.message.tool_calls or () if is_function_call(c)]
            turn.record_round(step.completion, started, most=self._most)
            return TurnEnd(turn.hand_back(step.completion, calls, model=self.spec.model), False)
        if turn.options.json_schema is not None:
            step = await self._checked_output(turn, step, started, stream)
        end = self._finish(turn, step, started, forced=forced)
        if turn.holds_text and stream:  # the validated answer, shown at last
            events(TextDelta(end.reply.content))
        return end

    async def _checked_output(
        self, turn: Turn, step: Finish, started: float, stream: bool
    ) -> Finish:
        """The answer checked against the caller's JSON schema: one corrective call when it
        does not match, then :class:`~generic_framework.errors.OutputSchemaError`."""
        output = turn.options.json_schema
        assert output is not None
        text = step.completion.message.content or ""
        problem, value = check_output(text, output)
        if problem is None:
            return Finish(with_content(step.completion, value))
        turn.record_round(step.completion, started, most=self._most)
        turn.correction = correction_messages(text, problem)
        request = self._request_for(turn, tools=None, forced=False)
        completion = await self._call(turn, request, stream, ignore)
        turn.correction = []
        problem, value = check_output(completion.message.content or "", output)
        if problem is not None:
            raise OutputSchemaError(
                f"the model's answer does not match the JSON schema {output.name!r}, "
                f"even after one corrective call: {problem}"
            )
        return Finish(with_content(completion, value))

    async def _run_tools(
        self, turn: Turn, number: int, step: RunTools, started: float, events: EventSink
    ) -> None:
        """Step 4: announce the round, answer its calls, record it with their results."""
        calls = step.message.tool_calls or []
        events(RoundStarted(number, [call_name(call) for call in calls]))
        tools_started = perf_counter()
        results = await self._handle_tool_calls(step.message, turn, events)
        if len(results) != len(calls):
            raise ToolLoopError("a tool round must return one result per call")
        turn.record_round(
            step.completion, started, calls, results, most=self._most, tools_started=tools_started
        )

    def _finish(self, turn: Turn, step: Finish, started: float, *, forced: bool) -> TurnEnd:
        """Step 5: the reply from the answering call; the turn is to be stored."""
        turn.record_round(step.completion, started, most=self._most)
        reply = turn.finish(
            step.completion,
            forced=forced,
            fallback=self.spec.final_answer_fallback,
            model=self.spec.model,
        )
        return TurnEnd(reply, store=True)

    def _filtered(self, turn: Turn, exc: ContentFilterError) -> TurnEnd:
        """The content filter stopped a call: a short notice, nothing stored."""
        logger.warning("%s: the content filter stopped the turn (%s)", turn.persona, exc)
        reply = turn.reply(CONTENT_FILTER_NOTICE, "content_filter", self.spec.model, [])
        return TurnEnd(reply, store=False)

    def _request_for(
        self, turn: Turn, *, tools: list[ToolSpec] | None, forced: bool
    ) -> ChatRequest:
        """The round's request, for :meth:`_call_llm`.

        The request is ``[system, history..., user, this turn's tool rounds...]``. ``tools`` is
        the turn's plan: for a ``//`` message (the prefix already stripped) the built-in
        web_search tool with ``search_result: true`` plus the function tools (or the
        client-side ``search_web`` tool, or only the functions, by ``WEB_SEARCH_MODE``); no
        tools for a plain message unless ``tools_always``. ``forced`` appends the instruction
        to answer now; it is sent once and never stored.
        """
        messages = [*turn.prefix, *turn.new, *turn.correction]
        if forced:
            messages.append(self._forced)
        # A shallow copy of the per-persona template: the messages are already validated wire
        # models, so nothing is re-validated or deep-copied per round.
        update: dict[str, Any] = {"messages": messages, "tools": tools}
        options = turn.options
        if options is not NO_OPTIONS:
            update.update(options.request_fields())
            if tools and options.tool_choice is not None:
                update["tool_choice"] = options.tool_choice
        if turn.upstream_user is not None:  # the signed-in user's (persona._upstream_user)
            update["user_id"] = turn.upstream_user
        return self._request.model_copy(update=update)

    async def _complete(self, turn: Turn, request: ChatRequest) -> ChatCompletion:
        """Step 2 of ``respond()``: :meth:`_call_llm` not streamed, its completion counted."""
        watch = turn.watch
        span = watch.call_started(request, stream=False)
        completion = None
        try:
            async with aclosing(self._call_llm(request, turn, stream=False)) as items:
                async for item in items:
                    if isinstance(item, ChatCompletion):
                        completion = item
            if completion is None:
                raise ToolLoopError("the model call returned no completion")
        except BaseException as exc:
            watch.call_failed(span, exc)
            raise
        watch.call_done(span, completion)
        turn.collect(completion)
        return completion

    async def _streamed(
        self, turn: Turn, request: ChatRequest, events: EventSink
    ) -> ChatCompletion:
        """Step 2 of ``stream()``: :meth:`_call_llm` streamed, its text to ``events`` with
        ``[ref_N]`` rewritten to ``[n]`` as it streams, the completion counted and returned.

        A piece that may end inside a marker is held until the marker completes or proves not
        to be one (:class:`~generic_framework.core.citations.CitationStream`). What is still
        held when the call ends is rewritten after the call's own sources were collected.
        """
        server_search = any(isinstance(spec, WebSearchToolSpec) for spec in request.tools or ())
        marks = turn.citations.stream(provisional=server_search)
        watch = turn.watch
        span = watch.call_started(request, stream=True)
        completion: ChatCompletion | None = None
        try:
            async with aclosing(self._call_llm(request, turn, stream=True)) as items:
                async for item in items:
                    if isinstance(item, ChatCompletion):
                        completion = item
                        watch.call_done(span, item)
                    elif shown := marks.feed(item.text):
                        watch.text_started()
                        events(TextDelta(shown))
            if completion is None:
                raise ToolLoopError("the model call returned no completion")
        except BaseException as exc:
            if completion is None:  # a failed or abandoned call
                watch.call_failed(span, exc)
            raise
        turn.collect(completion)
        if tail := marks.flush():
            watch.text_started()
            events(TextDelta(tail))
        return completion

    async def _call_llm(
        self, request: ChatRequest, turn: Turn, *, stream: bool
    ) -> AsyncGenerator[TextDelta | ChatCompletion, None]:
        """Send one request to the turn's model: every model call of a turn is made here.

        The request is first shaped by its model's profile
        (:func:`~generic_framework.wire.profiles.shape_request`: ``tool_stream`` on a streamed
        call offering functions to a model that takes it). Not streamed, it yields the
        completion of ``turn.model.chat(request)``; streamed, one :class:`TextDelta` per text
        piece of ``turn.model.chat_stream(request)``, then the completion. A subclass may
        override it (to answer from a script, a cache, another model): the loop counts,
        traces and rewrites whatever it yields, in both modes. It must yield exactly one
        :class:`ChatCompletion`, last; :class:`TextDelta` items before it are shown in
        streamed turns and ignored otherwise.

        A call refused as too long for the context window (1261) before anything came back
        is sent once more without the oldest half of the history turns it carried (never a
        tool call without its results; :mod:`~generic_framework.core.overflow`); the turn
        keeps the shorter history for its later rounds, the stored conversation is not
        touched. Still too long, or with no history to drop, it raises a
        :class:`ContextTooLongError` that says so. Both outcomes are counted.

        Yields:
            :class:`TextDelta` pieces (streamed), then the completion.
        """
        request = shape_request(request, stream=stream)
        sent = False
        try:
            if not stream:  # one completion: no generator of its own to keep alive
                completion = await turn.model.chat(request)
                sent = True
                yield completion
                return
            async for item in _answer(turn, request, stream=stream):
                sent = True
                yield item
            return
        except ContextTooLongError as exc:
            if sent:
                raise
            shorter = without_oldest_turns(request, turn, exc)
        try:
            async for item in _answer(turn, shorter, stream=stream):
                yield item
        except ContextTooLongError as exc:
            turn.watch.context_overflow("failed")
            raise too_long(shorter.model, exc, trimmed=True) from exc

    async def _handle_tool_calls(
        self, message: AssistantMessage, turn: Turn, events: EventSink
    ) -> list[ToolResult]:
        """Answer every tool call of ``message``: append the messages, return the results.

        Appends the assistant message (text, or ``null`` when empty; the tool calls; its
        ``reasoning_content`` echoed unchanged), then exactly one tool message per call in call
        order. Built-in ``web_search`` calls get :data:`BUILTIN_SEARCH_CONFIRMATION`; functions
        run concurrently, each under ``TOOL_TIMEOUT``, and every mistake of the model becomes
        an error text it reads. Puts one :class:`ToolFinished` per call in ``events`` as each
        ends; returns the results, one per call, in call order (the loop counts and records
        them). A subclass may override it (to answer from a script, to run the tools
        elsewhere) under the same contract.
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
        running = execute(calls, turn.plan, time_limit=self.tool_timeout, persona=turn.persona)
        async with aclosing(running) as finished:
            async for index, outcome in finished:
                outcomes[index] = outcome
                events(ToolFinished(outcome.name, outcome.ok, outcome.ms))
        results = [
            tool_result(call, outcome, turn.citations)
            for call, outcome in zip(calls, outcomes, strict=True)
            if outcome is not None
        ]
        if len(results) != len(calls):
            raise ToolLoopError("a tool call was left without an answer")
        for call, result in zip(calls, results, strict=True):
            turn.new.append(ToolMessage(content=result.content, tool_call_id=call.id))
        return results


async def _answer(
    turn: Turn, request: ChatRequest, *, stream: bool
) -> AsyncGenerator[TextDelta | ChatCompletion, None]:
    """One call of ``turn.model``: the completion, or its text pieces then the completion."""
    if not stream:
        yield await turn.model.chat(request)
        return
    events = turn.model.chat_stream(request)
    try:
        async for event in events:
            if isinstance(event, ContentDelta):
                yield TextDelta(event.text)
            elif isinstance(event, StreamCompleted):
                yield event.completion
    finally:
        # Closing the client's generator early releases its HTTP response at once.
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
