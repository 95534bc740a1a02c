"""The bot end to end in groups and forum topics: it answers only what is meant for it.

A group message is for the bot when it mentions it, replies to it, is a command of it, or
starts with ``//``; anything else gets silence and no model call. Groups get edits, never
drafts (drafts are for private chats).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bot_processes import (
    BUNDLED,
    FIXTURES,
    BotProcess,
    Process,
    bot_env,
    mock_process,
    mock_requests,
)
from fake_bot_api import Call, FakeBotAPI

pytestmark = pytest.mark.timeout(120)

GROUP = -1001234567890
QUESTION = "What is the capital of Canada?"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    with mock_process(tmp, fixtures=[BUNDLED, FIXTURES]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI) -> Iterator[BotProcess]:
    env = bot_env(tmp_path, mock, fake_bot_api)
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as running:
        yield running
    assert fake_bot_api.token.partition(":")[2] not in running.text()


def in_group(fake: FakeBotAPI, text: str, **extra: object) -> dict[str, object]:
    return fake.text(text, chat_id=GROUP, chat_type="supergroup", **extra)  # type: ignore[arg-type]


def sent_to(fake: FakeBotAPI, chat: int) -> list[Call]:
    return [c for c in fake.calls if c.params.get("chat_id") == chat and c.method != "getUpdates"]


def answered(fake: FakeBotAPI, needle: str, chat: int = GROUP) -> Call:
    return fake.wait_for(
        lambda c: (
            c.method in ("sendMessage", "editMessageText")
            and c.params["chat_id"] == chat
            and c.params.get("parse_mode") == "HTML"
            and needle in c.params["text"]
        )
    )


def test_a_group_message_not_meant_for_the_bot_gets_silence(
    fake_bot_api: FakeBotAPI, bot: BotProcess, mock: Process
) -> None:
    before = mock_requests(mock)
    fake_bot_api.push(in_group(fake_bot_api, QUESTION))
    fake_bot_api.push(in_group(fake_bot_api, "/help@some_other_bot"))
    # A private message after them: once it is answered, the group's were handled too.
    fake_bot_api.push(fake_bot_api.text("/help"))
    fake_bot_api.wait_for(lambda c: c.method == "sendMessage" and c.params["chat_id"] == 1001)
    time.sleep(0.5)
    assert sent_to(fake_bot_api, GROUP) == []
    assert mock_requests(mock) == before


def test_a_mention_is_answered_without_the_mention_and_by_edits(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(in_group(fake_bot_api, f"@persona_test_bot {QUESTION}"))
    answered(fake_bot_api, "Ottawa")
    assert not [c for c in sent_to(fake_bot_api, GROUP) if c.method == "sendMessageDraft"]


def test_a_reply_to_the_bot_a_command_and_a_web_question_are_answered(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(in_group(fake_bot_api, "/help@persona_test_bot"))
    help_call = fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and c.params["chat_id"] == GROUP
    )
    assert "/persona" in help_call.params["text"]
    bots_message = fake_bot_api.chat_messages(GROUP)[-1]
    fake_bot_api.push(in_group(fake_bot_api, QUESTION, reply_to_message=bots_message))
    answered(fake_bot_api, "Ottawa")
    fake_bot_api.push(in_group(fake_bot_api, "// what's the weather in Nanaimo?"))
    answered(fake_bot_api, "Nanaimo is mild")


def test_a_forum_topic_is_answered_in_its_topic(fake_bot_api: FakeBotAPI, bot: BotProcess) -> None:
    fake_bot_api.push(in_group(fake_bot_api, f"@persona_test_bot {QUESTION}", thread_id=77))
    final = answered(fake_bot_api, "Ottawa")
    first = next(c for c in sent_to(fake_bot_api, GROUP) if c.method == "sendMessage")
    assert first.params["message_thread_id"] == 77
    assert final.status == 200
