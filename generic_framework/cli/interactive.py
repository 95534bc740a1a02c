"""The interactive ``chat`` session: streamed answers, a live status line, slash commands.

One event loop (``asyncio.Runner``) and one :class:`~generic_framework.runtime.Runtime` live for
the whole session, so the HTTP client and its connections are reused across turns and personas:
``/persona NAME`` only picks another persona of the same runtime. Ctrl-C during a turn cancels
that turn only; the runner turns SIGINT into a cancellation of the running task, and nothing of a
cancelled turn is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
from dataclasses import dataclass

from generic_framework.cli.common import EXIT_OK, err, explain, new_conversation_id
from generic_framework.cli.offline import no_recording_text, unrecorded
from generic_framework.cli.output import print_reply, print_sources
from generic_framework.cli.status import Status
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.persona import WEB_PREFIX, Persona
from generic_framework.core.reply import Reply
from generic_framework.errors import ConfigError, GLMError
from generic_framework.limits import check_text
from generic_framework.runtime import Runtime
from generic_framework.turns import Ask

__all__ = ["HELP", "interactive"]

_COMMANDS = "/persona NAME, /new, /history, /help, /quit"
HELP = f"Type a message; start it with {WEB_PREFIX} to search the web.\nCommands: {_COMMANDS}"
_QUIT = frozenset({"/quit", "/exit", "/q"})
_SEARCHING = "searching the web..."


@dataclass(slots=True)
class _Session:
    """What the session's commands change: the persona and the conversation."""

    runtime: Runtime
    persona: Persona
    conversation: str
    offline: bool


def interactive(
    runtime: Runtime, persona: str | None, conversation: str | None, offline: bool
) -> int:
    """Run the interactive session until /quit or end of input, then close ``runtime``.

    Args:
        runtime: the command's runtime, not yet opened (its settings point at the embedded
            mock when offline).
        persona: the persona to start with (``None``: the runtime's default).
        conversation: the stored conversation to continue (``None``: a new one).
        offline: answers come from the embedded mock (an unrecorded question is explained).

    Raises:
        ConfigError: no personas, or no persona of that name.
    """
    with asyncio.Runner() as runner:
        try:
            chosen = runtime.persona(persona)
            runner.run(runtime.open())
            session = _Session(runtime, chosen, conversation or new_conversation_id(), offline)
            err(f"{chosen.spec.name}: {HELP}")
            _read_eval_loop(runner, session)
        finally:
            runner.run(runtime.aclose())
    return EXIT_OK


def _read_eval_loop(runner: asyncio.Runner, session: _Session) -> None:
    prompt = "> " if sys.stdin.isatty() else ""
    _tolerate_undecodable_input()
    number = 0
    while True:
        try:
            line = input(prompt)
        except EOFError:
            return
        number += 1
        text = line.strip()
        if not text:
            continue
        try:
            check_text(text)
        except ValueError as exc:
            err(f"error: line {number} {exc}; it was not sent")
            continue
        if text.startswith("/") and not text.startswith(WEB_PREFIX):
            if not runner.run(_command(session, text)):
                return
        else:
            _run_turn(runner, session, text)


def _tolerate_undecodable_input() -> None:
    """Read bytes that are not UTF-8 as lone surrogates instead of raising.

    With the strict default a bad byte raises inside ``input()`` and loses the rest of the
    buffered input; this way the line arrives whole, :func:`check_text` refuses it, and the
    session goes on with the next line.
    """
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="surrogateescape")


def _run_turn(runner: asyncio.Runner, session: _Session, text: str) -> None:
    try:
        runner.run(_turn(session.runtime, Ask(session.persona, text, None, session.conversation)))
    except KeyboardInterrupt:
        err("\n(cancelled; nothing of this turn was stored)")
    except GLMError as exc:
        if session.offline and unrecorded(exc):
            coding = session.runtime.settings.is_coding_endpoint
            err(no_recording_text(coding, session.persona.spec.name))
        else:
            err(explain(exc, session.runtime.settings))


# ------------------------------------------------------------------------------ a turn


async def _turn(runtime: Runtime, ask: Ask) -> None:
    """One turn of the chat, asked of the runtime's turn service as a local caller."""
    status = Status()
    status.show(_SEARCHING if ask.web else "thinking...")
    ticker = asyncio.create_task(status.tick())
    renderer = _Renderer(status)
    try:
        async with contextlib.aclosing(await runtime.turns.stream(ask)) as run:
            async for event in run:
                renderer.handle(event)
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        status.clear()


class _Renderer:
    """Writes a turn's events: text live on stdout, progress on the status line."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.wrote = False

    def handle(self, event: PersonaEvent) -> None:
        """Show one event of :meth:`Persona.stream`."""
        if isinstance(event, TextDelta):
            self.status.clear()
            sys.stdout.write(event.text)
            sys.stdout.flush()
            self.wrote = True
        elif isinstance(event, RoundStarted):
            self.status.show(f"round {event.round}: {_round_label(event.tools)}")
        elif isinstance(event, ToolFinished):
            outcome = "ok" if event.ok else "failed"
            self.status.show(f"{event.name} {outcome} in {event.ms:.0f} ms; thinking...")
        elif isinstance(event, Done):
            self._done(event.reply)

    def _done(self, reply: Reply) -> None:
        self.status.clear()
        if self.wrote:
            # The streamed text is on screen already; only the sources are missing.
            sys.stdout.write("\n")
            print_sources(reply.citations, sys.stdout)
        else:
            print_reply(reply, sys.stdout)


def _round_label(tools: list[str]) -> str:
    if "web_search" in tools:
        return _SEARCHING
    return f"running {', '.join(tools) or 'tools'}"


# ------------------------------------------------------------------------------ commands


async def _command(session: _Session, text: str) -> bool:
    """Run a slash command; False when the session should end."""
    name, _, arg = text.partition(" ")
    if name in _QUIT:
        return False
    if name == "/new":
        session.conversation = new_conversation_id()
        err(f"(new conversation {session.conversation})")
    elif name == "/persona" and arg.strip():
        _switch_persona(session, arg.strip())
    elif name == "/persona":
        names = ", ".join(sorted(session.runtime.specs()))
        current = session.persona.spec.name
        err(f"(talking to {current}; personas: {names}; switch with /persona NAME)")
    elif name == "/history":
        await _print_history(session)
    elif name == "/help":
        err(HELP)
    else:
        err(f"error: unknown command {name}; the commands are {_COMMANDS}")
    return True


def _switch_persona(session: _Session, name: str) -> None:
    try:
        session.persona = session.runtime.persona(name)
    except ConfigError as exc:
        err(f"error: {exc}")
    else:
        err(f"(now talking to {session.persona.spec.name})")


async def _print_history(session: _Session) -> None:
    stored = await session.runtime.conversations.get(session.conversation) or []
    shown = [
        item.message
        for item in stored
        if item.message.role in {"user", "assistant"} and item.message.content
    ]
    if not shown:
        err(f"(nothing yet: conversation {session.conversation} has no messages)")
        return
    for message in shown:
        print(f"{message.role}: {message.content}")
    sys.stdout.flush()
