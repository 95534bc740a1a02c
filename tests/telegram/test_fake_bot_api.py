"""The fake Bot API answers python-telegram-bot, the bot's real client library, as Telegram does.

The end-to-end tests of the bot trust this server's refusals (invalid HTML, long messages, edits
that change nothing, 409s, scripted 429s) and its records; these tests hold it to the Bot API's
behaviour through the library itself and through raw HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import telegram
import uvicorn
from fake_bot_api import CONFLICT_POLLING, CONFLICT_WEBHOOK, FakeBotAPI, deliver
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from support import wait_for
from telegram.ext import Application, ContextTypes, MessageHandler, filters
from telegram_html import HtmlError, parse_html

CHAT = 1001
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)


def raw(fake: FakeBotAPI, method: str, token: str | None = None, **params: Any) -> httpx.Response:
    url = f"{fake.base_url}/bot{token or fake.token}/{method}"
    return httpx.post(url, json=params, timeout=10)


def bot(fake: FakeBotAPI) -> telegram.Bot:
    return telegram.Bot(fake.token, base_url=f"{fake.base_url}/bot")


# -- the wire ------------------------------------------------------------------------------------


async def test_the_library_reaches_the_methods_it_calls(fake_bot_api: FakeBotAPI) -> None:
    async with bot(fake_bot_api) as client:
        me = await client.get_me()
        sent = await client.send_message(CHAT, "<b>Hi</b> &amp; bye", parse_mode="HTML")
        edited = await client.edit_message_text("Hi again", CHAT, sent.message_id)
        assert await client.send_message_draft(CHAT, 7, "Thinking")
        assert await client.send_chat_action(CHAT, "typing")
        assert await client.set_my_commands([("new", "A fresh conversation")])
        assert await client.delete_message(CHAT, sent.message_id)
    assert me.username == "persona_test_bot" and me.id == 123456
    assert sent.text == "Hi & bye" and sent.entities[0].type == "bold"
    assert sent.from_user is not None and sent.from_user.is_bot
    assert isinstance(edited, telegram.Message)
    assert edited.text == "Hi again" and edited.message_id == sent.message_id
    assert [c.method for c in fake_bot_api.calls] == [
        "getMe",  # the library's own, when it initialises
        "getMe",
        "sendMessage",
        "editMessageText",
        "sendMessageDraft",
        "sendChatAction",
        "setMyCommands",
        "deleteMessage",
    ]
    assert all(c.status == 200 for c in fake_bot_api.calls)
    assert fake_bot_api.my_commands() == [{"command": "new", "description": "A fresh conversation"}]
    assert fake_bot_api.chat_messages(CHAT) == []


async def test_form_fields_are_decoded_like_json_bodies(fake_bot_api: FakeBotAPI) -> None:
    """The library sends forms whose non-string fields are JSON; strings stay strings."""
    keyboard = telegram.InlineKeyboardMarkup(
        [[telegram.InlineKeyboardButton("A", callback_data="a")]]
    )
    async with bot(fake_bot_api) as client:
        await client.send_message(CHAT, "42", reply_markup=keyboard, disable_notification=True)
    raw(fake_bot_api, "sendMessage", chat_id=CHAT, text="42", reply_markup=keyboard.to_dict())
    form, json_body = fake_bot_api.calls_to("sendMessage")
    assert form.params == {
        "chat_id": CHAT,
        "text": "42",
        "disable_notification": True,
        "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]},
    }
    assert json_body.params["reply_markup"] == form.params["reply_markup"]
    assert fake_bot_api.chat_messages(CHAT)[0]["reply_markup"] == form.params["reply_markup"]


def test_unknown_methods_wrong_tokens_and_paths_answer_like_telegram(
    fake_bot_api: FakeBotAPI,
) -> None:
    unknown = raw(fake_bot_api, "sendTelepathy", chat_id=CHAT)
    assert unknown.status_code == 404
    assert unknown.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
    wrong = raw(fake_bot_api, "getMe", token="123456:wrong")
    assert wrong.status_code == 401 and wrong.json()["description"] == "Unauthorized"
    elsewhere = httpx.get(f"{fake_bot_api.base_url}/nothing", timeout=10)
    assert elsewhere.status_code == 404 and elsewhere.json()["ok"] is False
    assert raw(fake_bot_api, "getme").json()["ok"]  # method names are case-insensitive
    broken = httpx.post(f"{fake_bot_api.base_url}/bot{fake_bot_api.token}/sendMessage",
                        content=b"{", headers={"content-type": "application/json"},
                        timeout=30)  # fmt: skip
    assert broken.status_code == 400 and broken.json()["ok"] is False
    statuses = [(c.method, c.status) for c in fake_bot_api.calls]
    assert statuses == [
        ("sendTelepathy", 404),
        ("getMe", 401),
        ("getMe", 200),
        ("sendMessage", 400),
    ]


async def test_the_token_is_in_no_log_line(
    fake_bot_api: FakeBotAPI, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.DEBUG):
        raw(fake_bot_api, "getMe")
        raw(fake_bot_api, "getMe", token="654321:other-secret")
        fake_bot_api.fail("sendMessage", status=500)
        raw(fake_bot_api, "sendMessage", chat_id=CHAT, text="x")
        raw(fake_bot_api, "setWebhook", url="https://bot.example/hook", secret_token="hook-secret")
        with pytest.raises(AssertionError) as failure:
            fake_bot_api.wait_for(lambda c: c.method == "close", timeout=0.1)
    out, err = capfd.readouterr()
    # The client's own lines (httpx logs every URL at INFO) are the bot's to redact, not the fake's.
    server_side = [r.getMessage() for r in caplog.records if not r.name.startswith("http")]
    assert any("other-secret" in r.getMessage() for r in caplog.records)  # the check can see it
    for text in (*server_side, out, err, str(failure.value)):
        assert fake_bot_api.token not in text and "other-secret" not in text
        assert "hook-secret" not in text


# -- getUpdates --------------------------------------------------------------------------------


async def test_a_long_poll_wakes_when_an_update_is_pushed(fake_bot_api: FakeBotAPI) -> None:
    async with bot(fake_bot_api) as client:
        poll = asyncio.create_task(client.get_updates(timeout=10))
        await wait_for(lambda: fake_bot_api.waiting_polls == 1, "the poll waits at the fake")
        pushed = time.monotonic()
        update_id = fake_bot_api.push(fake_bot_api.text("hello"))
        updates = await poll
        assert time.monotonic() - pushed < 5  # the poll's own timeout is 10 s
        assert [u.update_id for u in updates] == [update_id]
        assert updates[0].message is not None and updates[0].message.text == "hello"


async def test_a_long_poll_without_updates_waits_its_timeout(fake_bot_api: FakeBotAPI) -> None:
    async with bot(fake_bot_api) as client:
        started = time.monotonic()
        assert await client.get_updates(timeout=1) == ()
        assert 0.9 <= time.monotonic() - started < 5


async def test_offset_confirms_limit_caps_and_allowed_updates_filter(
    fake_bot_api: FakeBotAPI,
) -> None:
    first = fake_bot_api.push(fake_bot_api.text("one"))
    second = fake_bot_api.push(fake_bot_api.text("two"))
    async with bot(fake_bot_api) as client:
        assert [u.update_id for u in await client.get_updates(limit=1)] == [first]
        assert [u.update_id for u in await client.get_updates()] == [first, second]
        assert [u.update_id for u in await client.get_updates(offset=first + 1)] == [second]
        assert await client.get_updates(offset=second + 1) == ()
        sent = await client.send_message(CHAT, "Pick one")
        fake_bot_api.push(fake_bot_api.callback("a"))
        message = fake_bot_api.push(fake_bot_api.text("three"))
        got = await client.get_updates(offset=second + 1, allowed_updates=["message"])
    assert [u.update_id for u in got] == [message]
    assert fake_bot_api.allowed_updates == ["message"]
    assert fake_bot_api.calls_to("getUpdates")[-1].params["allowed_updates"] == ["message"]
    assert sent.message_id == 3  # ids count per chat, the user's messages included


async def test_conflict_answers_409_even_to_a_waiting_poll(fake_bot_api: FakeBotAPI) -> None:
    async with bot(fake_bot_api) as client:
        poll = asyncio.create_task(client.get_updates(timeout=10))
        await wait_for(lambda: fake_bot_api.waiting_polls == 1, "the poll waits at the fake")
        started = time.monotonic()
        fake_bot_api.conflict = True
        with pytest.raises(telegram.error.Conflict):
            await poll
        assert time.monotonic() - started < 5  # the poll's own timeout is 10 s
    answer = raw(fake_bot_api, "getUpdates")
    assert answer.status_code == 409
    assert answer.json() == {"ok": False, "error_code": 409, "description": CONFLICT_POLLING}


async def test_polling_while_a_webhook_is_set_is_a_conflict(fake_bot_api: FakeBotAPI) -> None:
    async with bot(fake_bot_api) as client:
        assert await client.set_webhook(
            "https://bot.example/telegram", secret_token="s3cret_-", allowed_updates=["message"]
        )
        with pytest.raises(telegram.error.Conflict, match="webhook is active"):
            await client.get_updates()
        info = await client.get_webhook_info()
        assert info.url == "https://bot.example/telegram"
        assert await client.delete_webhook()
        assert await client.get_updates() == ()
        with pytest.raises(telegram.error.BadRequest, match="unallowed characters"):
            await client.set_webhook("https://bot.example/telegram", secret_token="a+b=")
    assert raw(fake_bot_api, "setWebhook", url="https://x.example/").json()["ok"]
    assert raw(fake_bot_api, "getUpdates").json()["description"] == CONFLICT_WEBHOOK


# -- messages and their rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("<p>x</p>", 'Unsupported start tag "p" at byte offset 0'),
        ("<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ('<span class="x">y</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("é<b", "Unclosed start tag at byte offset 2"),
        ("<a href=https://x>y</a>", "Unexpected end of name token at byte offset 13"),
    ],
)
def test_invalid_html_is_refused_as_telegram_refuses_it(
    fake_bot_api: FakeBotAPI, text: str, error: str
) -> None:
    answer = raw(fake_bot_api, "sendMessage", chat_id=CHAT, text=text, parse_mode="HTML")
    assert answer.status_code == 400
    assert answer.json()["description"] == f"Bad Request: can't parse entities: {error}"
    assert fake_bot_api.chat_messages(CHAT) == []


def test_valid_html_records_the_visible_text_entities_and_links() -> None:
    parsed = parse_html(
        '<b>1 &lt; 2</b> &amp; &#128512; <a href="https://e.org/?a=1&amp;b=2">[1]</a> '
        '<pre><code class="language-py">x = 1</code></pre> <tg-spoiler>s</tg-spoiler>'
        " <blockquote expandable>q</blockquote> a & b &nbsp;"
    )
    assert parsed.text == "1 < 2 & 😀 [1] x = 1 s q a & b &nbsp;"
    assert parsed.links == ["https://e.org/?a=1&b=2"]
    assert [(e["type"], e["offset"], e["length"]) for e in parsed.entities] == [
        ("bold", 0, 5),
        ("text_link", 11, 3),
        ("pre", 15, 5),
        ("spoiler", 21, 1),
        ("expandable_blockquote", 23, 1),
    ]
    assert parsed.entities[2]["language"] == "py"
    with pytest.raises(HtmlError):
        parse_html("<tg-emoji emoji-id=abc>x</tg-emoji>")


@pytest.mark.parametrize(
    ("text", "too_long"),
    [
        ("a" * 4096, False),
        ("<b>" + "a" * 4096 + "</b>", False),
        ("&lt;" * 4097, True),
        ("😀" * 2048, False),
        ("😀" * 2049, True),  # 4098 UTF-16 code units
    ],
)
def test_length_is_counted_after_parsing_in_utf16(
    fake_bot_api: FakeBotAPI, text: str, too_long: bool
) -> None:
    answer = raw(fake_bot_api, "sendMessage", chat_id=CHAT, text=text, parse_mode="HTML")
    if too_long:
        assert answer.status_code == 400
        assert answer.json()["description"] == "Bad Request: message is too long"
    else:
        assert answer.json()["ok"], answer.json()


async def test_an_edit_that_changes_nothing_is_refused(fake_bot_api: FakeBotAPI) -> None:
    keyboard = telegram.InlineKeyboardMarkup(
        [[telegram.InlineKeyboardButton("A", callback_data="a")]]
    )
    async with bot(fake_bot_api) as client:
        sent = await client.send_message(CHAT, "<i>draft</i>", parse_mode="HTML")
        with pytest.raises(telegram.error.BadRequest, match="exactly the same"):
            await client.edit_message_text(
                "<em>draft</em>", CHAT, sent.message_id, parse_mode="HTML"
            )
        await client.edit_message_text("draft", CHAT, sent.message_id)  # the italics go
        await client.edit_message_text("draft", CHAT, sent.message_id, reply_markup=keyboard)
        with pytest.raises(telegram.error.BadRequest, match="exactly the same"):
            await client.edit_message_reply_markup(CHAT, sent.message_id, reply_markup=keyboard)
        with pytest.raises(telegram.error.BadRequest, match=r"(?i)message to edit not found"):
            await client.edit_message_text("x", CHAT, 999)
    assert fake_bot_api.calls_to("editMessageText")[0].status == 400
    error = raw(fake_bot_api, "editMessageText", chat_id=CHAT, message_id=sent.message_id,
                text="draft", reply_markup=keyboard.to_dict())  # fmt: skip
    assert error.json()["description"] == NOT_MODIFIED
    [message] = fake_bot_api.chat_messages(CHAT)
    assert message["text"] == "draft" and message["edits"] == 2 and "entities" not in message
    assert message["reply_markup"] == keyboard.to_dict()


def test_a_reply_needs_a_message_the_chat_has(fake_bot_api: FakeBotAPI) -> None:
    update = fake_bot_api.text("question", chat_id=-100200, chat_type="supergroup")
    asked = update["message"]["message_id"]
    ok = raw(fake_bot_api, "sendMessage", chat_id=-100200, text="answer",
             reply_parameters={"message_id": asked})  # fmt: skip
    assert ok.json()["result"]["reply_to_message"]["text"] == "question"
    missing = raw(fake_bot_api, "sendMessage", chat_id=-100200, text="answer",
                  reply_parameters={"message_id": 77})  # fmt: skip
    assert missing.json()["description"] == "Bad Request: message to be replied not found"
    assert fake_bot_api.transcript(-100200) == ["Ada: question", "Persona Bot: answer"]


async def test_drafts_are_recorded_or_refused_like_an_older_server(
    fake_bot_api: FakeBotAPI,
) -> None:
    async with bot(fake_bot_api) as client:
        assert await client.send_message_draft(CHAT, 1, "Hal")
        assert await client.send_message_draft(CHAT, 1, "<b>Hallo</b>", parse_mode="HTML")
        with pytest.raises(telegram.error.BadRequest):
            await client.send_message_draft(-100200, 1, "in a group")
        fake_bot_api.drafts_supported = False
        with pytest.raises(telegram.error.InvalidToken, match="Not Found"):  # the library's 404
            await client.send_message_draft(CHAT, 1, "Hallo!")
    assert [(d["draft_id"], d["text"]) for d in fake_bot_api.drafts(CHAT)] == [
        (1, "Hal"),
        (1, "Hallo"),
    ]
    assert fake_bot_api.calls_to("sendMessageDraft")[-1].status == 404


# -- faults --------------------------------------------------------------------------------------


async def test_scripted_faults_answer_the_next_calls_then_stop(
    fake_bot_api: FakeBotAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")  # the library's retry_after as a timedelta
    fake_bot_api.fail("sendMessage", retry_after=3, times=2)
    fake_bot_api.fail("sendChatAction", status=403, description="Forbidden: bot was kicked")
    async with bot(fake_bot_api) as client:
        for _ in range(2):
            with pytest.raises(telegram.error.RetryAfter) as limited:
                await client.send_message(CHAT, "hi")
            assert limited.value.retry_after == timedelta(seconds=3)
        await client.send_message(CHAT, "hi")
        with pytest.raises(telegram.error.Forbidden, match="bot was kicked"):
            await client.send_chat_action(CHAT, "typing")
    assert [c.status for c in fake_bot_api.calls_to("sendMessage")] == [429, 429, 200]
    body = raw(fake_bot_api, "getMe").json()
    fake_bot_api.fail("getMe")
    assert raw(fake_bot_api, "getMe").json() == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 1",
        "parameters": {"retry_after": 1},
    }
    assert body["ok"]


def test_wait_for_sees_calls_from_other_threads_and_times_out_usefully(
    fake_bot_api: FakeBotAPI,
) -> None:
    later = threading.Timer(0.2, raw, (fake_bot_api, "sendMessage"), {"chat_id": CHAT, "text": "x"})
    later.start()
    call = fake_bot_api.wait_for(lambda c: c.params["text"] == "x", timeout=5)
    assert call.method == "sendMessage" and call.params["chat_id"] == CHAT
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"calls seen:\n.*sendMessage 200"):
        fake_bot_api.wait_for(lambda c: c.params["text"] == "y", timeout=0.3)
    assert time.monotonic() - started < 2


# -- updates, webhooks, a whole application --------------------------------------------------


def test_updates_carry_what_telegram_adds(fake_bot_api: FakeBotAPI) -> None:
    command = fake_bot_api.text("/persona@persona_test_bot sage", chat_type="group", user_id=7)
    message = command["message"]
    assert message["chat"]["type"] == "group" and message["chat"]["id"] < 0
    assert message["entities"] == [{"type": "bot_command", "offset": 0, "length": 25}]
    mention = fake_bot_api.text("hé @persona_test_bot", chat_id=-100300, thread_id=5)["message"]
    assert mention["entities"] == [{"type": "mention", "offset": 3, "length": 17}]
    assert mention["chat"]["is_forum"] and mention["message_thread_id"] == 5
    assert "text" not in fake_bot_api.photo()["message"]
    with pytest.raises(AssertionError, match="no message"):
        fake_bot_api.callback("a", user_id=8)
    for update in (command, {"message": mention}, fake_bot_api.photo(user_id=7)):
        parsed = telegram.Update.de_json({"update_id": 1, **update}, None)
        assert parsed.effective_message is not None


@pytest.fixture
def webhook_receiver() -> Iterator[tuple[str, list[tuple[str | None, Any]]]]:
    seen: list[tuple[str | None, Any]] = []

    async def receive(request: Request) -> Response:
        seen.append((request.headers.get("x-telegram-bot-api-secret-token"), await request.json()))
        return Response(status_code=200 if len(seen) == 1 else 503)

    app = Starlette(routes=[Route("/hook", receive, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/hook", seen
    server.should_exit = True
    thread.join(10)


def test_deliver_posts_updates_with_the_secret_header(
    fake_bot_api: FakeBotAPI, webhook_receiver: tuple[str, list[tuple[str | None, Any]]]
) -> None:
    url, seen = webhook_receiver
    assert raw(fake_bot_api, "setWebhook", url=url, secret_token="abc").json()["ok"]
    update = fake_bot_api.text("hello")
    assert fake_bot_api.deliver(update) == 200
    assert deliver({"update_id": 5, **update}, url) == 503
    assert seen[0][0] == "abc" and seen[0][1]["message"]["text"] == "hello"
    assert seen[0][1]["update_id"] > 0
    assert seen[1] == (None, {"update_id": 5, **update})


def test_an_application_polls_answers_and_stops(fake_bot_api: FakeBotAPI) -> None:
    async def answer(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text(f"You said: {update.effective_message.text}")
        context.application.stop_running()

    application = (
        Application.builder()
        .token(fake_bot_api.token)
        .base_url(f"{fake_bot_api.base_url}/bot")
        .build()
    )
    application.add_handler(MessageHandler(filters.TEXT, answer))
    fake_bot_api.push(fake_bot_api.text("ping"))
    # A loop of the test's own, closed after: run_polling(close_loop=False) leaves closing to
    # its caller, and a loop left open is reported by pytest at the end of the session.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        application.run_polling(poll_interval=0.0, timeout=1, stop_signals=None, close_loop=False)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    methods = [c.method for c in fake_bot_api.calls]
    assert methods[:2] == ["getMe", "deleteWebhook"]
    assert fake_bot_api.transcript(CHAT) == ["Ada: ping", "Persona Bot: You said: ping"]
    assert fake_bot_api.calls_to("sendMessage")[0].params["chat_id"] == CHAT
