"""The fake Bot API for the Telegram tests: one started server per test, so no test sees
another's updates, messages or scripted faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_bot_api import FakeBotAPI


@pytest.fixture
def fake_bot_api() -> Iterator[FakeBotAPI]:
    with FakeBotAPI() as fake:
        yield fake
