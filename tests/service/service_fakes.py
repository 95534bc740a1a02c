"""Scripted personas for service tests: no model, no network, exact control over timing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.options import TurnOptions
from generic_framework.core.reply import Citation, Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.tools.web_search import WebSearch, WebSearchMode
from generic_framework.wire.messages import AssistantMessage, Usage, UserMessage

TOKEN = "test-token-0123456789"
FOOTER = "\n\nSources:\n1. [Nanaimo weather](https://weather.example.org/nanaimo)"
"""The sources footer of ``/v1/chat/completions`` for a reply citing :data:`WEATHER`."""

WEATHER = Citation(
    number=1,
    title="Nanaimo weather",
    url="https://weather.example.org/nanaimo",
    site="Example Weather",
    snippet="Light rain, 9 degrees.",
    published="2026-03-13",
    ref="ref_1",
)


def make_reply(
    content: str = "Light rain and 9 degrees [1].",
    *,
    citations: Sequence[Citation] = (WEATHER,),
    stop_reason: str = "completed",
    conversation_id: str | None = None,
    text: str = "question",
) -> Reply:
    return Reply(
        content=content,
        citations=list(citations),
        usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        model="glm-4.7",
        conversation_id=conversation_id,
        messages=[UserMessage(content=text), AssistantMessage(content=content)],
    )


class FakePersona:
    """Streams ``events`` then ``Done``; raises ``error`` after ``error_after`` events."""

    def __init__(
        self,
        name: str = "scout",
        *,
        description: str = "finds things out",
        events: Sequence[PersonaEvent] | None = None,
        reply: Reply | None = None,
        error: BaseException | None = None,
        error_after: int = 0,
        allow_client_system: bool = True,
        web_search: WebSearchMode = "off",
    ) -> None:
        self.spec = PersonaSpec(
            name=name,
            system_prompt="",
            description=description,
            allow_client_system=allow_client_system,
            web_search=WebSearch(mode=web_search),
        )
        self.events = list(
            events
            if events is not None
            else [
                RoundStarted(round=1, tools=["web_search"]),
                ToolFinished(name="web_search", ok=True, ms=12.34),
                TextDelta(text="Light rain "),
                TextDelta(text="and 9 degrees [1]."),
            ]
        )
        self.reply = reply
        self.error = error
        self.error_after = error_after
        self.calls: list[tuple[str, str | None]] = []
        self.histories: list[list[dict[str, Any]] | None] = []
        self.options: list[TurnOptions | None] = []
        self.callers: list[Any] = []

    async def respond(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        options: TurnOptions | None = None,
        caller: Any = None,
    ) -> Reply:
        turn = self.stream(
            text, conversation_id=conversation_id, history=history, options=options, caller=caller
        )
        async with contextlib.aclosing(turn) as it:
            async for event in it:
                if isinstance(event, Done):
                    return event.reply
        raise AssertionError("no Done")

    async def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        options: TurnOptions | None = None,
        caller: Any = None,
    ) -> AsyncGenerator[PersonaEvent, None]:
        self.calls.append((text, conversation_id))
        self.options.append(options)
        self.callers.append(caller)
        self.histories.append(None if history is None else [dict(m) for m in history])
        for index, event in enumerate(self.events):
            if self.error is not None and index == self.error_after:
                raise self.error
            yield event
        if self.error is not None:
            raise self.error
        yield Done(self.reply or make_reply(conversation_id=conversation_id, text=text))


def chunks(body: str) -> list[Any]:
    """The JSON payloads of an SSE body, with ``[DONE]`` kept as the string."""
    import json

    out: list[Any] = []
    for frame in body.split("\n\n"):
        if frame.startswith("data: "):
            data = frame[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out
