"""The official openai client against the service, whose personas call the mock Z.AI server.

The service runs in-process (httpx's ASGI transport); the mock is a real HTTP server on
loopback. A fixture recorded with ``match: {system: exact, history: exact}`` answers a request
only when every message of it, the system messages included, equals the recording, so a served
exchange proves what the upstream request carried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from generic_framework.config import Settings
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.mock.fixture import Fixture
from generic_framework.runtime import Runtime
from generic_framework.service import create_app

CHAT_PATH = "/api/paas/v4/chat/completions"
PROMPT = "You are Tutor. Answer in one short sentence."
CLIENT_SYSTEM = "Answer like a pirate."
TURNS = [
    ("What is 2 + 2?", "Arr, 4."),
    ("And doubled?", "Arr, 8."),
    ("And halved again?", "Arr, 4 once more."),
]
Connect = Callable[..., Any]


def _answer(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"req-{n}",
        "created": 1767950000,
        "model": "glm-4.7",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _strict_conversation() -> Fixture:
    """Three turns, each request compared whole: both system messages, then every turn."""
    exchanges = []
    earlier: list[dict[str, str]] = []
    for n, (question, answer) in enumerate(TURNS):
        messages = [
            {"role": "system", "content": PROMPT},
            {"role": "system", "content": CLIENT_SYSTEM},
            *earlier,
            {"role": "user", "content": question},
        ]
        body = {"model": "glm-4.7", "messages": messages, "stream": False}
        exchanges.append(
            {
                "request": {
                    "method": "POST",
                    "path": "/api/paas/v4/chat/completions",
                    "body": body,
                },
                "response": {"status": 200, "headers": {}, "body": _answer(answer, n)},
            }
        )
        earlier += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return Fixture.model_validate(
        {
            "name": "stateless_three_turns",
            "persona": "tutor",
            "user_input": TURNS[0][0],
            "match": {"system": "exact", "history": "exact"},
            "exchanges": exchanges,
        }
    )


def _personas(tmp_path: Path, allow_client_system: bool = True) -> Path:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    allow = "true" if allow_client_system else "false"
    (folder / "tutor.toml").write_text(
        f'system_prompt = "{PROMPT}"\nallow_client_system = {allow}\n\n'
        '[web_search]\nmode = "off"\n',
        encoding="utf-8",
    )
    return folder


@pytest.fixture
async def bot_on(tmp_path: Path) -> AsyncIterator[Connect]:
    """``bot_on(mock, personas)``: an openai client to the service over the mock."""
    clients: list[httpx.AsyncClient] = []
    runtimes: list[Runtime] = []

    def connect(mock: MockServer, personas: Path) -> openai.AsyncOpenAI:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=mock.base_url,
            personas_dir=personas,
            data_dir=tmp_path / "data",
        )
        runtimes.append(Runtime(settings))
        transport = httpx.ASGITransport(app=create_app(runtime=runtimes[-1]))
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://localhost"))
        # max_retries left at its default (2): a refusal must not be retried by the client.
        return openai.AsyncOpenAI(
            api_key="unused", base_url="http://localhost/v1", http_client=clients[-1]
        )

    yield connect
    for client in clients:
        await client.aclose()
    for runtime in runtimes:
        await runtime.aclose()


async def test_a_stateless_openai_conversation_keeps_its_context(
    tmp_path: Path, bot_on: Connect
) -> None:
    async with MockServer([_strict_conversation()]) as mock:
        client = bot_on(mock, _personas(tmp_path))
        messages: list[Any] = [{"role": "system", "content": CLIENT_SYSTEM}]
        for question, expected in TURNS:
            messages.append({"role": "user", "content": question})
            completion = await client.chat.completions.create(model="tutor", messages=messages)
            answer = completion.choices[0].message.content
            assert answer == expected
            messages.append({"role": "assistant", "content": answer})
        report = mock.report()
    # Turn 3 was answered from exchange 2, which the mock serves only to a request carrying the
    # persona's prompt, then the client's system message, then turns 1 and 2.
    assert report["fixtures"][0]["served"] == [1, 1, 1]
    assert report["requests"] == 3
    assert report["unmatched_requests"] == []


async def test_a_persona_that_refuses_client_system_messages(
    tmp_path: Path, bot_on: Connect
) -> None:
    async with MockServer([_strict_conversation()]) as mock:
        client = bot_on(mock, _personas(tmp_path, allow_client_system=False))
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="tutor",
                messages=[
                    {"role": "system", "content": CLIENT_SYSTEM},
                    {"role": "user", "content": TURNS[0][0]},
                ],
            )
        report = mock.report()
    assert refused.value.code == "system_not_allowed"
    assert "allow_client_system" in refused.value.message
    assert report["requests"] == 0


def _refusing(question: str, status: int, code: str, message: str) -> Fixture:
    body = {"model": "glm-4.7", "messages": [{"role": "user", "content": question}]}
    error = {"error": {"code": code, "message": message}}
    return Fixture.model_validate(
        {
            "name": f"refused_{code}",
            "persona": "tutor",
            "user_input": question,
            "exchanges": [
                {
                    "request": {"method": "POST", "path": CHAT_PATH, "body": body},
                    "response": {"status": status, "headers": {}, "body": error},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("status", "code", "raised", "answered"),
    [
        # the prompt exceeds the model's length (no history to drop): OpenAI's own code
        (400, "1261", openai.BadRequestError, 400),
        (400, "1214", openai.BadRequestError, 400),  # an invalid messages parameter
        (400, "1211", openai.BadRequestError, 400),  # the model does not exist
        (429, "1113", openai.PermissionDeniedError, 403),  # no balance: an account problem
        (401, "1002", openai.PermissionDeniedError, 403),  # the service's key was refused
        (429, "1308", openai.RateLimitError, 429),  # a used-up quota: x-should-retry false
    ],
)
async def test_an_upstream_refusal_is_one_upstream_call_through_the_openai_client(
    tmp_path: Path,
    bot_on: Connect,
    status: int,
    code: str,
    raised: type[openai.APIStatusError],
    answered: int,
) -> None:
    question = "Tell me everything at once."
    refusal = _refusing(question, status, code, f"refused with {code}")
    async with MockServer([refusal]) as mock:
        client = bot_on(mock, _personas(tmp_path))
        with pytest.raises(raised) as refused:
            await client.chat.completions.create(
                model="tutor", messages=[{"role": "user", "content": question}]
            )
        report = mock.report()
    assert refused.value.status_code == answered
    assert refused.value.code == ("context_length_exceeded" if code == "1261" else code)
    assert f"refused with {code}" in refused.value.message
    # Neither the service's client (LLM_MAX_RETRIES=3) nor the openai client (max_retries=2)
    # asked again: one call reached the mock.
    assert report["requests"] == 1


async def test_an_unrecorded_question_offline_is_a_400_not_retried(
    tmp_path: Path, bot_on: Connect
) -> None:
    async with MockServer(bundled_fixture_paths()) as mock:
        client = bot_on(mock, _personas(tmp_path))
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="tutor", messages=[{"role": "user", "content": "Nothing recorded this."}]
            )
        report = mock.report()
    # Plain words and a code of the service's own, not the mock's matching diagnosis.
    assert refused.value.code == "offline_not_recorded"
    assert "Offline mode only answers the questions recorded" in refused.value.message
    assert "Closest fixture" not in refused.value.message
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert report["requests"] == 1
