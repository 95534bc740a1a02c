"""The bots' commands, once for every platform: ``/start``, ``/help``, ``/new``,
``/persona [NAME]``, ``/usage``, and whatever a capability registers.

A :class:`CommandRegistry` holds :class:`Command` s; each platform lists them where it
registers commands (Telegram's ``setMyCommands``, Discord's slash commands, with a command's
:attr:`Command.choices` as the options of its argument) and runs one through
:meth:`CommandRegistry.run` with a :class:`CommandContext`: the runtime, the chat's
:class:`~generic_framework.chats.surface.ChatSurface`, the chat's key and who asks. A capability
adds its commands with :meth:`CommandRegistry.register` (in :func:`default_commands`, or from
another package through the ``generic_framework.chat_commands`` entry-point group, each entry a
callable given the registry), and every platform offers them.

A chat's current conversation and persona are its :class:`~generic_framework.store.chats.
ChatState` in the runtime's store: ``/new`` gives the chat a fresh conversation id (the old
conversation stays stored), ``/persona`` changes who answers from the next message on.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points

from generic_framework.chats.surface import ChatSurface
from generic_framework.quotas import remaining_today
from generic_framework.runtime import Runtime
from generic_framework.store.chats import ChatState
from generic_framework.store.users import User

__all__ = [
    "ENTRY_POINTS",
    "Command",
    "CommandContext",
    "CommandRegistry",
    "chat_state",
    "default_commands",
    "new_conversation_id",
    "persona_names",
    "set_persona",
]

ENTRY_POINTS = "generic_framework.chat_commands"
"""The entry-point group of commands from other packages (callables given the registry)."""
_NAME = re.compile(r"[a-z0-9_]{1,32}")


@dataclass(frozen=True, slots=True)
class CommandContext:
    """What a command needs: the runtime, where to answer, which chat, and who asks."""

    runtime: Runtime
    surface: ChatSurface
    platform: str
    key: str
    user: User

    @property
    def private(self) -> bool:
        """True in a private chat."""
        return self.surface.chat.private

    async def say(self, text: str) -> None:
        """Answer with one plain message."""
        await self.surface.say(text)


CommandRun = Callable[[CommandContext, str], Awaitable[None]]
"""A command's work: given the context and the text after the command."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command.

    Attributes:
        name: lowercase letters, digits and ``_`` (``persona``).
        description: one line for the platform's command list.
        run: the work.
        argument: the name of its one optional argument (``name``), or ``None``.
        choices: the values the argument may take (offered by platforms with choices).
    """

    name: str
    description: str
    run: CommandRun
    argument: str | None = None
    choices: Callable[[Runtime], list[str]] | None = None


class CommandRegistry:
    """The commands of every platform (see the module's docstring)."""

    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def register(self, command: Command) -> None:
        """Add ``command``.

        Raises:
            ValueError: the name is not a command name, or is taken.
        """
        if not _NAME.fullmatch(command.name):
            raise ValueError(f"{command.name!r} is not a command name (a-z, 0-9, _)")
        if command.name in self._commands:
            raise ValueError(f"the command /{command.name} is registered already")
        self._commands[command.name] = command

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def get(self, name: str) -> Command | None:
        """The command named ``name``, if any."""
        return self._commands.get(name)

    def help_text(self, private: bool) -> str:
        """What ``/help`` says (and ``/start`` after its greeting)."""
        lines = [
            "Write a message and I answer it. Start it with // to search the web first, "
            "for example: // weather in Nanaimo today",
            "",
            *(f"/{command.name} - {command.description}" for command in self),
        ]
        if not private:
            lines += [
                "",
                "In a group I answer only when mentioned, replied to, given a command, or a "
                "message that starts with //.",
            ]
        return "\n".join(lines)

    async def run(self, ctx: CommandContext, name: str, argument: str) -> None:
        """Answer the command ``name`` (an unknown one gets the help)."""
        command = self.get(name)
        if command is None:
            await ctx.say(self.help_text(ctx.private))
            return
        await command.run(ctx, argument)


def new_conversation_id() -> str:
    """A fresh conversation id (``ch`` and 12 hex digits)."""
    return "ch" + uuid.uuid4().hex[:12]


async def chat_state(runtime: Runtime, platform: str, key: str) -> ChatState:
    """The chat's state, made (a fresh conversation, the default persona) on first use."""
    store = runtime.chat_states
    state = await store.chat_state(platform, key)
    if state is None:
        state = ChatState(new_conversation_id(), None)
        await store.set_chat_state(platform, key, state)
    return state


def persona_names(runtime: Runtime) -> list[str]:
    """The personas a chat may choose, sorted."""
    return sorted(runtime.specs(required=True))


async def set_persona(runtime: Runtime, platform: str, key: str, name: str) -> bool:
    """Make ``name`` the chat's persona; False (nothing changed) when there is none so named."""
    if name not in persona_names(runtime):
        return False
    state = await chat_state(runtime, platform, key)
    fresh = ChatState(state.conversation_id, name)
    await runtime.chat_states.set_chat_state(platform, key, fresh)
    return True


def _current(runtime: Runtime, state: ChatState) -> str:
    if state.persona is not None and state.persona in runtime.specs():
        return state.persona
    return runtime.spec(None).name


def default_commands() -> CommandRegistry:
    """The built-in commands, then those of the ``generic_framework.chat_commands`` group."""
    registry = CommandRegistry()

    async def start(ctx: CommandContext, argument: str) -> None:
        await ctx.say(f"Hello! {registry.help_text(ctx.private)}")

    async def help_(ctx: CommandContext, argument: str) -> None:
        await ctx.say(registry.help_text(ctx.private))

    for command in (
        Command("start", "What this bot does", start),
        Command("help", "How to ask, and the commands", help_),
        Command("new", "Start a fresh conversation", _new),
        Command("persona", "Choose who answers", _persona, "name", persona_names),
        Command("usage", "What is left of today's budget", _usage),
    ):
        registry.register(command)
    for entry in entry_points(group=ENTRY_POINTS):
        entry.load()(registry)
    return registry


async def _new(ctx: CommandContext, argument: str) -> None:
    state = await chat_state(ctx.runtime, ctx.platform, ctx.key)
    fresh = ChatState(new_conversation_id(), state.persona)
    await ctx.runtime.chat_states.set_chat_state(ctx.platform, ctx.key, fresh)
    await ctx.say("Started a new conversation: I have forgotten what was said before.")


async def _persona(ctx: CommandContext, argument: str) -> None:
    name = argument.strip()
    if await set_persona(ctx.runtime, ctx.platform, ctx.key, name):
        await ctx.say(f"{name} answers from now on.")
        return
    state = await chat_state(ctx.runtime, ctx.platform, ctx.key)
    current = _current(ctx.runtime, state)
    first = f"There is no persona named {name!r}. " if name else ""
    text = f"{first}Now answering: {current}. Choose a persona:"
    await ctx.surface.choose(text, persona_names(ctx.runtime))


async def _usage(ctx: CommandContext, argument: str) -> None:
    left = await remaining_today(ctx.user, ctx.runtime.users, ctx.runtime.settings)
    lines = [f"Today (UTC) you used {left.used_tokens} tokens and {left.used_searches} searches."]
    lines.append(
        "Tokens: no daily limit." if left.tokens is None else f"Tokens left today: {left.tokens}."
    )
    lines.append(
        "Web searches: no daily limit."
        if left.searches is None
        else f"Web searches left today: {left.searches}."
    )
    if left.rpm is not None:
        lines.append(f"At most {left.rpm} messages a minute.")
    await ctx.say("\n".join(lines))
