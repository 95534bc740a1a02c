"""The ``chat`` command: one message (one-shot) or, without one, an interactive session."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from generic_framework.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    err,
    new_conversation_id,
    open_runtime,
    persona_specs,
    run_command,
)
from generic_framework.cli.interactive import interactive
from generic_framework.cli.offline import no_recording_text, offline_notice, unrecorded, upstream
from generic_framework.cli.output import print_reply
from generic_framework.config import Settings
from generic_framework.core.reply import Reply
from generic_framework.errors import GLMError
from generic_framework.pictures import file_url
from generic_framework.runtime import Runtime
from generic_framework.turns import Ask, OptionRefused

__all__ = ["ChatOptions", "run_chat"]


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
    images: tuple[Path, ...] = ()


def run_chat(options: ChatOptions) -> int:
    """The ``chat`` command; returns the exit code."""

    def chat(settings: Settings) -> int:
        # A missing or unknown persona is refused before the embedded mock starts; the files
        # read for that check are the command's one runtime's, built once the endpoint is known.
        specs = persona_specs(settings, options.persona)
        with upstream(settings, options.mock) as (active, offline):
            if offline:
                err(offline_notice(options.mock))
            runtime = open_runtime(active, specs, offline=offline)
            if options.message is None and not options.images:
                return interactive(runtime, options.persona, options.conversation, offline)
            return _one_shot(runtime, options.message or "", options, offline)

    return run_command(chat, base_url=options.base_url, llm_model=options.model)


def _one_shot(runtime: Runtime, message: str, options: ChatOptions, offline: bool) -> int:
    asked = runtime.persona(options.persona).spec.name
    try:
        images = tuple(file_url(path) for path in options.images)
        reply = asyncio.run(_answer(runtime, message, options, images))
    except (OSError, OptionRefused) as exc:
        err(f"error: {exc}")
        return EXIT_USAGE
    except GLMError as exc:
        if offline and unrecorded(exc):
            err(no_recording_text(runtime.settings.is_coding_endpoint, asked))
            return EXIT_ERROR
        raise
    if options.as_json:
        print(reply.model_dump_json(indent=2))
    else:
        print_reply(reply, sys.stdout)
    return EXIT_OK


async def _answer(
    runtime: Runtime, message: str, options: ChatOptions, images: tuple[str, ...] = ()
) -> Reply:
    """The persona's reply, from the runtime opened for this one turn."""
    async with runtime:
        persona = runtime.persona(options.persona)
        conversation = options.conversation or new_conversation_id()
        ask = Ask(persona, message, None, conversation, images=images)
        return await runtime.turns.respond(ask)
