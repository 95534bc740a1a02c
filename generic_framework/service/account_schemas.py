"""Bodies of ``/v1/me`` and the admin endpoints (``/v1/admin/users``, ``/v1/admin/keys``).

Requests forbid unknown fields; a user name follows
:data:`~generic_framework.store.users.USER_NAME_PATTERN`. A key's record never holds the key:
only :class:`KeyCreatedOut`, answered once by ``POST /v1/admin/keys``, does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from generic_framework.store.users import LIMIT_MAX, USER_NAME_PATTERN, ApiKey, Limits, User

__all__ = [
    "KeyCreateRequest",
    "KeyCreatedOut",
    "KeyListOut",
    "KeyOut",
    "LimitsOut",
    "MeOut",
    "TodayOut",
    "UserCreateRequest",
    "UserListOut",
    "UserOut",
    "UserUpdateRequest",
    "key_out",
    "user_out",
]

UserName = Field(pattern=USER_NAME_PATTERN, max_length=128)


def _whole(value: Any) -> Any:
    """A JSON integer: an int, or a float without a fraction (JSON Schema's "integer" allows
    ``1.0``); never a string or a boolean."""
    if isinstance(value, bool) or not isinstance(value, int | float | None):
        raise PydanticCustomError("int_type", "must be a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise PydanticCustomError("int_type", "must be a whole number")
        return int(value)
    return value


Whole = Annotated[int, Field(ge=0, le=LIMIT_MAX), BeforeValidator(_whole)]


def _number(value: Any) -> Any:
    """A JSON number: an int or a float; never a string or a boolean (which pydantic's lax
    mode would take as 1.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", "must be a number")
    return value


Days = Annotated[float, Field(gt=0, le=36500), BeforeValidator(_number)]
"""A key's lifetime in days: a number over 0, at most a hundred years."""


class LimitsOut(BaseModel):
    """Limits: ``null`` the default (the settings' for a user, the user's for a key), 0 none."""

    rpm: int | None = None
    daily_tokens: int | None = None
    daily_searches: int | None = None


class UserOut(BaseModel):
    """A user."""

    id: str
    name: str
    role: Literal["user", "admin"]
    created_at: str
    limits: LimitsOut


class UserListOut(BaseModel):
    """``GET /v1/admin/users``."""

    object: Literal["list"] = "list"
    data: list[UserOut]


class KeyOut(BaseModel):
    """A key's record (never the key itself)."""

    id: str
    user: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    personas: list[str] | None
    limits: LimitsOut
    usable: bool


class KeyListOut(BaseModel):
    """``GET /v1/admin/keys``."""

    object: Literal["list"] = "list"
    data: list[KeyOut]


class KeyCreatedOut(KeyOut):
    """``POST /v1/admin/keys``: the record and the key, shown this once."""

    key: str


class _LimitsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rpm: Whole | None = None
    daily_tokens: Whole | None = None
    daily_searches: Whole | None = None

    def limits(self) -> Limits:
        """As a :class:`Limits`."""
        return Limits(self.rpm, self.daily_tokens, self.daily_searches)


class UserCreateRequest(_LimitsIn):
    """``POST /v1/admin/users``."""

    name: str = UserName
    role: Literal["user", "admin"] = "user"


class UserUpdateRequest(_LimitsIn):
    """``PATCH /v1/admin/users/{name}``: the fields given change (a limit ``null``: back to
    the default)."""

    role: Literal["user", "admin"] | None = None


class KeyCreateRequest(_LimitsIn):
    """``POST /v1/admin/keys``: a key for ``user`` (made when missing)."""

    user: str = UserName
    expires_days: Days | None = None
    personas: list[str] | None = Field(default=None, max_length=100)


class TodayOut(BaseModel):
    """Today's (UTC) use and what is left (``null``: no limit)."""

    tokens: int
    searches: int
    tokens_left: int | None
    searches_left: int | None


class MeOut(BaseModel):
    """``GET /v1/me``: who the caller is, how they signed in, their limits and today."""

    user: UserOut
    via: Literal["key", "token", "header", "local"]
    key: KeyOut | None
    limits: LimitsOut
    today: TodayOut


def _limits(limits: Limits) -> LimitsOut:
    return LimitsOut(
        rpm=limits.rpm, daily_tokens=limits.daily_tokens, daily_searches=limits.daily_searches
    )


def user_out(user: User) -> UserOut:
    """A user as the API shows it."""
    return UserOut(
        id=user.id,
        name=user.name,
        role=user.role,
        created_at=user.created_at,
        limits=_limits(user.limits),
    )


def key_out(key: ApiKey, user_name: str) -> KeyOut:
    """A key's record as the API shows it."""
    return KeyOut(
        id=key.id,
        user=user_name,
        created_at=key.created_at,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
        personas=list(key.personas) if key.personas is not None else None,
        limits=_limits(key.limits),
        usable=key.usable(),
    )
