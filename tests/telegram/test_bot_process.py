"""``generic-framework telegram`` as a process: how it starts, and how it stops when it must.

A missing token is a configuration error (exit 2) naming ``TELEGRAM_BOT_TOKEN``; Telegram's 409
Conflict (another process polls the bot) is said in one line and the process exits 2 (the
compose service then waits to be stopped instead of restarting and cutting the other poller
off); so is a
bot whose webhook is set (polling would take the updates away from ``serve``); without an API
key the bot answers from the embedded mock and says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bot_processes import BUNDLED, OWNER, BotProcess, Process, bot_env, mock_process
from fake_bot_api import FakeBotAPI
from support import free_port, run_cli

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    with mock_process(tmp, fixtures=[BUNDLED]) as server:
        yield server


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_a_missing_token_is_a_configuration_error(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api)
    del env["TELEGRAM_BOT_TOKEN"]
    done = run_cli(["telegram"], env, cwd=tmp_path)
    assert done.returncode == 2
    assert error_lines(done.stderr) == [done.stderr.strip()]
    assert "TELEGRAM_BOT_TOKEN" in done.stderr
    assert fake_bot_api.calls == []


def test_a_second_poller_is_said_in_one_line_and_the_process_stops(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api)
    fake_bot_api.conflict = True
    bot = BotProcess(env, tmp_path / "bot.log", fake_bot_api).start()
    try:
        assert bot.wait(30) == 2
    finally:
        bot.stop()
    lines = error_lines(bot.text())
    assert len(lines) == 1
    assert "409 Conflict" in lines[0]
    assert "Traceback" not in bot.text()
    assert fake_bot_api.token.partition(":")[2] not in bot.text()


def test_a_bot_with_a_webhook_is_not_polled(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    fake_bot_api.webhook = {"url": "https://bot.example/telegram/webhook"}
    env = bot_env(tmp_path, mock, fake_bot_api)
    done = run_cli(["telegram"], env, cwd=tmp_path)
    assert done.returncode == 2
    assert len(error_lines(done.stderr)) == 1
    assert "webhook" in error_lines(done.stderr)[0]
    assert fake_bot_api.webhook is not None  # left in place for serve
    assert fake_bot_api.calls_to("getUpdates") == []


def test_without_an_api_key_the_embedded_mock_answers(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        del env[name]
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as bot:
        fake_bot_api.push(fake_bot_api.text("// what's the weather in Nanaimo?"))
        fake_bot_api.wait_for(
            lambda c: (
                c.method == "sendMessage"
                and c.params["chat_id"] == OWNER
                and "Nanaimo is mild" in c.params["text"]
            )
        )
    offline = [line for line in bot.text().splitlines() if line.startswith("offline:")]
    assert offline == [
        "offline: no OPENAI_API_KEY set; answering from the embedded mock's recorded fixtures."
    ]


def test_the_polling_process_serves_its_metrics_when_asked(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    port = free_port()
    env = bot_env(tmp_path, mock, fake_bot_api, TELEGRAM_METRICS_PORT=str(port))
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api):
        fake_bot_api.push(fake_bot_api.text("// what's the weather in Nanaimo?"))
        fake_bot_api.push(fake_bot_api.text("hello", user_id=4242))
        fake_bot_api.wait_for(lambda c: c.method == "sendMessage" and c.params["chat_id"] == 4242)
        fake_bot_api.wait_for(
            lambda c: c.method == "sendMessage" and "Nanaimo is mild" in c.params["text"]
        )
        deadline = time.monotonic() + 20
        while True:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            counted = {
                outcome: f'generic_framework_telegram_updates_total{{outcome="{outcome}"}} ' in text
                for outcome in ("received", "answered", "refused")
            }
            if all(counted.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert counted == {"received": True, "answered": True, "refused": True}
    assert 'outcome="received"} 2.0' in text
    with pytest.raises(httpx.ConnectError):  # the server stopped with the bot
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_empty_allowlists_are_warned_of_at_start(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api)
    del env["TELEGRAM_ALLOWED_USERS"]
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as bot:
        fake_bot_api.push(fake_bot_api.text("hello"))
        # The stranger's reply comes once start-up is over, its warning written.
        fake_bot_api.wait_for(
            lambda c: c.method == "sendMessage" and "TELEGRAM_ALLOWED_USERS" in c.params["text"]
        )
    warned = [line for line in bot.text().splitlines() if "both empty" in line]
    assert len(warned) == 1
    assert "lets nobody in" in warned[0] and "TELEGRAM_ALLOWED_USERS=" in warned[0]


def test_the_question_help_suggests_is_answered_offline(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI
) -> None:
    env = bot_env(tmp_path, mock, fake_bot_api)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        del env[name]
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api):
        fake_bot_api.push(fake_bot_api.text("/help"))
        helped = fake_bot_api.wait_for(
            lambda c: c.method == "sendMessage" and "for example: " in c.params["text"]
        )
        suggested = helped.params["text"].split("for example: ")[1].splitlines()[0].strip()
        assert suggested.startswith("//")
        fake_bot_api.push(fake_bot_api.text(suggested))
        fake_bot_api.wait_for(
            lambda c: (
                c.method in ("sendMessage", "editMessageText")
                and "Nanaimo is mild" in c.params["text"]
            )
        )
