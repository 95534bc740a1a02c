"""What the CLI commands do; ``cli.py`` only declares them.

Every command returns an exit code instead of raising, so errors end as one line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import SecretStr

from generic_framework.config import Settings, load_dotenv
from generic_framework.wire.errors import ConfigError, GLMError

if TYPE_CHECKING:
    from generic_framework.core.persona import Persona
    from generic_framework.core.reply import Reply

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
OFFLINE_KEY = "offline-mock-key"


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """The ``chat`` command's options."""

    message: str | None
    persona: str | None = None
    conversation: str | None = None
    as_json: bool = False
    mock: bool = False
    base_url: str | None = None
    model: str | None = None


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _settings(**overrides: Any) -> Settings:
    load_dotenv()
    values = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**values)


@contextlib.contextmanager
def _upstream(settings: Settings, force_mock: bool) -> Iterator[tuple[Settings, bool]]:
    """Yield the settings to use and whether answers come from the embedded mock."""
    if settings.has_api_key and not force_mock:
        yield settings, False
        return
    from generic_framework.mock import MockServer, bundled_fixture_paths

    with MockServer(bundled_fixture_paths()) as server:
        offline = settings.model_copy(
            update={"base_url": server.base_url, "api_key": SecretStr(OFFLINE_KEY)}
        )
        yield offline, True


def _pick(personas: dict[str, Persona], name: str | None) -> Persona:
    if not personas:
        raise ConfigError("no personas found: set PERSONAS_DIR to a folder of persona .toml files")
    if name is None:
        return personas["scout"] if "scout" in personas else next(iter(personas.values()))
    if name not in personas:
        raise ConfigError(f"unknown persona {name!r}; available: {', '.join(sorted(personas))}")
    return personas[name]


def explain(exc: GLMError, settings: Settings) -> str:
    """One line saying what failed and what to do about it."""
    from generic_framework.wire import errors as e

    retries = settings.llm_max_retries
    hints: list[tuple[type[GLMError], str]] = [
        (e.AuthenticationError, "Z.AI rejected the API key: check OPENAI_API_KEY"),
        (
            e.InsufficientBalanceError,
            "the account balance is empty: top it up, or use another key",
        ),
        (e.QuotaExceededError, "a plan limit was reached: wait for its reset time"),
        (e.RateLimitError, f"rate limited by Z.AI, retried {retries} times: try again shortly"),
        (e.APITimeoutError, f"no answer within LLM_TIMEOUT={settings.llm_timeout:g}s: raise it"),
        (e.APIConnectionError, f"could not reach {settings.base_url}: check OPENAI_BASE_URL"),
        (e.ContentFilterError, "blocked by Z.AI's content moderation: rephrase the message"),
        (e.ServerError, f"Z.AI failed on its side, retried {retries} times: try again later"),
        (e.ResponseValidationError, "Z.AI (or a proxy) sent a body that is not a chat answer"),
        (e.BadRequestError, "Z.AI rejected the request"),
        (e.ConfigError, "configuration error"),
    ]
    hint = next((text for cls, text in hints if isinstance(exc, cls)), "error")
    return f"error: {hint} ({exc})"


# ------------------------------------------------------------------------------------ chat


def run_chat(options: ChatOptions) -> int:
    """The ``chat`` command."""
    try:
        settings = _settings(base_url=options.base_url, llm_model=options.model)
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    try:
        with _upstream(settings, options.mock) as (active, offline):
            if offline:
                _err(_offline_notice(settings, options.mock))
            if options.message is None:
                from generic_framework._interactive import interactive

                return interactive(active, options, offline)
            return asyncio.run(_one_shot(active, options, offline))
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    except GLMError as exc:
        _err(explain(exc, settings))
        return EXIT_ERROR


def _offline_notice(settings: Settings, forced: bool) -> str:
    why = "--mock given" if forced else "no OPENAI_API_KEY set"
    return f"offline: {why}; answering from the embedded mock's recorded fixtures."


async def open_persona(settings: Settings, name: str | None) -> Persona:
    """Load the personas of PERSONAS_DIR and return the chosen one (with its own client)."""
    from generic_framework.core.history import ConversationStore
    from generic_framework.core.loader import load_personas
    from generic_framework.wire.client import GLMClient

    client = GLMClient(settings)
    store = ConversationStore(settings.database_path)
    found = load_personas(settings.personas_dir, settings=settings, client=client, store=store)
    return _pick(found, name)


async def _one_shot(settings: Settings, options: ChatOptions, offline: bool) -> int:
    assert options.message is not None
    persona = await open_persona(settings, options.persona)
    try:
        conversation = options.conversation or uuid.uuid4().hex[:12]
        try:
            reply = await persona.respond(options.message, conversation_id=conversation)
        except GLMError as exc:
            if offline and unrecorded(exc):
                _err(no_recording_text())
                return EXIT_ERROR
            raise
    finally:
        await persona.aclose()
    if options.as_json:
        print(reply.model_dump_json(indent=2))
    else:
        print_reply(reply, sys.stdout)
    return EXIT_OK


def unrecorded(exc: GLMError) -> bool:
    """True when the embedded mock had no recorded answer for the request."""
    from generic_framework.mock import NO_MATCH_CODE

    return exc.code == NO_MATCH_CODE


def no_recording_text() -> str:
    """The honest answer to a question the embedded mock has no recording for."""
    from generic_framework.mock import bundled_examples

    lines = [
        "The embedded mock has no recorded answer for that message (it never invents one).",
        "Set OPENAI_API_KEY for real answers, or try one of the recorded questions:",
    ]
    lines += [f"  generic-framework chat {example!r}" for example in bundled_examples()]
    return "\n".join(lines)


def print_reply(reply: Reply, out: TextIO) -> None:
    """Print the answer (markdown on a terminal, plain text when piped) and its sources."""
    if out.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        console = Console(file=out)
        console.print(Markdown(reply.content))
    else:
        out.write(reply.content.rstrip() + "\n")
    if reply.citations:
        out.write("\nSources:\n")
        for citation in reply.citations:
            title = citation.title or citation.site or citation.url
            out.write(f"  [{citation.number}] {title} - {citation.url}\n")
    out.flush()


# ------------------------------------------------------------------------------------ others


def list_personas(directory: Path | None) -> int:
    """The ``personas`` command."""
    from generic_framework.core.loader import load_personas

    try:
        settings = _settings(personas_dir=directory)
        found = load_personas(settings.personas_dir, settings=settings)
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    if not found:
        _err(f"no personas in {settings.personas_dir}")
        return EXIT_ERROR
    for name, persona in sorted(found.items()):
        print(f"{name}\t{persona.description}")
    return EXIT_OK


def run_serve(host: str | None, port: int | None) -> int:
    """The ``serve`` command."""
    from generic_framework.service import run

    try:
        settings = _settings(bot_host=host, bot_port=port)
        run(settings)
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    return EXIT_OK


def run_mock(
    fixtures: list[Path],
    host: str,
    port: int,
    latency_ms: int,
    fail_rate: float = 0.0,
    fail_seed: int = 0,
) -> int:
    """The ``mock`` command."""
    from generic_framework.mock import serve_forever

    try:
        serve_forever(
            fixtures,
            host=host,
            port=port,
            latency_ms=latency_ms,
            fail_rate=fail_rate,
            fail_seed=fail_seed,
        )
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    return EXIT_OK


def run_record(message: str, out: Path, persona: str | None) -> int:
    """The ``record`` command."""
    from generic_framework.recording.recorder import record

    try:
        settings = _settings()
        if not settings.has_api_key:
            raise ConfigError("record talks to the real endpoint: set OPENAI_API_KEY")
        path = asyncio.run(record(settings, message, out, persona=persona))
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
    except GLMError as exc:
        _err(explain(exc, settings))
        return EXIT_ERROR
    _err(f"wrote {path}")
    return EXIT_OK


def run_replay(paths: list[Path], as_json: bool) -> int:
    """The ``replay`` command."""
    from generic_framework.recording.replay import replay_main

    try:
        settings = _settings()
        return replay_main(paths, settings=settings, as_json=as_json)
    except ConfigError as exc:
        _err(f"error: {exc}")
        return EXIT_USAGE
