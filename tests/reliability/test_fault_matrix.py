"""The fault matrix end to end: the mock as a real process, the real persona in this process.

Every case of ``fault_fixtures.CASES`` runs one turn of the ``probe`` persona against the mock
(``python -m generic_framework mock --fixtures fixtures/faults``) and checks four things: the
outcome (the typed error, or the answer and its ``stop_reason``), the number of requests that
reached the mock (its ``/mock/report``), that the turn ended within its deadline, and what the
conversation store holds afterwards (the whole turn with a valid history, or nothing at all).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fault_fixtures import CASES, FIXTURES, PERSONAS, SETTINGS, Case, build_all
from matrix_checks import check_store, expected_of
from service_processes import Process, base_env

from generic_framework.config import Settings
from generic_framework.core.events import Done
from generic_framework.core.loader import load_persona
from generic_framework.core.reply import Reply
from generic_framework.errors import GLMError
from generic_framework.mock.fixture import Expected
from generic_framework.runtime import Runtime
from generic_framework.store import ConversationStore, SQLiteStore
from generic_framework.wire import retry

pytestmark = pytest.mark.e2e

KEY = "reliability-matrix-key"


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("mock")
    args = ["mock", "--fixtures", str(FIXTURES), "--host", "127.0.0.1", "--port", "0"]
    with Process(args, tmp / "mock.log", base_env(tmp), tmp) as process:
        yield process


@pytest.fixture
def waits() -> Iterator[None]:
    before = retry._testing
    yield
    retry.set_testing(before)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ConversationStore]:
    opened = SQLiteStore(tmp_path / "conversations.sqlite3")
    yield opened
    await opened.aclose()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_turn(case: Case, settings: Settings, store: ConversationStore) -> Reply:
    async with Runtime(settings, store=store) as runtime:
        persona = load_persona(PERSONAS / "probe.toml", runtime=runtime)
        if not case.stream:
            return await persona.respond(case.user_input, conversation_id=case.name)
        reply = None
        async for event in persona.stream(case.user_input, conversation_id=case.name):
            if isinstance(event, Done):
                reply = event.reply
        assert reply is not None
        return reply


def check_outcome(expected: Expected, reply: Reply | None, error: GLMError | None) -> None:
    if expected.error is not None:
        assert error is not None, f"expected {expected.error.type}, got a reply: {reply}"
        assert type(error).__name__ == expected.error.type, repr(error)
        assert error.code == expected.error.code
        return
    assert error is None, f"unexpected {error!r}"
    assert reply is not None
    assert (reply.content, reply.stop_reason) == (expected.content, expected.stop_reason)
    assert len(reply.rounds) == expected.rounds


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_fault(
    case: Case,
    mock: Process,
    store: ConversationStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    waits: None,
) -> None:
    port = closed_port() if case.refused else mock.port
    settings = Settings.defaults(
        api_key=KEY,
        base_url=f"http://127.0.0.1:{port}/api/paas/v4",
        data_dir=tmp_path,
        personas_dir=PERSONAS,
        **SETTINGS,
    )
    httpx.post(f"{mock.url}/mock/reset", timeout=30)
    retry.set_testing(not case.real_waits)
    caplog.set_level(logging.WARNING, logger="generic_framework.wire.retry")
    reply: Reply | None = None
    error: GLMError | None = None
    started = time.monotonic()
    try:
        reply = await run_turn(case, settings, store)
    except GLMError as exc:
        error = exc
    elapsed = time.monotonic() - started

    check_outcome(expected_of(case), reply, error)
    retries = [r for r in caplog.records if r.name == "generic_framework.wire.retry"]
    report: dict[str, Any] = httpx.get(f"{mock.url}/mock/report", timeout=30).json()
    if case.refused:  # nothing reached the mock: count the attempts the retry policy logged
        assert len(retries) + 1 == case.requests
    else:
        assert report["requests"] == case.requests
        assert (report["rejected"], report["unmatched"]) == (0, 0)
    assert elapsed < case.deadline
    if case.real_waits:
        assert elapsed >= 0.5
        assert all("next attempt in 0.25s" in r.getMessage() for r in retries)
    await check_store(store, case, None if error else reply)


def test_the_checked_in_fixtures_are_the_generated_ones() -> None:
    generated = build_all()
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in FIXTURES.glob("*.json")}
    assert sorted(on_disk) == sorted(generated)
    stale = [name for name, text in generated.items() if on_disk[name] != text]
    assert not stale, f"run python tests/reliability/fault_fixtures.py (stale: {stale})"
