"""The bot's commands: ``/start``, ``/help``, ``/new``, ``/persona [NAME]`` and ``/usage``.

Each one answers with one short message (``/persona`` without a name with an inline keyboard
of the personas; pressing a button is a callback query, answered by :func:`choose_persona`).
A chat's current conversation and persona are its :class:`~generic_framework.store.chats.
ChatState` in the runtime's store: ``/new`` gives the chat a fresh conversation id (the old
conversation stays stored), ``/persona`` changes who answers from the next message on.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup

from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.chats.telegram.live import ChatRef
from generic_framework.quotas import remaining_today
from generic_framework.runtime import Runtime
from generic_framework.store.chats import ChatState
from generic_framework.store.users import User

__all__ = [
    "COMMANDS",
    "PERSONA_DATA",
    "PLATFORM",
    "CommandContext",
    "chat_state",
    "choose_persona",
    "help_text",
    "new_conversation_id",
    "run_command",
]

PLATFORM = "telegram"
"""The platform's name in the store (chat states, claimed updates, user names)."""
PERSONA_DATA = "persona:"
"""How a persona button's callback data starts (``persona:scout``)."""
COMMANDS = (
    ("start", "What this bot does"),
    ("help", "How to ask, and the commands"),
    ("new", "Start a fresh conversation"),
    ("persona", "Choose who answers"),
    ("usage", "What is left of today's budget"),
)
"""The commands registered with ``setMyCommands`` (name, description)."""


def help_text(private: bool) -> str:
    """What ``/help`` says (and ``/start`` after its greeting)."""
    lines = [
        "Write a message and I answer it. Start it with // to search the web first, "
        "for example: // weather in Nanaimo today",
        "",
        *(f"/{name} - {text}" for name, text in COMMANDS),
    ]
    if not private:
        lines += [
            "",
            "In a group I answer only when mentioned, replied to, given a command, or a "
            "message that starts with //.",
        ]
    return "\n".join(lines)


def new_conversation_id() -> str:
    """A fresh conversation id (``tg`` and 12 hex digits)."""
    return "tg" + uuid.uuid4().hex[:12]


async def chat_state(runtime: Runtime, key: str) -> ChatState:
    """The chat's state, made (a fresh conversation, the default persona) on first use."""
    store = runtime.chat_states
    state = await store.chat_state(PLATFORM, key)
    if state is None:
        state = ChatState(new_conversation_id(), None)
        await store.set_chat_state(PLATFORM, key, state)
    return state


@dataclass(frozen=True, slots=True)
class CommandContext:
    """What a command needs: the runtime, the Bot API, where to answer, and who asks."""

    runtime: Runtime
    bot: Bot
    delivery: Delivery
    chat: ChatRef
    key: str
    user: User


async def _say(ctx: CommandContext, text: str, markup: InlineKeyboardMarkup | None = None) -> None:
    await ctx.delivery.send(
        "sendMessage",
        lambda: ctx.bot.send_message(
            ctx.chat.chat_id, text, reply_markup=markup, message_thread_id=ctx.chat.thread_id
        ),
    )


async def run_command(ctx: CommandContext, name: str, argument: str) -> None:
    """Answer the command ``name`` (an unknown one gets the help)."""
    if name == "start":
        await _say(ctx, f"Hello! {help_text(ctx.chat.private)}")
    elif name == "new":
        state = await chat_state(ctx.runtime, ctx.key)
        fresh = ChatState(new_conversation_id(), state.persona)
        await ctx.runtime.chat_states.set_chat_state(PLATFORM, ctx.key, fresh)
        await _say(ctx, "Started a new conversation: I have forgotten what was said before.")
    elif name == "persona":
        await _persona(ctx, argument.strip())
    elif name == "usage":
        await _say(ctx, await _usage(ctx))
    else:
        await _say(ctx, help_text(ctx.chat.private))


def _keyboard(names: list[str]) -> InlineKeyboardMarkup:
    buttons = [
        InlineKeyboardButton(name, callback_data=f"{PERSONA_DATA}{name}")
        for name in names
        if len(f"{PERSONA_DATA}{name}".encode()) <= 64  # Telegram's limit for callback data
    ]
    return InlineKeyboardMarkup([buttons[i : i + 2] for i in range(0, len(buttons), 2)])


async def _persona(ctx: CommandContext, name: str) -> None:
    names = sorted(ctx.runtime.specs(required=True))
    if name in names:
        await _set_persona(ctx.runtime, ctx.key, name)
        await _say(ctx, f"{name} answers from now on.")
        return
    state = await chat_state(ctx.runtime, ctx.key)
    current = _current(ctx.runtime, state)
    first = f"There is no persona named {name!r}. " if name else ""
    await _say(ctx, f"{first}Now answering: {current}. Choose a persona:", _keyboard(names))


def _current(runtime: Runtime, state: ChatState) -> str:
    if state.persona is not None and state.persona in runtime.specs():
        return state.persona
    return runtime.spec(None).name


async def _set_persona(runtime: Runtime, key: str, name: str) -> None:
    state = await chat_state(runtime, key)
    await runtime.chat_states.set_chat_state(PLATFORM, key, ChatState(state.conversation_id, name))


async def choose_persona(ctx: CommandContext, query_id: str, data: str, message_id: int) -> None:
    """A persona button was pressed: set it, answer the query, and say so in its message."""
    name = data.removeprefix(PERSONA_DATA)
    known = name in ctx.runtime.specs(required=True)
    if known:
        await _set_persona(ctx.runtime, ctx.key, name)
    note = f"{name} answers from now on." if known else f"There is no persona named {name!r}."
    await ctx.delivery.send(
        "answerCallbackQuery", lambda: ctx.bot.answer_callback_query(query_id, text=note)
    )
    await ctx.delivery.send(
        "editMessageText",
        lambda: ctx.bot.edit_message_text(note, chat_id=ctx.chat.chat_id, message_id=message_id),
    )


async def _usage(ctx: CommandContext) -> str:
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
    return "\n".join(lines)
