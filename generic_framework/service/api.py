"""The ``/v1`` endpoints: models, chat completions, and server-held conversations."""

from __future__ import annotations

import inspect
import re
import secrets
import time
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from generic_framework.core.reply import Reply
from generic_framework.service.errors import ServiceError, exception_response
from generic_framework.service.schemas import (
    CONVERSATION_ID_PATTERN,
    ChatCompletionOut,
    ChatCompletionRequest,
    ChoiceOut,
    ConversationOut,
    MessageOut,
    ModelListOut,
    ModelOut,
    TurnOut,
    TurnRequest,
)
from generic_framework.service.state import ServiceState, state_of
from generic_framework.service.turns import (
    PersonaLike,
    StreamWriter,
    checked_text,
    finish_reason,
    last_user_text,
    reply_citations,
    reply_usage,
    reply_web_search,
    sse_body,
    stream_turn,
)

__all__ = [
    "chat_completions",
    "delete_conversation",
    "get_conversation",
    "list_models",
    "post_message",
]

_M = TypeVar("_M", bound=BaseModel)
_ID = re.compile(CONVERSATION_ID_PATTERN)
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


async def _parse(request: Request, model: type[_M]) -> _M:
    """Validate the JSON body; the first problem becomes a 400 naming the field."""
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        param = where or None
        message = f"{where}: {err['msg']}" if where else str(err["msg"])
        raise ServiceError(400, message, param=param, code=err["type"]) from None


def _persona(state: ServiceState, name: str, param: str) -> PersonaLike:
    persona = state.personas.get(name)
    if persona is None:
        known = ", ".join(sorted(state.personas)) or "none"
        raise ServiceError(
            404,
            f"no persona named {name!r} (known: {known})",
            param=param,
            code="model_not_found",
        )
    return persona


def _conversation_id(request: Request) -> str:
    value = str(request.path_params["conversation_id"])
    if not _ID.fullmatch(value):
        raise ServiceError(
            400,
            "a conversation id is 1-128 letters, digits, '_' or '-'",
            param="conversation_id",
            code="invalid_conversation_id",
        )
    return value


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the personas, as OpenAI models."""
    state = state_of(request)
    data = [
        ModelOut(id=name, description=getattr(persona, "description", "") or "")
        for name, persona in sorted(state.personas.items())
    ]
    return _json(ModelListOut(data=data))


async def _streamed(
    state: ServiceState, persona: PersonaLike, model: str, text: str, conversation_id: str | None
) -> Response:
    """Start the turn and wait for its first event before committing to a 200 stream.

    A failure before anything was produced (the upstream refused, timed out, was rate limited)
    still gets its proper status; later failures become an error frame in the stream.
    """
    events = stream_turn(persona, text, conversation_id, state.locks)
    try:
        first = await anext(events)
    except Exception as exc:
        await events.aclose()
        return exception_response(exc)
    writer = StreamWriter(model, conversation_id)
    return StreamingResponse(
        sse_body(writer, first, events), media_type="text/event-stream", headers=_SSE_HEADERS
    )


async def _respond(
    state: ServiceState, persona: PersonaLike, text: str, cid: str | None
) -> Reply | Response:
    """One non-streamed turn, one at a time per conversation; a failure becomes its response."""
    try:
        async with state.locks.hold(cid):
            return await persona.respond(text, conversation_id=cid)
    except Exception as exc:
        return exception_response(exc)


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions``: OpenAI's request and response; ``model`` = persona.

    Only the last message (which must be the user's) is sent to the persona. Earlier messages
    are ignored unless ``conversation_id`` (an extension) names a server-held conversation, whose
    stored history is then used and extended (docs/design/0602).
    """
    state = state_of(request)
    body = await _parse(request, ChatCompletionRequest)
    persona = _persona(state, body.model, "model")
    text = last_user_text(body.messages, state.settings.bot_max_message_chars)
    cid = body.conversation_id
    if body.stream:
        return await _streamed(state, persona, body.model, text, cid)
    reply = await _respond(state, persona, text, cid)
    if isinstance(reply, Response):
        return reply
    completion = ChatCompletionOut(
        id=f"chatcmpl-{secrets.token_hex(12)}",
        created=int(time.time()),
        model=body.model,
        choices=[
            ChoiceOut(
                message=MessageOut(content=reply.content),
                finish_reason=finish_reason(reply),
            )
        ],
        usage=reply_usage(reply),
        web_search=reply_web_search(reply),
        citations=reply_citations(reply),
        stop_reason=reply.stop_reason,
        conversation_id=cid,
    )
    return _json(completion)


async def post_message(request: Request) -> Response:
    """``POST /v1/conversations/{id}/messages``: one turn with server-held history."""
    state = state_of(request)
    cid = _conversation_id(request)
    body = await _parse(request, TurnRequest)
    persona = _persona(state, body.persona, "persona")
    text = checked_text(body.content, state.settings.bot_max_message_chars, param="content")
    if body.stream:
        return await _streamed(state, persona, body.persona, text, cid)
    reply = await _respond(state, persona, text, cid)
    if isinstance(reply, Response):
        return reply
    turn = TurnOut(
        conversation_id=cid,
        persona=body.persona,
        content=reply.content,
        citations=reply_citations(reply),
        web_search=reply_web_search(reply),
        rounds=[r.model_dump(mode="json") for r in reply.rounds],
        usage=reply_usage(reply),
        stop_reason=reply.stop_reason,
        model=reply.model,
    )
    return _json(turn)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _as_dict(item: Any) -> dict[str, Any]:
    """A stored message as JSON: the wire message, plus its turn, persona and time if known."""
    inner = getattr(item, "message", None)
    if isinstance(inner, BaseModel):
        extra = {k: getattr(item, k) for k in ("turn", "persona", "created_at") if hasattr(item, k)}
        return {**inner.model_dump(mode="json", exclude_none=True), **extra}
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", exclude_none=True)
    return dict(item)


async def get_conversation(request: Request) -> Response:
    """``GET /v1/conversations/{id}``: the stored messages, oldest first; 404 when unknown."""
    state = state_of(request)
    cid = _conversation_id(request)
    messages = await _maybe_await(state.store.get(cid))
    if messages is None:
        raise ServiceError(404, f"no conversation {cid!r}", code="conversation_not_found")
    return _json(ConversationOut(id=cid, messages=[_as_dict(m) for m in messages]))


async def delete_conversation(request: Request) -> Response:
    """``DELETE /v1/conversations/{id}``: 204 when deleted, 404 when unknown.

    Waits for a turn running on the conversation to end first, so a delete never races a store.
    """
    state = state_of(request)
    cid = _conversation_id(request)
    async with state.locks.hold(cid):
        deleted = await _maybe_await(state.store.delete(cid))
    if not deleted:
        raise ServiceError(404, f"no conversation {cid!r}", code="conversation_not_found")
    return Response(status_code=204)
