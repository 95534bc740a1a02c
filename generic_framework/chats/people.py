"""The people of a chat platform as the user system knows them.

Each sender is a user named ``<platform>:<id>`` (``telegram:1001``), made on their first
allowed message: their budgets and accounting are the user system's (``BOT_DEFAULT_*``, or
what ``users set`` gave them; ``usage --by user``). Two processes seeing a new person at once
both try to add the user; the store refuses the second name, which then reads the first's.
A turn is asked as that user (a :class:`~generic_framework.store.users.Caller` signed in by
the platform, like a trusted front's header), admitted and counted by
:mod:`generic_framework.quotas`.
"""

from __future__ import annotations

from generic_framework.quotas import Refusal
from generic_framework.store.users import Caller, User, UserAdmin, add_or_read

__all__ = ["caller_for", "platform_user", "refusal_text", "user_name", "wait_words"]


def user_name(platform: str, ident: int | str) -> str:
    """The user name of ``ident`` on ``platform`` (``telegram:1001``)."""
    return f"{platform}:{ident}"


async def platform_user(users: UserAdmin, platform: str, ident: int | str) -> User:
    """The user of ``ident`` on ``platform``, added on first use (safe when two processes
    add the same person at once).

    Raises:
        RuntimeError: the user could neither be added nor read (a store fault).
    """
    name = user_name(platform, ident)
    user = await users.user(name) or (await add_or_read(users, name))[0]
    if user is None:
        raise RuntimeError(f"user {name} could not be added")
    return user


def caller_for(user: User) -> Caller:
    """The caller of a platform user's turn (signed in by the platform, with no key)."""
    return Caller(user, None, via="header")


def wait_words(seconds: int) -> str:
    """``42 seconds``, ``3 minutes``, ``5 hours``: how long until a retry, in round words."""
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} minutes"
    return f"{round(seconds / 3600)} hours"


def refusal_text(refusal: Refusal) -> str:
    """A refused turn as a short chat message saying when to retry."""
    if refusal.limit == "rpm":
        what = f"more than {refusal.value} messages a minute"
    elif refusal.limit == "daily_tokens":
        what = "today's share of answers"
    else:
        what = f"today's {refusal.value} web searches"
    return f"You have used {what}. Please try again in {wait_words(refusal.retry_after)}."
