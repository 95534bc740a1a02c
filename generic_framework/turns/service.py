"""The turn service: the one way from an edge to a persona, whoever asks.

The HTTP API (both turn endpoints, streamed or not, and so the page), Telegram and the CLI's
chat all ask :class:`TurnService` (handed out by :attr:`Runtime.turns
<generic_framework.runtime.Runtime.turns>`) for a turn with an :class:`Ask`. The service:

1. **admits** the caller: the persona allowlist of their key (:class:`PersonaNotAllowed`), the
   options and pictures they sent (:class:`OptionRefused`: a picture of another type, bad
   base64, another scheme, too many or too large; nothing is sent), then their limits
   (:func:`~generic_framework.quotas.admit_turn`; :class:`TurnRefused` carries the
   :class:`~generic_framework.quotas.Refusal`, which each edge words its own way); a persona
   whose model cannot see gets its pictures described first (:mod:`generic_framework.pictures`);
2. **runs** the persona (:meth:`TurnService.respond`, or :meth:`TurnService.stream` for events),
   with the lifecycle hooks (:class:`~generic_framework.core.hooks.TurnHooks`) registered on the
   service and, for a persona with memory, the caller's kept facts and the ``remember`` and
   ``forget`` tools bound to them (:mod:`generic_framework.memory`); the persona stores the
   turn in its conversation under the conversation's lock;
3. **counts** the turn against the caller's daily limits when it ends, whatever the end: an
   answer, an error, a cancel, a client gone or a stream closed halfway. The tokens and searches
   come from the turn's own :class:`~generic_framework.core.account.TurnAccount` (what the
   metrics and the stored record read), never from the reply a failed turn does not have: a
   tool round Z.AI billed counts even when the next call failed.

A caller without a daily limit costs no store round trip at the end, and a turn with nothing
to count, or no hook registered, runs the persona exactly as it would run alone.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from generic_framework.core.account import TurnAccount
from generic_framework.core.events import PersonaEvent
from generic_framework.core.history import HistoryItem
from generic_framework.core.hooks import HookChain, TurnHooks
from generic_framework.core.options import NO_OPTIONS, TurnOptions
from generic_framework.core.persona import WEB_PREFIX
from generic_framework.core.reply import Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.memory.turns import with_memory
from generic_framework.pictures import Picture, PictureRefused, read_pictures
from generic_framework.pictures.vision import describe
from generic_framework.quotas import Allowance, Refusal, admit_turn, record_turn, unlimited
from generic_framework.store.keys import ClaimRef
from generic_framework.store.users import Caller, UserAdmin, pseudonym
from generic_framework.wire.profiles import check_choice, nearest_effort, profile_for, sees

if TYPE_CHECKING:
    from generic_framework.core.resources import Resources

__all__ = [
    "Ask",
    "PersonaNotAllowed",
    "TurnPersona",
    "TurnRefused",
    "TurnService",
    "allowed",
]


class TurnPersona(Protocol):
    """What the turn service needs from a persona
    (:class:`~generic_framework.core.persona.Persona`)."""

    @property
    def spec(self) -> PersonaSpec:
        """The persona's fields (its name is what a key's persona allowlist names)."""
        ...

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
        """Answer one user message."""
        ...

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
        """Answer one user message as events ending with ``Done``; closable (``aclose``)."""
        ...


@dataclass(frozen=True, slots=True)
class Ask:
    """One turn asked of the service.

    Attributes:
        persona: who answers.
        text: the user's message.
        caller: who asks (admitted against their limits, counted in their daily totals);
            ``None`` for the process's own operator (the CLI's chat): never limited.
        conversation_id: the store's key of a stored conversation to use and extend.
        history: instead, the earlier messages of a stateless request (nothing is stored).
        options: the client's sampling settings, output format and own tools.
        images: the URLs of the message's pictures (``data:`` or ``https:``), as they came;
            checked when the turn is admitted.
    """

    persona: TurnPersona
    text: str
    caller: Caller | None
    conversation_id: str | None = None
    history: Sequence[HistoryItem] | None = None
    options: TurnOptions | None = None
    images: tuple[str, ...] = ()

    def settling(self, claim: ClaimRef | None) -> Ask:
        """This ask, its stored turn settling ``claim`` (a request's ``Idempotency-Key``) in
        the turn's own transaction (:attr:`TurnOptions.settles
        <generic_framework.core.options.TurnOptions.settles>`); itself without one."""
        if claim is None:
            return self
        options = replace(self.options or NO_OPTIONS, settles=claim)
        return replace(self, options=options)

    @property
    def web(self) -> bool:
        """Whether the turn is a web search turn (``//``)."""
        return self.text.lstrip().startswith(WEB_PREFIX)


class TurnRefused(Exception):
    """A limit refused the turn before it ran (:attr:`refusal` says which, and until when)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class PersonaNotAllowed(Exception):
    """The caller's key has a persona allowlist without this persona."""

    def __init__(self, persona: str) -> None:
        super().__init__(f"this API key may not use persona {persona!r}")
        self.persona = persona


class OptionRefused(Exception):
    """The caller asked for an option the persona's model does not take (nothing ran,
    nothing was counted); ``param`` names it."""

    def __init__(self, param: str, problem: str, code: str = "unsupported_parameter") -> None:
        super().__init__(f"{param}: {problem}")
        self.param = param
        self.code = code


def _effort(ask: Ask) -> Ask:
    """``ask`` with the caller's ``reasoning_effort`` as the persona's model takes it: the
    nearest value it takes (``medium`` on GLM-5.3 is sent as ``high``:
    :func:`~generic_framework.wire.profiles.nearest_effort`).

    Raises:
        OptionRefused: the model takes no ``reasoning_effort`` at all (the words of
            ``LLM_REASONING_EFFORT``'s rule, :func:`~generic_framework.wire.profiles.check_choice`).
    """
    options = ask.options
    effort = options.reasoning_effort if options is not None else None
    model = ask.persona.spec.model
    profile = profile_for(model, warn=False) if effort is not None and model else None
    if options is None or effort is None or model is None or profile is None:
        return ask
    if not profile.efforts:
        problem = check_choice(
            model,
            thinking=None,
            clear_thinking=None,
            reasoning_effort=effort,
            names={"model": "the persona's model", "reasoning_effort": "reasoning_effort"},
        )
        raise OptionRefused("reasoning_effort", problem or "not taken")
    taken = nearest_effort(effort, profile.efforts)
    if taken == effort:
        return ask
    return replace(ask, options=replace(options, reasoning_effort=taken))


def allowed(caller: Caller | None, persona: str) -> bool:
    """Whether the caller's key (if it has a persona allowlist) may use ``persona``."""
    key = caller.key if caller is not None else None
    personas = key.personas if key is not None else None
    return personas is None or persona in personas


_FREE = Allowance()


class _Bill(TurnHooks):
    """Keeps the turn's account, for the daily totals the turn counts against."""

    __slots__ = ("account",)

    def __init__(self) -> None:
        self.account: TurnAccount | None = None

    def on_end(self, account: TurnAccount, outcome: str) -> None:
        self.account = account


class TurnService:
    """Admits, runs and counts turns for every edge (see the module's docstring).

    Args:
        resources: the runtime: its store counts the limits (opened only for a caller who
            has some), its settings have the default limits (``BOT_DEFAULT_*``).
        hooks: lifecycle hooks every turn gets (more with :meth:`add_hooks`).
    """

    def __init__(self, resources: Resources, hooks: Sequence[TurnHooks] = ()) -> None:
        self.resources = resources
        self.hooks: list[TurnHooks] = list(hooks)

    @property
    def users(self) -> UserAdmin:
        """Where the limits are counted: the runtime's users."""
        return self.resources.users

    def add_hooks(self, hooks: TurnHooks) -> None:
        """Give every later turn ``hooks`` too (after those added before)."""
        self.hooks.append(hooks)

    async def admit(self, ask: Ask) -> Allowance:
        """Admit ``ask``'s caller: their key's persona allowlist, their options and pictures,
        then their limits.

        Raises:
            PersonaNotAllowed: the key may not use the persona.
            OptionRefused: the persona's model takes no ``reasoning_effort`` and the caller
                chose one (a value it does not take is sent as the nearest it takes), or a
                picture is refused (``param`` ``image_url``, code ``invalid_image``).
            TurnRefused: a limit is reached (nothing ran, nothing was counted).
        """
        return (await self._admit(ask))[0]

    async def _admit(self, ask: Ask) -> tuple[Allowance, Ask, tuple[Picture, ...]]:
        """The allowance, ``ask`` as it runs (its effort as the model takes it), its pictures."""
        if not allowed(ask.caller, ask.persona.spec.name):
            raise PersonaNotAllowed(ask.persona.spec.name)
        ask = _effort(ask)
        pictures = self._pictures(ask)
        if ask.caller is None or unlimited(ask.caller):
            return _FREE, replace(ask, images=()), pictures
        admitted = await admit_turn(ask.caller, self.users, self.resources.settings, web=ask.web)
        if isinstance(admitted, Refusal):
            raise TurnRefused(admitted)
        return admitted, replace(ask, images=()), pictures

    def _pictures(self, ask: Ask) -> tuple[Picture, ...]:
        """The ask's pictures, checked (:func:`~generic_framework.pictures.read_pictures`)."""
        if not ask.images:
            return ()
        settings = self.resources.settings
        try:
            return read_pictures(
                ask.images,
                max_count=settings.bot_max_images,
                max_bytes=settings.bot_max_image_bytes,
            )
        except PictureRefused as exc:
            raise OptionRefused("image_url", str(exc), code="invalid_image") from None

    async def _seen(self, ask: Ask, pictures: tuple[Picture, ...], allowance: Allowance) -> Ask:
        """``ask`` with its pictures in its options: as they came for a persona whose model
        sees, else each described by the persona's vision model first (those calls' tokens
        counted against the caller's daily limits at once)."""
        if not pictures:
            return ask
        spec = ask.persona.spec
        if not sees(spec.model or self.resources.settings.llm_model):
            account = TurnAccount()
            user = pseudonym(ask.caller.user.id) if ask.caller is not None else None
            vision = spec.vision_model or self.resources.settings.llm_vision_model
            try:
                pictures = tuple(
                    [
                        await describe(
                            self.resources.model,
                            vision,
                            picture,
                            ask.text,
                            account=account,
                            user_id=user,
                        )
                        for picture in pictures
                    ]
                )
            finally:
                if allowance.scopes:
                    await record_turn(allowance, account, self.users)
        options = replace(ask.options or NO_OPTIONS, pictures=pictures)
        return replace(ask, options=options)

    async def respond(self, ask: Ask) -> Reply:
        """Admit, answer and count one turn (see :meth:`admit` for what it raises; a failed
        turn raises what the persona raised, after its billed tokens were counted)."""
        allowance, ask, pictures = await self._admit(ask)
        ask = await self._seen(ask, pictures, allowance)
        options = await self._options(ask)
        bill, hooks = self._hooks(allowance)
        try:
            return await ask.persona.respond(
                ask.text,
                conversation_id=ask.conversation_id,
                history=ask.history,
                options=options,
                caller=ask.caller,
                **hooks,
            )
        finally:
            await self._count(allowance, bill)

    async def stream(self, ask: Ask) -> AsyncGenerator[PersonaEvent, None]:
        """Admit ``ask`` now (see :meth:`admit`), and describe its pictures for a persona
        whose model cannot see; then its events, not started yet.

        Iterate them to ``Done`` or close them: the turn is counted when the generator ends,
        however it ends.
        """
        allowance, ask, pictures = await self._admit(ask)
        ask = await self._seen(ask, pictures, allowance)
        options = await self._options(ask)
        bill, hooks = self._hooks(allowance)
        events = ask.persona.stream(
            ask.text,
            conversation_id=ask.conversation_id,
            history=ask.history,
            options=options,
            caller=ask.caller,
            **hooks,
        )
        if bill is None:
            return events
        return self._counted(events, allowance, bill)

    async def _options(self, ask: Ask) -> TurnOptions | None:
        """The turn's options: the caller's, with the persona's memory of its user when the
        persona keeps one (:mod:`generic_framework.memory.turns`)."""
        if not ask.persona.spec.memory.enabled:
            return ask.options
        memories = self.resources.memories
        spec, conversation = ask.persona.spec, ask.conversation_id
        return await with_memory(memories, spec, ask.caller, ask.options, conversation)

    def _hooks(self, allowance: Allowance) -> tuple[_Bill | None, dict[str, TurnHooks]]:
        """The turn's bill (only when it counts against a daily limit) and the persona's
        ``hooks`` argument (none at all when there is nothing to hook)."""
        bill = _Bill() if allowance.scopes else None
        chain = [*self.hooks, bill] if bill is not None else self.hooks
        if not chain:
            return None, {}
        return bill, {"hooks": chain[0] if len(chain) == 1 else HookChain(chain)}

    async def _counted(
        self,
        events: AsyncGenerator[PersonaEvent, None],
        allowance: Allowance,
        bill: _Bill,
    ) -> AsyncGenerator[PersonaEvent, None]:
        try:
            async with aclosing(events) as inner:
                async for event in inner:
                    yield event
        finally:
            await self._count(allowance, bill)

    async def _count(self, allowance: Allowance, bill: _Bill | None) -> None:
        """Add the ended turn's tokens and searches to the daily totals it counts against."""
        if bill is not None and bill.account is not None:
            await record_turn(allowance, bill.account, self.users)
