"""Fixtures of the service tests: an app over scripted personas and a real conversation store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_fakes import FakePersona

from generic_framework.config import Settings
from generic_framework.core.history import ConversationStore
from generic_framework.service import create_app
from generic_framework.wire.retry import set_testing


@pytest.fixture(autouse=True, scope="session")
def _no_retry_waits() -> Iterator[None]:
    set_testing(True)
    yield
    set_testing(False)


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., Settings]:
    def make(**values: Any) -> Settings:
        base: dict[str, Any] = {
            "api_key": "test-key",
            "data_dir": tmp_path / "data",
            "personas_dir": tmp_path / "personas",
        }
        (tmp_path / "data").mkdir(exist_ok=True)
        return Settings(**{**base, **values})

    return make


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ConversationStore]:
    opened = ConversationStore(tmp_path / "data" / "conversations.sqlite3")
    yield opened
    await opened.aclose()


@pytest.fixture
def client_for(
    settings_for: Callable[..., Settings], store: ConversationStore
) -> Callable[..., httpx.AsyncClient]:
    """An httpx client talking to the app in-process (``token=`` sends the bearer token)."""

    def make(
        personas: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        **values: Any,
    ) -> httpx.AsyncClient:
        settings = settings_for(**values)
        chosen = personas if personas is not None else {"scout": FakePersona()}
        app = create_app(settings, personas=chosen, store=store)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://bot", headers=headers
        )

    return make
