"""``GET /v1/me`` and the admin endpoints: users and their keys over HTTP.

``/v1/me`` answers any caller: who they are, how they signed in, their limits and what is left
today. ``/v1/admin/users`` and ``/v1/admin/keys`` do what the ``users`` and ``keys`` commands
do, for admins only (403 for anyone else, before anything is read).
"""

from __future__ import annotations

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from generic_framework.quotas import effective_limits
from generic_framework.service.account_schemas import (
    KeyCreatedOut,
    KeyCreateRequest,
    KeyListOut,
    MeOut,
    TodayOut,
    UserCreateRequest,
    UserListOut,
    UserUpdateRequest,
    key_out,
    user_out,
)
from generic_framework.service.callers import caller_of, require_admin
from generic_framework.service.errors import ServiceError
from generic_framework.service.requests import known_params, parse_body
from generic_framework.service.state import state_of
from generic_framework.store.users import Limits, User, UserAdmin, check_user_name, expiry

__all__ = ["admin_key", "admin_keys", "admin_user", "admin_users", "me"]


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def _left(limit: int | None, used: int) -> int | None:
    return max(0, limit - used) if limit else None


async def me(request: Request) -> Response:
    """``GET /v1/me``."""
    known_params(request)
    state = state_of(request)
    caller = caller_of(request)
    users = state.runtime.users
    user = await users.user_by_id(caller.user.id) or caller.user
    limits = effective_limits(user, state.settings)
    tokens, searches = await users.usage_today(f"u:{user.id}")
    return _json(
        MeOut(
            user=user_out(user),
            via=caller.via,
            key=key_out(caller.key, user.name) if caller.key is not None else None,
            limits=user_out(User(user.id, user.name, user.role, limits)).limits,
            today=TodayOut(
                tokens=tokens,
                searches=searches,
                tokens_left=_left(limits.daily_tokens, tokens),
                searches_left=_left(limits.daily_searches, searches),
            ),
        )
    )


async def _user_named(users: UserAdmin, name: str) -> User:
    try:
        check_user_name(name)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="name", code="invalid_user") from None
    user = await users.user(name)
    if user is None:
        raise ServiceError(404, f"no user named {name!r}", code="user_not_found")
    return user


async def admin_users(request: Request) -> Response:
    """``GET /v1/admin/users`` (every user), ``POST`` (add one: 201, 409 when taken)."""
    require_admin(request)
    known_params(request)
    users = state_of(request).runtime.users
    if request.method == "POST":
        body = await parse_body(request, UserCreateRequest)
        try:
            made = await users.add_user(body.name, role=body.role, limits=body.limits())
        except ValueError as exc:
            raise ServiceError(409, str(exc), param="name", code="user_exists") from None
        return _json(user_out(made), 201)
    return _json(UserListOut(data=[user_out(u) for u in await users.users()]))


async def admin_user(request: Request) -> Response:
    """``GET``, ``PATCH`` (role, limits) and ``DELETE`` (with their keys and conversations)
    ``/v1/admin/users/{name}``."""
    require_admin(request)
    known_params(request)
    users = state_of(request).runtime.users
    user = await _user_named(users, str(request.path_params["name"]))
    if request.method == "DELETE":
        try:
            await users.remove_user(user.name)
        except ValueError as exc:
            raise ServiceError(409, str(exc), code="bootstrap_admin") from None
        return Response(status_code=204)
    if request.method == "PATCH":
        body = await parse_body(request, UserUpdateRequest)
        given = body.model_fields_set - {"role"}
        limits = None
        if given:
            old = user.limits
            limits = Limits(
                body.rpm if "rpm" in given else old.rpm,
                body.daily_tokens if "daily_tokens" in given else old.daily_tokens,
                body.daily_searches if "daily_searches" in given else old.daily_searches,
            )
        try:
            changed = await users.set_user(user.name, role=body.role, limits=limits)
        except ValueError as exc:
            raise ServiceError(409, str(exc), code="bootstrap_admin") from None
        user = changed or user
    return _json(user_out(user))


async def admin_keys(request: Request) -> Response:
    """``GET /v1/admin/keys[?user=NAME]`` (records, never keys), ``POST`` (a new key, shown
    once: 201)."""
    require_admin(request)
    known_params(request, *(() if request.method == "POST" else ("user",)))
    users = state_of(request).runtime.users
    if request.method == "POST":
        body = await parse_body(request, KeyCreateRequest)
        user = await users.user(body.user)
        if user is None:
            user = await users.add_user(body.user)
        personas = tuple(body.personas) if body.personas is not None else None
        key, text = await users.create_key(
            user.id, expires_at=expiry(body.expires_days), personas=personas, limits=body.limits()
        )
        created = KeyCreatedOut(**key_out(key, user.name).model_dump(), key=text)
        return _json(created, 201)
    names = {u.id: u.name for u in await users.users()}
    name = request.query_params.get("user")
    owner = (await _user_named(users, name)).id if name is not None else None
    keys = await users.keys(owner)
    return _json(KeyListOut(data=[key_out(k, names.get(k.user_id, k.user_id)) for k in keys]))


async def admin_key(request: Request) -> Response:
    """``DELETE /v1/admin/keys/{key_id}``: revoke it (204; 404 when there is no such key not
    revoked yet)."""
    require_admin(request)
    known_params(request)
    users = state_of(request).runtime.users
    key_id = str(request.path_params["key_id"])
    if not await users.revoke_key(key_id):
        raise ServiceError(
            404, f"no key {key_id[:40]!r} that is not revoked yet", code="key_not_found"
        )
    return Response(status_code=204)
