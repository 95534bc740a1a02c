"""Persona: a persona spec bound to a runtime; answers user turns with the tool loop.

A :class:`Persona` is a :class:`~generic_framework.core.engine.TurnEngine` (the loop, with its
seams ``_call_llm`` and ``_handle_tool_calls``) for one :class:`PersonaSpec`, bound to the
:class:`~generic_framework.core.resources.Resources` whose client calls the model and whose
store and locks keep conversations. ``respond()`` and ``stream()`` share one path,
:meth:`Persona._run_turn`: parse ``//``, add the tools of the persona's MCP servers when the turn
offers tools (the runtime starts the servers on first use), take the conversation's lock (this
process's, then the store's: across replicas on PostgreSQL), load the history, run the loop,
store the turn whole with its record, return the reply. ``respond()`` awaits it with a sink that
drops the events; ``stream()`` runs it in a task whose events it hands on as they come, then
``Done`` (:mod:`~generic_framework.core.live`). Which tools a turn offers (the ``//``
switch, the caller's tools, the MCP servers' tools) is :mod:`~generic_framework.core.turn_plans`'s
to decide; ``WEB_PREFIX``, ``ASK_FOR_QUESTION`` and ``as_stored`` are re-exported from there.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Coroutine, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from generic_framework.config import Settings
from generic_framework.core.engine import (
    BUILTIN_SEARCH_CONFIRMATION,
    CONTENT_FILTER_NOTICE,
    FORCED_ANSWER_INSTRUCTION,
    TurnEngine,
)
from generic_framework.core.events import EventSink, PersonaEvent, ignore
from generic_framework.core.history import ForeignHistory, HistoryItem, foreign_history
from generic_framework.core.hooks import TurnHooks
from generic_framework.core.live import live
from generic_framework.core.observe import TurnWatch
from generic_framework.core.options import NO_OPTIONS, TurnOptions, schema_instruction
from generic_framework.core.reply import Reply
from generic_framework.core.resources import Resources
from generic_framework.core.sanitize import sanitize_history
from generic_framework.core.spec import DEFAULT_FINAL_ANSWER_FALLBACK, PersonaSpec
from generic_framework.core.tooling import ToolPlan
from generic_framework.core.turn import Turn, turn_record
from generic_framework.core.turn_plans import (
    ASK_FOR_MESSAGE,
    ASK_FOR_QUESTION,
    WEB_PREFIX,
    TurnPlans,
    as_stored,
)
from generic_framework.errors import ConfigError
from generic_framework.limits import check_text
from generic_framework.pictures.content import kept, stored_text, user_content
from generic_framework.tools.base import FunctionTool
from generic_framework.wire.messages import (
    Message,
    SystemMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from generic_framework.store.users import Caller

__all__ = [
    "ASK_FOR_QUESTION",
    "BUILTIN_SEARCH_CONFIRMATION",
    "CONTENT_FILTER_NOTICE",
    "DEFAULT_FINAL_ANSWER_FALLBACK",
    "FORCED_ANSWER_INSTRUCTION",
    "WEB_PREFIX",
    "Persona",
    "as_stored",
]

logger = logging.getLogger("generic_framework.persona")


def stored(query: str, messages: Sequence[Message], options: TurnOptions) -> Sequence[Message]:
    """A turn's new messages as its conversation keeps them: a user message with pictures
    keeps its text and their descriptions (or marks), never the pictures (docs/design/0329)."""
    if not options.pictures:
        return messages
    return [UserMessage(content=stored_text(query, options.pictures)), *messages[1:]]


def _upstream_user(caller: Caller | None, options: TurnOptions) -> str | None:
    """The requests' ``user_id`` when the asker decides it: a signed-in user's own stable
    pseudonym (never their name; a user cannot spread their calls over others'), except
    that the bootstrap admin (``BOT_API_TOKEN``, often an application's backend) may name its
    own end users with the client's ``user`` field (``options.user_id``, already a pseudonym).
    ``None``: the options' value, if any, is sent."""
    if caller is None:
        return None
    # The users' rules are loaded by the turns that have a caller or a conversation, so a
    # Persona without either loads no store module (docs/design/0704).
    from generic_framework.store.users import BOOTSTRAP_USER, pseudonym

    if caller.user.id == BOOTSTRAP_USER and options.user_id is not None:
        return None
    return pseudonym(caller.user.id)


class Persona(TurnEngine):
    """A named assistant: a :class:`PersonaSpec` (its fields), its function tools, the tool loop.

    The spec is the one place a persona's fields are declared: ``persona.spec`` is the
    :class:`~generic_framework.core.spec.ResolvedSpec` the persona runs (``persona.spec.name``,
    ``persona.spec.model``, ``persona.spec.web_search``, ...; the settings' values filled in
    where the spec left a field unset). A new field is added to :class:`PersonaSpec` alone.

    Args:
        name: identifies the persona (``^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$``).
        system_prompt: the instructions sent first in every request.
        tools: function tools (see :func:`~generic_framework.tools.tool`); the spec's ``tools``
            are their names.
        settings: defaults for the spec's unset fields, for a persona with its own runtime;
            :meth:`Settings.defaults` when omitted (pass ``Settings()`` to read the
            environment). With ``runtime``, the runtime's settings are used.
        runtime: the :class:`~generic_framework.runtime.Runtime` to use (its client, store
            and locks); without one the persona opens its own on first use and closes it in
            :meth:`aclose`.
        **fields: any other :class:`PersonaSpec` field by its name (``model``,
            ``temperature``, ``thinking``, ``reasoning_effort``, ``max_tool_rounds``,
            ``web_search``, ``tools_always``, ``mcp_servers``, ``description``,
            ``final_answer_fallback``, ``allow_client_system``, ``client_parameters``), checked
            as a persona file's keys are; unset fields take the settings' values
            (``LLM_MODEL``, ``LLM_TEMPERATURE``, ...). A model that cannot take the thinking
            or reasoning_effort chosen is refused here (:mod:`generic_framework.wire.profiles`).
            A spec already built (a persona file's) goes to :meth:`from_spec`.

    Raises:
        ConfigError: an unknown or invalid field, or an invalid tool set.
    """

    def __init__(
        self,
        name: str,
        system_prompt: str,
        tools: Iterable[FunctionTool] = (),
        settings: Settings | None = None,
        *,
        runtime: Resources | None = None,
        **fields: Any,
    ) -> None:
        tools = tuple(tools)
        if "tool_modules" in fields:
            raise ConfigError(
                f"persona {name!r}: tool_modules is a persona file's key: pass the tools "
                "themselves (tools=[...])"
            )
        spec = PersonaSpec.build(
            name=name,
            system_prompt=system_prompt,
            tools=tuple(getattr(t, "name", repr(t)) for t in tools),
            **fields,
        )
        self._bind(spec, tools, settings, runtime)

    @classmethod
    def from_spec(
        cls,
        spec: PersonaSpec,
        *,
        tools: Iterable[FunctionTool] = (),
        settings: Settings | None = None,
        runtime: Resources | None = None,
    ) -> Persona:
        """A persona for ``spec`` with the resolved function ``tools`` (see ``__init__``)."""
        persona = cls.__new__(cls)
        persona._bind(spec, tuple(tools), settings, runtime)
        return persona

    def _bind(
        self,
        spec: PersonaSpec,
        tools: tuple[FunctionTool, ...],
        settings: Settings | None,
        runtime: Resources | None,
    ) -> None:
        if runtime is not None and settings is not None and settings is not runtime.settings:
            raise TypeError("pass settings or runtime, not both (the runtime has its settings)")
        self.runtime = runtime if runtime is not None else Resources(settings)
        self._owns_runtime = runtime is None
        config = self.runtime.settings
        resolved = spec.resolve(config)
        keep = config.is_coding_endpoint or (
            resolved.thinking is not None and resolved.thinking.clear_thinking is False
        )
        super().__init__(resolved, tool_timeout=config.tool_timeout, keep_reasoning=keep)
        self.tools = tools
        if spec.mcp_servers:  # a persona without servers makes the runtime no sessions
            self.runtime.mcp.check(spec.mcp_servers, source=f"persona {spec.name!r}")
        self._plans = TurnPlans(resolved, tools, self.runtime)

    def __repr__(self) -> str:
        spec = self.spec
        return f"Persona(name={spec.name!r}, model={spec.model!r}, tools={len(self.tools)})"

    @property
    def settings(self) -> Settings:
        """The runtime's settings."""
        return self.runtime.settings

    # ------------------------------------------------------------------ public API

    async def respond(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[HistoryItem] | None = None,
        options: TurnOptions | None = None,
        caller: Caller | None = None,
        hooks: TurnHooks | None = None,
    ) -> Reply:
        """Answer one user message; with ``conversation_id``, in that stored conversation.

        Args:
            text: the user's message.
            conversation_id: a stored conversation whose history is used and extended: an id
                (the bootstrap admin's conversation, as the CLI's), or a user's conversation
                key (:func:`~generic_framework.store.users.conversation_key`).
            history: instead, the earlier messages as OpenAI-style dicts (``{"role": "user",
                "content": "..."}``; :mod:`generic_framework.core.history` has the rules):
                sanitised and trimmed to ``HISTORY_TURNS`` like a stored history; its system
                messages follow the persona's prompt; a user message starting with ``//`` is
                sent as a stored one is (the question alone). Nothing is stored.
            options: the caller's sampling settings, output format and own tools
                (:class:`~generic_framework.core.options.TurnOptions`); a turn with
                ``client_tools`` may end with :attr:`Reply.tool_calls` for the caller to run.
            caller: who asks (the service's signed-in user): the stored record keeps their
                user and key ids, and the upstream request carries their stable pseudonym as
                ``user_id`` (:func:`~generic_framework.store.users.pseudonym`).
            hooks: the turn's lifecycle hooks (:class:`~generic_framework.core.hooks.TurnHooks`).

        Raises:
            ValueError: ``text`` is not UTF-8 text, ``conversation_id`` breaks the rule of
                :func:`~generic_framework.store.users.check_conversation_key`, both
                ``conversation_id`` and ``history`` are given, or ``history`` is invalid or
                has system messages the persona refuses (``allow_client_system = false``), or
                ``options`` has caller tools or a continuation with ``conversation_id``
                (a stored conversation cannot hold the caller's tool rounds); nothing was sent.
            GLMError: the API failed for good (after retries); nothing is stored then.
        """
        return await self._run_turn(
            text, conversation_id, history, options, caller, hooks, stream=False, events=ignore
        )

    def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[HistoryItem] | None = None,
        options: TurnOptions | None = None,
        caller: Caller | None = None,
        hooks: TurnHooks | None = None,
    ) -> AsyncGenerator[PersonaEvent, None]:
        """Answer one user message as a stream of events, ending with ``Done(reply)``.

        The arguments are those of :meth:`respond`. The turn starts on the first iteration, in
        a task of its own whose events the stream hands on as they come
        (:mod:`~generic_framework.core.live`). Iterate it to the end, or close it with
        ``aclose()``: closing cancels an unfinished turn (nothing stored) and waits until it
        has ended and freed its conversation. Invalid arguments raise the :class:`ValueError`
        of :meth:`respond` on the first iteration, before anything is sent.
        """

        def run(events: EventSink) -> Coroutine[Any, Any, Reply]:
            return self._run_turn(
                text, conversation_id, history, options, caller, hooks, stream=True, events=events
            )

        return live(run)

    async def aclose(self) -> None:
        """Close the runtime this persona opened itself (a shared runtime stays open)."""
        if self._owns_runtime:
            await self.runtime.aclose()

    async def __aenter__(self) -> Self:
        """Open the persona's own runtime now (its client in a worker thread); a shared
        runtime is its owner's to open."""
        if self._owns_runtime:
            await self.runtime.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ the turn

    def _checked(
        self,
        text: str,
        conversation_id: str | None,
        history: Sequence[HistoryItem] | None,
        options: TurnOptions,
    ) -> ForeignHistory:
        """The turn's arguments checked (see :meth:`respond`), and the caller's history."""
        # Checked before anything is sent: a turn the store would refuse must not be paid for.
        check_text(text)
        if conversation_id is not None and (options.client_tools or options.continuation):
            raise ValueError(
                "a stored conversation cannot hold the caller's tool rounds: send the "
                "caller's tools (and their results) without conversation_id"
            )
        return self._foreign(conversation_id, history)

    def _foreign(
        self, conversation_id: str | None, history: Sequence[HistoryItem] | None
    ) -> ForeignHistory:
        """The caller's history, checked; empty without one (the conversation's key checked)."""
        if conversation_id is not None:
            from generic_framework.store.users import check_conversation_key

            check_conversation_key(conversation_id)
        if history is None:
            return ForeignHistory(system=(), messages=())
        if conversation_id is not None:
            raise ValueError(
                "pass conversation_id (the stored history) or history (the caller's), not both"
            )
        foreign = foreign_history(history)
        if foreign.system and not self.spec.allow_client_system:
            raise ValueError(
                f"persona {self.spec.name!r} does not accept system messages from the caller "
                "(allow_client_system = false in its persona file)"
            )
        return ForeignHistory(foreign.system, as_stored(foreign.messages))

    async def _run_turn(
        self,
        text: str,
        conversation_id: str | None,
        history: Sequence[HistoryItem] | None,
        options: TurnOptions | None,
        caller: Caller | None,
        hooks: TurnHooks | None,
        *,
        stream: bool,
        events: EventSink,
    ) -> Reply:
        """Parse the message, run the loop under the conversation's lock (its public events to
        ``events``), store, and return the reply."""
        options = options or NO_OPTIONS
        foreign = self._checked(text, conversation_id, history, options)
        query, plan = self._plans.parse(text)
        if not query and not options.pictures:
            content = ASK_FOR_QUESTION if text.lstrip().startswith(WEB_PREFIX) else ASK_FOR_MESSAGE
            return Reply(content=content, model=self.spec.model, conversation_id=conversation_id)
        plan = await self._plans.for_turn(plan, options)
        watch = self._watch(plan, conversation_id, caller, stream=stream)
        watch.hooks = hooks
        try:
            async with self.runtime.conversation(conversation_id) as held:
                watch.began()
                earlier = list(foreign.messages)
                if held is not None:
                    earlier = await held.load(self.settings.history_turns)
                turn = self._new_turn(
                    query, plan, earlier, foreign.system, conversation_id, watch, options, caller
                )
                end = await self._loop(turn, stream, events)
                if end.store and held is not None:
                    record = turn_record(
                        text, end.reply, watch.account, caller, offline=self.runtime.offline
                    )
                    await held.append_turn(
                        self.spec.name,
                        stored(query, turn.new, options),
                        record,
                        kept(options.pictures),
                        settles=options.settles,
                    )
        except BaseException as exc:
            watch.failed(exc)
            raise
        watch.finished(end.reply.stop_reason)
        return end.reply

    def _watch(
        self, plan: ToolPlan, conversation_id: str | None, caller: Caller | None, *, stream: bool
    ) -> TurnWatch:
        """The turn's watch (its log line carries the asker's hashed user id)."""
        user = caller.user.id if caller is not None else None
        return TurnWatch(
            self.runtime.telemetry, self.spec, plan, conversation_id, stream=stream, user=user
        )

    def _new_turn(
        self,
        query: str,
        plan: ToolPlan,
        history: Sequence[Message],
        system: Sequence[SystemMessage],
        conversation_id: str | None,
        watch: TurnWatch,
        options: TurnOptions = NO_OPTIONS,
        caller: Caller | None = None,
    ) -> Turn:
        # Sanitised once per turn: the history does not change between rounds, and the turn's
        # own messages are built whole by _handle_tool_calls (docs/design/0301).
        safe = sanitize_history(
            history, max_turns=self.settings.history_turns, keep_reasoning=self.keep_reasoning
        )
        output = options.json_schema
        extra = [*options.instructions]
        if output is not None:
            extra.append(schema_instruction(output))
        return Turn(
            persona=self.spec.name,
            model=self.runtime.model,
            plan=plan,
            prefix=[*self._system, *system, *extra, *safe],
            new=[UserMessage(content=user_content(query, options.pictures)), *options.continuation],
            conversation_id=conversation_id,
            watch=watch,
            options=options,
            upstream_user=_upstream_user(caller, options),
        )
