"""Fixtures of the telemetry tests: the bot service in front of the in-process mock (the
helpers the tests import are in ``telemetry_support``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import every_upstream_reachable
from telemetry_support import Bot, settings

from generic_framework.mock import create_app as create_mock
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UpstreamProbe
from generic_framework.telemetry import Telemetry


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


@pytest.fixture
def bot(tmp_path: Path) -> Bot:
    """The service with the repository's personas, its runtime calling the bundled mock."""

    @contextlib.asynccontextmanager
    async def make(
        telemetry: Telemetry | None = None, **values: Any
    ) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
        mock = httpx.ASGITransport(app=create_mock())
        runtime = Runtime(settings(tmp_path, **values), transport=mock, telemetry=telemetry)
        probe = UpstreamProbe(runtime.settings, connect=every_upstream_reachable)
        app = create_app(runtime=runtime, upstream_probe=probe)
        transport = httpx.ASGITransport(app=app)
        async with (
            runtime,
            httpx.AsyncClient(
                transport=transport, base_url="http://localhost", timeout=30
            ) as client,
        ):
            yield client, runtime

    return make
