"""The Discord bot end to end: the real ``generic-framework discord`` process (debug logging
on) against the fake Discord (REST and the gateway) and the mock Z.AI; nothing of our own
replaced. Every bot process's whole output is checked for the token when its test ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from discord_payloads import BOT_ID, user
from discord_processes import (
    BUNDLED,
    FIXTURES,
    TELEGRAM_FIXTURES,
    BotProcess,
    Process,
    bot_env,
    mock_process,
)
from fake_discord import LIMIT, FakeDiscord

pytestmark = pytest.mark.timeout(120)

OWNER, STRANGER, MEMBER = 1001, 4242, 1002
DM, GENERAL, OTHER = 5001, 6001, 6002
NANAIMO = "// what's the weather in Nanaimo?"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    with mock_process(tmp, fixtures=[BUNDLED, FIXTURES, TELEGRAM_FIXTURES]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_discord: FakeDiscord) -> Iterator[BotProcess]:
    fake_discord.add_channel(GENERAL, "general")
    fake_discord.add_channel(OTHER, "other")
    env = bot_env(
        tmp_path,
        mock,
        fake_discord,
        DISCORD_ALLOWED_USERS=str(OWNER),
        DISCORD_ALLOWED_CHANNELS=str(GENERAL),
    )
    with BotProcess(env, tmp_path / "bot.log", fake_discord) as running:
        yield running
    text = running.text()
    assert "DEBUG" in text  # the debug lines were written...
    assert fake_discord.token not in text  # ...without the token, or any part of it
    assert all(part not in text for part in fake_discord.token.split("."))


def mock_requests(mock: Process) -> int:
    import httpx

    return int(httpx.get(f"{mock.url}/mock/report", timeout=10).json()["requests"])


def answered(fake: FakeDiscord, channel: int, needle: str) -> dict[str, Any]:
    """The bot's message in ``channel`` that shows ``needle`` once the answer is final."""
    found: list[dict[str, Any]] = []

    def shown() -> bool:
        found[:] = [m for m in fake.bot_messages(channel) if needle in m["content"]]
        return bool(found)

    fake.wait_for(shown)
    return found[-1]


def test_a_dm_web_question_is_answered_with_linked_sources(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.say(owner, DM, NANAIMO)
    final = answered(fake_discord, DM, "Sources")
    assert "Nanaimo is mild" in final["content"]
    assert "(<https://" in final["content"]  # [n] linked, the link's embed kept away
    assert final["allowed_mentions"] == {"parse": []}
    assert final["flags"] & 4  # SUPPRESS_EMBEDS
    assert fake_discord.calls_to("POST", rf"/channels/{DM}/typing")
    live = fake_discord.calls_to("POST", rf"/channels/{DM}/messages")[0]
    assert live.body["content"] == "Searching the web…"  # the status line, then edits
    assert fake_discord.calls_to("PATCH", rf"/channels/{DM}/messages/")
    assert len(fake_discord.bot_messages(DM)) == 1


def test_a_stranger_gets_their_id_and_no_model_call(
    fake_discord: FakeDiscord, bot: BotProcess, mock: Process
) -> None:
    before = mock_requests(mock)
    stranger = fake_discord.person(STRANGER, "stranger")
    fake_discord.say(stranger, DM + 1, NANAIMO)
    said = answered(fake_discord, DM + 1, "user id")
    assert f"Your Discord user id is {STRANGER}" in said["content"]
    assert "DISCORD\\_ALLOWED\\_USERS" in said["content"]  # escaped: shown as written
    assert mock_requests(mock) == before


def test_a_guild_channel_is_answered_only_when_the_bot_is_addressed(
    fake_discord: FakeDiscord, bot: BotProcess, mock: Process
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    member = fake_discord.person(MEMBER, "member")
    before = mock_requests(mock)
    fake_discord.say(member, GENERAL, "What is the capital of Canada?", guild=True)
    me = user(BOT_ID, "persona-bot", bot=True)
    asked = fake_discord.say(
        member, GENERAL, f"<@{BOT_ID}> What is the capital of Canada?", guild=True, mentions=[me]
    )
    first = answered(fake_discord, GENERAL, "Ottawa")
    assert mock_requests(mock) == before + 1  # the chatter was left alone
    assert asked["content"] not in first["content"]
    fake_discord.say(member, GENERAL, "and its population?", guild=True, reply_to=first)
    fake_discord.wait_for(lambda: len(fake_discord.bot_messages(GENERAL)) >= 2)
    fake_discord.say(member, GENERAL, NANAIMO, guild=True)
    answered(fake_discord, GENERAL, "Nanaimo is mild")
    # Another channel: the owner is let in everywhere, a member only where it is allowed.
    fake_discord.say(member, OTHER, f"<@{BOT_ID}> hello", guild=True, mentions=[me])
    refused = answered(fake_discord, OTHER, "user id")
    assert f"this channel, {OTHER}" in refused["content"]
    fake_discord.say(owner, OTHER, NANAIMO, guild=True)
    answered(fake_discord, OTHER, "Nanaimo is mild")


def test_persona_is_a_slash_command_with_the_personas_as_choices(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    registered = {c["name"]: c for c in fake_discord.commands}
    assert {"start", "help", "new", "persona", "usage"} <= set(registered)
    option = registered["persona"]["options"][0]
    assert option["name"] == "name" and not option["required"]
    choices = [choice["value"] for choice in option["choices"]]
    assert "scout" in choices
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.command("persona", owner, DM, guild=False, name="scout")
    answered(fake_discord, DM, "scout answers from now on.")
    fake_discord.command("persona", owner, DM, guild=False)
    offered = answered(fake_discord, DM, "Now answering: scout")
    assert "Pick one with /persona" in offered["content"]
    fake_discord.command("new", owner, GENERAL, guild=True)
    answered(fake_discord, GENERAL, "Started a new conversation")
    assert fake_discord.calls_to("POST", r"/interactions/\d+/interaction-1/callback")


def test_a_long_answer_is_split_into_messages_discord_accepts(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.say(owner, DM, "Tell me everything about the tides.")
    answered(fake_discord, DM, "Paragraph 30.")
    shown = [m["content"] for m in fake_discord.bot_messages(DM)]
    assert len(shown) >= 6
    assert all(0 < len(text) <= LIMIT for text in shown)
    for number in range(1, 31):
        assert sum(f"Paragraph {number}." in text for text in shown) == 1
    sent = fake_discord.calls_to("POST", rf"/channels/{DM}/messages")
    assert all(call.status == 200 for call in sent)


def test_everyone_in_an_answer_pings_nobody_and_injects_no_markup(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.say(
        owner,
        GENERAL,
        f"<@{BOT_ID}> Announce something to the whole server.",
        guild=True,
        mentions=[user(BOT_ID, "persona-bot", bot=True)],
    )
    final = answered(fake_discord, GENERAL, "real bold")
    text = final["content"]
    assert "@everyone" not in text and "@here" not in text
    assert "@\u200beveryone" in text
    assert "\\<@123456>" in text  # shown as written, never a mention
    assert "[a masked link](<https://evil.example>)" in text  # a link, its embed kept away
    assert "**real bold**" in text
    assert final["allowed_mentions"] == {"parse": []}


def test_the_gateway_s_reconnect_is_resumed_and_missed_messages_answered(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    fake_discord.wait_for(lambda: "heartbeat" in fake_discord.gateway_log)
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.reconnect()
    fake_discord.say(owner, DM, NANAIMO)  # sent while the bot reconnects: replayed on resume
    answered(fake_discord, DM, "Sources")
    log = fake_discord.gateway_log
    assert log.count("identify") == 1 and log.count("resume") == 1
    assert log.index("identify") < log.index("closed") < log.index("resume")


def test_a_429_is_waited_out_for_its_retry_after(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.fail(rf"POST /channels/{DM}/messages$", retry_after=1.5)
    fake_discord.say(owner, DM, "What is the capital of Canada?")
    answered(fake_discord, DM, "Ottawa")
    posts = fake_discord.calls_to("POST", rf"/channels/{DM}/messages$")
    assert [call.status for call in posts[:2]] == [429, 200]
    assert posts[1].at - posts[0].at >= 1.4


def test_an_upstream_failure_is_a_short_message_and_a_log_line_with_request_ids(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    fake_discord.say(owner, DM, "Write a haiku about the sea.")
    said = answered(fake_discord, DM, "model")
    assert "owner" in said["content"]
    lines = [line for line in bot.text().splitlines() if "failed upstream" in line]
    assert len(lines) == 1
    assert "request dc-" in lines[0] and "InsufficientBalanceError" in lines[0]


def test_without_an_api_key_the_embedded_mock_answers(
    tmp_path: Path, mock: Process, fake_discord: FakeDiscord
) -> None:
    env = bot_env(tmp_path, mock, fake_discord, DISCORD_ALLOWED_USERS=str(OWNER))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        del env[name]
    with BotProcess(env, tmp_path / "bot.log", fake_discord) as bot:
        owner = fake_discord.person(OWNER, "owner")
        fake_discord.say(owner, DM, NANAIMO)
        answered(fake_discord, DM, "Nanaimo is mild")
    offline = [line for line in bot.text().splitlines() if line.startswith("offline:")]
    assert offline == [
        "offline: no OPENAI_API_KEY set; answering from the embedded mock's recorded fixtures."
    ]


def run_discord(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``generic-framework discord`` run until it exits by itself."""
    command = [sys.executable, "-m", "generic_framework", "discord"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_missing_or_malformed_token_is_a_configuration_error(
    tmp_path: Path, mock: Process, fake_discord: FakeDiscord
) -> None:
    env = bot_env(tmp_path, mock, fake_discord)
    for token in (None, "not-a-token"):
        if token is None:
            del env["DISCORD_BOT_TOKEN"]
        else:
            env["DISCORD_BOT_TOKEN"] = token
        done = run_discord(env)
        assert done.returncode == 2, done.stderr
        assert "DISCORD_BOT_TOKEN" in done.stderr
        assert "not-a-token" not in done.stderr  # a secret's value is never shown
    assert fake_discord.calls == []


def test_a_refused_token_is_said_in_one_line_and_exits_2(
    tmp_path: Path, mock: Process, fake_discord: FakeDiscord
) -> None:
    wrong = "OTk5OTk5OTk5OTk5.XyZ1ab.another-token-the-fake-refuses"
    env = bot_env(tmp_path, mock, fake_discord, DISCORD_BOT_TOKEN=wrong)
    done = run_discord(env)
    assert done.returncode == 2
    assert "Discord refused DISCORD_BOT_TOKEN" in done.stderr
    assert wrong not in done.stdout + done.stderr
    assert [call.path for call in fake_discord.calls] == ["/users/@me"]
