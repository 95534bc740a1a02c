"""``/memory`` and ``/forget`` on Discord: the real ``generic-framework discord`` process with the
keeper persona (personas/examples/keeper.toml), the mock Z.AI and the fake Discord. They are
slash commands like the others (``/forget`` with an optional ``id``), and typed in a DM too. A
fact the persona remembers in a DM is listed with the command that deletes it, deleted one by
one or all at once, and never shown or erased in a guild channel, whose memory is the
channel's own (what the persona remembers there is listed and erased there, by any member)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from discord_payloads import BOT_ID, user
from discord_processes import BUNDLED, PERSONAS, BotProcess, Process, bot_env, mock_process
from fake_discord import FakeDiscord

pytestmark = pytest.mark.timeout(120)

OWNER, MEMBER = 1001, 1002
DM, GENERAL = 5001, 6001
FACT = "The user's cat is called Miso."
REMEMBER = "Remember that my cat is called Miso."
REMEMBERED = "I will remember that your cat is called Miso"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    with mock_process(tmp_path_factory.mktemp("mock"), fixtures=[BUNDLED]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_discord: FakeDiscord) -> Iterator[BotProcess]:
    fake_discord.add_channel(GENERAL, "general")
    env = bot_env(
        tmp_path,
        mock,
        fake_discord,
        PERSONAS_DIR=str(PERSONAS / "examples"),
        BOT_DEFAULT_PERSONA="keeper",
        DISCORD_ALLOWED_USERS=str(OWNER),
        DISCORD_ALLOWED_CHANNELS=str(GENERAL),
    )
    with BotProcess(env, tmp_path / "bot.log", fake_discord) as running:
        yield running
    assert fake_discord.token not in running.text()


def shown(fake: FakeDiscord, channel: int, needle: str, times: int = 1) -> str:
    """The ``times``-th of the bot's messages in ``channel`` showing ``needle`` (unescaped)."""
    found: list[str] = []

    def there() -> bool:
        texts = [m["content"].replace("\\", "") for m in fake.bot_messages(channel)]
        found[:] = [text for text in texts if needle in text]
        return len(found) >= times

    fake.wait_for(there)
    return found[times - 1]


def test_memory_and_forget_are_slash_commands_from_the_registry(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    registered = {c["name"]: c for c in fake_discord.commands}
    assert {"memory", "forget"} <= set(registered)
    assert registered["memory"].get("options", []) == []
    (option,) = registered["forget"]["options"]
    assert option["name"] == "id" and not option["required"]
    assert "choices" not in option or not option["choices"]


def test_memory_lists_deletes_one_and_forget_erases_all(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    fake = fake_discord
    owner: dict[str, Any] = fake.person(OWNER, "owner")
    member = fake.person(MEMBER, "member")
    fake.command("memory", owner, DM, guild=False)
    shown(fake, DM, "keeper keeps nothing about you")
    fake.say(owner, DM, REMEMBER)
    shown(fake, DM, REMEMBERED)
    fake.say(owner, DM, "/memory")  # typed in a DM, as on the slash command
    listing = shown(fake, DM, FACT)
    (memory_id,) = re.findall(r"delete: /forget (mem_[0-9a-f]{16})", listing)
    assert "/forget alone erases them all." in listing
    # In a guild channel the memory is the channel's: the owner's fact is not shown or erased.
    fake.command("memory", owner, GENERAL, guild=True)
    shown(fake, GENERAL, "keeper keeps nothing about this group")
    me = user(BOT_ID, "persona-bot", bot=True)
    fake.say(owner, GENERAL, f"<@{BOT_ID}> /forget {memory_id}", guild=True, mentions=[me])
    shown(fake, GENERAL, f"keeper keeps no fact {memory_id}")
    # What the persona remembers in the channel is the channel's, listed and erased there.
    fake.say(owner, GENERAL, f"<@{BOT_ID}> {REMEMBER}", guild=True, mentions=[me])
    shown(fake, GENERAL, REMEMBERED)
    fake.command("memory", member, GENERAL, guild=True)
    group_listing = shown(fake, GENERAL, "keeps 1 fact(s) about this group")
    assert memory_id not in group_listing and FACT in group_listing
    fake.command("forget", member, GENERAL, guild=True)
    shown(fake, GENERAL, "keeper forgot 1 fact(s).")
    fake.command("memory", owner, DM, guild=False)
    assert FACT in shown(fake, DM, FACT, times=2)
    # One by one, then all at once.
    fake.command("forget", owner, DM, guild=False, id="mem_0000000000000000")
    shown(fake, DM, "keeper keeps no fact mem_0000000000000000")
    fake.command("forget", owner, DM, guild=False, id="not an id")
    shown(fake, DM, "'not an id' is not a fact's id")
    fake.command("forget", owner, DM, guild=False, id=memory_id)
    shown(fake, DM, f"Forgotten: {FACT}")
    fake.say(owner, DM, REMEMBER)
    shown(fake, DM, REMEMBERED, times=2)
    fake.command("forget", owner, DM, guild=False)
    shown(fake, DM, "keeper forgot 1 fact(s).")
    fake.command("memory", owner, DM, guild=False)
    shown(fake, DM, "keeper keeps nothing about you", times=2)
