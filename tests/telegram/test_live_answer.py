"""A live answer against the fake Bot API, in this process: python-telegram-bot's real client
over HTTP, events made here instead of a model's, so the timing is the test's to choose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import pairwise

import pytest
from fake_bot_api import FakeBotAPI
from support import wait_for
from telegram import Bot

from generic_framework.chats import live
from generic_framework.chats.live import LiveAnswer
from generic_framework.chats.message import ChatRef
from generic_framework.chats.telegram.delivery import Delivery
from generic_framework.chats.telegram.surface import Drafts, TelegramSurface, send_chunks
from generic_framework.core.events import Done, PersonaEvent, RoundStarted, TextDelta
from generic_framework.core.reply import Reply

GROUP = -100777


async def events(
    words: int, every: float, *, tool: str | None = None
) -> AsyncIterator[PersonaEvent]:
    if tool is not None:
        yield RoundStarted(1, [tool])
        await asyncio.sleep(every)
    text = ""
    for number in range(words):
        piece = f"word{number} "
        text += piece
        yield TextDelta(piece)
        await asyncio.sleep(every)
    yield Done(Reply(content=text.strip()))


async def answer(fake: FakeBotAPI, chat: ChatRef, source: AsyncIterator[PersonaEvent]) -> Reply:
    fake.received(fake.text("hi", chat_id=chat.chat_id, chat_type="supergroup")["message"])
    async with Bot(fake.token, base_url=f"{fake.base_url}/bot") as bot:
        live = LiveAnswer(TelegramSurface(bot, chat, drafts=Drafts()), interval=0.5, web=False)
        return await live.run(source)


async def test_a_group_answer_is_edited_at_most_every_interval(fake_bot_api: FakeBotAPI) -> None:
    reply = await answer(fake_bot_api, ChatRef(GROUP), events(30, 0.05))
    edits = [c for c in fake_bot_api.calls_to("editMessageText")]
    live = [
        c.at
        for c in edits
        if c.params.get("parse_mode") == "HTML" and "word29" not in c.params["text"]
    ]
    assert len(live) >= 2
    assert all(later - earlier >= 0.45 for earlier, later in pairwise(live))
    assert fake_bot_api.chat_messages(GROUP)[-1]["text"] == reply.content
    assert len([m for m in fake_bot_api.chat_messages(GROUP) if m["from"]["is_bot"]]) == 1


async def test_a_tool_s_name_is_the_status_while_it_runs(fake_bot_api: FakeBotAPI) -> None:
    await answer(fake_bot_api, ChatRef(GROUP), events(2, 0.3, tool="get_weather"))
    first = fake_bot_api.calls_to("sendMessage")[0]
    assert first.params["text"] == "Running get_weather…"


async def test_a_private_draft_is_renewed_while_a_long_search_runs(
    fake_bot_api: FakeBotAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "DRAFT_RENEW", 0.4)  # Telegram's 30 s, shrunk to the test's
    monkeypatch.setattr(live, "TYPING_EVERY", 0.2)

    def searching() -> int:
        drafts = fake_bot_api.calls_to("sendMessageDraft")
        return [c.params["text"] for c in drafts].count("Searching the web…")

    async def slow_search() -> AsyncIterator[PersonaEvent]:
        # The search lasts until the draft was renewed twice (about 0.8 s on a quiet machine;
        # a busy one renews later, not less often).
        await wait_for(lambda: searching() >= 3, "the draft renewed twice", 30)
        yield TextDelta("It is sunny.")
        yield Done(Reply(content="It is sunny."))

    fake_bot_api.received(fake_bot_api.text("// weather")["message"])
    async with Bot(fake_bot_api.token, base_url=f"{fake_bot_api.base_url}/bot") as bot:
        surface = TelegramSurface(bot, ChatRef(1001, private=True), drafts=Drafts())
        answer_ = LiveAnswer(surface, interval=0.5, web=True)
        await answer_.run(slow_search())
    drafts = [c.params["text"] for c in fake_bot_api.calls_to("sendMessageDraft")]
    assert drafts.count("Searching the web…") >= 3
    assert fake_bot_api.chat_messages(1001)[-1]["text"] == "It is sunny."


async def test_a_refused_part_is_sent_again_as_plain_text_and_no_part_twice(
    fake_bot_api: FakeBotAPI,
) -> None:
    chunks = ["<b>one</b> &amp; more", "<i>two</i>", "three <code>x &lt; y</code>"]
    fake_bot_api.received(fake_bot_api.text("hi", chat_id=GROUP, chat_type="supergroup")["message"])
    fake_bot_api.fail(
        "sendMessage", status=400, description="Bad Request: can't parse entities: test"
    )
    async with Bot(fake_bot_api.token, base_url=f"{fake_bot_api.base_url}/bot") as bot:
        await send_chunks(bot, Delivery(), ChatRef(GROUP), chunks, first_into=None)
    shown = [m["text"] for m in fake_bot_api.chat_messages(GROUP) if m["from"]["is_bot"]]
    assert shown == ["one & more", "two", "three x < y"]
    sent = [c for c in fake_bot_api.calls_to("sendMessage") if c.status == 200]
    assert [c.params.get("parse_mode") for c in sent] == [None, "HTML", "HTML"]
