"""Fixtures of the service tests: an app over scripted personas and a real conversation store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_fakes import FakePersona
from support import every_upstream_reachable

from generic_framework.config import Settings
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UpstreamProbe
from generic_framework.store import SQLiteStore


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., Settings]:
    def make(**values: Any) -> Settings:
        base: dict[str, Any] = {
            "api_key": "test-key",
            "data_dir": tmp_path / "data",
            "personas_dir": tmp_path / "personas",
        }
        (tmp_path / "data").mkdir(exist_ok=True)
        return Settings.defaults(**{**base, **values})

    return make


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "data" / "conversations.sqlite3")
    yield opened
    await opened.aclose()


@pytest.fixture
def client_for(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> Callable[..., httpx.AsyncClient]:
    """An httpx client talking to the app in-process (``token=`` sends the bearer token).

    The app borrows a runtime over the test's ``store``; ``raise_app_exceptions=False`` shows
    what a real server answers for an unexpected exception instead of raising it in the test.
    """

    def make(
        personas: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        raise_app_exceptions: bool = True,
        **values: Any,
    ) -> httpx.AsyncClient:
        runtime = Runtime(settings_for(**values), store=store)
        chosen = personas if personas is not None else {"scout": FakePersona()}
        probe = UpstreamProbe(runtime.settings, connect=every_upstream_reachable)
        app = create_app(runtime=runtime, personas=chosen, upstream_probe=probe)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)

    return make
