"""Webhook mode: two ``serve`` replicas on one PostgreSQL database receive the bot's updates.

Telegram redelivers an update it got no answer for in time, possibly to another replica: the
same update delivered to both is answered once (the store's claim). A request without the
secret, or with another one, is refused and processes nothing. The webhook route is outside
the API's bearer auth, and its updates are counted in ``/metrics``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bot_processes import BUNDLED, OWNER, Process, mock_process, mock_requests
from fake_bot_api import FakeBotAPI, deliver
from service_processes import TOKEN, bot_process

pytestmark = pytest.mark.timeout(180)

SECRET = "webhook-secret-0123456789"
PATH = "/telegram/webhook"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    with mock_process(tmp, fixtures=[BUNDLED]) as server:
        yield server


@pytest.fixture
def replicas(
    tmp_path: Path, mock: Process, fake_bot_api: FakeBotAPI, postgres_server: Any
) -> Iterator[list[Process]]:
    url = str(postgres_server.create_database())
    env = {
        "DATABASE_URL": url,
        "TELEGRAM_BOT_TOKEN": fake_bot_api.token,
        "TELEGRAM_API_URL": fake_bot_api.base_url,
        "TELEGRAM_ALLOWED_USERS": str(OWNER),
        "TELEGRAM_WEBHOOK_URL": "https://bot.example/telegram/webhook",
        "TELEGRAM_WEBHOOK_SECRET": SECRET,
        "LOG_LEVEL": "DEBUG",
    }
    started = []
    try:
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            started.append(bot_process(folder, mock, **env).start(timeout=40))
        yield started
    finally:
        for replica in started:
            replica.stop()
    for replica in started:
        text = replica.log.read_text(errors="replace")
        assert fake_bot_api.token.partition(":")[2] not in text
        assert SECRET not in text


def test_each_replica_registers_the_webhook_with_its_secret(
    fake_bot_api: FakeBotAPI, replicas: list[Process]
) -> None:
    calls = fake_bot_api.calls_to("setWebhook")
    assert len(calls) == 2
    assert fake_bot_api.webhook is not None
    assert fake_bot_api.webhook["url"] == "https://bot.example/telegram/webhook"
    assert fake_bot_api.webhook["secret_token"] == SECRET
    assert sorted(calls[0].params["allowed_updates"]) == ["callback_query", "message"]


def test_an_update_delivered_to_both_replicas_is_answered_once(
    fake_bot_api: FakeBotAPI, replicas: list[Process], mock: Process
) -> None:
    before = mock_requests(mock)
    update = {"update_id": 990001, **fake_bot_api.text("What is the capital of Canada?")}
    statuses = [deliver(update, f"{r.url}{PATH}", SECRET) for r in replicas]
    assert statuses == [200, 200]
    fake_bot_api.wait_for(
        lambda c: (
            c.method in ("sendMessage", "editMessageText")
            and c.params.get("parse_mode") == "HTML"
            and "Ottawa" in c.params["text"]
        )
    )
    time.sleep(1.5)  # time enough for a second answer, were there one
    answers = [m for m in fake_bot_api.chat_messages(OWNER) if m["from"]["is_bot"]]
    assert len(answers) == 1
    assert mock_requests(mock) == before + 1
    counted = sum(_metric(r, "answered") for r in replicas)
    received = sum(_metric(r, "received") for r in replicas)
    assert (counted, received) == (1, 2)


def _metric(replica: Process, outcome: str) -> float:
    body = httpx.get(
        f"{replica.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ).text
    name = f'generic_framework_telegram_updates_total{{outcome="{outcome}"}}'
    found = [line for line in body.splitlines() if line.startswith(name)]
    return float(found[0].split()[-1]) if found else 0.0


@pytest.mark.parametrize(("secret", "status"), [(None, 401), ("not-the-secret", 403)])
def test_a_request_without_the_secret_is_refused_and_processes_nothing(
    fake_bot_api: FakeBotAPI, replicas: list[Process], secret: str | None, status: int
) -> None:
    update = fake_bot_api.text("What is the capital of Canada?")
    assert deliver(update, f"{replicas[0].url}{PATH}", secret) == status
    time.sleep(1.0)
    assert [m for m in fake_bot_api.chat_messages(OWNER) if m["from"]["is_bot"]] == []
    assert _metric(replicas[0], "received") == 0


def test_the_webhook_needs_no_api_token(fake_bot_api: FakeBotAPI, replicas: list[Process]) -> None:
    # The API's bearer auth guards /v1; the webhook's secret is its own auth.
    assert httpx.get(f"{replicas[0].url}/v1/models", timeout=10).status_code == 401
    update = {"update_id": 990002, **fake_bot_api.text("/help")}
    assert deliver(update, f"{replicas[0].url}{PATH}", SECRET) == 200
    fake_bot_api.wait_for(lambda c: c.method == "sendMessage" and "/persona" in c.params["text"])


def test_an_update_under_way_is_finished_when_serve_stops(
    tmp_path: Path, fake_bot_api: FakeBotAPI
) -> None:
    with mock_process(tmp_path, latency_ms=3000, fixtures=[BUNDLED]) as slow:
        env = {
            "TELEGRAM_BOT_TOKEN": fake_bot_api.token,
            "TELEGRAM_API_URL": fake_bot_api.base_url,
            "TELEGRAM_ALLOWED_USERS": str(OWNER),
            "TELEGRAM_WEBHOOK_URL": "https://bot.example/telegram/webhook",
            "TELEGRAM_WEBHOOK_SECRET": SECRET,
        }
        replica = bot_process(tmp_path, slow, **env).start(timeout=40)
        try:
            update = {"update_id": 990003, **fake_bot_api.text("What is the capital of Canada?")}
            assert deliver(update, f"{replica.url}{PATH}", SECRET) == 200
            fake_bot_api.wait_for(lambda c: c.method == "sendChatAction")  # the turn runs
        finally:
            replica.stop()  # SIGTERM while the model is still answering
    answers = [m for m in fake_bot_api.chat_messages(OWNER) if m["from"]["is_bot"]]
    assert len(answers) == 1 and "Ottawa" in answers[0]["text"]
