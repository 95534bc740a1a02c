"""``/memory`` and ``/forget`` in Telegram: the real ``generic-framework telegram`` process with
the keeper persona (personas/examples/keeper.toml), the mock Z.AI and the fake Bot API. A fact
the persona remembers in a private chat is listed with the command that deletes it, deleted
one by one or all at once, and never shown in a group, whose memory is the group's own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from bot_processes import BUNDLED, OWNER, PERSONAS, BotProcess, Process, bot_env, mock_process
from fake_bot_api import Call, FakeBotAPI

pytestmark = pytest.mark.timeout(120)

GROUP = -1001234567890
FACT = "The user's cat is called Miso."


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    with mock_process(tmp_path_factory.mktemp("mock"), fixtures=[BUNDLED]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI) -> Iterator[BotProcess]:
    env = bot_env(
        tmp_path,
        mock,
        fake_bot_api,
        PERSONAS_DIR=str(PERSONAS / "examples"),
        BOT_DEFAULT_PERSONA="keeper",
        TELEGRAM_ALLOWED_CHATS=str(GROUP),
    )
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as running:
        yield running


def said(fake: FakeBotAPI, needle: str, chat: int = OWNER, times: int = 1) -> Call:
    """The ``times``-th message to ``chat`` holding ``needle``, once it was sent."""

    def sent(call: Call) -> bool:
        return (
            call.method == "sendMessage"
            and call.params["chat_id"] == chat
            and needle in call.params["text"]
            and call.status == 200
        )

    fake.wait_for(lambda c: sent(c) and len([x for x in fake.calls if sent(x)]) >= times)
    return [x for x in fake.calls if sent(x)][times - 1]


def test_memory_lists_deletes_one_and_forget_erases_all(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake = fake_bot_api
    commands = [c["command"] for c in fake.wait_for(
        lambda c: c.method == "setMyCommands"
    ).params["commands"]]  # fmt: skip
    assert {"memory", "forget"} <= set(commands)
    fake.push(fake.text("/memory"))
    said(fake, "keeper keeps nothing about you")
    fake.push(fake.text("Remember that my cat is called Miso."))
    said(fake, "I will remember that your cat is called Miso")
    fake.push(fake.text("/memory"))
    listing = said(fake, FACT).params["text"]
    (memory_id,) = re.findall(r"delete: /forget (mem_[0-9a-f]{16})", listing)
    # In a group the memory is the group's: the private fact is not shown there.
    fake.push(fake.text("/memory", chat_id=GROUP, chat_type="supergroup"))
    said(fake, "keeper keeps nothing about this group", chat=GROUP)
    fake.push(fake.text("/forget", chat_id=GROUP, chat_type="supergroup"))
    said(fake, "keeper forgot 0 fact(s).", chat=GROUP)
    # One by one, then all at once.
    fake.push(fake.text("/forget mem_0000000000000000"))
    said(fake, "keeper keeps no fact mem_0000000000000000")
    fake.push(fake.text(f"/forget {memory_id}"))
    said(fake, f"Forgotten: {FACT}")
    fake.push(fake.text("Remember that my cat is called Miso."))
    said(fake, "I will remember that your cat is called Miso", times=2)
    fake.push(fake.text("/forget"))
    said(fake, "keeper forgot 1 fact(s).")
    fake.push(fake.text("/memory"))
    said(fake, "keeper keeps nothing about you", times=2)
