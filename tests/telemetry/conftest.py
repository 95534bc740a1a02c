"""Fixtures of the telemetry tests: the bot service in front of the in-process mock."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from generic_framework.config import Settings
from generic_framework.mock import bundled_fixtures_dir
from generic_framework.mock import create_app as create_mock
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UpstreamProbe
from generic_framework.telemetry import Telemetry

REPO = Path(__file__).resolve().parents[2]
PERSONAS = REPO / "personas"
MOCK_URL = "http://mock.test/api/paas/v4"
TOKEN = "metrics-token-7f3a9c"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


async def reachable(host: str, port: int, seconds: float) -> None:
    """Every upstream accepts connections (the probe never leaves the process)."""


def settings(tmp_path: Path, **values: Any) -> Settings:
    base: dict[str, Any] = {
        "api_key": "mock-key",
        "base_url": MOCK_URL,
        "personas_dir": PERSONAS,
        "data_dir": tmp_path / "data",
        "llm_max_retries": 3,
    }
    return Settings.defaults(**{**base, **values})


Bot = Callable[..., AbstractAsyncContextManager[tuple[httpx.AsyncClient, Runtime]]]


@pytest.fixture
def bot(tmp_path: Path) -> Bot:
    """The service with the repository's personas, its runtime calling the bundled mock."""

    @contextlib.asynccontextmanager
    async def make(
        telemetry: Telemetry | None = None, **values: Any
    ) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
        mock = httpx.ASGITransport(app=create_mock())
        runtime = Runtime(settings(tmp_path, **values), transport=mock, telemetry=telemetry)
        probe = UpstreamProbe(runtime.settings, connect=reachable)
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


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, parsed with prometheus-client's parser."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def fixture_usage(*names: str) -> dict[str, int]:
    """Token counts summed over the successful responses of bundled fixtures."""
    total = {"prompt": 0, "completion": 0, "cached": 0, "reasoning": 0}
    for name in names:
        data = json.loads((bundled_fixtures_dir() / f"{name}.json").read_text(encoding="utf-8"))
        for exchange in data["exchanges"]:
            response = exchange["response"]
            body = response.get("body")
            if body is None:  # a stream: usage is on the last chunk
                chunks = [e for e in response["events"] if isinstance(e, dict)]
                body = chunks[-1]
            usage = body.get("usage") if isinstance(body, dict) else None
            if not usage:
                continue
            total["prompt"] += usage["prompt_tokens"]
            total["completion"] += usage["completion_tokens"]
            total["cached"] += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            details = usage.get("completion_tokens_details", {})
            total["reasoning"] += details.get("reasoning_tokens", 0)
    return total
