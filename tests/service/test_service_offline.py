"""``generic-framework serve`` as a real process: offline by default, ``--mock``, /v1/bot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from service_processes import PERSONAS, Process, base_env

from generic_framework.mock import load_fixtures
from generic_framework.mock.fixture import bundled_fixtures_dir
from generic_framework.pictures import file_url

pytestmark = pytest.mark.e2e

CAPITAL = "What is the capital of Canada?"
HELPER_QUESTION = "What is 15% of 80?"


def serve(tmp: Path, *args: str, **env: str) -> Process:
    environment = {
        **base_env(tmp),
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp / "data"),
        **env,
    }
    command = ["serve", "--host", "127.0.0.1", "--port", "0", *args]
    return Process(command, tmp / "bot.log", environment, tmp)


def test_without_a_key_serve_answers_from_the_embedded_mock(tmp_path: Path) -> None:
    with serve(tmp_path) as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
        client = openai.OpenAI(api_key="unused", base_url=f"{bot.url}/v1")
        answer = client.chat.completions.create(
            model="scout", messages=[{"role": "user", "content": CAPITAL}]
        )
        helped = client.chat.completions.create(
            model="helper", messages=[{"role": "user", "content": HELPER_QUESTION}]
        )
        with pytest.raises(openai.BadRequestError) as unrecorded:
            client.chat.completions.create(
                model="scout", messages=[{"role": "user", "content": "Nothing recorded this."}]
            )
        ready = httpx.get(f"{bot.url}/readyz", timeout=30)
    log = bot.log.read_text()
    assert "offline: no OPENAI_API_KEY set; answering from the embedded mock" in log
    assert set(info) == {"offline", "default_persona", "examples", "persona_examples"}
    assert info["offline"] is True
    # scout is the first persona (by name) with web search on; helper has it off.
    assert info["default_persona"] == "scout"
    assert CAPITAL in info["examples"]
    assert info["examples"][0].startswith("//")
    # Every bundled persona has recorded questions of its own, and they are answered.
    assert info["persona_examples"]["scout"] == info["examples"]
    assert HELPER_QUESTION in info["persona_examples"]["helper"]
    assert "Ottawa" in (answer.choices[0].message.content or "")
    assert "12" in (helped.choices[0].message.content or "")
    assert unrecorded.value.code == "offline_not_recorded"
    assert ready.status_code == 200


def test_mock_forces_offline_even_with_a_key(tmp_path: Path) -> None:
    with serve(
        tmp_path, "--mock", OPENAI_API_KEY="a-real-looking-key", BOT_DEFAULT_PERSONA="helper"
    ) as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
        answer = httpx.post(
            f"{bot.url}/v1/chat/completions",
            json={"model": "scout", "messages": [{"role": "user", "content": CAPITAL}]},
            timeout=30,
        )
    assert "offline: --mock given" in bot.log.read_text()
    assert info["offline"] is True
    assert info["default_persona"] == "helper"
    assert answer.status_code == 200


def test_turns_served_offline_are_stored_as_offline_and_not_billed(tmp_path: Path) -> None:
    with serve(tmp_path, "--mock", OPENAI_API_KEY="a-real-looking-key") as bot:
        stored = httpx.post(
            f"{bot.url}/v1/conversations/demo/messages",
            json={"persona": "scout", "content": CAPITAL},
            timeout=30,
        )
    assert stored.status_code == 200, stored.text
    env = {**base_env(tmp_path), "PERSONAS_DIR": str(PERSONAS), "DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "usage", "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["offline_turns"] == 1 and report["total"]["turns"] == 0


def test_with_a_key_serve_is_online(tmp_path: Path) -> None:
    # The key is never used: only /v1/bot is asked, which calls no model.
    with serve(tmp_path, OPENAI_API_KEY="a-real-looking-key") as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
    assert info == {
        "offline": False,
        "default_persona": "scout",
        "examples": [],
        "persona_examples": {},
    }
    assert "offline:" not in bot.log.read_text()


def test_an_unknown_default_persona_stops_serve_at_once(tmp_path: Path) -> None:
    environment = {
        **base_env(tmp_path),
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp_path / "data"),
        "BOT_DEFAULT_PERSONA": "nobody",
    }
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "serve", "--port", "0"],
        env=environment,
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "BOT_DEFAULT_PERSONA 'nobody' is not a persona (known: helper, scout)" in done.stderr


def test_a_mock_zai_server_upstream_offers_its_recorded_questions(tmp_path: Path) -> None:
    # The compose mock profile: a key, and OPENAI_BASE_URL at a separate mock Z.AI server.
    from generic_framework.mock import MockServer, bundled_examples

    with (
        MockServer() as mock,
        serve(
            tmp_path,
            OPENAI_API_KEY="mock-key",
            OPENAI_BASE_URL=mock.base_url,
        ) as bot,
    ):
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
        asked = httpx.get(
            f"{mock.url}/mock/examples", params={"persona": "scout"}, timeout=30
        ).json()
    assert info["offline"] is True and info["default_persona"] == "scout"
    assert info["examples"] == bundled_examples(persona="scout") != []
    # Every persona's own questions, learnt from the mock, as the embedded mock gives them.
    assert info["persona_examples"] == {
        name: bundled_examples(persona=name) for name in ("helper", "scout")
    }
    assert info["persona_examples"]["helper"] != []
    assert asked == {"examples": bundled_examples(persona="scout", endpoint=None)}


def test_a_plain_http_upstream_that_is_no_mock_is_online(tmp_path: Path) -> None:
    # Nothing listens there: the start-up question fails, and the bot is online as before.
    env = {"OPENAI_API_KEY": "a-key", "OPENAI_BASE_URL": "http://127.0.0.1:9/api/paas/v4"}
    with serve(tmp_path, **env) as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
    assert info == {
        "offline": False,
        "default_persona": "scout",
        "examples": [],
        "persona_examples": {},
    }


def test_the_offline_memory_demo_remembers_in_one_chat_and_recalls_in_the_next(
    tmp_path: Path,
) -> None:
    examples = PERSONAS / "examples"
    with serve(tmp_path, "--mock", PERSONAS_DIR=str(examples)) as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()

        def turn(cid: str, text: str) -> str:
            done = httpx.post(
                f"{bot.url}/v1/conversations/{cid}/messages",
                json={"persona": "keeper", "content": text},
                timeout=30,
            )
            assert done.status_code == 200, done.text
            return str(done.json()["content"])

        before = httpx.get(f"{bot.url}/v1/memories?persona=keeper", timeout=30).json()
        kept = turn("demo-1", "Remember that my cat is called Miso.")
        after = httpx.get(f"{bot.url}/v1/memories?persona=keeper", timeout=30).json()
        recalled = turn("demo-2", "What is my cat called?")
        gone = httpx.delete(f"{bot.url}/v1/memories/{after['data'][0]['id']}", timeout=30)
        empty = httpx.get(f"{bot.url}/v1/memories", timeout=30).json()
    assert "Remember that my cat is called Miso." in info["persona_examples"]["keeper"]
    assert before == {"object": "list", "data": []}
    assert kept == "Got it: I will remember that your cat is called Miso."
    assert [m["text"] for m in after["data"]] == ["The user's cat is called Miso."]
    assert recalled.startswith("Your cat is called Miso")
    assert gone.status_code == 204 and empty["data"] == []


def test_the_bundled_picture_sent_as_the_page_sends_it_is_answered_offline(
    tmp_path: Path,
) -> None:
    (demo,) = load_fixtures(bundled_fixtures_dir() / "picture_described.json")
    (picture,) = demo.picture_paths()
    assert demo.expected is not None
    content = [
        {"type": "text", "text": demo.user_input},
        {"type": "image_url", "image_url": {"url": file_url(picture)}},
    ]
    with serve(tmp_path, "--mock") as bot:
        info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
        # The page's request: the message's parts to a stored conversation, streamed.
        answer = httpx.post(
            f"{bot.url}/v1/conversations/picture/messages",
            json={"persona": "scout", "content": content, "stream": True},
            timeout=30,
        )
    assert answer.status_code == 200, answer.text
    events = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: {")
    ]
    assert events[-1]["reply"]["content"] == demo.expected.content
    assert demo.user_input not in info["examples"]  # typed alone it has no recorded answer
