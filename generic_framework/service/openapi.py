"""``/openapi.json``: an OpenAPI 3.1 document generated from the pydantic models of the service.

Paths are written here by hand; every schema comes from the service's pydantic models through
``model_json_schema``, so the document cannot drift from what the endpoints validate and return.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel

from generic_framework import __version__
from generic_framework.limits import PERSONA_NAME_PATTERN
from generic_framework.service.account_schemas import (
    KeyCreatedOut,
    KeyCreateRequest,
    KeyListOut,
    MeOut,
    UserCreateRequest,
    UserListOut,
    UserOut,
    UserUpdateRequest,
)
from generic_framework.service.memories import MemoryCreateRequest, MemoryListOut, MemoryOut
from generic_framework.service.schemas import (
    CONVERSATION_ID_PATTERN,
    BotInfoOut,
    ChatCompletionChunkOut,
    ChatCompletionOut,
    ChatCompletionRequest,
    ConversationListOut,
    ConversationOut,
    ErrorOut,
    HealthOut,
    ModelListOut,
    ModelOut,
    ReadyOut,
    RenamedOut,
    RenameRequest,
    TurnOut,
    TurnRequest,
)
from generic_framework.store.base import CURSOR_PATTERN, LIST_LIMIT_MAX
from generic_framework.store.memories import MEMORY_ID_PATTERN
from generic_framework.store.users import USER_NAME_PATTERN

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_REQUESTS: tuple[type[BaseModel], ...] = (
    ChatCompletionRequest,
    TurnRequest,
    RenameRequest,
    UserCreateRequest,
    UserUpdateRequest,
    KeyCreateRequest,
    MemoryCreateRequest,
)
_RESPONSES: tuple[type[BaseModel], ...] = (
    BotInfoOut,
    ChatCompletionOut,
    ChatCompletionChunkOut,
    TurnOut,
    ConversationOut,
    ConversationListOut,
    RenamedOut,
    BotInfoOut,
    ModelListOut,
    HealthOut,
    ReadyOut,
    ErrorOut,
    MeOut,
    UserOut,
    UserListOut,
    KeyListOut,
    KeyCreatedOut,
    MemoryOut,
    MemoryListOut,
)


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in _REQUESTS + _RESPONSES:
        if model in _REQUESTS:
            schema = model.model_json_schema(ref_template=_REF, mode="validation")
        else:
            schema = model.model_json_schema(ref_template=_REF, mode="serialization")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def _json_content(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(model)}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Invalid request (bad JSON, a field, a message too long, a Host not in "
        "BOT_ALLOWED_HOSTS), or the language model service refused it (content filter, invalid "
        "request, unknown model; `code` is Z.AI's)",
        401: "Missing, wrong, revoked or expired API key (or BOT_API_TOKEN), or a trusted "
        "user header from an address not in BOT_TRUSTED_PROXIES",
        403: "Another site's Origin, an admin-only request (?user=, /v1/admin) from a user, a "
        "persona the key may not use, or the service's API account may not do this",
        404: "Unknown persona, conversation, user or key",
        408: "The request body arrived too slowly",
        409: "A request with this Idempotency-Key is still running (Retry-After), a user of "
        "that name exists already, or a change the bootstrap admin refuses",
        413: "Body larger than BOT_MAX_BODY",
        415: "A state-changing request that is not application/json",
        422: "This Idempotency-Key was used with another request body",
        429: "A limit of the user or key (requests per minute, tokens or web searches per day; "
        "`code` names it), or rate limited or quota used up upstream (Retry-After when waiting "
        "helps)",
        502: "The language model service failed or cannot be reached",
        503: "The language model is overloaded, or no upstream slot (Retry-After)",
        504: "The language model service timed out",
    }
    return {str(s): {"description": text[s], "content": _json_content(ErrorOut)} for s in statuses}


_TURN_ERRORS = (400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 502, 503, 504)
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1-255 visible ASCII characters: a retry with the same key (same caller, same "
    "body) gets the first answer, with Idempotent-Replayed: true, instead of a second turn; kept "
    "a day",
    "schema": {"type": "string", "minLength": 1, "maxLength": 257},
}
"""The optional header of the turn endpoints (service/idempotency.py)."""
_STREAM_DOC = (
    "With `stream: true`: `text/event-stream` of `data: <ChatCompletionChunkOut>` frames ending "
    'with `data: [DONE]`; a failure after the first frame is a `data: {"error": ...}` frame. '
    "`: keep-alive` comments fill silences (BOT_STREAM_KEEPALIVE); a client that disconnects "
    "cancels the turn."
)


def _paths() -> dict[str, Any]:
    sse = {"text/event-stream": {"schema": {"type": "string"}}}
    return {
        "/healthz": {"get": _op("Liveness", {"200": _ok(HealthOut)}, public=True)},
        "/readyz": {
            "get": _op(
                "Readiness: the store answers a query and personas are loaded; an upstream that "
                "accepts no connection is reported in 'degraded', still 200; 503 'draining' "
                "while the service stops (SIGTERM)",
                {"200": _ok(ReadyOut), "503": _ok(ReadyOut, "Not ready, or draining")},
                public=True,
            )
        },
        "/metrics": {
            "get": _op(
                "Prometheus metrics (text format); public with BOT_METRICS_PUBLIC=true",
                {
                    "200": {
                        "description": "The metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors(401),
                },
            )
        },
        **_model_paths(),
        "/v1/bot": {
            "get": _op(
                "Offline (the embedded mock answers), the persona to offer first, and offline "
                "the recorded questions",
                {"200": _ok(BotInfoOut), **_errors(401)},
            )
        },
        "/v1/chat/completions": {
            "post": _op(
                "OpenAI-compatible chat completion; `model` is a persona name",
                {
                    "200": {
                        "description": "A completion. " + _STREAM_DOC,
                        "content": {**_json_content(ChatCompletionOut), **sse},
                    },
                    **_errors(*_TURN_ERRORS),
                },
                body=ChatCompletionRequest,
                parameters=[_IDEMPOTENCY_KEY, _USER],
            )
        },
        **(_conversation_paths(sse) | _user_paths() | _key_paths() | _memory_paths()),
    }


def _user_paths() -> dict[str, Any]:
    """``/v1/me`` and ``/v1/admin/users``."""
    name = {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": USER_NAME_PATTERN},
    }
    admin = (400, 401, 403, 404, 415)
    return {
        "/v1/me": {
            "get": _op(
                "Who the caller is, how they signed in, their limits and what is left today",
                {"200": _ok(MeOut), **_errors(400, 401)},
            )
        },
        "/v1/admin/users": {
            "get": _op(
                "Every user (admins only)", {"200": _ok(UserListOut), **_errors(400, 401, 403)}
            ),
            "post": _op(
                "Add a user (admins only); 409 when the name is taken",
                {"201": _ok(UserOut, "Added"), **_errors(*admin, 409)},
                body=UserCreateRequest,
            ),
        },
        "/v1/admin/users/{name}": {
            "get": _op(
                "A user (admins only)", {"200": _ok(UserOut), **_errors(*admin)}, parameters=[name]
            ),
            "patch": _op(
                "Change a user's role or limits (admins only); 409 for the bootstrap admin's "
                "role or limits",
                {"200": _ok(UserOut), **_errors(*admin, 409)},
                body=UserUpdateRequest,
                parameters=[name],
            ),
            "delete": _op(
                "Remove a user with their keys and conversations (admins only); 409 for the "
                "bootstrap admin",
                {"204": {"description": "Removed"}, **_errors(*admin, 409)},
                parameters=[name],
            ),
        },
    }


def _key_paths() -> dict[str, Any]:
    """``/v1/admin/keys``."""
    key_id = {"name": "key_id", "in": "path", "required": True, "schema": {"type": "string"}}
    owner = {**_USER, "description": "only this user's keys"}
    admin = (400, 401, 403, 404, 415)
    return {
        "/v1/admin/keys": {
            "get": _op(
                "Keys' records, never a key (admins only)",
                {"200": _ok(KeyListOut), **_errors(400, 401, 403, 404)},
                parameters=[owner],
            ),
            "post": _op(
                "Create a key, shown this once (admins only); the user is made when missing",
                {"201": _ok(KeyCreatedOut, "Created"), **_errors(*admin)},
                body=KeyCreateRequest,
            ),
        },
        "/v1/admin/keys/{key_id}": {
            "delete": _op(
                "Revoke a key at once, on every replica (admins only)",
                {"204": {"description": "Revoked"}, **_errors(*admin)},
                parameters=[key_id],
            )
        },
    }


_PAGE = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX, "default": 20},
    },
    {
        "name": "before",
        "in": "query",
        "required": False,
        "description": "the next_before of the previous page",
        "schema": {"type": "string", "pattern": CURSOR_PATTERN},
    },
]
"""The query parameters of ``GET /v1/conversations`` (besides :data:`_USER`)."""

_USER = {
    "name": "user",
    "in": "query",
    "required": False,
    "description": "admins only: act on this user's conversations (403 for anyone else)",
    "schema": {"type": "string", "pattern": USER_NAME_PATTERN},
}
"""``?user=NAME``: an admin acting on another user's conversations."""


_MODEL_ID = {
    "name": "model",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": PERSONA_NAME_PATTERN},
}
"""The path parameter of ``GET /v1/models/{model}``: a persona name."""


def _model_paths() -> dict[str, Any]:
    return {
        "/v1/models": {
            "get": _op("The personas, as models", {"200": _ok(ModelListOut), **_errors(401)})
        },
        "/v1/models/{model}": {
            "get": _op(
                "One persona, as a model",
                {"200": _ok(ModelOut), **_errors(401, 404)},
                parameters=[_MODEL_ID],
            )
        },
    }


def _conversation_paths(sse: dict[str, Any]) -> dict[str, Any]:
    conversation_id = {
        "name": "conversation_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": CONVERSATION_ID_PATTERN},
    }
    return {
        "/v1/conversations": {
            "get": _op(
                "Stored conversations, most recently updated first, a page at a time",
                {"200": _ok(ConversationListOut), **_errors(400, 401, 403, 404)},
                parameters=[*_PAGE, _USER],
            )
        },
        "/v1/conversations/{conversation_id}/messages": {
            "post": _op(
                "One turn of a server-held conversation",
                {
                    "200": {
                        "description": "The reply. " + _STREAM_DOC,
                        "content": {**_json_content(TurnOut), **sse},
                    },
                    **_errors(*_TURN_ERRORS),
                },
                body=TurnRequest,
                parameters=[conversation_id, _IDEMPOTENCY_KEY, _USER],
            )
        },
        "/v1/conversations/{conversation_id}": _one_conversation(conversation_id),
        "/v1/conversations/{conversation_id}/turns/last": {
            "delete": _op(
                "Remove the newest turn whole (question, tool rounds, answer), to ask it again or "
                "edit it; removing the only turn removes the conversation",
                {"204": {"description": "Removed"}, **_errors(400, 401, 403, 404, 415)},
                parameters=[conversation_id, _USER],
            )
        },
        "/v1/conversations/{conversation_id}/pictures/{sha256}": _picture(conversation_id),
    }


def _picture(conversation_id: dict[str, Any]) -> dict[str, Any]:
    """``/v1/conversations/{conversation_id}/pictures/{sha256}``: a kept picture's bytes."""
    return {
        "get": _op(
            "A picture kept with the conversation, by its SHA-256 (JPEG or PNG bytes)",
            {
                "200": {
                    "description": "The picture",
                    "content": {"image/png": {}, "image/jpeg": {}},
                },
                **_errors(400, 401, 403, 404),
            },
            parameters=[
                conversation_id,
                {
                    "name": "sha256",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                },
                _USER,
            ],
        )
    }


def _one_conversation(conversation_id: dict[str, Any]) -> dict[str, Any]:
    """``/v1/conversations/{conversation_id}``: read, rename, delete."""
    return {
        "get": _op(
            "A stored conversation: its persona, messages and turns (input as typed, "
            "answer, sources)",
            {"200": _ok(ConversationOut), **_errors(400, 401, 403, 404)},
            parameters=[conversation_id, _USER],
        ),
        "patch": _op(
            "Rename a conversation: a title of its own, listed instead of its first input",
            {"200": _ok(RenamedOut), **_errors(400, 401, 403, 404, 415)},
            body=RenameRequest,
            parameters=[conversation_id, _USER],
        ),
        "delete": _op(
            "Delete a conversation",
            {"204": {"description": "Deleted"}, **_errors(400, 401, 403, 404, 415)},
            parameters=[conversation_id, _USER],
        ),
    }


def _memory_paths() -> dict[str, Any]:
    """``/v1/memories``: what personas keep about the caller (service/memories.py)."""
    persona = {
        "name": "persona",
        "in": "query",
        "required": False,
        "description": "only the facts this persona keeps",
        "schema": {"type": "string", "pattern": PERSONA_NAME_PATTERN},
    }
    memory_id = {
        "name": "memory_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": MEMORY_ID_PATTERN},
    }
    return {
        "/v1/memories": {
            "get": _op(
                "The facts personas keep about the caller, newest first",
                {"200": _ok(MemoryListOut), **_errors(400, 401, 403, 404)},
                parameters=[persona, _USER],
            ),
            "post": _op(
                "Keep a fact for a persona with memory (at most a few hundred characters, "
                "never a key or token; 400 when the persona's memory is full)",
                {"201": _ok(MemoryOut, "Kept"), **_errors(400, 401, 403, 404, 413, 415)},
                body=MemoryCreateRequest,
                parameters=[_USER],
            ),
        },
        "/v1/memories/{memory_id}": {
            "delete": _op(
                "Erase a kept fact (404 for another user's)",
                {"204": {"description": "Erased"}, **_errors(400, 401, 403, 404, 415)},
                parameters=[memory_id, _USER],
            )
        },
    }


def _ok(model: type[BaseModel], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": _json_content(model)}


def _op(
    summary: str,
    responses: dict[str, Any],
    *,
    body: type[BaseModel] | None = None,
    parameters: list[dict[str, Any]] | None = None,
    public: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json_content(body)}
    if parameters:
        op["parameters"] = parameters
    op["security"] = [] if public else [{"bearer": []}]
    return op


@cache
def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI 3.1 document (built once)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "generic-framework bot service",
            "version": __version__,
            "description": "OpenAI-compatible chat with personas backed by GLM models.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a user's API key (gfk_...) or BOT_API_TOKEN (the bootstrap "
                    "admin); required on /v1/* when BOT_API_TOKEN is set",
                }
            },
        },
    }
