"""Users and their API keys: the records, the key format, and where a user's conversations live.

A user has a name, a role (``user`` or ``admin``), optional limits, and any number of API keys
(docs/design/0322). The bootstrap admin (id and name ``admin``) always exists: it is who
``BOT_API_TOKEN`` signs in as, who the CLI and the library act as, and who owns every
conversation stored before users existed.

**Keys** read ``gfk_<id>_<secret>``: a fixed prefix secret scanners can spot, a public id of 12
hex digits (shown in lists, revocable by), and 32 random bytes. Only the SHA-256 of the whole
key is stored: a key is a random 256-bit value, not a password, so a slow password hash would
add nothing but latency on every request (docs/design/0322 has the reasons).

**Conversation keys.** The store keeps a user's conversation ``chat-1`` under the key
``<user id>/chat-1``; the bootstrap admin's conversations keep their bare ids, as they were
before users existed. Ids never hold ``/``, so the two never collide, and the owner of any
stored conversation follows from its key alone (:func:`split_key`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from generic_framework.limits import check_conversation_id

__all__ = [
    "BOOTSTRAP_USER",
    "KEY_PREFIX",
    "LIMIT_MAX",
    "NO_LIMITS",
    "ROLES",
    "USER_NAME_PATTERN",
    "AccountsDump",
    "ApiKey",
    "Caller",
    "KeyMatch",
    "Limits",
    "Role",
    "StoredKey",
    "User",
    "UserAdmin",
    "add_or_read",
    "check_conversation_key",
    "check_user_name",
    "conversation_key",
    "key_hash",
    "key_id_of",
    "match_key",
    "new_key",
    "new_user_id",
    "pseudonym",
    "split_key",
]

Role = Literal["user", "admin"]
ROLES: tuple[Role, ...] = ("user", "admin")
BOOTSTRAP_USER = "admin"
"""The bootstrap admin's id and name."""
KEY_PREFIX = "gfk_"
"""What every API key starts with (secret scanners can be taught this prefix)."""

_USER_ID = re.compile(r"^u[0-9a-f]{12}$")
_KEY = re.compile(r"^gfk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
USER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}$"
"""What a user name may be (an e-mail address is one; so is a chat platform's user,
``telegram:123456789``). Never ``/``: a user's conversations are keyed ``<user id>/<id>``."""
_NAME = re.compile(USER_NAME_PATTERN)
_KEY_OWNER = r"(?:u[0-9a-f]{12}/)?"
CONVERSATION_KEY_PATTERN = rf"^{_KEY_OWNER}[A-Za-z0-9_-]{{1,128}}$"
_CONVERSATION_KEY = re.compile(CONVERSATION_KEY_PATTERN)


def check_user_name(name: str) -> str:
    """``name`` if it is a valid user name: 1-128 letters, digits, ``. _ @ + : -`` (an e-mail
    address is one, and a chat platform's user such as ``telegram:123456789``), starting with
    a letter or digit.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            "a user name is 1-128 letters, digits, '.', '_', '@', '+', ':' or '-', starting "
            "with a letter or digit"
        )
    return name


def new_user_id() -> str:
    """A new random user id (``u`` and 12 hex digits)."""
    return "u" + secrets.token_hex(6)


def conversation_key(owner: str, conversation_id: str) -> str:
    """Where the store keeps ``owner``'s conversation ``conversation_id``.

    Raises:
        ValueError: the id breaks :func:`~generic_framework.limits.check_conversation_id`.
    """
    check_conversation_id(conversation_id)
    if owner == BOOTSTRAP_USER:
        return conversation_id
    if not _USER_ID.fullmatch(owner):
        raise ValueError(f"{owner!r} is not a user id")
    return f"{owner}/{conversation_id}"


def split_key(key: str) -> tuple[str, str]:
    """The (owner, conversation id) of a stored conversation's key."""
    owner, slash, cid = key.partition("/")
    return (owner, cid) if slash else (BOOTSTRAP_USER, key)


def check_conversation_key(key: str) -> str:
    """``key`` if it is a conversation key (:func:`conversation_key`'s form).

    Raises:
        ValueError: it is not.
    """
    if not isinstance(key, str) or not _CONVERSATION_KEY.fullmatch(key):
        if isinstance(key, str) and "/" not in key:
            check_conversation_id(key)  # a bare id: its own rule's words
        raise ValueError(
            f"{str(key)[:160]!r} is not a conversation key (an id, or a user id, '/', an id)"
        )
    return key


def pseudonym(user_id: str) -> str:
    """The stable pseudonymous id sent upstream as ``user_id`` for a user (the provider's
    abuse tracking): a hash of the random user id, never the name."""
    digest = hashlib.sha256(f"generic_framework:user:{user_id}".encode()).hexdigest()
    return f"gf-{digest[:32]}"


LIMIT_MAX = 2**31 - 1
"""The largest limit (what both backends' columns hold)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A user's or a key's limits; ``None``: the default (the user's for a key, the settings'
    for a user); ``0``: none.

    Attributes:
        rpm: requests per minute (any 60 seconds).
        daily_tokens: prompt plus completion tokens per UTC day.
        daily_searches: web searches per UTC day.
    """

    rpm: int | None = None
    daily_tokens: int | None = None
    daily_searches: int | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "daily_tokens", "daily_searches"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} must be a whole number")
            if value is not None and not 0 <= value <= LIMIT_MAX:
                raise ValueError(f"{name} must be from 0 (no limit) to {LIMIT_MAX}")

    def over(self, base: Limits) -> Limits:
        """These limits, each unset one taken from ``base``."""
        return Limits(
            *(
                mine if mine is not None else theirs
                for mine, theirs in (
                    (self.rpm, base.rpm),
                    (self.daily_tokens, base.daily_tokens),
                    (self.daily_searches, base.daily_searches),
                )
            )
        )


NO_LIMITS = Limits()
"""Limits with every value unset (the defaults apply)."""


@dataclass(frozen=True, slots=True)
class User:
    """A user: a stable random id, a unique name, a role, limits, when made."""

    id: str
    name: str
    role: Role
    limits: Limits = field(default_factory=Limits)
    created_at: str = ""

    @property
    def is_admin(self) -> bool:
        """Whether the user may act for others."""
        return self.role == "admin"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key's record (the secret is never kept).

    Attributes:
        id: the public id (12 hex digits, part of the key).
        user_id: whose key it is.
        created_at: when it was made (ISO 8601, UTC).
        expires_at: when it stops working, or ``None``.
        revoked_at: when it was revoked, or ``None``.
        personas: the personas it may use, or ``None`` for all.
        limits: limits of its own, within the user's.
    """

    id: str
    user_id: str
    created_at: str
    expires_at: str | None = None
    revoked_at: str | None = None
    personas: tuple[str, ...] | None = None
    limits: Limits = field(default_factory=Limits)

    def usable(self, now: datetime | None = None) -> bool:
        """Neither revoked nor expired at ``now``."""
        if self.revoked_at is not None:
            return False
        if self.expires_at is None:
            return True
        return datetime.fromisoformat(self.expires_at) > (now or datetime.now(UTC))


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A key as the store hands it to authentication: its record, hash and user."""

    key: ApiKey
    hash: str
    user: User


@dataclass(frozen=True, slots=True)
class KeyMatch:
    """A presented key that matched a usable key."""

    key: ApiKey
    user: User


@dataclass(frozen=True, slots=True)
class AccountsDump:
    """Every user and key (hashes included), as ``db copy`` moves them."""

    users: tuple[User, ...] = ()
    keys: tuple[tuple[ApiKey, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the user, the key they used (``None`` for ``BOT_API_TOKEN``, the
    trusted header or an unguarded loopback service), and how they signed in."""

    user: User
    key: ApiKey | None = None
    via: Literal["token", "key", "header", "local"] = "key"

    @property
    def key_id(self) -> str:
        """The key's public id, or ``""``."""
        return self.key.id if self.key is not None else ""


def new_key() -> tuple[str, str]:
    """A new key: (public id, the whole key text)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, f"{KEY_PREFIX}{key_id}_{secret}"


def key_hash(text: str) -> str:
    """What the store keeps of a key: SHA-256 of the whole key, hex."""
    return hashlib.sha256(text.encode()).hexdigest()


def key_id_of(text: str) -> str | None:
    """The public id of a well-formed key, else ``None``."""
    found = _KEY.fullmatch(text)
    return found.group(1) if found else None


_DUMMY = key_hash(KEY_PREFIX + "0" * 12 + "_" + "0" * 43)


def match_key(text: str, stored: StoredKey | None, now: datetime | None = None) -> KeyMatch | None:
    """The user of ``text`` when it is ``stored``'s key and that key is usable, else ``None``.

    The hash is compared in constant time, and compared (against a dummy) even when no key
    has the id, so the answer's time does not tell a wrong id from a wrong secret.
    """
    presented = key_hash(text)
    equal = hmac.compare_digest(presented, stored.hash if stored is not None else _DUMMY)
    if stored is None or not equal or not stored.key.usable(now):
        return None
    return KeyMatch(stored.key, stored.user)


def expiry(days: float | None, now: datetime | None = None) -> str | None:
    """The ``expires_at`` of a key valid for ``days`` from ``now`` (``None``: no expiry).

    Raises:
        ValueError: ``days`` is not positive.
    """
    if days is None:
        return None
    if days <= 0:
        raise ValueError("--expires must be a positive number of days")
    moment = (now or datetime.now(UTC)) + timedelta(days=days)
    return moment.isoformat(timespec="milliseconds")


class UserAdmin(Protocol):
    """Users, keys and the counters of their limits (both backends implement it)."""

    async def add_user(self, name: str, *, role: Role = "user", limits: Limits = NO_LIMITS) -> User:
        """Add a user.

        Raises:
            ValueError: the name is invalid or taken.
        """
        ...

    async def user(self, name: str) -> User | None:
        """The user named ``name``, or ``None``."""
        ...

    async def user_by_id(self, user_id: str) -> User | None:
        """The user with id ``user_id``, or ``None``."""
        ...

    async def users(self) -> list[User]:
        """Every user, by name."""
        ...

    async def set_user(
        self, name: str, *, role: Role | None = None, limits: Limits | None = None
    ) -> User | None:
        """Change a user's role and/or limits (``limits`` replaces them whole); ``None``
        when there is no such user."""
        ...

    async def remove_user(self, name: str) -> bool:
        """Remove a user with their keys and conversations; True when the user existed.

        Raises:
            ValueError: the bootstrap admin cannot be removed.
        """
        ...

    async def create_key(
        self,
        user_id: str,
        *,
        expires_at: str | None = None,
        personas: tuple[str, ...] | None = None,
        limits: Limits = NO_LIMITS,
    ) -> tuple[ApiKey, str]:
        """A new key for the user: its record and the key itself (shown once, never kept)."""
        ...

    async def keys(self, user_id: str | None = None) -> list[ApiKey]:
        """Every key (of one user), newest first."""
        ...

    async def revoke_key(self, key_id: str) -> bool:
        """Revoke a key now; True when it existed and was not revoked yet."""
        ...

    async def stored_key(self, key_id: str) -> StoredKey | None:
        """A key with its hash and user, for :func:`match_key`."""
        ...

    async def admit(self, scope: str, limit: int, window: float = 60.0) -> float:
        """Count a request against ``limit`` requests per ``window`` seconds of ``scope``
        (across every process sharing the store): 0 when admitted, else the seconds until one
        would be."""
        ...

    async def add_usage(self, scopes: tuple[str, ...], tokens: int, searches: int) -> None:
        """Add a turn's tokens and searches to today's (UTC) totals of each scope."""
        ...

    async def usage_today(self, scope: str) -> tuple[int, int]:
        """Today's (UTC) tokens and searches of ``scope``."""
        ...

    async def dump_accounts(self) -> AccountsDump:
        """Every user and key, as ``db copy`` moves them."""
        ...

    async def restore_accounts(self, dump: AccountsDump) -> int:
        """Add the users and keys this store lacks (by id); return how many were added."""
        ...


async def add_or_read(users: UserAdmin, name: str) -> tuple[User | None, bool]:
    """Add the user ``name`` with the defaults, or read it when another process (a replica, a
    second bot) added it meanwhile: ``add_user`` refuses a taken name with ``ValueError``.

    Returns:
        The user (``None`` only if it could neither be added nor read) and whether this call
        added it.
    """
    try:
        return await users.add_user(name), True
    except ValueError:
        return await users.user(name), False
