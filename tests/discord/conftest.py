"""The fake Discord for the Discord tests: one started server per test, so no test sees
another's messages, commands or scripted faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_discord import FakeDiscord


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake
