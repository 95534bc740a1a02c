"""A database never initialised for this deployment is refused by the service's store, not
given a new, empty schema (docs/design/0325): an empty database where one was expected is most
often a lost volume or PostgreSQL started on another machine. ``db upgrade`` initialises a new
deployment; SQLite's first start still creates its file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generic_framework.config import Settings
from generic_framework.errors import StoreUnavailableError
from generic_framework.runtime import Runtime
from generic_framework.store.postgres import PostgresStore
from generic_framework.store.postgres_slots import PostgresSlots
from generic_framework.store.sqlite import SQLiteStore
from generic_framework.wire.messages import AssistantMessage, UserMessage

TURN = [UserMessage(content="hi"), AssistantMessage(content="hello")]


def _has_schema(server: Any, url: str) -> bool:
    rows = server.query(url, "SELECT to_regclass('schema_migrations') IS NOT NULL")
    return bool(rows[0][0])


async def test_the_runtime_s_store_refuses_an_uninitialised_database(
    postgres_server: Any, tmp_path: Path
) -> None:
    url = postgres_server.create_database(initialised=False)
    runtime = Runtime(Settings.defaults(database_url=url, data_dir=tmp_path))
    store = runtime.store
    try:
        with pytest.raises(StoreUnavailableError, match="never initialised") as refused:
            await store.get("c")
        assert "generic-framework db upgrade" in str(refused.value)
        assert refused.value.retryable and refused.value.retry_after
        with pytest.raises(StoreUnavailableError, match="never initialised"):
            await store.append_turn("c", "p", TURN)
    finally:
        await runtime.aclose()
    assert not _has_schema(postgres_server, url)  # nothing was created quietly


async def test_the_upstream_budget_refuses_it_too(postgres_server: Any) -> None:
    url = postgres_server.create_database(initialised=False)
    budget = PostgresSlots(url, budget="b", limit=1, wait=1.0, create=False)
    try:
        with pytest.raises(StoreUnavailableError, match="never initialised"):
            await budget.acquire()
    finally:
        await budget.aclose()
    assert not _has_schema(postgres_server, url)


async def test_once_initialised_the_service_s_store_migrates_and_serves(
    postgres_server: Any, tmp_path: Path
) -> None:
    url = postgres_server.create_database(initialised=False)
    first = PostgresStore(url)  # what `db upgrade` opens: creates the schema
    await first.open()
    await first.aclose()
    assert _has_schema(postgres_server, url)
    runtime = Runtime(Settings.defaults(database_url=url, data_dir=tmp_path))
    try:
        assert await runtime.store.append_turn("c", "p", TURN) == 1
    finally:
        await runtime.aclose()


async def test_sqlite_s_first_start_still_creates_its_file(tmp_path: Path) -> None:
    runtime = Runtime(Settings.defaults(data_dir=tmp_path))
    try:
        assert isinstance(runtime.store, SQLiteStore)
        assert await runtime.store.append_turn("c", "p", TURN) == 1
    finally:
        await runtime.aclose()


async def test_a_schema_gone_under_a_running_replica_is_refused_not_listed_empty(
    postgres_server: Any, tmp_path: Path
) -> None:
    url = postgres_server.create_database()
    runtime = Runtime(Settings.defaults(database_url=url, data_dir=tmp_path))
    store = runtime.store
    try:
        await store.append_turn("c", "p", TURN)
        assert await store.conversation_ids() == ["c"]
        # PostgreSQL back on an empty volume: the same address, no tables.
        postgres_server.query(url, "DROP SCHEMA public CASCADE")
        postgres_server.query(url, "CREATE SCHEMA public")
        with pytest.raises(StoreUnavailableError, match="never initialised"):
            await store.conversation_ids()
        with pytest.raises(StoreUnavailableError, match="never initialised"):
            await store.get("c")
    finally:
        await runtime.aclose()
    assert not _has_schema(postgres_server, url)


async def test_a_schema_gone_when_the_turns_connection_comes_back_is_refused(
    postgres_server: Any,
) -> None:
    url = postgres_server.create_database()
    store = PostgresStore(url)
    try:
        async with store.lock("c", history=1) as held:
            await held.append_turn("p", TURN)
        # PostgreSQL back on an empty volume: every session is gone, the tables with them.
        postgres_server.query(
            url,
            "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"
            " SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        # The turns' new session prepares its statements on tables that are not there.
        with pytest.raises(StoreUnavailableError, match="never initialised"):
            async with store.lock("c", history=1):
                pass
    finally:
        await store.aclose()
