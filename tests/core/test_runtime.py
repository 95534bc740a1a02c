"""Runtime: one owner of client, store and locks; personas bound to it; closing closes all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr
from support import assert_quiet

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.runtime import Runtime
from generic_framework.store import SQLiteStore
from generic_framework.wire.client import GLMClient
from generic_framework.wire.slots import LocalSlots

REPO = Path(__file__).resolve().parents[2]
PERSONAS = REPO / "personas"


def _settings(tmp_path: Path, base_url: str = "http://127.0.0.1:9/api/paas/v4") -> Settings:
    return Settings.defaults(
        api_key="runtime-test-key",
        base_url=base_url,
        personas_dir=PERSONAS,
        data_dir=tmp_path,
        llm_max_retries=0,
    )


def _open_files() -> set[str]:
    """What this process has open: sockets and files, by /proc/self/fd target."""
    fd_dir = Path("/proc/self/fd")
    targets = set()
    for entry in fd_dir.iterdir():
        try:
            targets.add(os.readlink(entry))
        except OSError:
            continue
    return targets


async def test_personas_are_bound_to_one_client_store_and_set_of_locks(tmp_path: Path) -> None:
    async with Runtime(_settings(tmp_path)) as runtime:
        scout, helper = runtime.persona("scout"), runtime.persona("helper")
        assert scout.runtime is runtime and helper.runtime is runtime
        assert runtime.persona("scout") is scout  # one object per name
        assert runtime.persona() is scout  # the default persona
        assert set(runtime.personas()) == {"helper", "scout"}
        assert runtime.client is runtime.client and runtime.store is runtime.store


async def test_unknown_and_missing_personas_are_config_errors(tmp_path: Path) -> None:
    async with Runtime(_settings(tmp_path)) as runtime:
        with pytest.raises(ConfigError, match="unknown persona 'nobody'; available: helper"):
            runtime.persona("nobody")
    empty = tmp_path / "empty"
    empty.mkdir()
    async with Runtime(_settings(tmp_path), personas_dir=empty) as runtime:
        with pytest.raises(ConfigError, match=r"no persona files \(\*\.toml\) in"):
            runtime.persona()


async def test_a_closed_runtime_leaves_no_socket_or_database_open(tmp_path: Path) -> None:
    database = str(tmp_path / "conversations.sqlite3")
    async with MockServer(bundled_fixture_paths()) as server:
        before = _open_files()
        runtime = Runtime(_settings(tmp_path, server.base_url))
        scout = runtime.persona("scout")
        reply = await scout.respond("// what's the weather in Nanaimo?", conversation_id="c1")
        assert reply.citations
        during = _open_files() - before
        assert any(target.startswith(database) for target in during)
        assert any(target.startswith("socket:") for target in during)
        await runtime.aclose()
        await runtime.aclose()  # closing twice is harmless
        assert _open_files() - before == set()
        with pytest.raises(ConfigError, match="is closed"):
            _ = runtime.client


async def test_borrowed_client_and_store_stay_open(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    client = GLMClient(settings)
    store = SQLiteStore(tmp_path / "borrowed.sqlite3")
    async with Runtime(settings, client=client, store=store) as runtime:
        assert runtime.client is client and runtime.store is store
    assert not client._http.is_closed
    assert await store.get("none") is None  # still usable
    await client.aclose()
    await store.aclose()


async def test_a_persona_without_a_runtime_owns_one_and_closes_it(tmp_path: Path) -> None:
    persona = Persona("solo", "Be brief.", settings=_settings(tmp_path))
    assert persona.runtime.settings.api_key is not None
    _ = persona.runtime.client
    await persona.aclose()
    assert persona.runtime.closed


async def test_a_persona_bound_to_a_runtime_leaves_it_open(tmp_path: Path) -> None:
    async with Runtime(_settings(tmp_path)) as runtime:
        persona = Persona("bound", "Be brief.", runtime=runtime)
        await persona.aclose()
        assert not runtime.closed


def test_library_objects_do_not_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-never-read-0123")
    monkeypatch.setenv("LLM_MODEL", "glm-from-env")
    monkeypatch.setenv("MAX_TOOL_ROUNDS", "9")
    persona = Persona("p", "S.")
    assert persona.settings.api_key is None
    assert (persona.spec.model, persona.spec.max_tool_rounds) == ("glm-4.7", 5)
    assert GLMClient().settings.api_key is None
    assert Runtime().settings.llm_model == "glm-4.7"
    assert Runtime.from_env().settings.llm_model == "glm-from-env"


def test_settings_and_runtime_together_are_refused(tmp_path: Path) -> None:
    runtime = Runtime(_settings(tmp_path))
    with pytest.raises(TypeError, match="settings or runtime"):
        Persona("p", "S.", settings=Settings.defaults(), runtime=runtime)


def test_no_resource_warning_in_development_mode(tmp_path: Path) -> None:
    """A whole turn and close in a fresh interpreter with -X dev and ResourceWarning as error."""
    script = f"""
import asyncio, gc
from generic_framework.config import Settings
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.runtime import Runtime

async def main():
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(api_key="k-0123456789", base_url=server.base_url,
                                     personas_dir={str(PERSONAS)!r}, data_dir={str(tmp_path)!r})
        async with Runtime(settings) as runtime:
            for name in ("scout", "helper", "scout"):
                runtime.persona(name)
            reply = await runtime.persona().respond("What is the capital of Canada?",
                                                     conversation_id="dev")
            print(reply.content)
    gc.collect()

asyncio.run(main())
"""
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    assert "Ottawa" in result.stdout
    assert_quiet(result.stderr)


DATABASE_MODULES = (
    "sqlite3",
    "_sqlite3",
    "psycopg",
    "psycopg_pool",
    "generic_framework.store.sqlite",
)


def test_a_turn_without_a_conversation_imports_no_database_module(tmp_path: Path) -> None:
    """Against the mock, in a fresh interpreter: the client and its upstream budget open, a
    turn answers, and neither SQLite nor psycopg (nor the SQLite backend) was imported."""
    script = f"""
import asyncio, json, sys
from generic_framework.config import Settings
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.runtime import Runtime

async def main():
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(api_key="k-0123456789", base_url=server.base_url,
                                     personas_dir={str(PERSONAS)!r}, data_dir={str(tmp_path)!r})
        async with Runtime(settings) as runtime:
            reply = await runtime.persona().respond("What is the capital of Canada?")
    print(reply.content)
    print(json.dumps(sorted(sys.modules)))

asyncio.run(main())
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    answer, modules = result.stdout.splitlines()[-2:]
    assert "Ottawa" in answer
    loaded = [m for m in json.loads(modules) if m.startswith(DATABASE_MODULES)]
    assert loaded == []
    assert not list(tmp_path.iterdir())  # no database file either


def test_the_upstream_budget_comes_from_the_configuration_not_the_store(tmp_path: Path) -> None:
    local = Runtime(_settings(tmp_path))
    assert isinstance(local.upstream_slots(), LocalSlots)
    shared = Runtime(
        _settings(tmp_path).model_copy(
            update={"database_url": SecretStr("postgresql://u:pw@127.0.0.1:9/db")}
        )
    )
    slots = shared.upstream_slots()
    assert type(slots).__name__ == "PostgresSlots"
    assert slots.limit == shared.settings.llm_max_concurrency
    assert shared._store is None  # no conversation store was opened for it
