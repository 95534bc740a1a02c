"""Pictures sent to the Telegram bot: the real bot process, the mock Z.AI and the fake Bot API.

A photo's largest size within ``BOT_MAX_IMAGE_BYTES`` is downloaded through the Bot API's
``getFile`` and its caption is the question; an image sent as a document too; another file,
or a picture over the limit, gets a short reply and nothing goes upstream. The mock answers
only a request carrying the expected picture (matched by the hash of its bytes), to a vision
persona.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bot_processes import OWNER, BotProcess, Process, bot_env, mock_process, mock_requests
from fake_bot_api import Call, FakeBotAPI

pytestmark = pytest.mark.timeout(120)

PROMPT = "You look at what you are shown."
SMALL = b"\x89PNG\r\n\x1a\n" + b"small" * 10
MIDDLE = b"\xff\xd8\xff" + b"middle" * 300
LARGE = b"\xff\xd8\xff" + b"large" * 2000
LIMIT = 5000  # BOT_MAX_IMAGE_BYTES here: LARGE is over it, MIDDLE is the largest within it
CAPTION = "What is on this menu?"
DOCUMENT_QUESTION = "And this chart?"


def exchange(picture: bytes, question: str, answer: str) -> dict[str, Any]:
    content = [
        {"type": "text", "text": question},
        {
            "type": "image_url",
            "image_url": {"url": "sha256:" + hashlib.sha256(picture).hexdigest()},
        },
    ]
    return {
        "request": {
            "method": "POST",
            "path": "/api/paas/v4/chat/completions",
            "body": {
                "model": "glm-4.6v",
                "messages": [
                    {"role": "system", "content": PROMPT},
                    {"role": "user", "content": content},
                ],
            },
        },
        "response": {
            "status": 200,
            "headers": {},
            "body": {
                "id": "tg-picture",
                "created": 1767950000,
                "model": "glm-4.6v",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": answer},
                    }
                ],
                "usage": {"prompt_tokens": 300, "completion_tokens": 8, "total_tokens": 308},
            },
        },
    }


def picture_fixtures(tmp: Path, platform: str, cases: list[tuple[str, bytes, str, str]]) -> Path:
    """A folder of mock fixtures: per ``(name, picture, question, answer)`` the seer's answer
    to the question with that picture."""
    folder = tmp / "fixtures"
    folder.mkdir()
    for name, picture, question, answer in cases:
        fixture = {
            "version": 1,
            "name": f"{platform}_{name}",
            "persona": "seer",
            "user_input": question,
            "exchanges": [exchange(picture, question, answer)],
        }
        (folder / f"{name}.json").write_text(json.dumps(fixture), encoding="utf-8")
    return folder


def seer_personas(tmp: Path) -> Path:
    """A personas folder holding the seer, a vision persona without web search."""
    personas = tmp / "personas"
    personas.mkdir()
    (personas / "seer.toml").write_text(
        f'system_prompt = "{PROMPT}"\nmodel = "glm-4.6v"\n\n[web_search]\nmode = "off"\n',
        encoding="utf-8",
    )
    return personas


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    cases = [
        ("photo", MIDDLE, CAPTION, "Soup of the day and bread."),
        ("document", SMALL, DOCUMENT_QUESTION, "Sales went up."),
    ]
    with mock_process(tmp, fixtures=[picture_fixtures(tmp, "telegram", cases)]) as server:
        yield server


@pytest.fixture
def bot(tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI) -> Iterator[BotProcess]:
    personas = seer_personas(tmp_path)
    env = bot_env(
        tmp_path, mock, fake_bot_api, PERSONAS_DIR=str(personas), BOT_MAX_IMAGE_BYTES=str(LIMIT)
    )
    with BotProcess(env, tmp_path / "bot.log", fake_bot_api) as running:
        yield running


def reply_to(fake: FakeBotAPI) -> Call:
    return fake.wait_for(
        lambda c: c.method == "sendMessage" and c.params["chat_id"] == OWNER and c.status == 200
    )


def downloaded(fake: FakeBotAPI) -> list[str]:
    return [c.params["file_id"] for c in fake.calls_to("getFile")]


def test_a_photo_s_largest_size_within_the_limit_is_answered_with_its_caption(
    fake_bot_api: FakeBotAPI, bot: BotProcess
) -> None:
    fake_bot_api.files.update({"p-small": SMALL, "p-middle": MIDDLE, "p-large": LARGE})
    sizes = [("p-small", len(SMALL)), ("p-middle", len(MIDDLE)), ("p-large", len(LARGE))]
    fake_bot_api.push(fake_bot_api.photo(sizes=sizes, caption=CAPTION))
    answer = reply_to(fake_bot_api)
    assert "Soup of the day" in answer.params["text"]
    assert downloaded(fake_bot_api) == ["p-middle"]


def test_an_image_document_is_answered(fake_bot_api: FakeBotAPI, bot: BotProcess) -> None:
    fake_bot_api.files["chart"] = SMALL
    fake_bot_api.push(
        fake_bot_api.document("chart", "image/png", len(SMALL), caption=DOCUMENT_QUESTION)
    )
    answer = reply_to(fake_bot_api)
    assert "Sales went up" in answer.params["text"]
    assert downloaded(fake_bot_api) == ["chart"]


@pytest.mark.parametrize(
    ("mime", "size", "words"),
    [
        ("application/pdf", 100, "only read text and pictures"),
        ("image/png", LIMIT + 1, f"the limit is {LIMIT}"),
    ],
)
def test_another_file_or_a_picture_too_large_gets_a_short_reply(
    fake_bot_api: FakeBotAPI, bot: BotProcess, mock: Process, mime: str, size: int, words: str
) -> None:
    before = mock_requests(mock)
    fake_bot_api.files["file"] = b"x" * size
    fake_bot_api.push(fake_bot_api.document("file", mime, size, caption="What is this?"))
    answer = reply_to(fake_bot_api)
    assert words in answer.params["text"]
    assert downloaded(fake_bot_api) == []  # refused by what Telegram says, before a download
    assert mock_requests(mock) == before


def test_a_mislabelled_picture_is_refused_after_its_download(
    fake_bot_api: FakeBotAPI, bot: BotProcess, mock: Process
) -> None:
    before = mock_requests(mock)
    fake_bot_api.files["fake"] = b"GIF89a" + bytes(32)
    fake_bot_api.push(fake_bot_api.document("fake", "image/png", 38, caption="What is this?"))
    answer = reply_to(fake_bot_api)
    assert "cannot use that picture" in answer.params["text"]
    assert mock_requests(mock) == before
