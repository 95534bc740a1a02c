"""The ``memories`` command group, declared only: what personas keep about each user.

Each command imports its implementation (:mod:`~generic_framework.cli.memories`, the store)
when it runs, so ``--help`` stays at typer; ``generic_framework.cli`` adds the group to the
command line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from generic_framework.cli.help import EPILOG as _EPILOG

__all__ = ["memories"]

memories = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The facts personas with [memory] keep about each user: list, forget.",
)


@memories.command("list", epilog=_EPILOG)
def memories_list(
    user: Annotated[str, typer.Option("--user", help="The user's name (admin: the operator).")],
    persona: Annotated[
        str | None, typer.Option("--persona", help="Only this persona's facts.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """A user's kept facts, newest first: id, persona, time, text."""
    from generic_framework.cli.memories import run_memories_list

    raise typer.Exit(run_memories_list(user, persona, as_json))


@memories.command("forget", epilog=_EPILOG)
def memories_forget(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="The fact's id (mem_...).")],
) -> None:
    """Erase one kept fact, whoever's it is."""
    from generic_framework.cli.memories import run_memories_forget

    raise typer.Exit(run_memories_forget(memory_id))
