"""A scripted chat model for your own tests: a persona's whole loop, without HTTP.

:class:`FunctionModel` is a :class:`~generic_framework.wire.model.ChatModel` that answers each
request with a Python function of it, the way pydantic-ai's ``FunctionModel`` does. Give it to
a runtime (``Runtime(model=...)``) and the personas bound to that runtime run the real loop on
its answers, in ``respond()`` and ``stream()`` alike: tools, rounds, the forced answer,
citations, storage, metrics::

    from generic_framework import Persona, Runtime, tool
    from generic_framework.testing import FunctionModel, tool_call

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    def answer(request):
        last = request.messages[-1]
        if last.role == "tool":  # the tool's result is in: answer with it
            return f"It is {last.content}."
        return [tool_call("add", {"a": 2, "b": 3})]

    async def test_adds():
        async with Runtime(model=FunctionModel(answer)) as runtime:
            adder = Persona("adder", "You add.", tools=[add], tools_always=True, runtime=runtime)
            reply = await adder.respond("What is 2 + 3?")
        assert reply.content == "It is 5."

What it cannot do: it never searches (a ``//`` turn in ``client`` mode still calls the
Web Search API through the runtime's GLM client; script ``web_search[]`` sources by returning a
whole :class:`~generic_framework.wire.messages.ChatCompletion`), and its token counts are word
counts, not a tokenizer's.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    Choice,
    ContentDelta,
    FunctionCall,
    Message,
    ReasoningDelta,
    StreamCompleted,
    StreamEvent,
    ToolCall,
    Usage,
)
from generic_framework.wire.responses import check_finish

__all__ = ["Answer", "FunctionModel", "tool_call"]

Answer: TypeAlias = str | Sequence[ToolCall] | AssistantMessage | ChatCompletion
"""What a :class:`FunctionModel`'s function returns: the answer's text, tool calls (see
:func:`tool_call`), an assistant message (text, calls, reasoning), or a whole completion
(to script ``usage``, ``finish_reason`` or ``web_search[]`` sources)."""

_ids = itertools.count(1)
_PIECES = re.compile(r"\s*\S+\s*|\s+")


def tool_call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str = ""
) -> ToolCall:
    """A function tool call as the model makes it (``arguments`` sent as a JSON string)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{next(_ids)}", function=FunctionCall(name=name, arguments=text))


class FunctionModel:
    """A chat model whose every answer is ``function(request)``.

    Args:
        function: called with each :class:`~generic_framework.wire.messages.ChatRequest`
            (``request.messages``, ``request.tools`` offered, ``request.model``...); returns,
            or returns an awaitable of, an :data:`Answer`.
        model_name: the ``model`` of its completions.

    Streamed, the text comes in pieces of one word (with its spaces), after the reasoning
    as one piece; then the whole completion. ``finish_reason`` is ``tool_calls`` for an
    answer with calls, else ``stop``; ``sensitive`` in a scripted completion raises
    :class:`~generic_framework.wire.errors.ContentFilterError` as the GLM client does.

    Attributes:
        requests: every request it was sent, in order.
    """

    def __init__(
        self,
        function: Callable[[ChatRequest], Answer | Awaitable[Answer]],
        *,
        model_name: str = "function-model",
    ) -> None:
        self.function = function
        self.model_name = model_name
        self.requests: list[ChatRequest] = []

    def __repr__(self) -> str:
        return f"FunctionModel({getattr(self.function, '__name__', self.function)!r})"

    async def chat(self, request: ChatRequest) -> ChatCompletion:
        """The completion for ``request``."""
        self.requests.append(request)
        answer = self.function(request)
        if inspect.isawaitable(answer):
            answer = await answer
        completion = self._completion(answer, request.messages)
        check_finish(completion.finish_reason, completion.id)
        return completion

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The completion for ``request``: reasoning, then text word by word, then the whole."""
        completion = await self.chat(request)
        message = completion.message
        if message.reasoning_content:
            yield ReasoningDelta(text=message.reasoning_content)
        for piece in _PIECES.findall(message.content or ""):
            yield ContentDelta(text=piece)
        yield StreamCompleted(completion=completion)

    def _completion(self, answer: Answer, messages: Sequence[Message]) -> ChatCompletion:
        if isinstance(answer, ChatCompletion):
            return answer
        if isinstance(answer, str):
            message = AssistantMessage(content=answer)
        elif isinstance(answer, AssistantMessage):
            message = answer
        else:
            message = AssistantMessage(tool_calls=list(answer))
        calls = message.tool_calls
        if calls:  # as Z.AI sends them: each call with its index
            message = message.model_copy(
                update={
                    "tool_calls": [c.model_copy(update={"index": i}) for i, c in enumerate(calls)]
                }
            )
        prompt = sum(_words(m) for m in messages)
        written = len((message.content or "").split()) + len(calls or ())
        return ChatCompletion(
            id=f"function-{next(_ids)}",
            model=self.model_name,
            choices=[Choice(finish_reason="tool_calls" if calls else "stop", message=message)],
            usage=Usage(
                prompt_tokens=prompt, completion_tokens=written, total_tokens=prompt + written
            ),
        )


def _words(message: Message) -> int:
    content = getattr(message, "content", None)
    return len(content.split()) if isinstance(content, str) else 0
