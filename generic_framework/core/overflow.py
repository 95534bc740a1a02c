"""Context overflow (1261): which history a too-long call can do without.

When Z.AI refuses a call as longer than the model's context window, the turn sends it once more
without the older half of the history it carried (docs/design/0319). History is cut only between
turns, at a user message, so an assistant message with tool calls is never separated from the
tool messages that answer it. The system prompts, the current turn and the stored conversation
are left alone: only the request changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from generic_framework.wire.messages import Message, SystemMessage, UserMessage

__all__ = ["drop_oldest_turns", "history_turns"]


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
