"""From the library's objects to the API's bodies: replies and stored conversations.

A :class:`~generic_framework.core.reply.Reply` becomes OpenAI's ``chat.completion`` (plus Z.AI's
``web_search[]``) or the service's own turn body; stored messages become the conversation body.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response

from generic_framework.core.reply import Citation, Reply, RoundState, ToolCallInfo
from generic_framework.core.tooling import call_name
from generic_framework.service.schemas import (
    ChatCompletionOut,
    ChoiceOut,
    ConversationOut,
    FinishReason,
    FunctionCallOut,
    MessageOut,
    ToolCallOut,
    TurnOut,
    TurnRecordOut,
    UsageOut,
)
from generic_framework.service.sources import sources_footer, url_citations
from generic_framework.store.base import StoredMessage, StoredTurn
from generic_framework.store.pictures import StoredPicture
from generic_framework.wire.messages import AssistantMessage, Usage, WebSearchResult

__all__ = [
    "chat_completion",
    "completion_id",
    "conversation_body",
    "finish_reason",
    "json_response",
    "reply_citations",
    "reply_tool_calls",
    "reply_usage",
    "reply_web_search",
    "stored_message",
    "stored_reply",
    "turn_answer",
    "turn_body",
    "turn_record_body",
]


def json_response(model: BaseModel, status: int = 200) -> Response:
    """``model`` as a JSON response."""
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def completion_id() -> str:
    """A fresh ``chatcmpl-...`` id, as OpenAI names completions."""
    return f"chatcmpl-{secrets.token_hex(12)}"


def finish_reason(reply: Reply) -> FinishReason:
    """OpenAI's ``finish_reason`` for a reply's ``stop_reason`` (``max_rounds`` -> ``stop``)."""
    if reply.stop_reason in ("length", "content_filter", "tool_calls"):
        return reply.stop_reason
    return "stop"


def reply_tool_calls(reply: Reply) -> list[ToolCallOut] | None:
    """The client's tool calls the model made, in OpenAI's shape; None when there are none."""
    if not reply.tool_calls:
        return None
    return [
        ToolCallOut(id=c.id, function=FunctionCallOut(name=c.name, arguments=c.arguments or "{}"))
        for c in reply.tool_calls
    ]


def reply_usage(reply: Reply) -> UsageOut:
    """The reply's token counts, summed over its rounds."""
    u = reply.usage
    return UsageOut(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.total_tokens,
    )


def reply_citations(reply: Reply) -> list[Citation]:
    """The reply's numbered citations."""
    return list(reply.citations)


def reply_web_search(reply: Reply) -> list[WebSearchResult]:
    """The reply's citations in Z.AI's ``web_search[]`` shape (``refer`` = the cited label)."""
    return [
        WebSearchResult(
            title=c.title,
            link=c.url,
            content=c.snippet,
            media=c.site,
            refer=c.ref or f"ref_{c.number}",
            publish_date=c.published,
        )
        for c in reply.citations
    ]


def chat_completion(
    reply: Reply, model: str, conversation_id: str | None, *, footer: bool = False
) -> ChatCompletionOut:
    """The ``chat.completion`` body of a reply; ``model`` is the persona's name.

    With ``footer`` the content ends with the reply's "Sources:" list, if it has sources
    (:func:`~generic_framework.service.sources.sources_footer`). ``annotations`` point at each
    ``[n]`` of the content (:func:`~generic_framework.service.sources.url_citations`); a reply
    that calls the client's tools carries ``tool_calls`` (content ``null`` when it has none).
    """
    content = reply.content + (sources_footer(reply.citations) if footer else "")
    calls = reply_tool_calls(reply)
    message = MessageOut(
        content=content or (None if calls else ""),
        annotations=url_citations(reply.content, reply.citations),
        tool_calls=calls,
    )
    return ChatCompletionOut(
        id=completion_id(),
        created=int(time.time()),
        model=model,
        choices=[ChoiceOut(message=message, finish_reason=finish_reason(reply))],
        usage=reply_usage(reply),
        web_search=reply_web_search(reply),
        citations=reply_citations(reply),
        stop_reason=reply.stop_reason,
        conversation_id=conversation_id,
    )


def turn_body(reply: Reply, persona: str, conversation_id: str) -> TurnOut:
    """The body of ``POST /v1/conversations/{id}/messages`` for a reply."""
    return TurnOut(
        conversation_id=conversation_id,
        persona=persona,
        content=reply.content,
        citations=reply_citations(reply),
        web_search=reply_web_search(reply),
        rounds=[r.model_dump(mode="json") for r in reply.rounds],
        usage=reply_usage(reply),
        stop_reason=reply.stop_reason,
        model=reply.model,
    )


def stored_message(item: StoredMessage) -> dict[str, Any]:
    """A stored message as JSON: the wire message, plus its turn, persona and time."""
    return {
        **item.message.model_dump(mode="json", exclude_none=True),
        "turn": item.turn,
        "persona": item.persona,
        "created_at": item.created_at,
    }


def turn_record_body(turn: StoredTurn) -> TurnRecordOut:
    """A stored turn's record as the API shows it (empty for turns stored without one)."""
    out = TurnRecordOut(
        turn=turn.turn, persona=turn.persona, created_at=turn.created_at, answer=turn_answer(turn)
    )
    r = turn.record
    if r is None:
        return out
    usage = {
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens,
        "reasoning_tokens": r.reasoning_tokens,
    }
    return out.model_copy(
        update={
            "input": r.input,
            "model": r.model,
            "stop_reason": r.stop_reason,
            "citations": list(r.sources),
            "usage": usage,
            "web_searches": r.web_searches,
            "rounds": r.rounds,
            "started_at": r.started_at,
            "duration_ms": r.duration_ms,
        }
    )


def turn_answer(turn: StoredTurn) -> str | None:
    """The turn's final answer: its last assistant message without tool calls."""
    for message in reversed(turn.messages):
        if isinstance(message, AssistantMessage) and not message.has_tool_calls:
            return message.content or ""
    return None


def stored_reply(turn: StoredTurn, conversation_id: str) -> Reply:
    """The reply of a stored turn, as its record and messages keep it: the answer, citations,
    stop reason, model, token totals and each round's number and duration (a round's own
    calls and usage are not stored), and the client's tool calls of a turn that ended with
    them. What a retry of an ``Idempotency-Key`` whose claim the turn settled is answered
    with (service/idempotency.py)."""
    reply = Reply(
        content=turn_answer(turn) or "",
        conversation_id=conversation_id,
        messages=list(turn.messages),
    )
    r = turn.record
    if r is None:
        return reply
    last = turn.messages[-1] if turn.messages else None
    calls = last.tool_calls or [] if isinstance(last, AssistantMessage) else []
    if r.stop_reason != "tool_calls":
        calls = []
    total = r.prompt_tokens + r.completion_tokens
    return reply.model_copy(
        update={
            "citations": list(r.sources),
            "rounds": [RoundState(number=n, duration_ms=ms) for n, ms in enumerate(r.round_ms, 1)],
            "usage": Usage(
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                total_tokens=total,
            ),
            "stop_reason": r.stop_reason or "completed",
            "model": r.model,
            "web_searches": r.web_searches,
            "tool_calls": [
                ToolCallInfo(id=c.id, name=call_name(c), arguments=c.function.arguments)
                for c in calls
            ],
        }
    )


def conversation_body(
    conversation_id: str,
    stored: Sequence[StoredMessage],
    turns: Sequence[StoredTurn] = (),
    pictures: Sequence[StoredPicture] = (),
) -> ConversationOut:
    """The body of ``GET /v1/conversations/{id}``: its messages, oldest first, its turns'
    records and its pictures (their hash, type, address or description; not their bytes)."""
    return ConversationOut(
        id=conversation_id,
        persona=turns[-1].persona if turns else "",
        messages=[stored_message(m) for m in stored],
        turns=[turn_record_body(t) for t in turns],
        pictures=[
            {
                "turn": p.turn,
                "sha256": p.sha256,
                "mime": p.mime,
                **({"url": p.url} if p.url else {}),
                **({"description": p.description} if p.description else {}),
            }
            for p in pictures
        ],
    )
