"""Shared by the telemetry tests (their ``conftest`` holds only fixtures): the repository's
personas, the metrics token, the settings of a bot on the in-process mock, the parsed samples of
a Prometheus exposition and the bundled fixtures' token counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from generic_framework.config import Settings
from generic_framework.mock import bundled_fixtures_dir
from generic_framework.runtime import Runtime

REPO = Path(__file__).resolve().parents[2]
PERSONAS = REPO / "personas"
MOCK_URL = "http://mock.test/api/paas/v4"
TOKEN = "metrics-token-7f3a9c"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

Bot = Callable[..., AbstractAsyncContextManager[tuple[httpx.AsyncClient, Runtime]]]


def settings(tmp_path: Path, **values: Any) -> Settings:
    base: dict[str, Any] = {
        "api_key": "mock-key",
        "base_url": MOCK_URL,
        "personas_dir": PERSONAS,
        "data_dir": tmp_path / "data",
        "llm_max_retries": 3,
    }
    return Settings.defaults(**{**base, **values})


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
