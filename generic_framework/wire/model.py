"""ChatModel: the one thing a turn calls to get a model answer.

:class:`~generic_framework.wire.client.GLMClient` satisfies it over HTTP;
:class:`generic_framework.testing.FunctionModel` satisfies it with a Python function, so a
persona's whole loop runs in a test without HTTP (pydantic-ai's ``FunctionModel`` is the same
idea). ``Persona._call_llm`` is the only caller, for streamed and plain turns alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from generic_framework.wire.messages import ChatCompletion, ChatRequest, StreamEvent

__all__ = ["ChatModel"]


class ChatModel(Protocol):
    """Answers chat requests: whole, or as a stream of events.

    ``chat_stream`` yields :class:`~generic_framework.wire.messages.ContentDelta` (and
    :class:`~generic_framework.wire.messages.ReasoningDelta`) pieces, then exactly one
    :class:`~generic_framework.wire.messages.StreamCompleted` with the whole completion. If the
    iterator has an ``aclose()`` (an async generator does), it is called when the turn stops
    reading early, so an HTTP response is released at once.
    """

    async def chat(self, request: ChatRequest) -> ChatCompletion:
        """The whole completion for ``request``."""
        ...

    def chat_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The completion for ``request`` as it is written."""
        ...
