"""The suite refuses to talk to the real services, and the public surface is guarded.

The public names themselves: tests/architecture/test_public_api.py.
"""

from __future__ import annotations

import socket

import pytest

import generic_framework


def test_real_zai_host_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match="offline"):
        socket.getaddrinfo("api.z.ai", 443)


@pytest.mark.parametrize("host", ["api.telegram.org", "API.Telegram.org.", "core.telegram.org"])
def test_real_telegram_hosts_are_refused(host: str) -> None:
    with pytest.raises(pytest.fail.Exception, match="offline"):
        socket.getaddrinfo(host, 443)
    with pytest.raises(pytest.fail.Exception, match="offline"):
        socket.create_connection((host, 443), timeout=1)


def test_loopback_is_allowed() -> None:
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError):
        _ = generic_framework.DoesNotExist  # type: ignore[attr-defined]
