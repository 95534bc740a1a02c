"""The service as a real process in front of the mock as a real process."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from service_processes import TOKEN, Process, bot_process, mock_process

pytestmark = pytest.mark.e2e

NANAIMO = "// what's the weather in Nanaimo?"
PERCENT = "// what is 17% of 2,340?"
CAPITAL = "What is the capital of Canada?"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Process, Process]]:
    with mock_process(tmp_path) as mock, bot_process(tmp_path, mock) as bot:
        yield mock, bot


def test_official_openai_client_plain_and_streamed(stack: tuple[Process, Process]) -> None:
    _, bot = stack
    client = openai.OpenAI(api_key=TOKEN, base_url=f"{bot.url}/v1", max_retries=0)
    assert [m.id for m in client.models.list()] == ["helper", "scout"]

    completion = client.chat.completions.create(
        model="scout", messages=[{"role": "user", "content": NANAIMO}]
    )
    answer = completion.choices[0].message.content or ""
    assert "Nanaimo" in answer and "[1]" in answer
    assert completion.choices[0].finish_reason == "stop"
    sources = (completion.model_extra or {})["web_search"]
    assert sources[0]["link"] == "https://weather.example.ca/city/nanaimo"
    assert sources[0]["refer"] == "ref_1"
    print(f"\nAPI answer to {NANAIMO!r}: {answer}\nfirst source: {sources[0]['link']}")

    stream = client.chat.completions.create(
        model="scout", messages=[{"role": "user", "content": NANAIMO}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Nanaimo" in text
    # The markers were rewritten as the text streamed, and the sources follow as markdown,
    # as in the JSON answer: what a stock client shows is the same either way.
    assert "[ref_" not in text and "afternoon [1]" in text
    assert text == answer
    assert "\n\nSources:\n1. [" in text and "](https://weather.example.ca/city/nanaimo)" in text
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert (last.model_extra or {})["web_search"][0]["link"].startswith("https://")
    assert last.usage is not None and last.usage.total_tokens > 0


def test_auth_and_limits_over_http(tmp_path: Path) -> None:
    with (
        mock_process(tmp_path) as mock,
        bot_process(tmp_path, mock, BOT_MAX_BODY="4096", BOT_MAX_MESSAGE_CHARS="50") as bot,
    ):
        url = f"{bot.url}/v1/chat/completions"
        ask = {"model": "scout", "messages": [{"role": "user", "content": CAPITAL}]}
        assert httpx.post(url, json=ask, timeout=30).status_code == 401
        wrong = httpx.post(url, json=ask, headers={"Authorization": "Bearer nope"}, timeout=30)
        assert wrong.status_code == 401
        big = {"model": "scout", "messages": [{"role": "user", "content": "x" * 5000}]}
        too_big = httpx.post(url, json=big, headers=AUTH, timeout=30)
        assert too_big.status_code == 413
        long = {"model": "scout", "messages": [{"role": "user", "content": "y" * 51}]}
        too_long = httpx.post(url, json=long, headers=AUTH, timeout=30)
        assert too_long.status_code == 400
        assert too_long.json()["error"]["code"] == "message_too_long"
        assert httpx.post(url, json=ask, headers=AUTH, timeout=30).status_code == 200
        assert httpx.get(f"{bot.url}/healthz", timeout=30).status_code == 200


def _read_until_progress(lines: Iterator[str]) -> dict[str, Any]:
    """Read SSE lines until the first tool-progress chunk (the turn is then mid-way)."""
    for line in lines:
        if line.startswith("data: {"):
            chunk = json.loads(line[len("data: ") :])
            if "progress" in chunk:
                return dict(chunk["progress"])
    raise AssertionError("the stream ended without tool progress")


def _post_turn(bot: Process, conversation: str, text: str, **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{bot.url}/v1/conversations/{conversation}/messages",
        json={"persona": "scout", "content": text, **extra},
        headers=AUTH,
        timeout=30,
    )


def _stored(bot: Process, conversation: str) -> httpx.Response:
    return httpx.get(f"{bot.url}/v1/conversations/{conversation}", headers=AUTH, timeout=30)


@pytest.mark.slow
def test_two_concurrent_turns_on_one_conversation_are_stored_in_order(tmp_path: Path) -> None:
    with mock_process(tmp_path, latency_ms=500) as mock, bot_process(tmp_path, mock) as bot:
        results: dict[str, httpx.Response] = {}
        with httpx.stream(
            "POST",
            f"{bot.url}/v1/conversations/race/messages",
            json={"persona": "scout", "content": PERCENT, "stream": True},
            headers=AUTH,
            timeout=30,
        ) as first:
            assert first.status_code == 200
            lines = first.iter_lines()
            assert _read_until_progress(lines)["event"] == "round_started"
            # The first turn is between its two model calls: the second must wait for it.
            second = threading.Thread(
                target=lambda: results.update(second=_post_turn(bot, "race", CAPITAL))
            )
            second.start()
            rest = "\n".join(lines)
        second.join(30)
        assert "data: [DONE]" in rest
        assert results["second"].status_code == 200
        assert "Ottawa" in results["second"].json()["content"]
        messages = _stored(bot, "race").json()["messages"]
    turns = [(m["turn"], m["role"]) for m in messages]
    assert turns == [
        (1, "user"),
        (1, "assistant"),
        (1, "tool"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
    assert messages[0]["content"] == "what is 17% of 2,340?"
    assert messages[4]["content"] == CAPITAL


@pytest.mark.slow
def test_sigkill_mid_turn_stores_no_partial_turn(tmp_path: Path) -> None:
    with mock_process(tmp_path, latency_ms=800) as mock:
        bot = bot_process(tmp_path, mock).start()
        try:
            assert _post_turn(bot, "crash", CAPITAL).status_code == 200
            with httpx.stream(
                "POST",
                f"{bot.url}/v1/conversations/crash/messages",
                json={"persona": "scout", "content": PERCENT, "stream": True},
                headers=AUTH,
                timeout=30,
            ) as response:
                assert _read_until_progress(response.iter_lines())["event"] == "round_started"
                bot.kill()  # the tool round is done, the answering call is still in flight
            bot.start()
            messages = _stored(bot, "crash").json()["messages"]
            assert [(m["turn"], m["role"], m["content"]) for m in messages] == [
                (1, "user", CAPITAL),
                (1, "assistant", messages[1]["content"]),
            ]
            again = _post_turn(bot, "crash", PERCENT)
            assert again.status_code == 200
            assert {m["turn"] for m in _stored(bot, "crash").json()["messages"]} == {1, 2}
        finally:
            bot.stop()
