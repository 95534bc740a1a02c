"""The ``generic-framework`` command line: chat, personas, serve, telegram, discord, mock,
record, replay, db, usage, users, keys, memories.

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
- :mod:`~generic_framework.cli.db`: ``db upgrade`` and ``db copy``;
  :mod:`~generic_framework.cli.db_backup`: ``db backup`` and ``db restore``.
- :mod:`~generic_framework.cli.usage`: ``usage``, from the stored turn records.
- :mod:`~generic_framework.cli.telegram`: ``telegram``, the Telegram bot.
- :mod:`~generic_framework.cli.discord`: ``discord``, the Discord bot.
- :mod:`~generic_framework.cli.accounts`: the ``users`` and ``keys`` groups' declarations
  (:mod:`~generic_framework.cli.users` runs them); :mod:`~generic_framework.cli.memory_commands`:
  the ``memories`` group's (:mod:`~generic_framework.cli.memories` runs them).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar, cast

import typer

from generic_framework import __version__
from generic_framework.cli._httpx_cli import defer_httpx_cli
from generic_framework.cli.accounts import keys, users
from generic_framework.cli.help import EPILOG as _EPILOG
from generic_framework.cli.memory_commands import memories

if TYPE_CHECKING:
    from generic_framework.usage import GroupBy

__all__ = ["app", "main"]

_V = TypeVar("_V", str, int)


def _base_named(name: str) -> type[Exception]:
    """click's exception class ``name``, found above ``typer.BadParameter``.

    Newer typer versions carry their own copy of click, older ones use click itself; the
    classes are found where this typer has them rather than imported from either.
    """
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == name and issubclass(cls, Exception):
            return cls
    raise ImportError(f"typer.BadParameter has no base class {name}")  # pragma: no cover


_CLICK_ERROR = _base_named("ClickException")


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


def _rule(name: str) -> Callable[[_V | None], _V | None]:
    """A typer callback checking a value with ``generic_framework.limits.<name>``.

    The rules are the ones the environment, the service, persona files and the store use
    (docs/design/0313); a refused value becomes a usage error naming the option, before any
    command starts. Imported when an option is given, so ``--help`` stays fast.
    """

    def check(value: _V | None) -> _V | None:
        if value is None:
            return None
        from generic_framework import limits

        rule: Callable[[_V], _V] = getattr(limits, name)
        try:
            return rule(value)
        except ValueError as exc:
            raise typer.BadParameter(f"{exc} (got {limits.shown(value)})") from None

    return check


PersonaOpt = Annotated[
    str | None,
    typer.Option(
        "--persona",
        "-p",
        help="Persona name (default: BOT_DEFAULT_PERSONA, else the first with web search).",
        callback=_rule("check_persona_name"),
    ),
]
HostOpt = Annotated[str, typer.Option(help="Interface to bind.", callback=_rule("check_bind_host"))]
PortOpt = Annotated[
    int, typer.Option(help="Port (0 picks a free one).", callback=_rule("check_port"))
]


@app.command(epilog=_EPILOG)
def chat(
    message: Annotated[
        str | None,
        typer.Argument(
            help="One message to answer; omit for an interactive chat.",
            callback=_rule("check_text"),
        ),
    ] = None,
    persona: PersonaOpt = None,
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            "-c",
            help="Continue this stored conversation (1-128 letters, digits, '_' or '-').",
            callback=_rule("check_conversation_id"),
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole reply as JSON.")] = False,
    mock: Annotated[
        bool, typer.Option("--mock", help="Answer from the embedded mock even with a key.")
    ] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="Z.AI endpoint (OPENAI_BASE_URL).", callback=_rule("check_base_url")
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model id (LLM_MODEL).", callback=_rule("check_model_id")),
    ] = None,
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
    host: Annotated[
        str | None,
        typer.Option(help="Interface to bind (BOT_HOST).", callback=_rule("check_bind_host")),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (BOT_PORT).", callback=_rule("check_port"))
    ] = None,
    mock: Annotated[
        bool,
        typer.Option("--mock", help="Answer from the embedded mock even when a key is set."),
    ] = False,
    stay_on_config_error: Annotated[
        bool,
        typer.Option(
            "--stay-on-config-error",
            help="On a configuration error (exit 2), wait to be stopped before exiting, so a "
            "container restart policy does not restart it in a loop.",
        ),
    ] = False,
) -> None:
    """Run the bot HTTP service (OpenAI-compatible API and a web chat page).

    With no API key (OPENAI_API_KEY), or with --mock, answers come from the embedded mock server
    and its recorded fixtures; the start-up log says so and GET /v1/bot reports offline: true.
    """
    from generic_framework.cli.serve import run_serve

    raise typer.Exit(run_serve(host, port, mock, stay_on_config_error=stay_on_config_error))


@app.command(epilog=_EPILOG)
def telegram(
    mock: Annotated[
        bool, typer.Option("--mock", help="Answer from the embedded mock even with a key.")
    ] = False,
) -> None:
    """Run the personas as a Telegram bot (long polling; TELEGRAM_BOT_TOKEN).

    Only the users in TELEGRAM_ALLOWED_USERS (or chats in TELEGRAM_ALLOWED_CHATS) are answered.
    """
    from generic_framework.cli.telegram import run_telegram

    raise typer.Exit(run_telegram(mock))


@app.command(epilog=_EPILOG)
def discord(
    mock: Annotated[
        bool, typer.Option("--mock", help="Answer from the embedded mock even with a key.")
    ] = False,
) -> None:
    """Run the personas as a Discord bot (the gateway; DISCORD_BOT_TOKEN).

    Only the users in DISCORD_ALLOWED_USERS (or guilds and channels in DISCORD_ALLOWED_GUILDS,
    DISCORD_ALLOWED_CHANNELS) are answered; the bot needs the Message Content intent.
    """
    from generic_framework.cli.discord import run_discord

    raise typer.Exit(run_discord(mock))


@app.command(epilog=_EPILOG)
def mock(
    fixtures: Annotated[
        list[Path] | None,
        typer.Option("--fixtures", help="Fixture file or directory (default: the bundled set)."),
    ] = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8090,
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
    message: Annotated[
        str, typer.Argument(help="The user message to send.", callback=_rule("check_text"))
    ],
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


def _since(value: str | None) -> str | None:
    """``--since``: a day (YYYY-MM-DD); the error names the option (a callback's do)."""
    if value is not None:
        try:
            date.fromisoformat(value)
        except ValueError:
            raise typer.BadParameter(f"must be a day like 2026-11-01 (got {value!r})") from None
    return value


_GROUPS = ("persona", "model", "day", "user")


def _group(value: str) -> str:
    """``--by``: one of :data:`_GROUPS`, said in plain words when it is not."""
    if value not in _GROUPS:
        raise typer.BadParameter(f"must be one of {', '.join(_GROUPS)} (got {value!r})")
    return value


@app.command(epilog=_EPILOG)
def usage(
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only turns from this day on (YYYY-MM-DD, UTC).", callback=_since
        ),
    ] = None,
    by: Annotated[
        str,
        typer.Option("--by", help="Group by: persona, model, day or user.", callback=_group),
    ] = "persona",
    user: Annotated[
        str | None, typer.Option("--user", help="Only the turns this user asked (a name).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="A TOML price table for an estimated cost (no defaults)."),
    ] = None,
) -> None:
    """Tokens, web searches and turns from the stored turn records, with an estimated cost."""
    from generic_framework.cli.usage import run_usage

    day = date.fromisoformat(since) if since is not None else None
    raise typer.Exit(run_usage(day, cast("GroupBy", by), as_json, prices, user))


db = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help=(
        "The conversation database (DATABASE_URL, or SQLite in DATA_DIR): migrate, copy, "
        "back up, restore."
    ),
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


@db.command("backup", epilog=_EPILOG)
def db_backup(
    target: Annotated[str, typer.Option("--to", help="The backup file to write (SQLite).")],
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="postgresql://..., sqlite:///PATH or a file path (default: DATABASE_URL, "
            "else SQLite in DATA_DIR).",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite an existing backup file.")
    ] = False,
) -> None:
    """Back up the conversations to one SQLite file, safely while the service writes, and
    check it (SQLite's integrity check, schema version) before it takes the file's name."""
    from generic_framework.cli.db_backup import run_backup

    raise typer.Exit(run_backup(target, source, replace))


@db.command("restore", epilog=_EPILOG)
def db_restore(
    source: Annotated[str, typer.Option("--from", help="The backup file (from db backup).")],
    target: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="postgresql://..., sqlite:///PATH or a file path (default: DATABASE_URL, "
            "else SQLite in DATA_DIR).",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace an existing SQLite database (kept as <name>.before-restore-<time>).",
        ),
    ] = False,
) -> None:
    """Check a backup, then restore it: SQLite is replaced atomically (never under a running
    service); PostgreSQL gets the conversations it does not have."""
    from generic_framework.cli.db_backup import run_restore

    raise typer.Exit(run_restore(source, target, replace))


app.add_typer(users, name="users")
app.add_typer(keys, name="keys")
app.add_typer(memories, name="memories")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``); ends with ``SystemExit(code)``.

    The entry point of the ``generic-framework`` console script and ``python -m
    generic_framework``. Whatever happens, the user gets an exit code of 0, 1 or 2 and at most
    one ``error: ...`` line on stderr, never a traceback: usage errors (an unknown option, a
    value an option's rule refuses) become one line and exit 2; an exception no command
    handles is a bug, reported as one ``error: internal error ...`` line and exit 1.
    """
    # The command's own process, before any command imports httpx (importing this module
    # does not): httpx's command line (click's rest, rich's progress, syntax and tables,
    # pygments) is then loaded only if someone runs it. Done here, in the entry point, never
    # at import: importing the library changes no other package (docs/design/0704).
    defer_httpx_cli()
    sys.exit(_run(argv))


def _run(argv: list[str] | None) -> int:
    # A terminal whose encoding cannot show a character of an answer (an ASCII or Latin-1
    # locale) gets "?" for it instead of a UnicodeEncodeError halfway through the answer.
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        sys.stdout.reconfigure(errors="replace")
    try:
        # standalone_mode=False: click and typer raise instead of printing their own
        # multi-line usage errors and tracebacks; every failure is worded here.
        result = app(args=argv, prog_name="generic-framework", standalone_mode=False)
    except _CLICK_ERROR as exc:
        from generic_framework.cli.common import err, usage_error

        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # no command at all: the help, as before
        else:
            err(usage_error(exc))
        return int(getattr(exc, "exit_code", 2))
    except (KeyboardInterrupt, typer.Abort):  # pragma: no cover - interactive
        return 130
    except Exception as exc:
        from generic_framework.cli.common import EXIT_ERROR, err, internal_error

        err(internal_error(exc))
        return EXIT_ERROR
    return result if isinstance(result, int) else 0
