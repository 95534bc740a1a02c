"""A live answer: the reply shown while the persona writes it, then the formatted answer.

Where the surface streams drafts (a Telegram private chat on a Bot API server that offers
``sendMessageDraft``) the text streams as a draft; elsewhere one message is sent and edited at
most every ``interval`` seconds (a platform's edit interval setting). While the web search or a
tool runs, the typing indicator is renewed every :data:`TYPING_EVERY` seconds and the draft (or
message) shows a short status: "Searching the web…" for the web search, the tool's name for the
others. A draft still standing is sent again after :data:`DRAFT_RENEW` seconds.

The final answer is the surface's rendered messages: in edit mode the live message becomes the
first one, in draft mode every message is a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from generic_framework.chats.surface import ChatSurface
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta
from generic_framework.core.reply import Reply

__all__ = ["DRAFT_RENEW", "SEARCHING", "TYPING_EVERY", "LiveAnswer"]

TYPING_EVERY = 4.0
"""Telegram shows a chat action for 5 s (Discord a typing indicator for 10): renewed sooner."""
DRAFT_RENEW = 20.0
"""Telegram shows a draft for 30 s: one still standing is sent again after this long."""
SEARCHING = "Searching the web…"


class LiveAnswer:
    """Shows one turn's events in a chat (see the module's docstring).

    Args:
        surface: the chat, on its platform.
        interval: the least seconds between two live updates.
        web: the turn is a ``//`` web search (its status shows from the start).
    """

    def __init__(self, surface: ChatSurface, *, interval: float, web: bool) -> None:
        self.surface, self.interval = surface, interval
        self.text = ""
        self.status = SEARCHING if web else ""
        self.busy = True  # the status shows: typing is renewed
        self.message_id: int | None = None  # edit mode: the live message
        self._shown = ""
        self._last = 0.0

    @property
    def use_drafts(self) -> bool:
        """Drafts for this answer (the surface offers them)."""
        return self.surface.can_draft

    async def run(self, events: AsyncIterator[PersonaEvent]) -> Reply:
        """Show ``events`` live, then send the final answer; the turn's reply.

        Raises:
            GLMError: the turn failed (what was shown stays; the caller says sorry).
            RuntimeError: the events ended without ``Done``.
        """
        typing = asyncio.create_task(self._keep_typing())
        try:
            if self.status:
                await self._update(force=True)
            reply = await self._follow(events)
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
        await self.finish(reply)
        return reply

    async def _follow(self, events: AsyncIterator[PersonaEvent]) -> Reply:
        async for event in events:
            if isinstance(event, TextDelta):
                self.text += event.text
                self.busy = False
                await self._update()
            elif isinstance(event, RoundStarted):
                self.text, self.busy = "", True  # a round's preamble is not the answer
                self.status = SEARCHING if "web_search" in event.tools else _tools(event.tools)
                await self._update(force=True)
            elif isinstance(event, Done):
                return event.reply
        raise RuntimeError("the turn's events ended without an answer")

    async def finish(self, reply: Reply) -> None:
        """Send ``reply`` formatted; the live message (edit mode) becomes its first part."""
        chunks = self.surface.render_answer(reply.content, reply.citations) or ["…"]
        first_into = None if self.use_drafts else self.message_id
        await self.surface.deliver(chunks, first_into=first_into)

    async def fail(self, text: str) -> None:
        """Say ``text`` (a short apology) instead of the answer: in the live message when
        there is one, else in a new message."""
        if self.message_id is not None and not self.use_drafts:
            await self.surface.replace(self.message_id, text)
            return
        await self.surface.say(text)

    def _shown_text(self) -> str:
        """What the live draft or message shows now (escaped text, no markup)."""
        if self.busy and self.status:
            return self.surface.escape(self.status)
        return self.surface.render_draft(self.text)

    async def _update(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        shown = self._shown_text()
        if not shown.strip() or shown == self._shown:
            return
        self._last, self._shown = now, shown
        if self.use_drafts and await self.surface.draft(shown):
            return
        if self.message_id is None:
            self.message_id = await self.surface.post(shown)
        else:
            await self.surface.update(self.message_id, shown)

    async def _keep_typing(self) -> None:
        while True:
            if self.busy:
                await self.surface.typing()
                await self._renew_draft()
            await asyncio.sleep(TYPING_EVERY)

    async def _renew_draft(self) -> None:
        """Send the shown draft again before it is dropped (a search may run longer)."""
        if self.use_drafts and self._shown and time.monotonic() - self._last >= DRAFT_RENEW:
            self._last = time.monotonic()
            await self.surface.draft(self._shown)


def _tools(names: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(names)) or "a tool"
    return f"Running {shown}…"
