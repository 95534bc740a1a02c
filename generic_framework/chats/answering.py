"""One message, from its arrival to its answer, the same on every platform.

A platform hands :meth:`Answerer.submit` a job per update, keyed by its lane (the chat, or
thread): the jobs of one lane run in order, lanes side by side
(:class:`~generic_framework.chats.lanes.Lanes`). Every update is counted (``received``, then
``answered``, ``refused`` or ``failed``) and logged with a request id of its own; a job that
raises is logged (redacted, like every log line), counted as ``failed``, and the chat gets a
short apology, and the bot goes on with the next update.

:meth:`Answerer.answer` answers one :class:`~generic_framework.chats.message.Incoming`: a
stranger gets their user id and how to be let in (no model call); a message with pictures (a
photo, an image document: :mod:`~generic_framework.chats.pictures`) is a turn with them, its
caption as the text; a message without text, or with another file (a voice message), gets a
polite "text and pictures only"; a command is run from the registry; anything else is a turn.

A turn is asked of the runtime's turn service (:mod:`generic_framework.turns`) by the sender's
user (``<platform>:<id>``: admitted against their limits, counted in their daily totals however
the turn ends), in the chat's current conversation with its persona. The conversation of a
private chat belongs to its one user; a group chat's (or thread's) belongs to the chat's own
user ``<platform>:<chat_id>``, so every member continues the same conversation and
``users remove <platform>:<chat_id>`` deletes it.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from generic_framework.chats.access import Access, Names, stranger_text
from generic_framework.chats.commands import (
    CommandContext,
    CommandRegistry,
    chat_state,
    default_commands,
)
from generic_framework.chats.lanes import Lanes
from generic_framework.chats.live import LiveAnswer
from generic_framework.chats.message import Incoming
from generic_framework.chats.people import caller_for, platform_user, refusal_text
from generic_framework.chats.pictures import NOT_A_PICTURE, picture_urls, refusal_reply
from generic_framework.chats.surface import ChatSurface
from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError, GLMError
from generic_framework.pictures import PictureRefused
from generic_framework.redaction import redact
from generic_framework.runtime import Runtime
from generic_framework.store.users import conversation_key
from generic_framework.turns import Ask, OptionRefused, TurnRefused
from generic_framework.wire import errors as e

__all__ = ["REQUEST_ID", "SORRY", "TEXT_ONLY", "Answerer", "Outcome", "friendly_error"]

TEXT_ONLY = NOT_A_PICTURE
SORRY = "Sorry, something went wrong while answering. Please try again."
REQUEST_ID: ContextVar[str] = ContextVar("chat_request_id", default="-")
"""The request id of the update being answered (set for each update's job)."""
Outcome = str | None
"""``answered``, ``refused``, ``failed``, or ``None`` for an update that needed no answer."""


def friendly_error(exc: GLMError, offline: bool) -> str:
    """A short message for the chat when the model could not answer."""
    if isinstance(exc, e.ContentFilterError):
        text = "The model declined to answer that. Please rephrase it."
    elif isinstance(exc, e.AuthenticationError | e.InsufficientBalanceError | e.QuotaExceededError):
        text = "I cannot reach my model right now; the bot's owner can see why in its log."
    elif isinstance(exc, e.RateLimitError | e.ServerError | e.APITimeoutError):
        text = "The model is busy right now. Please try again in a minute."
    elif isinstance(exc, e.APIConnectionError):
        text = "I cannot reach my model right now. Please try again in a minute."
    else:
        text = SORRY
    if offline:
        text += " (No API key is set: answers come from recorded examples only.)"
    return text


class Answerer:
    """Answers one platform's messages over one runtime (see the module's docstring).

    Args:
        runtime: the personas, the store, the locks, the metrics.
        platform: the platform's name (``telegram``).
        access: the allowlists.
        names: how the platform's people and settings are named to a stranger.
        interval: the least seconds between two edits of a live answer.
        offline: answers come from the embedded mock (said when a turn fails).
        commands: the commands; :func:`~generic_framework.chats.commands.default_commands`.
        request_prefix: how the request ids of the log start (``tg``).
    """

    def __init__(
        self,
        runtime: Runtime,
        platform: str,
        access: Access,
        names: Names,
        *,
        interval: float,
        offline: bool,
        commands: CommandRegistry | None = None,
        request_prefix: str = "",
    ) -> None:
        self.runtime, self.platform, self.access, self.names = runtime, platform, access, names
        self.interval, self.offline = interval, offline
        self.commands = commands if commands is not None else default_commands()
        self.prefix = request_prefix or platform[:2]
        self.log = logging.getLogger(f"generic_framework.{platform}")
        self.lanes = Lanes(on_error=self._lane_failed)

    # ------------------------------------------------------------------ updates

    def submit(
        self,
        lane: str,
        what: str,
        job: Callable[[], Awaitable[Outcome]],
        apologise: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Queue ``job`` (the answer to the update named ``what``) in ``lane``."""
        self.runtime.telemetry.metrics.chat_update(self.platform, "received")
        self.lanes.submit(lane, lambda: self._process(what, job, apologise))

    async def _process(
        self,
        what: str,
        job: Callable[[], Awaitable[Outcome]],
        apologise: Callable[[], Awaitable[object]] | None,
    ) -> None:
        request_id = f"{self.prefix}-{uuid.uuid4().hex[:16]}"
        REQUEST_ID.set(request_id)  # this lane job's own context: the answer's log lines
        extra = {"request_id": request_id}
        metrics = self.runtime.telemetry.metrics
        try:
            outcome = await job()
        except Exception as exc:
            metrics.chat_update(self.platform, "failed")
            self.log.error(
                "request %s: %s failed (%s: %s)",
                request_id,
                what,
                type(exc).__name__,
                redact(str(exc)),
                extra=extra,
            )
            if apologise is not None:
                with contextlib.suppress(Exception):  # the chat may be the fault (blocked, gone)
                    await apologise()
            return
        if outcome is not None:
            metrics.chat_update(self.platform, outcome)
            self.log.info("request %s: %s %s", request_id, what, outcome, extra=extra)

    def _lane_failed(self, key: str, exc: BaseException) -> None:
        self.runtime.telemetry.metrics.chat_update(self.platform, "failed")
        self.log.error("an update failed (%s: %s)", type(exc).__name__, redact(str(exc)))

    # ------------------------------------------------------------------ one message

    async def answer(self, incoming: Incoming, surface: ChatSurface) -> Outcome:
        """Answer ``incoming`` in ``surface`` (see the module's docstring); its outcome."""
        chat = incoming.chat
        if not self.access.allows(incoming.sender, chat.chat_id, incoming.group):
            await surface.say(
                stranger_text(self.names, incoming.sender, chat.chat_id, chat.private)
            )
            return "refused"
        images: tuple[str, ...] = ()
        if incoming.attachments:
            settings = self.runtime.settings
            try:
                images = await picture_urls(
                    incoming.attachments,
                    max_count=settings.bot_max_images,
                    max_bytes=settings.bot_max_image_bytes,
                )
            except PictureRefused as exc:
                words = str(exc)
                await surface.say(words if words == NOT_A_PICTURE else refusal_reply(exc))
                return "refused"
        if not incoming.text.strip() and not images:
            await surface.say(TEXT_ONLY)
            return "refused"
        if incoming.command is not None and not images:
            ctx = await self.context(incoming.sender, incoming.key, surface)
            await self.commands.run(ctx, incoming.command, incoming.argument)
            return "answered"
        return await self.turn(incoming, surface, images)

    async def context(self, sender: int, key: str, surface: ChatSurface) -> CommandContext:
        """A command's context for ``sender`` in the chat ``key``."""
        user = await platform_user(self.runtime.users, self.platform, sender)
        return CommandContext(self.runtime, surface, self.platform, key, user)

    def _persona(self, name: str | None) -> Persona:
        with contextlib.suppress(ConfigError):  # a persona file removed since it was chosen
            return self.runtime.persona(name)
        return self.runtime.persona(None)

    async def turn(
        self, incoming: Incoming, surface: ChatSurface, images: tuple[str, ...] = ()
    ) -> str:
        """Run one turn of the chat's persona (with the message's pictures) and show it
        live."""
        store = self.runtime.users
        user = await platform_user(store, self.platform, incoming.sender)
        owner = user
        if not incoming.chat.private:
            owner = await platform_user(store, self.platform, incoming.chat.chat_id)
        state = await chat_state(self.runtime, self.platform, incoming.key)
        persona = self._persona(state.persona)
        conversation = conversation_key(owner.id, state.conversation_id)
        ask = Ask(persona, incoming.text, caller_for(user), conversation, images=images)
        try:
            events = await self.runtime.turns.stream(ask)
        except TurnRefused as refused:
            await surface.say(refusal_text(refused.refusal))
            return "refused"
        except OptionRefused as refused:
            await surface.say(refusal_reply(refused))
            return "refused"
        live = LiveAnswer(surface, interval=self.interval, web=ask.web)
        try:
            async with contextlib.aclosing(events) as stream:
                await live.run(stream)
        except GLMError as exc:
            self.log.warning(
                "request %s: the turn failed upstream (%s; upstream request id %s)",
                REQUEST_ID.get(),
                type(exc).__name__,
                exc.request_id or "-",
                extra={"request_id": REQUEST_ID.get(), "upstream_request_id": exc.request_id},
            )
            await live.fail(friendly_error(exc, self.offline))
            return "failed"
        return "answered"
