"""The bot end to end in a private chat: the real ``generic-framework telegram`` process (debug
logging on), the mock Z.AI and the fake Bot API; nothing of our own replaced.

Every bot process's whole output is checked for the token when its test ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from bot_processes import (
    BUNDLED,
    FIXTURES,
    OWNER,
    STRANGER,
    BotProcess,
    Process,
    bot_env,
    mock_process,
    mock_requests,
)
from fake_bot_api import Call, FakeBotAPI

from generic_framework.store import SQLiteStore

pytestmark = pytest.mark.timeout(120)

NANAIMO = "// what's the weather in Nanaimo?"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    with mock_process(tmp, fixtures=[BUNDLED, FIXTURES]) as server:
        yield server


def assert_no_token(text: str, fake: FakeBotAPI) -> None:
    secret = fake.token.partition(":")[2]
    assert fake.token not in text
    assert secret not in text


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI) -> Iterator[BotProcess]:
    env = bot_env(tmp_path, mock, fake_bot_api)
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as running:
        yield running
    assert "HTTP Request: POST" in running.text()  # httpx's request lines were logged...
    assert_no_token(running.text(), fake_bot_api)  # ...without the token


def final_answer(fake: FakeBotAPI, chat_id: int = OWNER) -> Call:
    return fake.wait_for(
        lambda c: (
            c.method == "sendMessage"
            and c.params["chat_id"] == chat_id
            and c.params.get("parse_mode") == "HTML"
            and c.status == 200
        )
    )


def test_a_web_question_streams_a_draft_then_answers_with_linked_sources(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(fake_bot_api.text(NANAIMO))
    final = final_answer(fake_bot_api)
    text = final.params["text"]
    assert "Nanaimo is mild and cloudy" in text
    assert '<a href="https://' in text  # [n] linked, and the sources listed
    assert final.params["link_preview_options"] == {"is_disabled": True}
    drafts = fake_bot_api.calls_to("sendMessageDraft")
    assert drafts and drafts[0].params["text"] == "Searching the web…"
    assert fake_bot_api.calls_to("sendChatAction")[0].params["action"] == "typing"
    commands = [c["command"] for c in fake_bot_api.calls_to("setMyCommands")[0].params["commands"]]
    assert commands == ["start", "help", "new", "persona", "usage", "memory", "forget"]


def test_without_drafts_the_answer_is_one_message_edited(tmp_path: Path, mock: Process) -> None:
    with FakeBotAPI(drafts_supported=False) as fake:
        env = bot_env(tmp_path, mock, fake)
        with BotProcess(env, tmp_path / "bot.log", fake) as running:
            fake.push(fake.text(NANAIMO))
            fake.wait_for(lambda c: c.method == "editMessageText" and "Sources" in c.params["text"])
            messages = fake.chat_messages(OWNER)
            assert len([m for m in messages if m["from"]["is_bot"]]) == 1
            assert "Nanaimo is mild" in messages[-1]["text"]
        assert_no_token(running.text(), fake)


def test_a_stranger_gets_their_id_and_no_model_call(
    fake_bot_api: FakeBotAPI, bot: BotProcess, mock: Process
) -> None:
    before = mock_requests(mock)
    fake_bot_api.push(fake_bot_api.text(NANAIMO, user_id=STRANGER))
    reply = fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and c.params["chat_id"] == STRANGER
    )
    assert str(STRANGER) in reply.params["text"]
    assert "TELEGRAM_ALLOWED_USERS" in reply.params["text"]
    assert mock_requests(mock) == before
    assert not [c for c in fake_bot_api.calls if c.method == "sendMessageDraft"]


def test_a_file_that_is_not_a_picture_gets_a_polite_reply(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(fake_bot_api.document("notes", "application/zip", 10))
    reply = fake_bot_api.wait_for(lambda c: c.method == "sendMessage")
    assert "only read text and pictures" in reply.params["text"]


def _chat_state(tmp: Path, key: str) -> str:
    async def read() -> str:
        store = SQLiteStore(tmp / "data" / "conversations.sqlite3")
        try:
            state = await store.chat_state("telegram", key)
            assert state is not None
            return state.conversation_id
        finally:
            store.close()

    return asyncio.run(read())


def test_new_starts_a_fresh_conversation_and_persona_offers_a_keyboard(
    tmp_path: Path, fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(fake_bot_api.text("What is the capital of Canada?"))
    final_answer(fake_bot_api)
    first = _chat_state(tmp_path, str(OWNER))
    fake_bot_api.push(fake_bot_api.text("/new"))
    fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and "new conversation" in c.params["text"]
    )
    assert _chat_state(tmp_path, str(OWNER)) != first

    fake_bot_api.push(fake_bot_api.text("/persona"))
    menu = fake_bot_api.wait_for(lambda c: c.method == "sendMessage" and "reply_markup" in c.params)
    buttons = [
        b["callback_data"] for row in menu.params["reply_markup"]["inline_keyboard"] for b in row
    ]
    assert buttons == ["persona:helper", "persona:scout"]
    fake_bot_api.push(fake_bot_api.callback("persona:helper"))
    answered = fake_bot_api.wait_for(lambda c: c.method == "answerCallbackQuery")
    assert "helper" in answered.params["text"]
    fake_bot_api.wait_for(lambda c: c.method == "editMessageText" and "helper" in c.params["text"])


def test_a_long_answer_is_split_into_messages_telegram_accepts(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(fake_bot_api.text("Tell me everything about the tides."))
    fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and "Paragraph 30." in c.params["text"]
    )
    sent = [c for c in fake_bot_api.calls_to("sendMessage") if c.params.get("parse_mode") == "HTML"]
    assert len(sent) >= 3
    assert all(c.status == 200 and len(c.params["text"]) <= 4096 for c in sent)
    shown = "\n\n".join(m["text"] for m in fake_bot_api.chat_messages(OWNER) if m["from"]["is_bot"])
    for number in range(1, 31):
        assert f"Paragraph {number}." in shown


def test_markup_in_an_answer_is_shown_as_text(fake_bot_api: FakeBotAPI, bot: BotProcess) -> None:
    fake_bot_api.push(fake_bot_api.text("Repeat some HTML back to me."))
    final = final_answer(fake_bot_api)
    assert "&lt;script&gt;" in final.params["text"]
    assert "<script>" not in final.params["text"]
    shown = fake_bot_api.chat_messages(OWNER)[-1]
    assert "<script>alert(1)</script>" in shown["text"]  # what the user sees: the text itself
    assert '<a href="https://evil.example">' in shown["text"]


def test_a_429_is_waited_out_for_its_retry_after(fake_bot_api: FakeBotAPI, bot: BotProcess) -> None:
    fake_bot_api.fail("sendMessage", status=429, retry_after=2)
    fake_bot_api.push(fake_bot_api.text("What is the capital of Canada?"))
    final_answer(fake_bot_api)
    refused, retried = [c for c in fake_bot_api.calls_to("sendMessage")][:2]
    assert refused.status == 429 and retried.status == 200
    assert retried.at - refused.at >= 2.0


def test_an_upstream_refusal_is_a_short_message_and_a_log_line_with_request_ids(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.push(fake_bot_api.text("Write a haiku about the sea."))
    said = fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and "model" in c.params["text"]
    )
    assert "owner" in said.params["text"]  # an account problem: the owner sees why in the log
    fake_bot_api.push(fake_bot_api.text("/usage"))
    usage = fake_bot_api.wait_for(
        lambda c: c.method == "sendMessage" and "Today" in c.params["text"]
    )
    assert "no daily limit" in usage.params["text"]
    lines = [line for line in bot.text().splitlines() if "failed upstream" in line]
    assert len(lines) == 1
    assert "request tg-" in lines[0] and "InsufficientBalanceError" in lines[0]


def test_typing_is_renewed_while_the_search_runs(tmp_path: Path, fake_bot_api: FakeBotAPI) -> None:
    with mock_process(tmp_path, latency_ms=9000, fixtures=[BUNDLED]) as slow:
        env = bot_env(tmp_path, slow, fake_bot_api)
        with BotProcess(env, tmp_path / "bot.log", fake_bot_api):
            fake_bot_api.push(fake_bot_api.text(NANAIMO))
            final_answer(fake_bot_api)
    typing = [c.at for c in fake_bot_api.calls_to("sendChatAction")]
    assert len(typing) >= 3  # 9 s of search: at 0, ~4 and ~8 s
    gaps = [later - earlier for earlier, later in pairwise(typing)]
    assert all(3.5 <= gap <= 5.0 for gap in gaps), gaps


def test_a_turn_over_the_user_s_limit_says_when_to_retry_without_a_model_call(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api, BOT_DEFAULT_RPM="1")
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api):
        fake_bot_api.push(fake_bot_api.text("What is the capital of Canada?"))
        final_answer(fake_bot_api)
        before = mock_requests(mock)
        fake_bot_api.push(fake_bot_api.text("What is the capital of Canada?"))
        refused = fake_bot_api.wait_for(
            lambda c: c.method == "sendMessage" and "try again in" in c.params["text"]
        )
    assert "messages a minute" in refused.params["text"]
    assert mock_requests(mock) == before
