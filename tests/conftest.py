"""Suite-wide guards: tests are offline (any attempt to reach the real Z.AI service or the real
Telegram Bot API fails), and no MCP server process started by the suite outlives it.

Library tests build ``Settings.defaults(...)`` and never read the environment; the tests of the
entry points (CLI, service processes, ``Settings()``) give their processes or fixtures a clean
environment themselves."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_servers.leftovers import mcp_children

from generic_framework.wire import retry

# A host and every subdomain of it. Telegram: a wrong TELEGRAM_API_URL (or none) in a test would
# send the bot's token and its chats to the real Bot API (Discord's DISCORD_API_URL likewise).
_FORBIDDEN_HOSTS = (
    "api.z.ai",
    "z.ai",
    "open.bigmodel.cn",
    "bigmodel.cn",
    "api.telegram.org",
    "telegram.org",
    "discord.com",
    "discord.gg",
    "discordapp.com",
)


def _is_forbidden(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    host = host.lower().rstrip(".")
    return any(host == h or host.endswith("." + h) for h in _FORBIDDEN_HOSTS)


_real_getaddrinfo = socket.getaddrinfo
_real_create_connection = socket.create_connection


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if _is_forbidden(host):
        pytest.fail(f"a test tried to reach a real outside service ({host}); tests are offline")
    return _real_getaddrinfo(host, *args, **kwargs)


def _guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    if _is_forbidden(address[0]):
        pytest.fail(
            f"a test tried to reach a real outside service ({address[0]}); tests are offline"
        )
    return _real_create_connection(address, *args, **kwargs)


@pytest.fixture(autouse=True, scope="session")
def _offline() -> Iterator[None]:
    socket.getaddrinfo = _guarded_getaddrinfo
    socket.create_connection = _guarded_create_connection
    yield
    socket.getaddrinfo = _real_getaddrinfo
    socket.create_connection = _real_create_connection


@pytest.fixture(autouse=True, scope="session")
def _no_leftover_mcp_servers() -> Iterator[None]:
    """Fail the run when an MCP server of tests/mcp_servers is still running at its end.

    Runtimes stop their stdio children when they close, and CLI and service processes close
    their runtimes; a child found here escaped that. Processes that were running before the
    suite started are not counted.
    """
    before = mcp_children()
    yield
    deadline = time.monotonic() + 10.0
    left = mcp_children() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = mcp_children() - before
    assert not left, f"MCP server processes outlived the test suite: {sorted(left)}"


@pytest.fixture
def no_retry_waits() -> Iterator[None]:
    """Retries still count and cap their attempts but spend no time waiting.

    Request it, or use it automatically in a directory's conftest with a one-line fixture;
    the setting in force before the test is restored after it.
    """
    previous = retry._testing
    retry.set_testing(True)
    yield
    retry.set_testing(previous)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the session (see ``postgres_server.py``); skips when
    the server binaries are absent."""
    from postgres_server import PostgresServer, require_server

    server = PostgresServer(require_server()).init()
    try:
        yield server
    finally:
        # Stopped here; its files (every test's database: tens of thousands of files by the
        # end, a minute to delete under disk load) go when the session finishes, not on the
        # clock of whichever test ran last.
        server.stop("immediate")
        _REMOVE_AT_THE_END.append(server.root)


_REMOVE_AT_THE_END: list[Path] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Clusters that runs killed before their clean-up left running are stopped and removed
    here, before any test's clock starts: deleting a big one takes a minute under disk load,
    which the first test to use the server would otherwise be charged with."""
    from postgres_server import server_bindir, sweep_abandoned

    found = server_bindir()
    if found is not None:
        sweep_abandoned(found)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for root in _REMOVE_AT_THE_END:
        shutil.rmtree(root, ignore_errors=True)
