"""The service's side of the per-user and per-key limits: a refused turn is an HTTP 429.

The limits themselves, and how they are counted, are :mod:`generic_framework.quotas`' (every
edge that runs turns for users shares them). Here a :class:`~generic_framework.quotas.Refusal`
becomes a 429 with OpenAI's error shape: ``type`` ``rate_limit_error`` (requests per minute)
or ``insufficient_quota`` (daily), ``code`` naming the limit (``user_rpm``, ``key_rpm``,
``user_daily_tokens``, ``key_daily_searches``...), and ``Retry-After`` = the seconds until the
oldest counted request leaves the window, or until midnight UTC for a daily limit.
"""

from __future__ import annotations

from generic_framework import quotas
from generic_framework.config import Settings
from generic_framework.quotas import Allowance, effective_limits, record_turn, seconds_to_midnight
from generic_framework.service.errors import ServiceError
from generic_framework.store.users import Caller, UserAdmin

__all__ = [
    "Allowance",
    "admit_turn",
    "effective_limits",
    "record_turn",
    "refused",
    "seconds_to_midnight",
]


def refused(refusal: quotas.Refusal) -> ServiceError:
    """The 429 of a refused turn."""
    return ServiceError(
        429,
        refusal.message,
        type_="insufficient_quota" if refusal.daily else "rate_limit_error",
        code=f"{refusal.who}_{refusal.limit}",
        headers={"Retry-After": str(refusal.retry_after)},
    )


async def admit_turn(
    caller: Caller, users: UserAdmin, settings: Settings, *, web: bool
) -> Allowance:
    """Count one turn of ``caller`` against their limits (``web``: a ``//`` turn).

    Raises:
        ServiceError: 429 over a limit, with ``Retry-After``.
    """
    answer = await quotas.admit_turn(caller, users, settings, web=web)
    if isinstance(answer, quotas.Refusal):
        raise refused(answer)
    return answer
