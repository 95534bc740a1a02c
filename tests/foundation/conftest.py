"""Fixtures of the foundation tests: payload files, a scripted transport and a client factory.

Every test here is offline: clients talk to ``https://zai.test`` through ``httpx.MockTransport``
or to a server bound on 127.0.0.1. Retry waits are removed for every test (``set_testing``);
tests that look at the waits themselves turn them back on and replace ``retry.sleep``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.wire import retry
from generic_framework.wire.client import GLMClient

PAYLOADS = Path(__file__).parent / "payloads"

# A made-up key in Z.AI's shape (32 hex digits, a dot, 16 letters and digits), easy to grep for.
FAKE_KEY = "c0ffee00" * 4 + ".GfTestKey0Z9Y8X"
BASE_URL = "https://zai.test/api/paas/v4"

_ENV_NAMES = (
    "OPENAI_API_KEY",
    "ZAI_API_KEY",
    "OPENAI_BASE_URL",
    "ZAI_BASE_URL",
    "API_KEY",
    "BASE_URL",
    *(name.upper() for name in Settings.model_fields if name not in {"api_key", "base_url"}),
)

Step = httpx.Response | BaseException | Callable[[httpx.Request], Any]


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting of the machine running the tests leaks into the tests that read it."""
    for name in _ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


@pytest.fixture
def fake_key() -> str:
    """The recognisable fake API key every client of these tests uses."""
    return FAKE_KEY


@pytest.fixture
def payload() -> Callable[[str], dict[str, Any]]:
    """Load one JSON fixture from ``payloads/`` (a fresh copy every call)."""

    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((PAYLOADS / name).read_text(encoding="utf-8"))
        return data

    return load


@pytest.fixture
def sse() -> Callable[[str], bytes]:
    """Load one raw event-stream fixture from ``payloads/``."""
    return lambda name: (PAYLOADS / name).read_bytes()


class Script:
    """A MockTransport handler that answers with the given steps, one per request, in order.

    A step is an ``httpx.Response``, an exception to raise, or a callable taking the request.
    A request beyond the last step fails the test.
    """

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []
        self.closed = False

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if len(self.requests) > len(self.steps):
            raise AssertionError(f"unexpected request #{len(self.requests)} to {request.url}")
        step = self.steps[len(self.requests) - 1]
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, httpx.Response):
            return step
        result = step(request)
        return await result if not isinstance(result, httpx.Response) else result

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests seen so far."""
        return [json.loads(request.content) for request in self.requests]


class ScriptTransport(httpx.MockTransport):
    """MockTransport that records whether it was closed."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.script = script

    async def aclose(self) -> None:
        self.script.closed = True
        await super().aclose()


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., tuple[GLMClient, Script]]]:
    """Build a GLMClient over a :class:`Script`; keyword arguments override Settings."""
    clients: list[GLMClient] = []

    def factory(*steps: Step, **overrides: Any) -> tuple[GLMClient, Script]:
        script = Script(steps)
        values: dict[str, Any] = {"api_key": FAKE_KEY, "base_url": BASE_URL, **overrides}
        client = GLMClient(Settings.defaults(**values), transport=ScriptTransport(script))
        clients.append(client)
        return client, script

    yield factory
    for client in clients:
        await client.aclose()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Turn retry waits back on, but record them instead of sleeping."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    retry.set_testing(False)
    monkeypatch.setattr(retry, "sleep", fake_sleep)
    return recorded
