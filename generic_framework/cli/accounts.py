"""The ``users`` and ``keys`` command groups: their commands and options, declared only.

Each command imports its implementation (:mod:`~generic_framework.cli.users`, the store) when it
runs, so ``--help`` stays at typer; ``generic_framework.cli`` adds both groups to the command
line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from generic_framework.cli.help import EPILOG as _EPILOG

__all__ = ["keys", "users"]

users = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The people who may use the service (in the conversation database): add, list, set, "
    "remove.",
)
keys = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Users' API keys (gfk_...): create, list, revoke.",
)

_Rpm = Annotated[
    int | None,
    typer.Option("--rpm", min=0, max=2**31 - 1, help="Requests per minute (0: no limit)."),
]
_Tokens = Annotated[
    int | None,
    typer.Option("--daily-tokens", min=0, max=2**31 - 1, help="Tokens per UTC day (0: no limit)."),
]
_Searches = Annotated[
    int | None,
    typer.Option(
        "--daily-searches", min=0, max=2**31 - 1, help="Web searches per UTC day (0: no limit)."
    ),
]
_Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _changes(rpm: int | None, tokens: int | None, searches: int | None) -> dict[str, int | None]:
    given = {"rpm": rpm, "daily_tokens": tokens, "daily_searches": searches}
    return {name: value for name, value in given.items() if value is not None}


@users.command("add", epilog=_EPILOG)
def users_add(
    name: Annotated[str, typer.Argument(help="The user's name (an e-mail address works).")],
    admin: Annotated[bool, typer.Option("--admin", help="May act for others.")] = False,
    rpm: _Rpm = None,
    daily_tokens: _Tokens = None,
    daily_searches: _Searches = None,
    as_json: _Json = False,
) -> None:
    """Add a user (limits left out follow the BOT_DEFAULT_* settings)."""
    from generic_framework.cli.users import run_users_add
    from generic_framework.store.users import Limits

    limits = Limits(rpm, daily_tokens, daily_searches)
    raise typer.Exit(run_users_add(name, "admin" if admin else "user", limits, as_json))


@users.command("set", epilog=_EPILOG)
def users_set(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    admin: Annotated[
        bool | None, typer.Option("--admin/--user", help="Make an admin, or a user.")
    ] = None,
    rpm: _Rpm = None,
    daily_tokens: _Tokens = None,
    daily_searches: _Searches = None,
) -> None:
    """Change a user's role or limits; only the options given change."""
    from generic_framework.cli.users import run_users_set

    role = None if admin is None else ("admin" if admin else "user")
    raise typer.Exit(
        run_users_set(name, role, _changes(rpm, daily_tokens, daily_searches))  # type: ignore[arg-type]
    )


@users.command("list", epilog=_EPILOG)
def users_list(as_json: _Json = False) -> None:
    """Every user with role and limits."""
    from generic_framework.cli.users import run_users_list

    raise typer.Exit(run_users_list(as_json))


@users.command("remove", epilog=_EPILOG)
def users_remove(name: Annotated[str, typer.Argument(help="The user's name.")]) -> None:
    """Remove a user with their keys and conversations."""
    from generic_framework.cli.users import run_users_remove

    raise typer.Exit(run_users_remove(name))


@keys.command("create", epilog=_EPILOG)
def keys_create(
    user: Annotated[str, typer.Option("--user", help="Whose key (made when missing).")],
    expires: Annotated[
        float | None, typer.Option("--expires", help="Days until the key stops working.")
    ] = None,
    personas: Annotated[
        str | None, typer.Option("--personas", help="Only these personas (a,b).")
    ] = None,
    rpm: _Rpm = None,
    daily_tokens: _Tokens = None,
    daily_searches: _Searches = None,
    as_json: _Json = False,
) -> None:
    """Create a key; the last line of stdout is the key alone (shown once)."""
    from generic_framework.cli.users import run_keys_create
    from generic_framework.store.users import Limits

    allowed = None
    if personas is not None:
        allowed = tuple(p.strip() for p in personas.split(",") if p.strip())
    limits = Limits(rpm, daily_tokens, daily_searches)
    raise typer.Exit(run_keys_create(user, expires, allowed, limits, as_json))


@keys.command("list", epilog=_EPILOG)
def keys_list(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's keys.")] = None,
    as_json: _Json = False,
) -> None:
    """Keys (their ids and states; never a key)."""
    from generic_framework.cli.users import run_keys_list

    raise typer.Exit(run_keys_list(user, as_json))


@keys.command("revoke", epilog=_EPILOG)
def keys_revoke(
    key: Annotated[str, typer.Argument(metavar="KEY_OR_ID", help="A key or its id.")],
) -> None:
    """Revoke a key: refused at once by every replica."""
    from generic_framework.cli.users import run_keys_revoke

    raise typer.Exit(run_keys_revoke(key))
