"""The ``chat`` command: one message (one-shot) or, without one, an interactive session."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

from generic_framework.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    err,
    new_conversation_id,
    open_runtime,
    run_command,
)
from generic_framework.cli.interactive import interactive
from generic_framework.cli.offline import no_recording_text, offline_notice, unrecorded, upstream
from generic_framework.cli.output import print_reply
from generic_framework.config import Settings
from generic_framework.core.reply import Reply
from generic_framework.wire.errors import GLMError

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


def run_chat(options: ChatOptions) -> int:
    """The ``chat`` command; returns the exit code."""

    def chat(settings: Settings) -> int:
        # A missing or unknown persona is refused before the embedded mock starts.
        open_runtime(settings).spec(options.persona)
        with upstream(settings, options.mock) as (active, offline):
            if offline:
                err(offline_notice(options.mock))
            if options.message is None:
                return interactive(active, options.persona, options.conversation, offline)
            return _one_shot(active, options.message, options, offline)

    return run_command(chat, base_url=options.base_url, llm_model=options.model)


def _one_shot(settings: Settings, message: str, options: ChatOptions, offline: bool) -> int:
    try:
        reply = asyncio.run(_answer(settings, message, options))
    except GLMError as exc:
        if offline and unrecorded(exc):
            err(no_recording_text(settings.is_coding_endpoint))
            return EXIT_ERROR
        raise
    if options.as_json:
        print(reply.model_dump_json(indent=2))
    else:
        print_reply(reply, sys.stdout)
    return EXIT_OK


async def _answer(settings: Settings, message: str, options: ChatOptions) -> Reply:
    """The persona's reply, from a runtime open for this one turn."""
    async with open_runtime(settings) as runtime:
        persona = runtime.persona(options.persona)
        conversation = options.conversation or new_conversation_id()
        return await persona.respond(message, conversation_id=conversation)
