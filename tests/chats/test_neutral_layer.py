"""The platform-neutral chat layer on its own: the platform registry that ``serve`` mounts
webhooks from, a capability's command registered once and answered on a surface, an answer
packed for a platform whose limit counts its markup, and the per-platform update counter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from generic_framework.chats.access import Access, Names, stranger_text
from generic_framework.chats.answering import TEXT_ONLY, Answerer
from generic_framework.chats.commands import Command, CommandContext, default_commands
from generic_framework.chats.markup import Run, code_points
from generic_framework.chats.message import Attachment, ChatRef, Incoming
from generic_framework.chats.packing import render
from generic_framework.chats.platforms import platforms, webhook_factories
from generic_framework.config import Settings
from generic_framework.core.reply import Citation
from generic_framework.core.spec import PersonaSpec
from generic_framework.runtime import Runtime
from generic_framework.store import SQLiteStore
from generic_framework.telemetry.metrics import Metrics
from generic_framework.testing import FunctionModel

NAMES = Names("Chatland", "CHATLAND_ALLOWED_USERS", "CHATLAND_ALLOWED_ROOMS", "room")


class RecordingSurface:
    """A surface that keeps what it was asked to say (the layer's contract, nothing more)."""

    def __init__(self, chat: ChatRef) -> None:
        self._chat = chat
        self.said: list[str] = []
        self.offered: list[Sequence[str]] = []

    @property
    def chat(self) -> ChatRef:
        return self._chat

    @property
    def can_draft(self) -> bool:
        return False

    async def say(self, text: str) -> None:
        self.said.append(text)

    async def choose(self, text: str, options: Sequence[str]) -> None:
        self.said.append(text)
        self.offered.append(options)

    async def post(self, shown: str) -> int | None:
        self.said.append(shown)
        return len(self.said)

    async def update(self, message_id: int, shown: str) -> None:
        self.said[message_id - 1] = shown

    async def replace(self, message_id: int, text: str) -> None:
        self.said[message_id - 1] = text

    async def draft(self, shown: str) -> bool:
        return False

    async def typing(self) -> None:
        return None

    async def deliver(self, chunks: Sequence[str], *, first_into: int | None) -> None:
        for index, chunk in enumerate(chunks):
            if index == 0 and first_into is not None:
                self.said[first_into - 1] = chunk
            else:
                self.said.append(chunk)

    def render_answer(self, content: str, citations: Sequence[Citation]) -> list[str]:
        return [content]

    def render_draft(self, text: str) -> str:
        return text

    def escape(self, text: str) -> str:
        return text


def test_telegram_is_registered_and_serve_mounts_only_a_configured_webhook() -> None:
    assert "telegram" in platforms()
    assert webhook_factories({}) == []
    configured = {
        "TELEGRAM_BOT_TOKEN": "123:abcdefghijklmnop",
        "TELEGRAM_WEBHOOK_URL": "https://bot.example.org/hook/tg",
        "TELEGRAM_WEBHOOK_SECRET": "s3cret",
    }
    assert len(webhook_factories(configured)) == 1


def test_a_command_name_is_registered_once() -> None:
    registry = default_commands()

    async def nothing(ctx: CommandContext, argument: str) -> None:
        return None

    with pytest.raises(ValueError, match="registered already"):
        registry.register(Command("usage", "again", nothing))
    with pytest.raises(ValueError, match="not a command name"):
        registry.register(Command("Bad-Name", "no", nothing))


@pytest.fixture
async def runtime(tmp_path: Path) -> Runtime:
    settings = Settings.defaults(api_key="k", data_dir=tmp_path / "d", personas_dir=tmp_path / "p")
    specs = {
        "helper": PersonaSpec(name="helper", system_prompt="You help."),
        "scout": PersonaSpec(name="scout", system_prompt="You scout."),
    }
    store = SQLiteStore(tmp_path / "chats.db")
    await store.open()
    return Runtime(settings, store=store, model=FunctionModel(lambda r: "hi"), specs=specs)


async def test_a_capability_s_command_is_offered_and_run_on_any_platform(runtime: Runtime) -> None:
    registry = default_commands()

    async def echo(ctx: CommandContext, argument: str) -> None:
        await ctx.say(f"{ctx.platform}:{ctx.user.name} said {argument}")

    registry.register(Command("echo", "Say it back", echo))
    answerer = Answerer(
        runtime, "chatland", Access(None, None), NAMES, interval=1, offline=False, commands=registry
    )
    surface = RecordingSurface(ChatRef(7, private=True))
    incoming = Incoming("chatland", 42, surface.chat, "7", "/echo hi", "echo", "hi")
    async with runtime:
        assert await answerer.answer(incoming, surface) == "answered"
        help_ = Incoming("chatland", 42, surface.chat, "7", "/help", "help")
        await answerer.answer(help_, surface)
        persona = Incoming("chatland", 42, surface.chat, "7", "/persona", "persona")
        await answerer.answer(persona, surface)
    assert surface.said[0] == "chatland:chatland:42 said hi"
    assert "/echo - Say it back" in surface.said[1]
    assert surface.offered == [["helper", "scout"]]


async def test_a_stranger_and_a_file_get_their_short_replies_and_no_model_call(
    runtime: Runtime,
) -> None:
    model = runtime.model
    answerer = Answerer(
        runtime, "chatland", Access(frozenset({1}), frozenset()), NAMES, interval=1, offline=False
    )
    surface = RecordingSurface(ChatRef(-5))
    stranger = Incoming("chatland", 2, surface.chat, "-5", "hello")

    async def nothing() -> bytes:
        return b""

    photo = Attachment("f1", "image/png", 3, None, nothing)
    friend = Incoming("chatland", 1, surface.chat, "-5", "look", attachments=(photo,))
    async with runtime:
        assert await answerer.answer(stranger, surface) == "refused"
        assert await answerer.answer(friend, surface) == "refused"
    assert surface.said == [stranger_text(NAMES, 2, -5, False), TEXT_ONLY]
    assert "CHATLAND_ALLOWED_ROOMS" in surface.said[0] and "room, -5" in surface.said[0]
    assert isinstance(model, FunctionModel) and model.requests == []


def test_a_group_s_allowlist_lets_its_chats_in() -> None:
    access = Access(frozenset(), frozenset(), frozenset({900}))
    assert access.allows(5, 77, 900)
    assert not access.allows(5, 77, 901)
    assert not access.allows(5, 77)
    assert Access(frozenset(), frozenset()).closed


def test_markup_that_counts_against_the_limit_is_packed_again_until_it_fits() -> None:
    def starred(runs: Sequence[Run]) -> str:  # markup as long as its text: stars round words
        return "".join(f"**{run.text}**" if run.tags else run.text for run in runs)

    paragraphs = "\n\n".join(f"**bold {n}** " + "word " * 30 for n in range(40))
    chunks = render(paragraphs, [], starred, 500, units=code_points, markup_counts=True)
    assert len(chunks) > 1 and all(len(chunk) <= 500 for chunk in chunks)
    assert all(chunk.count("**") % 2 == 0 for chunk in chunks)


def test_updates_are_counted_per_platform() -> None:
    metrics = Metrics(process=False)
    metrics.chat_update("chatland", "answered")
    metrics.chat_update("telegram", "refused")
    text = metrics.exposition()[0].decode()
    assert (
        'generic_framework_chat_updates_total{outcome="answered",platform="chatland"} 1.0' in text
    )
    assert 'generic_framework_telegram_updates_total{outcome="refused"} 1.0' in text
