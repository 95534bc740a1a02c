"""A representative part of the fault matrix through the service: mock and bot as processes.

The bot serves the ``probe`` persona (``personas/probe.toml``; its tools come from
``fault_tools`` on ``PYTHONPATH``) with the matrix's settings. Each case posts one turn to
``/v1/conversations/{id}/messages`` and checks the HTTP outcome (the answer, or the gateway
status and error code the service maps the upstream failure to; after a stream has started, an
error frame), the requests that reached the mock, the deadline (the service waits its real
retry backoff, up to 1.5 s with two retries), and the SQLite store the bot wrote.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fault_fixtures import CASES, FIXTURES, HERE, PERSONAS, SETTINGS, Case
from matrix_checks import check_store, expected_of
from service_processes import TOKEN, Process, base_env, bot_process

from generic_framework.core.reply import Reply
from generic_framework.mock.fixture import Expected, ExpectedError
from generic_framework.store import SQLiteStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BACKOFF = 1.5
"""The most two retries can wait without a Retry-After (0.5 s, then 1 s)."""
GATEWAY = {
    # status, and the code without an upstream one (service/errors.py has the table)
    "RateLimitError": (429, "rate_limited"),
    "InsufficientBalanceError": (403, "upstream_account_unusable"),
    "APITimeoutError": (504, "upstream_timeout"),
    "APIConnectionError": (502, "upstream_unreachable"),
    "ServerError": (502, "upstream_error"),
}
WAIT = {429, 503}
"""Statuses answered with Retry-After."""


def gateway(error: ExpectedError) -> tuple[int, str]:
    """The status and error code the service answers for ``error``: Z.AI's code when known."""
    status, code = GATEWAY[error.type]
    if error.code in ("1305", "1312"):
        status = 503  # an overloaded model, not the caller's rate
    return status, error.code or code


SERVICE_CASES = [case for case in CASES if case.service]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Process, Path]]:
    tmp = tmp_path_factory.mktemp("stack")
    args = ["mock", "--fixtures", str(FIXTURES), "--host", "127.0.0.1", "--port", "0"]
    env = {name.upper(): str(value) for name, value in SETTINGS.items()}
    with (
        Process(args, tmp / "mock.log", base_env(tmp), tmp) as mock,
        bot_process(tmp, mock, PERSONAS_DIR=str(PERSONAS), PYTHONPATH=str(HERE), **env) as bot,
    ):
        yield mock, bot, tmp / "data" / "conversations.sqlite3"


@pytest.fixture
async def store(stack: tuple[Process, Process, Path]) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(stack[2])
    yield opened
    await opened.aclose()


def sse_frames(text: str) -> list[Any]:
    frames = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    return [frame if frame == "[DONE]" else json.loads(frame) for frame in frames]


def reply_of(case: Case, response: httpx.Response) -> tuple[Reply | None, str | None]:
    """The stored-reply stand-in and the error code of a 200 response (frame or JSON)."""
    if not case.stream:
        body = response.json()
        return Reply(content=body["content"], stop_reason=body["stop_reason"], model="-"), None
    frames = sse_frames(response.text)
    if frames[-1] != "[DONE]":
        return None, frames[-1]["error"]["code"]
    summary = frames[-2]["reply"]
    return Reply(content=summary["content"], stop_reason=summary["stop_reason"], model="-"), None


def check_http(case: Case, expected: Expected, response: httpx.Response) -> Reply | None:
    if expected.error is not None and not (case.stream and response.status_code == 200):
        status, code = gateway(expected.error)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code)
        if status in WAIT:
            assert int(response.headers["retry-after"]) >= 1
        return None
    assert response.status_code == 200, response.text
    reply, error_code = reply_of(case, response)
    if expected.error is not None:  # failed after the stream had started: an error frame
        assert error_code == gateway(expected.error)[1]
        return None
    assert reply is not None
    assert (reply.content, reply.stop_reason) == (expected.content, expected.stop_reason)
    return reply


@pytest.mark.parametrize("case", SERVICE_CASES, ids=[case.name for case in SERVICE_CASES])
async def test_fault_through_the_service(
    case: Case, stack: tuple[Process, Process, Path], store: SQLiteStore
) -> None:
    mock, bot, _ = stack
    httpx.post(f"{mock.url}/mock/reset", timeout=30)
    started = time.monotonic()
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        response = await client.post(
            f"{bot.url}/v1/conversations/{case.name}/messages",
            json={"persona": "probe", "content": case.user_input, "stream": case.stream},
        )
    elapsed = time.monotonic() - started

    reply = check_http(case, expected_of(case), response)
    report = httpx.get(f"{mock.url}/mock/report", timeout=30).json()
    assert report["requests"] == case.requests
    assert (report["rejected"], report["unmatched"]) == (0, 0)
    assert elapsed < case.deadline + BACKOFF
    await check_store(store, case, reply)
