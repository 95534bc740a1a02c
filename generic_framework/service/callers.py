"""Who is asking: the one place the service turns a request's credentials into a caller.

:class:`CallerMiddleware` (pure ASGI) resolves every request to ``/v1`` (and ``/metrics``
unless public) with :class:`Authenticator` and keeps the
:class:`~generic_framework.store.users.Caller` in the request's scope; endpoints read it with
:func:`caller_of`. The rules (docs/design/0322):

1. ``BOT_TRUSTED_USER_HEADER`` present: believed only when the connection comes from
   ``BOT_TRUSTED_PROXIES``; the user it names is made on first sight with
   ``BOT_AUTO_CREATE_USERS=true``. From any other address the header gets 401, never trust.
2. ``Authorization: Bearer gfk_...``: a user's API key, looked up by its public id and
   compared by hash in constant time; a wrong, revoked or expired key gets the same 401 (no
   hint which part was wrong). A revoked key is refused at once on every replica: keys are
   read from the store on each request, never cached.
3. ``Authorization: Bearer <BOT_API_TOKEN>``: the bootstrap admin, as before users existed.
4. No ``BOT_API_TOKEN`` (a loopback-only service): without a key (no credentials, or any
   other bearer value, as OpenAI clients always send one), the bootstrap admin.

:func:`acting_for` is the one rule for whose conversations a request touches: the caller's own,
or, for an admin only, the user named by ``?user=``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from typing import cast

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from generic_framework.config import Settings
from generic_framework.errors import StoreUnavailableError
from generic_framework.limits import IPNetwork
from generic_framework.redaction import register_secret
from generic_framework.service.errors import ServiceError, error_body
from generic_framework.store.users import (
    BOOTSTRAP_USER,
    Caller,
    User,
    UserAdmin,
    add_or_read,
    check_user_name,
    conversation_key,
    key_id_of,
    match_key,
)

__all__ = [
    "Authenticator",
    "CallerMiddleware",
    "acting_for",
    "caller_id",
    "caller_of",
    "conversation_for",
    "require_admin",
]

logger = logging.getLogger("generic_framework.service")

_SCOPE_KEY = "generic_framework.caller"
BOOTSTRAP = User(BOOTSTRAP_USER, BOOTSTRAP_USER, "admin")
"""The bootstrap admin as ``BOT_API_TOKEN`` signs in (its limits are read when a turn needs
them)."""
_BAD_KEY = "invalid, revoked or expired API key"


class AuthError(Exception):
    """A request whose credentials are refused (401), with what to tell the caller."""


class Authenticator:
    """Resolves a request's credentials to a :class:`Caller` (the module's rules).

    Args:
        settings: ``BOT_API_TOKEN``, ``BOT_TRUSTED_USER_HEADER``, ``BOT_TRUSTED_PROXIES``,
            ``BOT_AUTO_CREATE_USERS``.
        users: the store's users and keys.
    """

    def __init__(self, settings: Settings, users: UserAdmin) -> None:
        token = settings.bot_api_token
        self._token = f"Bearer {token.get_secret_value()}".encode() if token else None
        if token is not None:
            register_secret(token.get_secret_value())
        header = settings.bot_trusted_user_header
        self._header = header.encode() if header else None
        self._header_name = header or ""
        self._proxies: tuple[IPNetwork, ...] = settings.trusted_proxies
        self._auto_create = settings.bot_auto_create_users
        self._users = users

    async def resolve(self, scope: Scope) -> Caller:
        """The caller of a request.

        Raises:
            AuthError: the credentials are missing, wrong, revoked or expired, or the trusted
                header came from an address that is not trusted.
            StoreUnavailableError: the store cannot be reached.
        """
        authorization = _header(scope, b"authorization")
        if self._header is not None:
            named = _header(scope, self._header)
            if named is not None:
                if not self._from_proxy(scope):
                    raise AuthError(
                        f"the {self._header_name} header is only believed from the addresses "
                        "of BOT_TRUSTED_PROXIES"
                    )
                if authorization is None:
                    user = await self._header_user(named.decode("latin-1").strip())
                    return Caller(user, None, "header")
        if authorization is None:
            if self._token is None:
                return Caller(BOOTSTRAP, None, "local")
            raise AuthError(
                "missing credentials; send the header Authorization with the value "
                "'Bearer <API key>' (a user's key, gfk_...) or 'Bearer <BOT_API_TOKEN>'"
            )
        return await self._bearer(authorization)

    async def _bearer(self, value: bytes) -> Caller:
        scheme, _, token = value.partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer":
            raise AuthError("the Authorization header must be 'Bearer <API key>'")
        text = token.decode("latin-1")
        key_id = key_id_of(text)
        if key_id is not None:
            found = match_key(text, await self._users.stored_key(key_id))
            if found is None:
                raise AuthError(_BAD_KEY)
            return Caller(found.user, found.key, "key")
        if self._token is None:  # a loopback service without a token: any other value passes
            return Caller(BOOTSTRAP, None, "local")
        if hmac.compare_digest(b"Bearer " + token, self._token):
            return Caller(BOOTSTRAP, None, "token")
        raise AuthError(_BAD_KEY)

    def _from_proxy(self, scope: Scope) -> bool:
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(str(client[0]))
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self._proxies)

    async def _header_user(self, name: str) -> User:
        try:
            check_user_name(name)
        except ValueError as exc:
            raise AuthError(f"the {self._header_name} header does not name a user: {exc}") from None
        user = await self._users.user(name)
        if user is None and self._auto_create:
            user, added = await add_or_read(self._users, name)
            if added and user is not None:
                logger.info("user %s created on first sign-on", user.id)
        if user is None:
            raise AuthError(
                f"no user named {name!r}; an admin adds one (users add), or the service sets "
                "BOT_AUTO_CREATE_USERS=true"
            )
        return user


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


class CallerMiddleware:
    """Resolve the caller of every request to ``/v1`` (and ``also``) or answer 401."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator, also: tuple[str, ...] = ()):
        self.app = app
        self._auth = authenticator
        self._also = frozenset(also)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        guarded = path == "/v1" or path.startswith("/v1/") or path in self._also
        if scope["type"] != "http" or not guarded:
            await self.app(scope, receive, send)
            return
        try:
            scope[_SCOPE_KEY] = await self._auth.resolve(scope)
        except AuthError as exc:
            await _refuse(send, 401, str(exc), "authentication_error", "invalid_api_key")
            return
        except StoreUnavailableError as exc:
            await _refuse(send, 503, exc.message, "server_error", "store_unavailable")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str, type_: str, code: str) -> None:
    body = json.dumps(error_body(message, type_=type_, code=code)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="generic-framework"'))
    else:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def caller_of(request: Request) -> Caller:
    """The caller :class:`CallerMiddleware` resolved (the bootstrap admin on an app without
    it, e.g. a path it does not guard)."""
    return cast(Caller, request.scope.get(_SCOPE_KEY) or Caller(BOOTSTRAP, None, "local"))


def caller_id(request: Request) -> str:
    """A stable id of the caller for keying per-caller state: the user id, and the key's id
    when a key was used."""
    caller = caller_of(request)
    return f"{caller.user.id}:{caller.key_id}" if caller.key_id else caller.user.id


def require_admin(request: Request) -> Caller:
    """The caller, if an admin.

    Raises:
        ServiceError: 403 for anyone else.
    """
    caller = caller_of(request)
    if not caller.user.is_admin:
        raise ServiceError(
            403, "only an admin may do this", type_="permission_error", code="admin_only"
        )
    return caller


async def conversation_for(request: Request, users: UserAdmin, conversation_id: str) -> str:
    """Where the store keeps the conversation the request names: the caller's own, or the
    ``?user=`` user's for an admin (:func:`acting_for`).

    Raises:
        ServiceError: as :func:`acting_for`.
        ValueError: ``conversation_id`` is not a valid id.
    """
    owner = await acting_for(request, users)
    return conversation_key(owner, conversation_id)


async def acting_for(request: Request, users: UserAdmin) -> str:
    """The id of the user whose conversations the request touches: the caller's own, or the
    user named by ``?user=`` (admins only).

    Raises:
        ServiceError: 403 ``?user=`` from a non-admin; 404 no such user.
    """
    caller = caller_of(request)
    name = request.query_params.get("user")
    if name is None:
        return caller.user.id
    if not caller.user.is_admin:
        raise ServiceError(
            403,
            "only an admin may act on another user's conversations (?user=)",
            type_="permission_error",
            param="user",
            code="admin_only",
        )
    if name == caller.user.name:
        return caller.user.id
    try:
        check_user_name(name)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="user", code="invalid_user") from None
    user = await users.user(name)
    if user is None:
        raise ServiceError(
            404, f"no user named {name[:130]!r}", param="user", code="user_not_found"
        )
    return user.id
