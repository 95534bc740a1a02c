"""Making a stored history safe to send: no message list that Z.AI rejects with 1214.

The invariants (checked by :func:`history_problems`, enforced by :func:`sanitize_history`), for
the messages that follow the system prompt:

1. The history is empty or starts with a user message (a user message right after the system
   prompt; lists without one were seen rejected with 1214, docs/protocol.md §5).
2. No system messages inside the history.
3. No empty assistant messages: text, or tool calls, or both. Beside tool calls an empty text is
   sent as ``null`` (docs/protocol.md §2.2).
4. An assistant message with tool calls is followed at once by exactly one tool message per call,
   in call order, with the matching ``tool_call_id``.
5. Every tool message belongs to such a group.

Repairs drop, never invent: a broken call group (missing, extra or reordered answers) is removed
whole, orphan tool messages and empty assistant messages are removed, and leading messages
before the first user message are removed. Trimming works on whole turns (a turn starts at a user
message), so a call and its answers are never separated. Messages that need no repair are passed
through as the same objects; nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from generic_framework.wire.messages import AssistantMessage, Message, ToolMessage, UserMessage

__all__ = ["history_problems", "sanitize_history", "split_turns"]


def _has_text(message: AssistantMessage) -> bool:
    return bool(message.content and message.content.strip())


def _group_ok(messages: Sequence[Message], start: int) -> bool:
    """True when the assistant at ``start`` is followed by one answer per call, in order."""
    calls = messages[start].tool_calls or []  # type: ignore[union-attr]
    end = start + 1 + len(calls)
    if end > len(messages):
        return False
    for offset, call in enumerate(calls, start=1):
        answer = messages[start + offset]
        if not isinstance(answer, ToolMessage) or answer.tool_call_id != call.id:
            return False
    return end == len(messages) or not isinstance(messages[end], ToolMessage)


def _clean_assistant(message: AssistantMessage, keep_reasoning: bool) -> AssistantMessage:
    update: dict[str, object] = {}
    if message.tool_calls and message.content is not None and not message.content.strip():
        update["content"] = None
    if not keep_reasoning and message.reasoning_content is not None:
        update["reasoning_content"] = None
    return message.model_copy(update=update) if update else message


def _repair(messages: Sequence[Message], keep_reasoning: bool) -> list[Message]:
    out: list[Message] = []
    index, count = 0, len(messages)
    while index < count:
        message = messages[index]
        index += 1
        if isinstance(message, UserMessage):
            out.append(message)
        elif isinstance(message, AssistantMessage):
            if message.tool_calls:
                if _group_ok(messages, index - 1):
                    size = len(message.tool_calls)
                    out.append(_clean_assistant(message, keep_reasoning))
                    out.extend(messages[index : index + size])
                    index += size
            elif _has_text(message):
                out.append(_clean_assistant(message, keep_reasoning))
        # system messages and orphan tool messages are dropped
    first_user = next((i for i, m in enumerate(out) if isinstance(m, UserMessage)), len(out))
    return out[first_user:]


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Split a history into turns; each starts at a user message (a leading remainder too)."""
    turns: list[list[Message]] = []
    for message in messages:
        if isinstance(message, UserMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def sanitize_history(
    messages: Sequence[Message], *, max_turns: int | None = None, keep_reasoning: bool = True
) -> list[Message]:
    """Return ``messages`` repaired so they satisfy every invariant of this module.

    Args:
        messages: the history, without the system prompt.
        max_turns: keep only the last this-many turns (whole turns, so call groups stay whole).
        keep_reasoning: keep ``reasoning_content`` on assistant messages; Z.AI ignores earlier
            turns' reasoning unless preserved thinking is on (docs/protocol.md §9), so the persona
            drops it then to save tokens and bytes.

    Returns:
        A new list; unchanged messages are the same objects as in ``messages``.
    """
    repaired = _repair(messages, keep_reasoning)
    if max_turns is None:
        return repaired
    if max_turns <= 0:
        return []
    turns = split_turns(repaired)
    if len(turns) <= max_turns:
        return repaired
    return [message for turn in turns[-max_turns:] for message in turn]


def history_problems(messages: Sequence[Message]) -> list[str]:
    """List every invariant the history breaks (empty when it is safe to send)."""
    problems: list[str] = []
    if messages and not isinstance(messages[0], UserMessage):
        problems.append(f"messages[0] is {messages[0].role!r}, not a user message")
    index = 0
    while index < len(messages):
        found, skip = _message_problems(messages, index)
        problems += found
        index += skip + 1
    return problems


def _message_problems(messages: Sequence[Message], index: int) -> tuple[list[str], int]:
    """The problems of ``messages[index]``, and how many answering messages it vouches for."""
    message = messages[index]
    where = f"messages[{index}]"
    if message.role == "system":
        return [f"{where} is a system message inside the history"], 0
    if isinstance(message, ToolMessage):
        return [f"{where} answers {message.tool_call_id!r} with no call"], 0
    if not isinstance(message, AssistantMessage):
        return [], 0
    if not message.tool_calls:
        return ([] if _has_text(message) else [f"{where} is an empty assistant message"]), 0
    problems = []
    if message.content is not None and not message.content.strip():
        problems.append(f"{where} has empty text beside tool calls")
    if _group_ok(messages, index):
        return problems, len(message.tool_calls)
    return [*problems, f"{where}'s tool calls are not each answered in order"], 0
