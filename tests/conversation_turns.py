"""A conversation turn as the stores keep it, shared by the store and service tests."""

from __future__ import annotations

from generic_framework.wire.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)


def turn(n: int, *, with_tool: bool = False, text: str = "") -> list[Message]:
    """Turn ``n``: a question, with ``with_tool`` an ``echo`` call and its result, an answer."""
    messages: list[Message] = [UserMessage(content=text or f"question {n}")]
    if with_tool:
        call = ToolCall(id=f"t{n}", function=FunctionCall(name="echo", arguments='{"text":"x"}'))
        messages += [
            AssistantMessage(content=None, reasoning_content=f"r{n}", tool_calls=[call]),
            ToolMessage(content="x", tool_call_id=f"t{n}"),
        ]
    messages.append(AssistantMessage(content=f"answer {n}"))
    return messages


def exchange(question: str, answer: str, *, tool: bool = False) -> list[Message]:
    """A turn as typed and answered: with ``tool`` a ``calculate`` call and its result between."""
    out: list[Message] = [UserMessage(content=question)]
    if tool:
        call = ToolCall(id="t1", function=FunctionCall(name="calculate", arguments="{}"))
        out += [
            AssistantMessage(content=None, tool_calls=[call]),
            ToolMessage(content="4", tool_call_id="t1"),
        ]
    return [*out, AssistantMessage(content=answer)]
