"""Per-user and per-key limits on turns: requests per minute, tokens and web searches per day.

A user's limits are their own, else the ``BOT_DEFAULT_*`` settings (for the role ``user``;
an admin has none unless given); a key's own limits apply on top of its user's. The bootstrap
admin (``BOT_API_TOKEN``) is the operator and has none. Counted in the
store (:class:`~generic_framework.store.users.UserAdmin`), so every replica sharing a
PostgreSQL database (or processes sharing a SQLite file) counts against one limit.

- **Requests per minute**: every turn (``POST /v1/chat/completions``,
  ``POST /v1/conversations/{id}/messages``) is counted in a sliding 60-second window before it
  starts; over the limit it is refused with ``Retry-After`` = the seconds until the oldest
  counted request leaves the window.
- **Tokens and web searches per day** (UTC): a turn is refused once today's total reached the
  limit (a web search turn, ``//``, once the searches did), with ``Retry-After`` = the seconds
  until midnight UTC. A turn's size is not known before it runs, so the last admitted turn may
  pass the limit by its own size. Totals are added when a turn ends, only for a caller with a
  daily limit.

Refusals are 429 with OpenAI's error shape: ``type`` ``rate_limit_error`` (``requests``) or
``insufficient_quota`` (daily), ``code`` naming the limit (``user_rpm``, ``key_rpm``,
``user_daily_tokens``, ``key_daily_searches``...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from generic_framework.config import Settings
from generic_framework.core.reply import Reply
from generic_framework.service.errors import ServiceError
from generic_framework.store.users import Caller, Limits, User, UserAdmin

__all__ = ["Allowance", "admit_turn", "effective_limits", "record_turn", "seconds_to_midnight"]

_NONE = Limits(0, 0, 0)
_WORDS = {
    "rpm": "requests per minute",
    "daily_tokens": "tokens per day",
    "daily_searches": "web searches per day",
}


@dataclass(frozen=True, slots=True)
class Allowance:
    """What :func:`admit_turn` admitted: the scopes whose daily totals the turn adds to."""

    scopes: tuple[str, ...] = ()


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


def _refuse(who: str, limit: str, value: int, wait: float) -> ServiceError:
    daily = limit != "rpm"
    return ServiceError(
        429,
        f"the {who}'s limit of {value} {_WORDS[limit]} is reached; retry in {math.ceil(wait)} s",
        type_="insufficient_quota" if daily else "rate_limit_error",
        code=f"{who}_{limit}",
        headers={"Retry-After": str(max(1, math.ceil(wait)))},
    )


async def _scopes(
    caller: Caller, users: UserAdmin, settings: Settings
) -> list[tuple[str, str, Limits]]:
    """The (who, scope, limits) a caller's turn counts against."""
    if caller.via in ("token", "local"):
        return []  # the bootstrap admin, the operator: never limited (and no read per turn)
    user = caller.user
    scopes = [("user", f"u:{user.id}", effective_limits(user, settings))]
    if caller.key is not None:
        scopes.append(("key", f"k:{caller.key.id}", caller.key.limits.over(_NONE)))
    return scopes


async def _check_daily(users: UserAdmin, who: str, scope: str, limits: Limits, web: bool) -> None:
    """Refuse the turn when today's tokens (or, for a web turn, searches) reached a limit."""
    if not (limits.daily_tokens or (web and limits.daily_searches)):
        return
    tokens, searches = await users.usage_today(scope)
    if limits.daily_tokens and tokens >= limits.daily_tokens:
        raise _refuse(who, "daily_tokens", limits.daily_tokens, seconds_to_midnight())
    if web and limits.daily_searches and searches >= limits.daily_searches:
        raise _refuse(who, "daily_searches", limits.daily_searches, seconds_to_midnight())


async def admit_turn(
    caller: Caller, users: UserAdmin, settings: Settings, *, web: bool
) -> Allowance:
    """Count one turn of ``caller`` against their limits (``web``: a ``//`` turn): the daily
    ones first, so a refused turn takes no place in a per-minute window.

    Raises:
        ServiceError: 429 over a limit, with ``Retry-After``.
    """
    scopes = await _scopes(caller, users, settings)
    for who, scope, limits in scopes:
        await _check_daily(users, who, scope, limits, web)
    for who, scope, limits in scopes:
        if limits.rpm:
            wait = await users.admit(scope, limits.rpm)
            if wait > 0:
                raise _refuse(who, "rpm", limits.rpm, wait)
    daily = tuple(s for _, s, lim in scopes if lim.daily_tokens or lim.daily_searches)
    return Allowance(daily)


async def record_turn(allowance: Allowance, reply: Reply, users: UserAdmin) -> None:
    """Add a finished turn's tokens and web searches to the daily totals it counts against."""
    if not allowance.scopes:
        return
    usage = reply.usage
    tokens = usage.total_tokens or (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
    await users.add_usage(allowance.scopes, int(tokens or 0), reply.web_searches)
