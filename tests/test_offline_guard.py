"""The suite refuses to talk to the real service, and the public surface is guarded."""

from __future__ import annotations

import socket

import pytest

import generic_framework


def test_real_zai_host_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match="offline"):
        socket.getaddrinfo("api.z.ai", 443)


def test_loopback_is_allowed() -> None:
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_public_names_are_sorted_and_importable() -> None:
    names = generic_framework.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(generic_framework, name) is not None


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError):
        _ = generic_framework.DoesNotExist  # type: ignore[attr-defined]
