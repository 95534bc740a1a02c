"""The ``/v1`` endpoints: models, chat completions, and server-held conversations.

Endpoints raise on every failure (a :class:`~generic_framework.service.errors.ServiceError` for a
bad request, the persona's :class:`~generic_framework.errors.GLMError` for an upstream
failure); the app's exception handlers answer (:data:`~generic_framework.service.errors.
EXCEPTION_HANDLERS`). A persona serialises the turns of a conversation itself, under the
runtime's locks; ``DELETE`` takes the same lock.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from generic_framework.core.events import Done, PersonaEvent
from generic_framework.core.history import HistoryItem
from generic_framework.core.options import TurnOptions
from generic_framework.core.persona import WEB_PREFIX
from generic_framework.core.reply import Reply
from generic_framework.service.callers import acting_for, caller_of
from generic_framework.service.client_request import client_turn
from generic_framework.service.errors import ServiceError
from generic_framework.service.idempotency import idempotent
from generic_framework.service.mapping import chat_completion, conversation_body, turn_body
from generic_framework.service.quotas import Allowance, admit_turn, record_turn
from generic_framework.service.requests import checked_text, parse_body, path_conversation_id
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
from generic_framework.service.streaming import turn_stream
from generic_framework.store.base import LIST_LIMIT_MAX, StoredMessage
from generic_framework.store.users import Caller, conversation_key, split_key

__all__ = [
    "chat_completions",
    "conversation",
    "delete_conversation",
    "delete_last_turn",
    "get_conversation",
    "get_model",
    "list_conversations",
    "list_models",
    "post_message",
    "rename_conversation",
]


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def _stream(
    state: ServiceState,
    events: AsyncGenerator[PersonaEvent, None],
    model: str,
    cid: str | None,
    *,
    footer: bool = False,
    include_usage: bool = False,
) -> Response:
    """The streamed answer: a :class:`~generic_framework.service.streaming.TurnStream`;
    ``footer`` and ``include_usage`` as ``/v1/chat/completions`` asked."""
    settings = state.settings
    return turn_stream(
        events,
        model,
        cid,
        grace=settings.bot_stream_grace,
        keepalive=settings.bot_stream_keepalive,
        footer=footer,
        include_usage=include_usage,
    )


def _allowed(caller: Caller, name: str) -> bool:
    """Whether the caller's key (if it has a persona allowlist) may use persona ``name``."""
    personas = caller.key.personas if caller.key is not None else None
    return personas is None or name in personas


def _persona(state: ServiceState, name: str, param: str, caller: Caller) -> PersonaLike:
    persona = state.personas.get(name)
    if persona is not None and not _allowed(caller, name):
        raise ServiceError(
            403,
            f"this API key may not use persona {name!r}",
            type_="permission_error",
            param=param,
            code="persona_not_allowed",
        )
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


async def _key(request: Request, state: ServiceState, conversation_id: str) -> str:
    """Where the store keeps the conversation the request names: the caller's own, or the
    ``?user=`` user's for an admin (service/callers.py)."""
    owner = await acting_for(request, state.runtime.store)
    return conversation_key(owner, conversation_id)


async def _admit(request: Request, state: ServiceState, text: str) -> Allowance:
    """Count the turn against the caller's limits (service/quotas.py), or refuse it (429)."""
    web = text.lstrip().startswith(WEB_PREFIX)
    return await admit_turn(caller_of(request), state.runtime.store, state.settings, web=web)


@dataclass(frozen=True, slots=True)
class _TurnArgs:
    """One turn's arguments for the persona (``key``: the store's key of the conversation)."""

    persona: PersonaLike
    text: str
    key: str | None
    caller: Caller
    history: Sequence[HistoryItem] | None = None
    options: TurnOptions | None = None


async def _turn_events(
    request: Request, state: ServiceState, args: _TurnArgs
) -> AsyncGenerator[PersonaEvent, None]:
    """The turn admitted against the caller's limits (429 over one), as events; its tokens
    and searches are added to the daily totals when it ends."""
    allowance = await _admit(request, state, args.text)
    events = args.persona.stream(
        args.text,
        conversation_id=args.key,
        history=args.history,
        options=args.options,
        caller=args.caller,
    )
    return _counted(events, allowance, state) if allowance.scopes else events


async def _turn_reply(request: Request, state: ServiceState, args: _TurnArgs) -> Reply:
    """The turn admitted against the caller's limits (429 over one), answered and counted."""
    allowance = await _admit(request, state, args.text)
    reply = await args.persona.respond(
        args.text,
        conversation_id=args.key,
        history=args.history,
        options=args.options,
        caller=args.caller,
    )
    await record_turn(allowance, reply, state.runtime.store)
    return reply


async def _counted(
    events: AsyncGenerator[PersonaEvent, None], allowance: Allowance, state: ServiceState
) -> AsyncGenerator[PersonaEvent, None]:
    """A streamed turn's events; its tokens and searches are added to the daily totals."""
    async with aclosing(events) as inner:
        async for event in inner:
            if isinstance(event, Done):
                await record_turn(allowance, event.reply, state.runtime.store)
            yield event


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the personas, as OpenAI models."""
    state = state_of(request)
    caller = caller_of(request)
    data = [
        ModelOut(id=name, description=persona.description or "")
        for name, persona in sorted(state.personas.items())
        if _allowed(caller, name)
    ]
    return _json(ModelListOut(data=data))


async def get_model(request: Request) -> Response:
    """``GET /v1/models/{model}``: one persona, as an OpenAI model; 404 when unknown, 403 when
    the caller's key may not use it (as a turn with it would be)."""
    state = state_of(request)
    name = str(request.path_params["model"])
    persona = _persona(state, name, "model", caller_of(request))
    return _json(ModelOut(id=name, description=persona.description or ""))


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
    caller = caller_of(request)
    body = await parse_body(request, ChatCompletionRequest)
    persona = _persona(state, body.model, "model", caller)
    cid = body.conversation_id
    footer = (
        state.settings.bot_sources_footer if body.sources_footer is None else body.sources_footer
    )
    turn = client_turn(
        body,
        pins=getattr(persona, "client_parameters", {}),
        max_chars=state.settings.bot_max_message_chars,
        allow_system=getattr(persona, "allow_client_system", True),
        max_tool_rounds=getattr(persona, "max_tool_rounds", None),
        model=getattr(persona, "model", None),
    )
    text, history, options = turn.text, turn.history, turn.options
    key = None if cid is None else await _key(request, state, cid)

    async def run() -> Response:
        args = _TurnArgs(persona, text, key, caller, history, options)
        if body.stream:
            events = await _turn_events(request, state, args)
            return _stream(
                state, events, body.model, cid, footer=footer, include_usage=turn.include_usage
            )
        reply = await _turn_reply(request, state, args)
        return _json(chat_completion(reply, body.model, cid, footer=footer))

    return await idempotent(request, run)


async def post_message(request: Request) -> Response:
    """``POST /v1/conversations/{id}/messages``: one turn with server-held history; with
    ``Idempotency-Key`` a retry gets the first answer (service/idempotency.py)."""
    state = state_of(request)
    caller = caller_of(request)
    cid = path_conversation_id(request)
    key = await _key(request, state, cid)
    body = await parse_body(request, TurnRequest)
    persona = _persona(state, body.persona, "persona", caller)
    text = checked_text(body.content, state.settings.bot_max_message_chars, param="content")

    async def run() -> Response:
        args = _TurnArgs(persona, text, key, caller)
        if body.stream:
            return _stream(state, await _turn_events(request, state, args), body.persona, cid)
        reply = await _turn_reply(request, state, args)
        return _json(turn_body(reply, body.persona, cid))

    return await idempotent(request, run)


def _limit(request: Request, default: int = 20) -> int:
    unknown = sorted(set(request.query_params) - {"limit", "before", "user"})
    if unknown:
        raise ServiceError(
            400,
            f"unknown query parameter {unknown[0]!r} (known: limit, before, user)",
            param=unknown[0],
        )
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
    owner = await acting_for(request, state.runtime.store)
    before = request.query_params.get("before")
    try:
        found = await state.runtime.store.list_conversations(
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
    return _json(ConversationListOut(data=data, next_before=following))


async def get_conversation(request: Request) -> Response:
    """``GET /v1/conversations/{id}``: the stored messages, oldest first; 404 when unknown."""
    state = state_of(request)
    cid = path_conversation_id(request)
    turns = await state.runtime.store.turns(await _key(request, state, cid))
    if turns is None:
        raise _no_conversation(cid)
    stored = [
        StoredMessage(t.turn, t.persona, t.created_at, message)
        for t in turns
        for message in t.messages
    ]
    return _json(conversation_body(cid, stored, turns))


async def delete_conversation(request: Request) -> Response:
    """``DELETE /v1/conversations/{id}``: 204 when deleted, 404 when unknown.

    Holds the conversation's lock (the runtime's, which every turn holds), so a delete waits for
    a running turn to end instead of racing its write.
    """
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await _key(request, state, cid)
    async with state.runtime.locks.hold(key):
        deleted = await state.runtime.store.delete(key)
    if not deleted:
        raise _no_conversation(cid)
    return Response(status_code=204)


async def rename_conversation(request: Request) -> Response:
    """``PATCH /v1/conversations/{id}`` with ``{"title": ...}``: the conversation's own title;
    404 when unknown."""
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await _key(request, state, cid)
    title = (await parse_body(request, RenameRequest)).title  # checked: check_title
    if not await state.runtime.store.rename(key, title):
        raise _no_conversation(cid)
    return _json(RenamedOut(id=cid, title=title))


async def delete_last_turn(request: Request) -> Response:
    """``DELETE /v1/conversations/{id}/turns/last``: remove the newest turn whole (question,
    tool rounds, answer), so it can be asked again or edited; 204, or 404 when there is none.

    Holds the conversation's lock, as a turn does: a running turn ends first. Removing the only
    turn removes the conversation.
    """
    state = state_of(request)
    cid = path_conversation_id(request)
    key = await _key(request, state, cid)
    async with state.runtime.locks.hold(key):
        removed = await state.runtime.store.delete_last_turn(key)
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
