"""Per-user and per-key limits on turns, for every edge that runs turns for users.

A user's limits are their own, else the ``BOT_DEFAULT_*`` settings (for the role ``user``;
an admin has none unless given); a key's own limits apply on top of its user's. The bootstrap
admin (``BOT_API_TOKEN``) is the operator and has none. Counted in the store
(:class:`~generic_framework.store.users.UserAdmin`), so every process sharing a PostgreSQL
database (or a SQLite file) counts against one limit.

- **Requests per minute**: every turn is counted in a sliding 60-second window before it
  starts; over the limit it is refused for the seconds until the oldest counted request leaves
  the window.
- **Tokens and web searches per day** (UTC): a turn is refused once today's total reached the
  limit (a web search turn, ``//``, once the searches did), until midnight UTC. A turn's size
  is not known before it runs, so the last admitted turn may pass the limit by its own size.
  Totals are added when a turn ends, however it ends (an answer, an error, an abandoned
  stream), from the turn's own account, only for a caller with a daily limit.

:func:`admit_turn` answers with a :class:`Refusal` instead of raising, so each edge words it
its own way: the service as an HTTP 429 (service/errors.py), a chat platform as a short
message saying when to retry (generic_framework/chats/). Every edge admits and counts through
the turn service (:mod:`generic_framework.turns`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from generic_framework.config import Settings
from generic_framework.core.account import TurnAccount
from generic_framework.store.users import Caller, Limits, User, UserAdmin

__all__ = [
    "Allowance",
    "Refusal",
    "Remaining",
    "admit_turn",
    "effective_limits",
    "record_turn",
    "remaining_today",
    "seconds_to_midnight",
    "unlimited",
]

_NONE = Limits(0, 0, 0)
_WORDS = {
    "rpm": "requests per minute",
    "daily_tokens": "tokens per day",
    "daily_searches": "web searches per day",
}
LimitName = Literal["rpm", "daily_tokens", "daily_searches"]


@dataclass(frozen=True, slots=True)
class Allowance:
    """What :func:`admit_turn` admitted: the scopes whose daily totals the turn adds to."""

    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """A turn refused by a limit.

    Attributes:
        who: ``user`` or ``key``, whose limit it is.
        limit: ``rpm``, ``daily_tokens`` or ``daily_searches``.
        value: the limit's value.
        retry_after: whole seconds until a turn may be admitted again (at least 1).
    """

    who: str
    limit: LimitName
    value: int
    retry_after: int

    @property
    def daily(self) -> bool:
        """True for a daily limit (tokens or searches), False for requests per minute."""
        return self.limit != "rpm"

    @property
    def message(self) -> str:
        """``the user's limit of 10 requests per minute is reached; retry in 42 s``."""
        words = _WORDS[self.limit]
        return (
            f"the {self.who}'s limit of {self.value} {words} is reached; "
            f"retry in {self.retry_after} s"
        )


@dataclass(frozen=True, slots=True)
class Remaining:
    """What is left of a user's daily limits today (``None``: no such limit)."""

    tokens: int | None
    searches: int | None
    used_tokens: int
    used_searches: int
    rpm: int | None


def effective_limits(user: User, settings: Settings) -> Limits:
    """A user's limits with the settings' defaults filled in (0: none)."""
    if user.is_admin:
        return user.limits.over(_NONE)
    defaults = Limits(
        settings.bot_default_rpm,
        settings.bot_default_daily_tokens,
        settings.bot_default_daily_searches,
    )
    return user.limits.over(defaults)


def seconds_to_midnight(now: datetime | None = None) -> int:
    """Whole seconds until the next UTC day begins (at least 1)."""
    moment = now or datetime.now(UTC)
    midnight = datetime(moment.year, moment.month, moment.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, math.ceil((midnight - moment).total_seconds()))


def _refusal(who: str, limit: LimitName, value: int, wait: float) -> Refusal:
    return Refusal(who, limit, value, max(1, math.ceil(wait)))


def unlimited(caller: Caller) -> bool:
    """Whether ``caller`` is the operator (the bootstrap admin's token, a local command):
    never limited, so their turns need no read of the store."""
    return caller.via in ("token", "local")


def _scopes(caller: Caller, settings: Settings) -> list[tuple[str, str, Limits]]:
    """The (who, scope, limits) a caller's turn counts against."""
    if unlimited(caller):
        return []
    user = caller.user
    scopes = [("user", f"u:{user.id}", effective_limits(user, settings))]
    if caller.key is not None:
        scopes.append(("key", f"k:{caller.key.id}", caller.key.limits.over(_NONE)))
    return scopes


async def _check_daily(
    users: UserAdmin, who: str, scope: str, limits: Limits, web: bool
) -> Refusal | None:
    """A refusal when today's tokens (or, for a web turn, searches) reached a limit."""
    if not (limits.daily_tokens or (web and limits.daily_searches)):
        return None
    tokens, searches = await users.usage_today(scope)
    if limits.daily_tokens and tokens >= limits.daily_tokens:
        return _refusal(who, "daily_tokens", limits.daily_tokens, seconds_to_midnight())
    if web and limits.daily_searches and searches >= limits.daily_searches:
        return _refusal(who, "daily_searches", limits.daily_searches, seconds_to_midnight())
    return None


async def admit_turn(
    caller: Caller, users: UserAdmin, settings: Settings, *, web: bool
) -> Allowance | Refusal:
    """Count one turn of ``caller`` against their limits (``web``: a ``//`` turn): the daily
    ones first, so a refused turn takes no place in a per-minute window.

    Returns:
        The :class:`Allowance` to pass to :func:`record_turn`, or the :class:`Refusal` of the
        first limit reached.
    """
    scopes = _scopes(caller, settings)
    for who, scope, limits in scopes:
        refused = await _check_daily(users, who, scope, limits, web)
        if refused is not None:
            return refused
    for who, scope, limits in scopes:
        if limits.rpm:
            wait = await users.admit(scope, limits.rpm)
            if wait > 0:
                return _refusal(who, "rpm", limits.rpm, wait)
    daily = tuple(s for _, s, lim in scopes if lim.daily_tokens or lim.daily_searches)
    return Allowance(daily)


async def record_turn(allowance: Allowance, account: TurnAccount, users: UserAdmin) -> None:
    """Add an ended turn's tokens and web searches, from its account (whatever the end: a
    failed turn's billed rounds count too), to the daily totals it counts against."""
    tokens = account.total or account.prompt + account.completion
    searches = account.web_searches
    if allowance.scopes and (tokens or searches):
        await users.add_usage(allowance.scopes, tokens, searches)


async def remaining_today(user: User, users: UserAdmin, settings: Settings) -> Remaining:
    """What is left today of ``user``'s daily limits (their own, else the defaults)."""
    limits = effective_limits(user, settings)
    tokens, searches = await users.usage_today(f"u:{user.id}")
    return Remaining(
        tokens=max(0, limits.daily_tokens - tokens) if limits.daily_tokens else None,
        searches=max(0, limits.daily_searches - searches) if limits.daily_searches else None,
        used_tokens=tokens,
        used_searches=searches,
        rpm=limits.rpm or None,
    )
