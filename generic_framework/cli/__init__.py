"""The ``generic-framework`` command line: chat, personas, serve, mock, record, replay, db.

Exit codes: 0 success; 1 an upstream or runtime error (one line on stderr says what to do);
2 a usage or configuration error. This module only declares the commands; each one imports its
implementation (and through it rich, the mock or the service) when it runs, so ``--help`` stays
fast. The modules, none of which imports this one:

- :mod:`~generic_framework.cli.common`: exit codes, settings, one-line errors.
- :mod:`~generic_framework.cli.offline`: the embedded mock when there is no API key.
- :mod:`~generic_framework.cli.output`: printing a reply and its sources.
- :mod:`~generic_framework.cli.status`: the progress line of interactive turns.
- :mod:`~generic_framework.cli.chat` and :mod:`~generic_framework.cli.interactive`: ``chat``.
- :mod:`~generic_framework.cli.personas`, :mod:`~generic_framework.cli.serve`,
  :mod:`~generic_framework.cli.mock`, :mod:`~generic_framework.cli.fixtures`: the other commands.
- :mod:`~generic_framework.cli.db`: ``db upgrade`` and ``db copy``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from generic_framework import __version__

__all__ = ["app", "main"]

_EPILOG = "Exit codes: 0 success, 1 upstream or runtime error, 2 usage or configuration error."

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"generic-framework {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Chat personas backed by Z.AI's GLM models. Start a message with // to search the web."""


PersonaOpt = Annotated[
    str | None, typer.Option("--persona", "-p", help="Persona name (default: the first found).")
]


@app.command(epilog=_EPILOG)
def chat(
    message: Annotated[
        str | None, typer.Argument(help="One message to answer; omit for an interactive chat.")
    ] = None,
    persona: PersonaOpt = None,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Continue this stored conversation.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole reply as JSON.")] = False,
    mock: Annotated[
        bool, typer.Option("--mock", help="Answer from the embedded mock even with a key.")
    ] = False,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Z.AI endpoint (OPENAI_BASE_URL).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model id (LLM_MODEL).")] = None,
) -> None:
    """Chat with a persona. A message starting with // is a web query.

    With no API key (OPENAI_API_KEY), or with --mock, answers come from the embedded mock server
    and its recorded fixtures; the CLI says so on stderr.
    """
    from generic_framework.cli.chat import ChatOptions, run_chat

    options = ChatOptions(
        message=message,
        persona=persona,
        conversation=conversation,
        as_json=as_json,
        mock=mock,
        base_url=base_url,
        model=model,
    )
    raise typer.Exit(run_chat(options))


@app.command(epilog=_EPILOG)
def personas(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Persona directory (PERSONAS_DIR).")
    ] = None,
) -> None:
    """List the personas found in PERSONAS_DIR."""
    from generic_framework.cli.personas import list_personas

    raise typer.Exit(list_personas(directory))


@app.command(epilog=_EPILOG)
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind (BOT_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (BOT_PORT).")] = None,
) -> None:
    """Run the bot HTTP service (OpenAI-compatible API and a web chat page)."""
    from generic_framework.cli.serve import run_serve

    raise typer.Exit(run_serve(host, port))


@app.command(epilog=_EPILOG)
def mock(
    fixtures: Annotated[
        list[Path] | None,
        typer.Option("--fixtures", help="Fixture file or directory (default: the bundled set)."),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8090,
    latency_ms: Annotated[
        int, typer.Option("--latency-ms", min=0, help="Added delay per response.")
    ] = 0,
    fail_rate: Annotated[
        float,
        typer.Option(
            "--fail-rate", min=0.0, max=1.0, help="Fraction of requests answered 503 (0-1)."
        ),
    ] = 0.0,
    fail_seed: Annotated[
        int, typer.Option("--fail-seed", help="Seed of the --fail-rate failures.")
    ] = 0,
) -> None:
    """Run the mock Z.AI server, replaying recorded fixtures."""
    from generic_framework.cli.mock import run_mock

    raise typer.Exit(run_mock(fixtures or [], host, port, latency_ms, fail_rate, fail_seed))


@app.command(epilog=_EPILOG)
def record(
    message: Annotated[str, typer.Argument(help="The user message to send.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Fixture file to write.")],
    persona: PersonaOpt = None,
) -> None:
    """Run a persona against the real endpoint and save the exchange as a fixture.

    Authorization headers, cookies, keys and user ids are removed before anything is written.
    """
    from generic_framework.cli.fixtures import run_record

    raise typer.Exit(run_record(message, out, persona))


@app.command(epilog=_EPILOG)
def replay(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Fixture files or directories (default: bundled and tests/fixtures)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Replay recorded fixtures through the real Persona against the mock; exit 1 on a failure."""
    from generic_framework.cli.fixtures import run_replay

    raise typer.Exit(run_replay(paths or [], as_json))


db = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="The conversation database (DATABASE_URL, or SQLite in DATA_DIR): migrate, copy.",
)
app.add_typer(db, name="db")


@db.command("upgrade", epilog=_EPILOG)
def db_upgrade() -> None:
    """Apply pending migrations to the database DATABASE_URL names (SQLite in DATA_DIR when
    unset). Safe to repeat, and to run while replicas are running."""
    from generic_framework.cli.db import run_upgrade

    raise typer.Exit(run_upgrade())


@db.command("copy", epilog=_EPILOG)
def db_copy(
    source: Annotated[
        str,
        typer.Option(
            "--from", help="postgresql://..., sqlite:///PATH or a file path to copy from."
        ),
    ],
    target: Annotated[str, typer.Option("--to", help="Where to copy to (the same forms).")],
) -> None:
    """Copy every conversation into another database (SQLite to PostgreSQL and back), then
    verify turn and message counts and a checksum per conversation."""
    from generic_framework.cli.db import run_copy

    raise typer.Exit(run_copy(source, target))


def main(argv: list[str] | None = None) -> None:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``); ends with ``SystemExit(code)``.

    The entry point of the ``generic-framework`` console script and ``python -m
    generic_framework``.
    """
    try:
        app(args=argv)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
