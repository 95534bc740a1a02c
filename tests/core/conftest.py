"""Fixtures for persona tests: settings, strict scripts (see zai_script.py), clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from zai_script import Script, Scripted, make_settings

from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def script() -> Iterator[Callable[..., Script]]:
    """Make scripts; each one must be used up by the end of the test."""
    made: list[Script] = []

    def make(*responses: Scripted) -> Script:
        made.append(Script(*responses))
        return made[-1]

    yield make
    for each in made:
        each.assert_done()


@pytest.fixture
def client_for(settings: Settings) -> Iterator[Callable[[Script], GLMClient]]:
    """GLM clients over scripts, closed at teardown."""
    clients: list[GLMClient] = []

    def make(transport: Script, custom: Settings | None = None) -> GLMClient:
        clients.append(GLMClient(custom or settings, transport=transport))
        return clients[-1]

    yield make
    # httpx closes nothing real for a mock transport; dropping the references is enough.
    clients.clear()
