"""A Telegram turn that fails after a billed tool round counts against its sender's daily limit
(the turn service counts from the turn's own account, not from a reply it never had), on
SQLite and on PostgreSQL.

The bot's handlers run in the test's loop over the fake Bot API (a real server on loopback);
the model is scripted (tests/billed_turns.py): a billed tool round, then a failed call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from billed_turns import BILLED, TOOL, fail_after_the_tool, opened_store
from fake_bot_api import TOKEN, FakeBotAPI
from telegram import Bot, Update

from generic_framework.chats.access import Access
from generic_framework.chats.telegram.handlers import Handlers
from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec
from generic_framework.runtime import Runtime
from generic_framework.store import ConversationStore
from generic_framework.testing import FunctionModel

SENDER = 4242


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationStore]:
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    opened = await opened_store(request.param, tmp_path, server)
    yield opened
    await opened.aclose()


async def test_a_failed_turn_counts_its_billed_tokens_against_the_sender(
    store: ConversationStore, fake_bot_api: FakeBotAPI, tmp_path: Path
) -> None:
    settings = Settings.defaults(
        api_key="k",
        data_dir=tmp_path / "data",
        personas_dir=tmp_path / "p",
        bot_default_daily_tokens=BILLED,
    )
    spec = PersonaSpec(name="helper", system_prompt="You help.", tools=[TOOL], tools_always=True)
    model = FunctionModel(fail_after_the_tool)
    bot = Bot(TOKEN, base_url=f"{fake_bot_api.base_url}/bot")
    async with Runtime(settings, store=store, model=model, specs={"helper": spec}) as runtime:
        await bot.initialize()
        try:
            handlers = Handlers(runtime, bot, Access(None, None), interval=0.05, offline=False)

            async def say(text: str) -> str | None:
                update = {"update_id": 1, **fake_bot_api.text(text, user_id=SENDER)}
                return await handlers.handle(Update.de_json(update, bot))

            assert await say("what is 2 + 2?") == "failed"
            assert len(model.requests) == 2  # the billed round, then the failed call
            user = await store.user(f"telegram:{SENDER}")
            assert user is not None
            assert await store.usage_today(f"u:{user.id}") == (BILLED, 0)
            assert await say("and 3 + 3?") == "refused"
            assert len(model.requests) == 2
        finally:
            await bot.shutdown()
    said = [m.get("text", "") for m in fake_bot_api.chat_messages(SENDER)]
    assert said[-1].startswith("You have used today's share of answers"), said
