"""Both store backends behind one fixture: every contract test runs on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from generic_framework.store import ConversationStore, open_store

BACKENDS = ["sqlite", "postgres"]

MakeStore = Callable[[], ConversationStore]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database of the backend under test."""
    if backend == "postgres":
        server: Any = request.getfixturevalue("postgres_server")
        return str(server.create_database())
    return f"sqlite:///{tmp_path / 'conversations.sqlite3'}"


@pytest.fixture
async def make_store(database_url: str) -> AsyncIterator[MakeStore]:
    """Opens stores on the test's database (several = several processes); closes them all."""
    opened: list[ConversationStore] = []

    def make() -> ConversationStore:
        store = open_store(database_url, sqlite_path="unused", pool_size=4)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
async def store(make_store: MakeStore) -> ConversationStore:
    return make_store()
