"""create_app and its one owner: the runtime it builds (and closes) or borrows (and leaves open)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from service_fakes import FakePersona
from service_processes import PERSONAS, REPO

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.state import ServiceState
from generic_framework.store import SQLiteStore
from generic_framework.wire.messages import AssistantMessage, UserMessage


def state(app: object) -> ServiceState:
    service = app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, ServiceState)
    return service


async def test_an_app_without_a_runtime_builds_one_and_closes_it_at_shutdown(
    settings_for: Callable[..., Settings],
) -> None:
    app = create_app(settings_for(personas_dir=PERSONAS))
    runtime = state(app).runtime
    assert state(app).owns_runtime
    # The personas of PERSONAS_DIR, bound to that runtime: one client, one store, one lock set.
    assert set(state(app).personas) == {"helper", "scout"}
    assert all(
        isinstance(p, Persona) and p.runtime is runtime for p in state(app).personas.values()
    )
    async with app.router.lifespan_context(app):
        assert not runtime.closed
    assert runtime.closed


async def test_a_given_runtime_is_borrowed_and_stays_open(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> None:
    async with Runtime(settings_for(personas_dir=PERSONAS), store=store) as runtime:
        app = create_app(runtime=runtime)
        assert state(app).runtime is runtime
        assert not state(app).owns_runtime
        assert state(app).personas["scout"] is runtime.persona("scout")
        async with app.router.lifespan_context(app):
            pass
        assert not runtime.closed
    assert runtime.closed


async def test_conversations_are_read_from_the_runtime_store(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> None:
    await store.append_turn(
        "c1", "scout", [UserMessage(content="hi"), AssistantMessage(content="yo")]
    )
    app = create_app(runtime=Runtime(settings_for(), store=store), personas={})
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        got = await client.get("/v1/conversations/c1")
    assert [m["content"] for m in got.json()["messages"]] == ["hi", "yo"]


def test_a_bad_persona_file_fails_create_app(
    settings_for: Callable[..., Settings], tmp_path: Path
) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "broken.toml").write_text('system_prompt = "x"\ntools = ["no_such_tool"]\n')
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        create_app(settings_for())


def test_a_missing_personas_dir_fails_create_app(settings_for: Callable[..., Settings]) -> None:
    with pytest.raises(ConfigError, match="PERSONAS_DIR"):
        create_app(settings_for())


def test_a_persona_of_another_runtime_is_refused(settings_for: Callable[..., Settings]) -> None:
    settings = settings_for()
    stray = Persona("scout", "Be brief.", settings=settings)  # its own runtime and store
    with pytest.raises(TypeError, match="another runtime"):
        create_app(runtime=Runtime(settings), personas={"scout": stray})


def test_settings_and_a_runtime_with_other_settings_are_refused(
    settings_for: Callable[..., Settings],
) -> None:
    runtime = Runtime(settings_for())
    with pytest.raises(TypeError, match="not both"):
        create_app(settings_for(), runtime=runtime, personas={"scout": FakePersona()})
    app = create_app(runtime.settings, runtime=runtime, personas={"scout": FakePersona()})
    assert state(app).settings is runtime.settings


def test_python_m_service_is_the_cli_serve_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework.service", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--host" in done.stdout and "--port" in done.stdout


def test_an_app_over_a_folder_without_persona_files_is_refused(tmp_path: Path) -> None:
    # It would start and never be ready (no persona to answer with): refused at once instead.
    settings = Settings.defaults(personas_dir=tmp_path, data_dir=tmp_path / "data")
    with pytest.raises(ConfigError, match=r"no persona files \(\*\.toml\) in "):
        create_app(settings)
