"""The bot's parts on their own, where an end-to-end run would be slow or could not show it:
per-chat order, the retries of Bot API calls, which group messages are meant for the bot, the
settings, the token's redaction and a refused turn's words."""

from __future__ import annotations

import asyncio
import logging
import warnings
from datetime import timedelta

import pytest
from telegram import Bot, Chat, Message, MessageEntity, User
from telegram.error import BadRequest, NetworkError, RetryAfter

from generic_framework.chats.access import Access
from generic_framework.chats.lanes import Lanes
from generic_framework.chats.people import refusal_text
from generic_framework.chats.telegram.access import addressed, chat_key
from generic_framework.chats.telegram.delivery import ATTEMPTS, Delivery
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.errors import ConfigError
from generic_framework.quotas import Refusal
from generic_framework.redaction import redact
from generic_framework.telemetry.logs import RedactingFormatter

BOT_ID, NAME = 123456, "persona_test_bot"

# ------------------------------------------------------------------------------ lanes


async def test_a_chat_s_jobs_run_in_order_while_other_chats_go_on() -> None:
    done: list[str] = []
    slow_started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        slow_started.set()
        await release.wait()
        done.append("a1")

    def job(name: str) -> object:
        async def run() -> None:
            done.append(name)

        return run

    lanes = Lanes()
    lanes.submit("a", slow)
    lanes.submit("a", job("a2"))  # type: ignore[arg-type]
    lanes.submit("b", job("b1"))  # type: ignore[arg-type]
    await slow_started.wait()
    await asyncio.sleep(0.05)
    assert done == ["b1"]  # chat b was not held up by chat a's slow turn
    release.set()
    assert await lanes.join(5)
    assert done == ["b1", "a1", "a2"]


async def test_a_failing_job_does_not_stop_its_lane() -> None:
    failures: list[str] = []
    ran: list[int] = []

    async def bad() -> None:
        raise RuntimeError("a handler bug")

    async def good() -> None:
        ran.append(1)

    lanes = Lanes(on_error=lambda key, exc: failures.append(f"{key}: {exc}"))
    lanes.submit("a", bad)
    lanes.submit("a", good)
    assert await lanes.join(5)
    assert failures == ["a: a handler bug"] and ran == [1]


async def test_join_cancels_what_outlives_its_grace() -> None:
    lanes = Lanes()
    lanes.submit("a", lambda: asyncio.sleep(30))
    assert not await lanes.join(0.05)
    assert lanes.busy == 0


# ------------------------------------------------------------------------------ delivery


def retry_after(seconds: int) -> RetryAfter:
    with warnings.catch_warnings():  # python-telegram-bot's int-or-timedelta migration
        warnings.simplefilter("ignore")
        return RetryAfter(timedelta(seconds=seconds))


class Script:
    """A call that fails as scripted, then answers ``"ok"``; the waits it was made to take."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.waits: list[float] = []

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_a_429_is_waited_out_for_its_retry_after() -> None:
    script = Script(retry_after(3))
    assert await Delivery(sleep=script.sleep).send("sendMessage", script) == "ok"
    assert script.waits == [3.0] and script.calls == 2


async def test_message_is_not_modified_is_a_success() -> None:
    script = Script(BadRequest("Bad Request: message is not modified: specified new text is same"))
    assert await Delivery(sleep=script.sleep).send("editMessageText", script) is None
    assert script.calls == 1


async def test_network_errors_are_retried_with_backoff_a_bounded_number_of_times() -> None:
    script = Script(*[NetworkError("connection refused")] * (ATTEMPTS + 1))
    with pytest.raises(NetworkError):
        await Delivery(sleep=script.sleep).send("sendMessage", script)
    assert script.calls == ATTEMPTS
    assert script.waits == [0.5, 1.0, 2.0, 4.0]


async def test_other_bad_requests_are_not_retried() -> None:
    script = Script(BadRequest("Bad Request: chat not found"))
    with pytest.raises(BadRequest):
        await Delivery(sleep=script.sleep).send("sendMessage", script)
    assert script.calls == 1


async def test_a_live_update_after_a_429_is_dropped_until_retry_after_passes() -> None:
    delivery = Delivery()
    first = Script(retry_after(60))
    assert await delivery.live("editMessageText", first) is None
    second = Script()
    assert await delivery.live("editMessageText", second) is None
    assert second.calls == 0 and delivery.quiet


# ------------------------------------------------------------------------------ addressing


def message(
    text: str, *, kind: str = "supergroup", reply_from: int | None = None, **extra: object
) -> Message:
    bot = Bot("123456:TEST-token-never-logged")
    entities = []
    if text.startswith("/"):  # as a client would mark it ("//" too: the bot must not mind)
        entities.append(MessageEntity(MessageEntity.BOT_COMMAND, 0, len(text.split(maxsplit=1)[0])))
    at = text.find(f"@{NAME}")
    if at >= 0 and not text.startswith("/"):
        entities.append(MessageEntity(MessageEntity.MENTION, at, len(NAME) + 1))
    chat = Chat(-100 if kind != "private" else 1001, kind)
    sender = User(1001, "Ada", False)
    reply = None
    if reply_from is not None:
        reply = Message(
            5, None, chat, from_user=User(reply_from, "X", reply_from == BOT_ID), text="hi"
        )  # type: ignore[arg-type]
    found = Message(
        9,
        None,
        chat,
        from_user=sender,
        text=text,
        entities=entities,
        reply_to_message=reply,
        **extra,  # type: ignore[arg-type]
    )
    found.set_bot(bot)
    return found


@pytest.mark.parametrize(
    ("text", "reply_from", "meant", "said"),
    [
        ("hello everyone", None, False, None),
        (f"@{NAME} what is the capital of Canada?", None, True, "what is the capital of Canada?"),
        (f"@{NAME}, // weather in Nanaimo", None, True, "// weather in Nanaimo"),
        ("// weather in Nanaimo", None, True, "// weather in Nanaimo"),
        ("and you?", BOT_ID, True, "and you?"),
        ("and you?", 77, False, None),
        (f"/persona@{NAME} scout", None, True, None),
        ("/persona@other_bot scout", None, False, None),
        ("/help", None, True, None),
    ],
)
def test_a_group_message_is_for_the_bot_only_when_addressed(
    text: str, reply_from: int | None, meant: bool, said: str | None
) -> None:
    found = addressed(message(text, reply_from=reply_from), BOT_ID, NAME)
    assert (found is not None) == meant
    if found is not None and said is not None:
        assert found.text == said and found.command is None
    if found is not None and said is None:
        assert found.command in ("persona", "help")


def test_every_private_message_is_for_the_bot() -> None:
    found = addressed(message("hello", kind="private"), BOT_ID, NAME)
    assert found is not None and found.text == "hello"


def test_a_forum_topic_is_a_conversation_of_its_own() -> None:
    topic = message("hi", message_thread_id=7, is_topic_message=True)
    assert chat_key(topic) == "-100:7"
    assert chat_key(message("hi")) == "-100"


def test_access_is_closed_by_default() -> None:
    closed = Access(frozenset(), frozenset())
    assert not closed.allows(1001, 1001)
    assert Access(frozenset({1001}), frozenset()).allows(1001, -100)
    assert Access(frozenset(), frozenset({-100})).allows(42, -100)
    assert not Access(frozenset(), frozenset({-100})).allows(42, 42)
    assert Access(None, frozenset()).allows(42, 42)


# ------------------------------------------------------------------------------ settings


def test_the_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:TEST-token-never-logged")
    monkeypatch.setenv("TELEGRAM_ALLOWED_USERS", "1001, 1002")
    monkeypatch.setenv("TELEGRAM_ALLOWED_CHATS", "*")
    monkeypatch.setenv("TELEGRAM_EDIT_INTERVAL", "")
    settings = TelegramSettings()
    assert settings.allowed_users == frozenset({1001, 1002})
    assert settings.allowed_chats is None
    assert settings.telegram_edit_interval == 1.5
    assert settings.base_url == "https://api.telegram.org/bot"
    assert not settings.webhook


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"telegram_allowed_users": "1001,ada"}, "TELEGRAM_ALLOWED_USERS must be comma-separated"),
        ({"telegram_bot_token": "not a token"}, "TELEGRAM_BOT_TOKEN must be the token"),
        ({"telegram_edit_interval": "inf"}, "TELEGRAM_EDIT_INTERVAL"),
        ({"telegram_api_url": "ftp://x"}, "TELEGRAM_API_URL"),
    ],
)
def test_a_bad_setting_names_its_variable(values: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        TelegramSettings.defaults(**values)
    assert "not a token" not in str(caught.value)  # a secret's value is never repeated


def test_a_webhook_needs_its_url_and_secret_together() -> None:
    with pytest.raises(ConfigError, match="go together"):
        _ = TelegramSettings.defaults(telegram_webhook_url="https://bot.example/hook").webhook
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        _ = TelegramSettings.defaults(
            telegram_webhook_url="https://bot.example/hook", telegram_webhook_secret="s3cret"
        ).webhook
    both = TelegramSettings.defaults(
        telegram_bot_token="123456:TEST-token-never-logged",
        telegram_webhook_url="https://bot.example/hook",
        telegram_webhook_secret="s3cret",
    )
    assert both.webhook and both.webhook_path == "/hook"


def test_the_token_in_a_bot_api_url_is_redacted_from_log_lines() -> None:
    url = "https://api.telegram.org/bot987654:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getUpdates"
    record = logging.LogRecord("httpx", logging.INFO, "", 0, "HTTP Request: POST %s", (url,), None)
    line = RedactingFormatter("%(message)s").format(record)
    assert line == "HTTP Request: POST https://api.telegram.org/bot***/getUpdates"
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" not in redact(f"error: {url} failed")


def test_a_refused_turn_says_when_to_retry() -> None:
    assert refusal_text(Refusal("user", "rpm", 5, 42)).endswith("try again in 42 seconds.")
    daily = refusal_text(Refusal("user", "daily_searches", 3, 7200))
    assert "3 web searches" in daily and "2 hours" in daily
