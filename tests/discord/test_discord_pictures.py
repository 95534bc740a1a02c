"""Pictures sent to the Discord bot: the real ``generic-framework discord`` process, the mock
Z.AI and the fake Discord, which serves each attachment at its URL as Discord's CDN does.

A JPEG or PNG attachment within ``BOT_MAX_IMAGE_BYTES`` is downloaded from its URL and the
message's text is the question (the type read from the file name when Discord leaves
``content_type`` out), through the same neutral path as a Telegram photo; another
file, or a picture Discord says is over the limit, gets the same short reply before anything
is downloaded and nothing goes upstream. The mock answers only a request carrying the expected
picture (matched by the hash of its bytes), to a vision persona.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from discord_payloads import BOT_ID, user
from discord_processes import BotProcess, Process, bot_env, mock_process, mock_requests
from fake_discord import FakeDiscord
from test_bot_pictures import picture_fixtures, seer_personas
from test_discord_bot import answered

pytestmark = pytest.mark.timeout(120)

OWNER, DM, GENERAL = 1001, 5001, 6001
CHART = b"\x89PNG\r\n\x1a\n" + b"chart" * 10
PHOTO = b"\xff\xd8\xff" + b"photo" * 300
LIMIT = 5000  # BOT_MAX_IMAGE_BYTES here
QUESTION = "What does this chart say?"
PHOTO_QUESTION = "What is on this plate?"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    cases = [
        ("chart", CHART, QUESTION, "Sales went up."),
        ("photo", PHOTO, PHOTO_QUESTION, "Pancakes with syrup."),
    ]
    with mock_process(tmp, fixtures=[picture_fixtures(tmp, "discord", cases)]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_discord: FakeDiscord) -> Iterator[BotProcess]:
    fake_discord.add_channel(GENERAL, "general")
    personas = seer_personas(tmp_path)
    env = bot_env(
        tmp_path,
        mock,
        fake_discord,
        PERSONAS_DIR=str(personas),
        BOT_MAX_IMAGE_BYTES=str(LIMIT),
        DISCORD_ALLOWED_USERS=str(OWNER),
    )
    with BotProcess(env, tmp_path / "bot.log", fake_discord) as running:
        yield running
    assert fake_discord.token not in running.text()  # a failed download's error line too


@pytest.mark.parametrize(
    ("filename", "picture", "mime", "question", "answer"),
    [
        ("chart.png", CHART, "image/png", QUESTION, "Sales went up"),
        ("plate.jpg", PHOTO, "image/jpeg", PHOTO_QUESTION, "Pancakes with syrup"),
        ("plate.jpeg", PHOTO, None, PHOTO_QUESTION, "Pancakes with syrup"),
    ],
    ids=["png", "jpeg", "jpeg-without-content-type"],
)
def test_a_dm_with_a_picture_is_answered_with_its_text(
    fake_discord: FakeDiscord,
    bot: BotProcess,
    mock: Process,
    filename: str,
    picture: bytes,
    mime: str | None,
    question: str,
    answer: str,
) -> None:
    before = mock_requests(mock)
    owner = fake_discord.person(OWNER, "owner")
    file = fake_discord.attach(DM, filename, picture, mime)
    fake_discord.say(owner, DM, question, attachments=[file])
    answered(fake_discord, DM, answer)  # the mock answers only the request with this picture
    assert fake_discord.downloads == [filename]
    assert mock_requests(mock) == before + 1


def test_a_picture_in_a_guild_channel_is_answered_with_the_mention_taken_out(
    fake_discord: FakeDiscord, bot: BotProcess
) -> None:
    owner = fake_discord.person(OWNER, "owner")
    file = fake_discord.attach(GENERAL, "chart.png", CHART, "image/png")
    me = user(BOT_ID, "persona-bot", bot=True)
    text = f"<@{BOT_ID}> {QUESTION}"
    fake_discord.say(owner, GENERAL, text, guild=True, mentions=[me], attachments=[file])
    answered(fake_discord, GENERAL, "Sales went up")
    assert fake_discord.downloads == ["chart.png"]


@pytest.mark.parametrize(
    ("filename", "mime", "size", "words"),
    [
        ("report.pdf", "application/pdf", 100, "only read text and pictures"),
        ("notes.txt", "text/plain; charset=utf-8", 100, "only read text and pictures"),
        ("huge.png", "image/png", LIMIT + 1, f"the limit is {LIMIT}"),
    ],
    ids=["pdf", "text", "too-large"],
)
def test_another_file_or_a_picture_too_large_gets_a_short_reply(
    fake_discord: FakeDiscord,
    bot: BotProcess,
    mock: Process,
    filename: str,
    mime: str,
    size: int,
    words: str,
) -> None:
    before = mock_requests(mock)
    owner = fake_discord.person(OWNER, "owner")
    file = fake_discord.attach(DM, filename, b"x" * size, mime)
    fake_discord.say(owner, DM, "What is this?", attachments=[file])
    answered(fake_discord, DM, words)
    assert fake_discord.downloads == []  # refused by what Discord says, before a download
    assert mock_requests(mock) == before


def test_an_attachment_gone_from_the_cdn_gets_an_apology_and_no_model_call(
    fake_discord: FakeDiscord, bot: BotProcess, mock: Process
) -> None:
    before = mock_requests(mock)
    owner = fake_discord.person(OWNER, "owner")
    file = fake_discord.attach(DM, "chart.png", CHART, "image/png")
    fake_discord.files.clear()  # its URL expired: the CDN answers 404
    fake_discord.say(owner, DM, QUESTION, attachments=[file])
    answered(fake_discord, DM, "something went wrong")
    assert mock_requests(mock) == before
    again = fake_discord.attach(DM, "chart.png", CHART, "image/png")
    fake_discord.say(owner, DM, QUESTION, attachments=[again])  # the bot still answers
    answered(fake_discord, DM, "Sales went up")
