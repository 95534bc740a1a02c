"""The ``/v1`` endpoints: models, chat completions, and server-held conversations.

Endpoints raise on every failure (a :class:`~generic_framework.service.errors.ServiceError` for a
bad request, the persona's :class:`~generic_framework.errors.GLMError` for an upstream
failure); the app's exception handlers answer (:data:`~generic_framework.service.errors.
EXCEPTION_HANDLERS`). A persona serialises the turns of a conversation itself, under the
runtime's locks; ``DELETE`` takes the same lock.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from generic_framework.core.events import PersonaEvent
from generic_framework.core.reply import Reply
from generic_framework.service.callers import acting_for, caller_of, conversation_for
from generic_framework.service.client_request import client_turn
from generic_framework.service.errors import ServiceError, not_allowed
from generic_framework.service.idempotency import idempotent
from generic_framework.service.mapping import (
    chat_completion,
    conversation_body,
    json_response,
    turn_body,
)
from generic_framework.service.requests import (
    content_parts,
    known_params,
    parse_body,
    path_conversation_id,
)
from generic_framework.service.schemas import (
    ChatCompletionRequest,
    ConversationListOut,
    ConversationSummaryOut,
    ModelListOut,
    ModelOut,
    RenamedOut,
    RenameRequest,
    TurnRequest,
)
from generic_framework.service.state import PersonaLike, ServiceState, state_of
from generic_framework.service.streaming import reply_events, turn_stream
from generic_framework.store.base import LIST_LIMIT_MAX, StoredMessage
from generic_framework.store.keys import ClaimRef
from generic_framework.store.users import split_key
from generic_framework.turns import Ask, allowed

__all__ = [
    "chat_completions",
    "conversation",
    "delete_conversation",
    "delete_last_turn",
    "get_conversation",
    "get_model",
    "get_picture",
    "list_conversations",
    "list_models",
    "post_message",
    "rename_conversation",
]


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _persona(state: ServiceState, name: str, param: str) -> PersonaLike:
    """The persona a request names (404 when unknown); whether the caller may use it is the
    turn service's to say (403)."""
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


def _no_conversation(conversation_id: str) -> ServiceError:
    return ServiceError(404, f"no conversation {conversation_id!r}", code="conversation_not_found")


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the personas, as OpenAI models."""
    state = state_of(request)
    caller = caller_of(request)
    data = [
        ModelOut(id=name, description=persona.spec.description or "")
        for name, persona in sorted(state.personas.items())
        if allowed(caller, name)
    ]
    return json_response(ModelListOut(data=data))


async def get_model(request: Request) -> Response:
    """``GET /v1/models/{model}``: one persona, as an OpenAI model; 404 when unknown, 403 when
    the caller's key may not use it (as a turn with it would be)."""
    state = state_of(request)
    name = str(request.path_params["model"])
    persona = _persona(state, name, "model")
    if not allowed(caller_of(request), name):
        raise not_allowed(name, "model")
    return json_response(ModelOut(id=name, description=persona.spec.description or ""))


Answer = Callable[[AsyncGenerator[PersonaEvent, None] | Reply], Response]
"""An endpoint's response to a turn: its events (streamed), or its reply."""


def _runner(
    state: ServiceState, ask: Ask, stream: bool, answer: Answer
) -> Callable[[ClaimRef | None], Awaitable[Response]]:
    """The turn of ``ask`` run by the turn service and answered, its stored turn settling the
    request's ``Idempotency-Key`` claim (service/idempotency.py)."""

    async def run(claim: ClaimRef | None) -> Response:
        settling = ask.settling(claim)
        if stream:
            return answer(await state.runtime.turns.stream(settling))
        return answer(await state.runtime.turns.respond(settling))

    return run


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions``: OpenAI's request and response; ``model`` = persona.

    The last message (which must be the user's) is the turn; the earlier ones are its history
    (user and assistant messages, sanitised and trimmed to HISTORY_TURNS; system messages after
    the persona's prompt, unless it refuses them), and nothing is stored. With
    ``conversation_id`` (an extension) the server-held conversation's history is used and
    extended instead, and the earlier messages are ignored (docs/design/0602).
    With ``Idempotency-Key`` a retry gets the first answer (service/idempotency.py).
    """
    state = state_of(request)
    body = await parse_body(request, ChatCompletionRequest)
    persona = _persona(state, body.model, "model")
    cid = body.conversation_id
    turn = client_turn(
        body,
        pins=persona.spec.client_parameters,
        max_chars=state.settings.bot_max_message_chars,
        allow_system=persona.spec.allow_client_system,
        max_tool_rounds=persona.spec.max_tool_rounds,
    )
    key = None if cid is None else await conversation_for(request, state.runtime.users, cid)
    ask = Ask(persona, turn.text, caller_of(request), key, turn.history, turn.options, turn.images)
    footer = body.sources_footer
    if footer is None:
        footer = state.settings.bot_sources_footer

    def answer(events: AsyncGenerator[PersonaEvent, None] | Reply) -> Response:
        if isinstance(events, Reply):
            if not body.stream:
                return json_response(chat_completion(events, body.model, cid, footer=footer))
            events = reply_events(events)
        usage = turn.include_usage
        settings = state.settings
        return turn_stream(events, body.model, cid, settings, footer=footer, include_usage=usage)

    return await idempotent(request, _runner(state, ask, body.stream, answer), answer)


async def post_message(request: Request) -> Response:
    """``POST /v1/conversations/{id}/messages``: one turn with server-held history; with
    ``Idempotency-Key`` a retry gets the first answer (service/idempotency.py)."""
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    body = await parse_body(request, TurnRequest)
    persona = _persona(state, body.persona, "persona")
    limit = state.settings.bot_max_message_chars
    text, images = content_parts(body.content, "body", limit, param="content")
    ask = Ask(persona, text, caller_of(request), key, images=images)

    def answer(events: AsyncGenerator[PersonaEvent, None] | Reply) -> Response:
        if isinstance(events, Reply):
            if not body.stream:
                return json_response(turn_body(events, body.persona, cid))
            events = reply_events(events)
        return turn_stream(events, body.persona, cid, state.settings)

    return await idempotent(request, _runner(state, ask, body.stream, answer), answer)


def _limit(request: Request, default: int = 20) -> int:
    known_params(request, "limit", "before", "user")
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= LIST_LIMIT_MAX:
        raise ServiceError(
            400, f"limit must be an integer from 1 to {LIST_LIMIT_MAX}", param="limit"
        )
    return int(raw)


async def list_conversations(request: Request) -> Response:
    """``GET /v1/conversations?limit=&before=``: stored conversations, newest first.

    ``next_before`` is set when the page is full: pass it as ``before`` for the next page.
    """
    state = state_of(request)
    limit = _limit(request)
    owner = await acting_for(request, state.runtime.users)
    before = request.query_params.get("before")
    try:
        found = await state.runtime.conversations.list_conversations(
            limit=limit, before=before, owner=owner
        )
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="before", code="invalid_cursor") from None
    data = [
        ConversationSummaryOut(
            id=split_key(c.id)[1],
            persona=c.persona,
            title=c.title,
            created_at=c.created_at,
            updated_at=c.updated_at,
            turns=c.turns,
        )
        for c in found
    ]
    following = found[-1].cursor if len(found) == limit else None
    return json_response(ConversationListOut(data=data, next_before=following))


async def get_conversation(request: Request) -> Response:
    """``GET /v1/conversations/{id}``: the stored messages, oldest first, the turns' records
    and the pictures kept (without their bytes: :func:`get_picture`); 404 when unknown."""
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    dump = await state.runtime.conversations.dump(key)
    if dump is None:
        raise _no_conversation(cid)
    turns = dump.turns
    stored = [
        StoredMessage(t.turn, t.persona, t.created_at, message)
        for t in turns
        for message in t.messages
    ]
    return json_response(conversation_body(cid, stored, turns, dump.pictures))


async def get_picture(request: Request) -> Response:
    """``GET /v1/conversations/{id}/pictures/{sha256}``: a kept picture's bytes, with its MIME
    type; 404 when the conversation has none by that hash (or only its https address)."""
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    sha256 = str(request.path_params["sha256"]).lower()
    kept = (
        await state.runtime.conversations.picture(key, sha256) if _HEX64.fullmatch(sha256) else None
    )
    if kept is None or not kept.data:
        raise ServiceError(404, f"no picture {sha256!r} in this conversation", code="not_found")
    headers = {"Cache-Control": "private, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(kept.data, media_type=kept.mime, headers=headers)


async def delete_conversation(request: Request) -> Response:
    """``DELETE /v1/conversations/{id}``: 204 when deleted, 404 when unknown.

    Holds the conversation's lock (the runtime's, which every turn holds), so a delete waits for
    a running turn to end instead of racing its write.
    """
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    async with state.runtime.locks.hold(key):
        deleted = await state.runtime.conversations.delete(key)
    if not deleted:
        raise _no_conversation(cid)
    return Response(status_code=204)


async def rename_conversation(request: Request) -> Response:
    """``PATCH /v1/conversations/{id}`` with ``{"title": ...}``: the conversation's own title;
    404 when unknown."""
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    title = (await parse_body(request, RenameRequest)).title  # checked: check_title
    if not await state.runtime.conversations.rename(key, title):
        raise _no_conversation(cid)
    return json_response(RenamedOut(id=cid, title=title))


async def delete_last_turn(request: Request) -> Response:
    """``DELETE /v1/conversations/{id}/turns/last``: remove the newest turn whole (question,
    tool rounds, answer), so it can be asked again or edited; 204, or 404 when there is none.

    Holds the conversation's lock, as a turn does: a running turn ends first. Removing the only
    turn removes the conversation.
    """
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await conversation_for(request, state.runtime.users, cid)
    async with state.runtime.locks.hold(key):
        removed = await state.runtime.conversations.delete_last_turn(key)
    if not removed:
        raise _no_conversation(cid)
    return Response(status_code=204)


async def conversation(request: Request) -> Response:
    """``/v1/conversations/{id}``: one route for ``GET``, ``PATCH`` and ``DELETE`` (a 405
    lists them all)."""
    if request.method == "DELETE":
        return await delete_conversation(request)
    if request.method == "PATCH":
        return await rename_conversation(request)
    return await get_conversation(request)
