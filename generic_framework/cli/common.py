"""What every command shares: exit codes, settings read at the edge, one-line errors.

Every command returns an exit code instead of raising, so a failure ends as one line on stderr:
:func:`run_command` reads the settings (``.env`` first) and turns a :class:`ConfigError` into
``error: ...`` and exit 2, any other :class:`GLMError` into :func:`explain` and exit 1.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import typer

from generic_framework.config import Settings, load_dotenv
from generic_framework.errors import ConfigError, GLMError
from generic_framework.redaction import redact, redact_url
from generic_framework.wire import errors as e

if TYPE_CHECKING:
    from generic_framework.core.spec import PersonaSpec
    from generic_framework.runtime import Runtime

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "err",
    "explain",
    "internal_error",
    "load_settings",
    "new_conversation_id",
    "open_runtime",
    "persona_specs",
    "run_command",
    "usage_error",
]

EXIT_OK = 0
"""Success."""
EXIT_ERROR = 1
"""An upstream or runtime error."""
EXIT_USAGE = 2
"""A usage or configuration error (typer's own usage errors are 2 too)."""


def err(text: str) -> None:
    """Print one line (or block) on stderr, at once."""
    print(text, file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def usage_error(exc: Exception) -> str:
    """The one line for a usage error of typer (``error: no such option: --x; see ...``).

    A refused value's message says what is allowed; other usage errors (an unknown option, a
    missing argument) point at the command's ``--help``.
    """
    format_message = getattr(exc, "format_message", None)
    text = format_message() if callable(format_message) else str(exc)
    message = _one_line(str(text)).rstrip(".")
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and not isinstance(exc, typer.BadParameter):
        message += f"; see '{ctx.command_path} --help'"
    return redact(f"error: {message}")


def internal_error(exc: BaseException) -> str:
    """The one line for an exception no command handled: a bug, never the user's input."""
    detail = _one_line(str(exc))[:300]
    return redact(
        f"error: internal error ({type(exc).__name__}: {detail}); this is a bug: please report "
        "it with the command that caused it"
    )


def load_settings(**overrides: Any) -> Settings:
    """Read ``.env`` and the environment; the ``overrides`` that are not ``None`` win.

    Raises:
        ConfigError: a setting is invalid.
    """
    load_dotenv()
    settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    settings.register_secrets()  # never echoed by any later message or log line
    return settings


def open_runtime(
    settings: Settings, specs: Mapping[str, PersonaSpec] | None = None, *, offline: bool = False
) -> Runtime:
    """The command's one runtime: ``settings``, the process environment for ``${VAR}`` in
    persona files' MCP servers (the CLI is where the environment is read), the persona
    ``specs`` when the command has read them already (else it reads ``PERSONAS_DIR``), and
    ``offline`` when ``settings`` point at the embedded mock (its turns are stored so)."""
    from generic_framework.runtime import Runtime  # not for `mock` or `--help`: keep them light

    return Runtime(settings, environ=os.environ, specs=specs, offline=offline)


def persona_specs(settings: Settings, persona: str | None) -> dict[str, PersonaSpec]:
    """The persona files of ``PERSONAS_DIR``, read once, with ``persona`` checked among them
    (a command refuses a bad name before it starts anything).

    Raises:
        ConfigError: no persona files, no persona of that name, or ``BOT_DEFAULT_PERSONA``
            naming none.
    """
    from generic_framework.runtime import choose_spec, read_specs

    specs = read_specs(settings.personas_dir, required=True)
    choose_spec(specs, persona, settings=settings)
    return specs


def new_conversation_id() -> str:
    """A fresh conversation id (12 hex digits)."""
    return uuid.uuid4().hex[:12]


def explain(exc: GLMError, settings: Settings) -> str:
    """One line saying what failed and what to do about it."""
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
        (
            e.APIConnectionError,
            f"could not reach {redact_url(settings.base_url)}: check OPENAI_BASE_URL",
        ),
        (e.ContentFilterError, "blocked by Z.AI's content moderation: rephrase the message"),
        (e.ServerError, f"Z.AI failed on its side, retried {retries} times: try again later"),
        (e.ResponseValidationError, "Z.AI (or a proxy) sent a body that is not a chat answer"),
        (e.BadRequestError, "Z.AI rejected the request"),
        (
            e.NotFoundError,
            f"Z.AI does not know the model {settings.llm_model!r} (or the endpoint): check "
            "LLM_MODEL and OPENAI_BASE_URL",
        ),
        (ConfigError, "configuration error"),
    ]
    hint = next((text for cls, text in hints if isinstance(exc, cls)), "the call failed")
    # The hints quote settings (the endpoint URL): redacted like every error text.
    return redact(f"error: {hint} ({exc})")


def run_command(action: Callable[[Settings], int], **overrides: Any) -> int:
    """Run ``action`` on the settings (see :func:`load_settings`) and return its exit code.

    A :class:`ConfigError` (reading the settings or later) prints ``error: ...`` and gives
    :data:`EXIT_USAGE`; any other :class:`GLMError` prints :func:`explain` and gives
    :data:`EXIT_ERROR`.
    """
    try:
        settings = load_settings(**overrides)
    except ConfigError as exc:
        err(redact(f"error: {exc}"))
        return EXIT_USAGE
    try:
        return action(settings)
    except ConfigError as exc:
        err(redact(f"error: {exc}"))
        return EXIT_USAGE
    except GLMError as exc:
        err(explain(exc, settings))
        return EXIT_ERROR
