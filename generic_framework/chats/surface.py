"""A chat surface: what a platform does for one chat, all the neutral layer asks of it.

Each platform implements :class:`ChatSurface` over its own client for one chat: plain short
messages (commands, refusals, apologies) sent reliably, a live answer's first message and its
edits (an edit is dropped rather than waited for when the platform asks to slow down), a draft
where the platform streams one, the typing indicator, a choice offered (the persona picker),
and its markup: the final answer's messages within its length limit, a partial answer, an
escaped status line. :class:`~generic_framework.chats.live.LiveAnswer` and the commands of
:mod:`generic_framework.chats.commands` speak only to this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from generic_framework.chats.message import ChatRef
from generic_framework.core.reply import Citation

__all__ = ["ChatSurface"]


class ChatSurface(Protocol):
    """One chat on one platform (see the module's docstring)."""

    @property
    def chat(self) -> ChatRef:
        """Where the messages go."""
        ...

    @property
    def can_draft(self) -> bool:
        """Whether a live answer streams as a draft here (else one message is edited)."""
        ...

    async def say(self, text: str) -> None:
        """Send ``text`` as a plain message (retried through the platform's rate limits)."""
        ...

    async def choose(self, text: str, options: Sequence[str]) -> None:
        """Send ``text`` offering ``options`` (buttons, or a list of what to type)."""
        ...

    async def post(self, shown: str) -> int | None:
        """Send a live answer's first message (``shown`` in the platform's markup); its id."""
        ...

    async def update(self, message_id: int, shown: str) -> None:
        """Edit a live answer's message (dropped while the platform asks to slow down)."""
        ...

    async def replace(self, message_id: int, text: str) -> None:
        """Edit a message to plain ``text`` (retried: an apology must be seen)."""
        ...

    async def draft(self, shown: str) -> bool:
        """Show ``shown`` as a draft; False when the platform turns out to offer none."""
        ...

    async def typing(self) -> None:
        """Show the typing indicator (dropped on failure)."""
        ...

    async def deliver(self, chunks: Sequence[str], *, first_into: int | None) -> None:
        """Send the final answer's messages; with ``first_into`` the first one replaces that
        message's text."""
        ...

    def render_answer(self, content: str, citations: Sequence[Citation]) -> list[str]:
        """The final answer as messages in the platform's markup, each within its limit."""
        ...

    def render_draft(self, text: str) -> str:
        """A partial answer in the platform's markup (escaped text, cut to the limit)."""
        ...

    def escape(self, text: str) -> str:
        """Plain ``text`` (a status line) escaped for the platform's markup."""
        ...
