"""``chat --image FILE``: a picture from the command line, through the turn service, to the mock."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from support import run_cli

from generic_framework.mock import MockServer, load_fixtures
from generic_framework.mock.fixture import Fixture, bundled_fixtures_dir

pytestmark = pytest.mark.e2e

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
QUESTION = "What does the sign say?"
PROMPT = "You look at what you are shown."


def _fixture() -> Fixture:
    picture = "data:image/png;base64," + base64.b64encode(PNG).decode()
    content = [
        {"type": "text", "text": QUESTION},
        {"type": "image_url", "image_url": {"url": picture}},
    ]
    answer = {
        "id": "r1",
        "created": 1767950000,
        "model": "glm-4.6v",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "OPEN."},
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": content}]
    return Fixture.model_validate(
        {
            "name": "cli_picture",
            "user_input": QUESTION,
            "match": {"system": "exact", "history": "exact", "model": "exact"},
            "exchanges": [
                {
                    "request": {
                        "method": "POST",
                        "path": "/api/paas/v4/chat/completions",
                        "body": {"model": "glm-4.6v", "messages": messages},
                    },
                    "response": {"status": 200, "headers": {}, "body": answer},
                }
            ],
        }
    )


@pytest.fixture
def seer_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "seer.toml").write_text(
        f'system_prompt = "{PROMPT}"\nmodel = "glm-4.6v"\n\n[web_search]\nmode = "off"\n',
        encoding="utf-8",
    )
    return {**env, "PERSONAS_DIR": str(folder), "OPENAI_API_KEY": "k"}


def test_chat_sends_a_picture_file(seer_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "sign.png").write_bytes(PNG)
    with MockServer([_fixture()]) as mock:
        args = ["chat", "--persona", "seer", "--base-url", mock.base_url]
        done = run_cli([*args, "--image", str(tmp_path / "sign.png"), QUESTION], seer_env)
        report = mock.report()
    assert done.returncode == 0, done.stderr
    assert "OPEN." in done.stdout
    assert report["fixtures"][0]["served"] == [1]


def test_chat_refuses_a_file_that_is_not_a_picture(
    seer_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("not a picture", encoding="utf-8")
    with MockServer([_fixture()]) as mock:
        args = ["chat", "--persona", "seer", "--base-url", mock.base_url]
        done = run_cli([*args, "--image", str(tmp_path / "notes.txt"), QUESTION], seer_env)
        report = mock.report()
    assert done.returncode == 2
    assert "application/octet-stream MIME type" in done.stderr
    assert report["requests"] == 0


OFFLINE = "offline: no OPENAI_API_KEY set; answering from the embedded mock's recorded fixtures."


def test_the_bundled_picture_is_answered_offline(env: dict[str, str]) -> None:
    (demo,) = load_fixtures(bundled_fixtures_dir() / "picture_described.json")
    (picture,) = demo.picture_paths()
    assert demo.expected is not None and demo.expected.content
    done = run_cli(["chat", "--image", str(picture), "what is in this picture?"], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == demo.expected.content
    assert done.stderr.strip() == OFFLINE
    # The answer is the picture's: the question alone has no recorded answer.
    alone = run_cli(["chat", "what is in this picture?"], env)
    assert alone.returncode == 1
    assert "no recorded answer" in alone.stderr
