"""Suite-wide guards: tests are offline and never see the developer's real configuration."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

_FORBIDDEN_HOSTS = ("api.z.ai", "z.ai", "open.bigmodel.cn", "bigmodel.cn")
_CONFIG_VARIABLES = (
    "OPENAI_API_KEY",
    "ZAI_API_KEY",
    "OPENAI_BASE_URL",
    "ZAI_BASE_URL",
    "LLM_MODEL",
    "LLM_TEMPERATURE",
    "LLM_THINKING",
    "LLM_TIMEOUT",
    "LLM_MAX_RETRIES",
    "MAX_TOOL_ROUNDS",
    "TOOL_TIMEOUT",
    "WEB_SEARCH_MODE",
    "PERSONAS_DIR",
    "DATA_DIR",
    "BOT_API_TOKEN",
    "BOT_HOST",
    "BOT_PORT",
    "LOG_LEVEL",
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
        pytest.fail(f"a test tried to reach the real Z.AI service ({host}); tests are offline")
    return _real_getaddrinfo(host, *args, **kwargs)


def _guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    if _is_forbidden(address[0]):
        pytest.fail(f"a test tried to reach the real Z.AI service ({address[0]})")
    return _real_create_connection(address, *args, **kwargs)


@pytest.fixture(autouse=True, scope="session")
def _offline() -> Iterator[None]:
    socket.getaddrinfo = _guarded_getaddrinfo
    socket.create_connection = _guarded_create_connection
    yield
    socket.getaddrinfo = _real_getaddrinfo
    socket.create_connection = _real_create_connection


@pytest.fixture(autouse=True)
def _clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each test starts without the developer's key, endpoint or data directory."""
    for name in _CONFIG_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path_factory.mktemp("data")))
