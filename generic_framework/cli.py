"""The ``generic-framework`` command line."""

from __future__ import annotations

import typer

from generic_framework import __version__

app = typer.Typer(no_args_is_help=True, add_completion=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"generic-framework {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Chat personas backed by Z.AI's GLM models."""


def main() -> None:
    """Entry point of the console script."""
    app()
