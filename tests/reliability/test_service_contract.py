"""Contract details the OpenAPI fuzzing turned up, pinned down one by one."""

from __future__ import annotations

from pathlib import Path

import httpx
from service_fakes import TOKEN, FakePersona

from generic_framework.config import Settings
from generic_framework.service import create_app


def client(tmp_path: Path) -> httpx.AsyncClient:
    settings = Settings.defaults(bot_api_token=TOKEN, data_dir=tmp_path)
    app = create_app(settings, personas={"scout": FakePersona()})
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def test_the_401_message_says_how_to_authenticate(tmp_path: Path) -> None:
    async with client(tmp_path) as bot:
        refused = await bot.get("/v1/models")
    assert refused.status_code == 401
    message = refused.json()["error"]["message"]
    assert "***" not in message
    assert "'Bearer <BOT_API_TOKEN>'" in message


async def test_a_405_on_a_conversation_allows_both_of_its_methods(tmp_path: Path) -> None:
    async with client(tmp_path) as bot:
        refused = await bot.put(
            "/v1/conversations/c1", headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert refused.status_code == 405
    allowed = {method.strip() for method in refused.headers["allow"].split(",")}
    assert {"GET", "DELETE"} <= allowed
