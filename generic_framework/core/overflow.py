"""Context overflow (1261): which history a too-long call can do without.

When Z.AI refuses a call as longer than the model's context window, the turn sends it once more
without the older half of the history it carried (docs/design/0319). History is cut only between
turns, at a user message, so an assistant message with tool calls is never separated from the
tool messages that answer it. The system prompts, the current turn and the stored conversation
are left alone: only the request changes. :func:`without_oldest_turns` is that second request
(the turn keeps the shorter history for its later rounds); :func:`too_long` is the error a turn
ends with when there is nothing to drop or the shorter call is still too long. The turn engine's
``_call_llm`` decides when to ask for them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from generic_framework.wire.errors import ContextTooLongError
from generic_framework.wire.messages import ChatRequest, Message, SystemMessage, UserMessage
from generic_framework.wire.profiles import profile_for

if TYPE_CHECKING:
    from generic_framework.core.turn import Turn

__all__ = ["drop_oldest_turns", "history_turns", "too_long", "without_oldest_turns"]

logger = logging.getLogger("generic_framework.persona")


def history_turns(prefix: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split a turn's prefix into its leading system messages and its history turns.

    A history turn starts at a user message and runs to the next one (its assistant answer,
    tool calls and tool results included); messages before the first user message belong to
    the first turn.
    """
    start = 0
    while start < len(prefix) and isinstance(prefix[start], SystemMessage):
        start += 1
    turns: list[list[Message]] = []
    for message in prefix[start:]:
        if isinstance(message, UserMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return list(prefix[:start]), turns


def drop_oldest_turns(prefix: Sequence[Message]) -> tuple[list[Message], int]:
    """``prefix`` without the oldest half of its history turns (at least one), and how many
    turns were dropped; ``(prefix, 0)`` when it has no history."""
    system, turns = history_turns(prefix)
    if not turns:
        return list(prefix), 0
    dropped = (len(turns) + 1) // 2
    kept = [message for turn in turns[dropped:] for message in turn]
    return [*system, *kept], dropped


def without_oldest_turns(request: ChatRequest, turn: Turn, exc: ContextTooLongError) -> ChatRequest:
    """``request`` without the oldest history turns; raises ``exc`` reworded when there
    are none to drop."""
    carried = len(turn.prefix)
    same = all(a is b for a, b in zip(request.messages, turn.prefix, strict=False))
    prefix, dropped = drop_oldest_turns(turn.prefix)
    if not dropped or not same or len(request.messages) < carried:
        turn.watch.context_overflow("failed")
        raise too_long(request.model, exc, trimmed=False) from exc
    turn.watch.context_overflow("trimmed")
    logger.warning(
        "%s: the call was too long for %s (1261); sending it again without the %d oldest "
        "of its history turns",
        turn.persona,
        request.model,
        dropped,
    )
    rest = request.messages[carried:]
    turn.prefix[:] = prefix  # the turn's later rounds send the shorter history too
    return request.model_copy(update={"messages": [*prefix, *rest]})


def too_long(model: str, exc: ContextTooLongError, *, trimmed: bool) -> ContextTooLongError:
    """The error a turn ends with when its call does not fit the model's context window."""
    profile = profile_for(model, warn=False)
    window = f" ({profile.context_window // 1024}K tokens)" if profile is not None else ""
    if trimmed:
        text = (
            f"the conversation is too long for {model}'s context window{window} even without "
            "its oldest turns: start a new conversation, or lower HISTORY_TURNS"
        )
    else:
        text = (
            f"the message is too long for {model}'s context window{window}, with no earlier "
            "turn left to drop: shorten it"
        )
    return ContextTooLongError(
        f"{text} (the upstream said: {exc.message})",
        status_code=exc.status_code,
        code=exc.code,
        request_id=exc.request_id,
    )
