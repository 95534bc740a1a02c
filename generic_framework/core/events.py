"""Events of :meth:`Persona.stream() <generic_framework.core.persona.Persona.stream>`.

A stream yields, in order: :class:`TextDelta` pieces as the model writes, :class:`RoundStarted`
when the model asks for tools, one :class:`ToolFinished` per call as each one ends (completion
order), more text, and exactly one :class:`Done` last, carrying the same :class:`Reply` that
:meth:`Persona.respond` returns.

Text written in a round that ends with tool calls (``"Let me check."``) is streamed too, so the
concatenated deltas can differ from :attr:`Reply.content`, which holds only the final answer.
Both have ``[ref_N]`` rewritten to ``[n]``: the deltas as they stream (a marker split across
pieces is held until it completes), numbered provisionally while server-side search has not yet
sent its sources (see :meth:`CitationBook.stream()
<generic_framework.core.citations.CitationBook.stream>`). Display the deltas live, then trust
``Done``.

Events are small frozen dataclasses (many deltas per answer); :meth:`to_dict` gives a JSON-ready
form with a ``type`` key.

Inside the loop the events go to an :data:`EventSink`, a plain callable the turn is given:
``stream()`` passes one that hands them to its consumer as they come, ``respond()`` passes
:func:`ignore`. The loop's own values (the next step, a round's results, the turn's end) are
returned by the methods that make them, never put in a sink.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from generic_framework.core.reply import Reply

__all__ = [
    "Done",
    "EventSink",
    "PersonaEvent",
    "RoundStarted",
    "TextDelta",
    "ToolFinished",
    "ignore",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text."""

    text: str
    type: ClassVar[str] = "text_delta"

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "text_delta", "text": ...}``."""
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """The model asked for tools; they are about to run.

    Attributes:
        round: the number of the model call that asked (1-based).
        tools: the names of the called tools, in call order (repeats kept).
    """

    round: int
    tools: list[str]
    type: ClassVar[str] = "round_started"

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "round_started", "round": ..., "tools": [...]}``."""
        return {"type": self.type, "round": self.round, "tools": list(self.tools)}


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """One tool call ended (successfully or with an error text for the model)."""

    name: str
    ok: bool
    ms: float
    type: ClassVar[str] = "tool_finished"

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "tool_finished", "name": ..., "ok": ..., "ms": ...}``."""
        return {"type": self.type, "name": self.name, "ok": self.ok, "ms": round(self.ms, 1)}


@dataclass(frozen=True, slots=True)
class Done:
    """The turn is over (and stored, when it has a conversation)."""

    reply: Reply
    type: ClassVar[str] = "done"

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "done", "reply": {...}}`` (the reply without its raw messages)."""
        return {"type": self.type, "reply": self.reply.model_dump(exclude={"messages"})}


PersonaEvent = TextDelta | RoundStarted | ToolFinished | Done
"""Anything :meth:`Persona.stream` yields."""

EventSink = Callable[[PersonaEvent], None]
"""Where the loop puts the public events of a turn as it makes them (never the loop's own
values): called once per event, in order, from the task that runs the turn."""


def ignore(event: PersonaEvent) -> None:
    """The sink of a turn nobody watches (``respond()``): every event is dropped."""
