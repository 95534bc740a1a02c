"""One real mock server per test session, on 127.0.0.1 and an ephemeral port.

Each test loads its own fixtures with ``serve(...)``, which replaces the server's fixtures and
resets its progress, so tests never see each other's state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from mock_helpers import AUTH

from generic_framework.mock import Fixture, MockServer


@pytest.fixture(scope="session")
def mock_server() -> Iterator[MockServer]:
    with MockServer([]) as server:
        yield server


@pytest.fixture
def serve(mock_server: MockServer) -> Iterator[Callable[..., MockServer]]:
    """Load fixtures into the shared server; accepted keys and latency are restored after."""

    def load(*fixtures: Fixture, api_keys: list[str] | None = None) -> MockServer:
        mock_server.set_fixtures(list(fixtures))
        mock_server.app.api_keys = frozenset(api_keys) if api_keys is not None else None
        return mock_server

    yield load
    mock_server.set_fixtures([])
    mock_server.app.api_keys = None
    mock_server.app.latency = 0


@pytest.fixture
def http(mock_server: MockServer) -> Iterator[httpx.Client]:
    """A synchronous client for the shared server, with a valid key."""
    with httpx.Client(base_url=mock_server.url, headers=AUTH, timeout=10) as client:
        yield client
