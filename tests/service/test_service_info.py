"""``GET /v1/bot`` in-process: the default persona's rule and the exact shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from service_fakes import FakePersona

from generic_framework.errors import ConfigError

Client = Callable[..., httpx.AsyncClient]


def searching(name: str) -> FakePersona:
    return FakePersona(name, web_search="builtin")


async def info(client_for: Client, personas: dict[str, Any], **values: Any) -> dict[str, Any]:
    async with client_for(personas, **values) as client:
        response = await client.get("/v1/bot")
    assert response.status_code == 200
    return dict(response.json())


async def test_the_first_persona_with_web_search_is_the_default(client_for: Client) -> None:
    personas = {"alpha": FakePersona("alpha"), "zed": searching("zed"), "mid": searching("mid")}
    assert await info(client_for, personas) == {
        "offline": False,
        "default_persona": "mid",
        "examples": [],
        "persona_examples": {},
    }


async def test_without_web_search_the_first_persona_by_name(client_for: Client) -> None:
    personas = {"zed": FakePersona("zed"), "alpha": FakePersona("alpha")}
    assert (await info(client_for, personas))["default_persona"] == "alpha"
    assert (await info(client_for, {}))["default_persona"] is None


async def test_bot_default_persona_wins_and_must_exist(client_for: Client) -> None:
    personas = {"alpha": FakePersona("alpha"), "zed": searching("zed")}
    chosen = await info(client_for, personas, bot_default_persona="alpha")
    assert chosen["default_persona"] == "alpha"
    with pytest.raises(ConfigError, match="BOT_DEFAULT_PERSONA 'nobody' is not a persona"):
        client_for(personas, bot_default_persona="nobody")
