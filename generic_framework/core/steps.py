"""The steps of the tool loop: what a model answer asks for, and what the loop hands back.

:func:`next_step` reads one completion and names the next step explicitly, :class:`RunTools`
or :class:`Finish`; a tool round returns its results (one per call, in call order), and the
loop returns one :class:`TurnEnd` (the reply, and whether to store it). They are values the
loop's methods return, as the next node of a graph is: none of them travels with the public
events (:mod:`~generic_framework.core.events`), which go to the turn's sink. They are the
vocabulary between :class:`~generic_framework.core.engine.TurnEngine` and
:class:`~generic_framework.core.persona.Persona`, kept apart from the engine so that a subclass
overriding a seam, or a test, reads them without the loop itself; ``core.engine`` re-exports
them.
"""

from __future__ import annotations

from dataclasses import dataclass

from generic_framework.core.reply import Reply
from generic_framework.wire.messages import AssistantMessage, ChatCompletion

__all__ = ["Finish", "RunTools", "TurnEnd", "next_step"]


@dataclass(frozen=True, slots=True)
class RunTools:
    """Next step: answer the tool calls of the completion's message, then call again."""

    completion: ChatCompletion

    @property
    def message(self) -> AssistantMessage:
        """The assistant message carrying the calls."""
        return self.completion.message


@dataclass(frozen=True, slots=True)
class Finish:
    """Next step: the turn ends with this completion's text."""

    completion: ChatCompletion


def next_step(completion: ChatCompletion, *, tools_offered: bool) -> RunTools | Finish:
    """What a model answer asks for.

    Tool calls are run only when tools were offered and the answer did not stop for
    ``length`` (a cut-off answer's calls may be incomplete); otherwise the turn finishes and
    any tool calls in the answer are dropped.
    """
    message = completion.message
    if tools_offered and message.tool_calls and completion.finish_reason != "length":
        return RunTools(completion)
    return Finish(completion)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """What the loop returns: the reply, and whether the turn's messages are to be stored."""

    reply: Reply
    store: bool
