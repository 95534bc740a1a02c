"""The interactive ``chat`` session: streamed answers, a live status line, slash commands.

One event loop (``asyncio.Runner``) lives for the whole session, so the persona's HTTP client and
its connections are reused across turns. Ctrl-C during a turn cancels that turn only; the runner
turns SIGINT into a cancellation of the running task, and nothing of a cancelled turn is stored.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from typing import TYPE_CHECKING

from generic_framework._chat import (
    EXIT_OK,
    ChatOptions,
    explain,
    no_recording_text,
    open_persona,
    unrecorded,
)
from generic_framework.config import Settings
from generic_framework.wire.errors import ConfigError, GLMError

if TYPE_CHECKING:
    from generic_framework.core.persona import Persona
    from generic_framework.core.reply import Reply

HELP = (
    "Type a message; start it with // to search the web.\n"
    "Commands: /persona NAME, /new, /history, /help, /quit"
)


class _Status:
    """A one-line progress indicator on stderr: live on a terminal, plain lines when piped."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.label = ""
        self.started = time.monotonic()
        self.visible = False

    def show(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        if self.tty:
            self.visible = True
            self.draw()
        else:
            print(f"... {label}", file=sys.stderr, flush=True)

    def draw(self) -> None:
        if self.visible:
            elapsed = time.monotonic() - self.started
            sys.stderr.write(f"\r\x1b[2K{self.label} {elapsed:.0f}s")
            sys.stderr.flush()

    def clear(self) -> None:
        if self.visible:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
            self.visible = False

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.draw()


async def _turn(persona: Persona, text: str, conversation: str) -> None:
    from generic_framework._chat import print_reply
    from generic_framework.core.events import Done, RoundStarted, TextDelta, ToolFinished

    status = _Status()
    web = text.lstrip().startswith("//")
    status.show("searching the web..." if web else "thinking...")
    ticker = asyncio.create_task(status.tick())
    wrote = False
    try:
        async for event in persona.stream(text, conversation_id=conversation):
            if isinstance(event, TextDelta):
                status.clear()
                sys.stdout.write(event.text)
                sys.stdout.flush()
                wrote = True
            elif isinstance(event, RoundStarted):
                names = ", ".join(event.tools) or "tools"
                label = (
                    "searching the web..." if "web_search" in event.tools else f"running {names}"
                )
                status.show(f"round {event.round}: {label}")
            elif isinstance(event, ToolFinished):
                outcome = "ok" if event.ok else "failed"
                status.show(f"{event.name} {outcome} in {event.ms:.0f} ms; thinking...")
            elif isinstance(event, Done):
                status.clear()
                if wrote:
                    sys.stdout.write("\n")
                    if event.reply.citations:
                        _sources(event.reply)
                else:
                    print_reply(event.reply, sys.stdout)
    finally:
        ticker.cancel()
        status.clear()


def _sources(reply: Reply) -> None:
    sys.stdout.write("\nSources:\n")
    for c in reply.citations:
        sys.stdout.write(f"  [{c.number}] {c.title or c.site or c.url} - {c.url}\n")
    sys.stdout.flush()


def interactive(settings: Settings, options: ChatOptions, offline: bool) -> int:
    """Run the interactive session until /quit or end of input."""
    conversation = options.conversation or uuid.uuid4().hex[:12]
    with asyncio.Runner() as runner:
        persona = runner.run(open_persona(settings, options.persona))
        print(f"{persona.name}: {HELP}", file=sys.stderr)
        try:
            while True:
                try:
                    line = input("> " if sys.stdin.isatty() else "")
                except EOFError:
                    break
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/") and not text.startswith("//"):
                    result = runner.run(_command(text, settings, persona, conversation))
                    if result is None:
                        break
                    persona, conversation = result
                    continue
                _run_turn(runner, persona, text, conversation, settings, offline)
        finally:
            runner.run(persona.aclose())
    return EXIT_OK


def _run_turn(
    runner: asyncio.Runner,
    persona: Persona,
    text: str,
    conversation: str,
    settings: Settings,
    offline: bool,
) -> None:
    try:
        runner.run(_turn(persona, text, conversation))
    except KeyboardInterrupt:
        print("\n(cancelled; nothing of this turn was stored)", file=sys.stderr)
    except GLMError as exc:
        if offline and unrecorded(exc):
            print(no_recording_text(), file=sys.stderr)
        else:
            print(explain(exc, settings), file=sys.stderr)


async def _command(
    text: str, settings: Settings, persona: Persona, conversation: str
) -> tuple[Persona, str] | None:
    name, _, arg = text.partition(" ")
    if name in {"/quit", "/exit", "/q"}:
        return None
    if name == "/new":
        conversation = uuid.uuid4().hex[:12]
        print(f"(new conversation {conversation})", file=sys.stderr)
    elif name == "/persona":
        try:
            chosen = await open_persona(settings, arg.strip() or None)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
        else:
            await persona.aclose()
            persona = chosen
            print(f"(now talking to {persona.name})", file=sys.stderr)
    elif name == "/history":
        stored = await persona.store.get(conversation) or []
        for item in stored:
            message = item.message
            if message.role in {"user", "assistant"} and message.content:
                print(f"{message.role}: {message.content}")
    else:
        print(HELP, file=sys.stderr)
    return persona, conversation
