"""``/v1/memories``: what personas keep about the caller, to read, add and erase.

- ``GET /v1/memories[?persona=P]``: the caller's own kept facts (of one persona, or all),
  newest first, as ``{"object": "list", "data": [{"id", "persona", "text", "created_at"}]}``.
- ``POST /v1/memories`` with ``{"persona", "text"}``: keep a fact by hand, under the same rules
  as the persona's ``remember`` (length, no key or token, the persona's ``max_items``); 201
  with the fact. The persona must keep a memory and the caller's key may have to allow it.
- ``DELETE /v1/memories/{id}``: erase one; another user's id is 404, as a conversation is.

Every endpoint answers for the caller's own facts; an admin reaches a user's with
``?user=NAME``, as with conversations (:func:`~generic_framework.service.callers.acting_for`).
The page's Memory panel and the chat platforms read and erase through the same store calls
(docs/design/0332).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from generic_framework.limits import PERSONA_NAME_PATTERN, check_persona_name
from generic_framework.service.callers import acting_for, caller_of
from generic_framework.service.errors import ServiceError, not_allowed
from generic_framework.service.mapping import json_response
from generic_framework.service.requests import known_params, parse_body
from generic_framework.service.state import state_of
from generic_framework.store.memories import FACT_CHARS, MEMORY_ID_PATTERN, Memory, check_memory_id
from generic_framework.turns import allowed

__all__ = [
    "MemoryCreateRequest",
    "MemoryListOut",
    "MemoryOut",
    "add_memory",
    "delete_memory",
    "list_memories",
    "memories",
]


class MemoryOut(BaseModel):
    """One kept fact."""

    id: str = Field(pattern=MEMORY_ID_PATTERN)
    object: Literal["memory"] = "memory"
    persona: str
    text: str
    created_at: str


class MemoryListOut(BaseModel):
    """``GET /v1/memories``: the caller's kept facts, newest first."""

    object: Literal["list"] = "list"
    data: list[MemoryOut]


class MemoryCreateRequest(BaseModel):
    """``POST /v1/memories``: a fact to keep for a persona."""

    model_config = ConfigDict(extra="forbid")

    persona: str = Field(pattern=PERSONA_NAME_PATTERN)
    text: str = Field(min_length=1, max_length=FACT_CHARS * 4)


def _out(memory: Memory) -> MemoryOut:
    return MemoryOut(
        id=memory.id, persona=memory.persona, text=memory.text, created_at=memory.created_at
    )


def _no_memory(memory_id: str) -> ServiceError:
    return ServiceError(404, f"no kept fact {memory_id[:40]!r}", code="memory_not_found")


async def memories(request: Request) -> Response:
    """``/v1/memories``: one route for ``GET`` and ``POST``, so a 405 there lists both in its
    ``Allow`` header."""
    if request.method == "POST":
        return await add_memory(request)
    return await list_memories(request)


async def list_memories(request: Request) -> Response:
    """``GET /v1/memories[?persona=P][&user=NAME]``."""
    known_params(request, "persona", "user")
    state = state_of(request)
    owner = await acting_for(request, state.runtime.users)
    persona = request.query_params.get("persona")
    if persona is not None:
        try:
            check_persona_name(persona)
        except ValueError as exc:
            raise ServiceError(400, str(exc), param="persona", code="invalid_persona") from None
    found = await state.runtime.memories.memories(owner, persona)
    return json_response(MemoryListOut(data=[_out(m) for m in found]))


async def add_memory(request: Request) -> Response:
    """``POST /v1/memories[?user=NAME]``: 201 with the fact kept (the one already kept when
    it is the same); 400 when it may not be kept or the memory is full."""
    known_params(request, "user")
    state = state_of(request)
    owner = await acting_for(request, state.runtime.users)
    body = await parse_body(request, MemoryCreateRequest)
    persona = state.personas.get(body.persona)
    if persona is None:
        raise ServiceError(
            404, f"no persona named {body.persona!r}", param="persona", code="model_not_found"
        )
    if not allowed(caller_of(request), body.persona):
        raise not_allowed(body.persona, "persona")
    memory = persona.spec.memory
    if not memory.enabled:
        raise ServiceError(
            400,
            f"persona {body.persona!r} keeps no memory ([memory] enabled = true in its file)",
            param="persona",
            code="memory_disabled",
        )
    try:
        kept = await state.runtime.memories.remember(
            owner, body.persona, body.text, max_items=memory.max_items
        )
    except ValueError as exc:
        code = "memory_full" if "memory is full" in str(exc) else "invalid_fact"
        raise ServiceError(400, str(exc), param="text", code=code) from None
    return json_response(_out(kept), 201)


async def delete_memory(request: Request) -> Response:
    """``DELETE /v1/memories/{memory_id}[?user=NAME]``: 204 when erased; 404 when the
    caller (or the user named) keeps no such fact."""
    known_params(request, "user")
    state = state_of(request)
    owner = await acting_for(request, state.runtime.users)
    memory_id = str(request.path_params["memory_id"])
    try:
        check_memory_id(memory_id)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="memory_id", code="invalid_memory_id") from None
    if await state.runtime.memories.forget(owner, memory_id) is None:
        raise _no_memory(memory_id)
    return Response(status_code=204)
