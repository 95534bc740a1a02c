"""What the client reports about its upstream calls.

:class:`UpstreamObserver` is what :class:`~generic_framework.wire.client.GLMClient` tells about
every HTTP exchange and retry (the runtime's Prometheus metrics implement it); the wire layer
itself knows nothing of Prometheus. The client keeps two plain counters beside its upstream
budget (:mod:`generic_framework.wire.slots`), so the metrics can show calls in flight and queued
without any work on the hot path.
"""

from __future__ import annotations

from typing import Protocol

from generic_framework.errors import GLMError
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    ResponseValidationError,
)

__all__ = ["NO_OBSERVER", "UpstreamObserver", "status_label"]


class UpstreamObserver(Protocol):
    """Receives the outcome of every upstream HTTP exchange (one per attempt)."""

    def upstream_response(self, endpoint: str, status: str, code: str) -> None:
        """An exchange ended: HTTP ``status`` (or a failure word) and business ``code``."""
        ...

    def upstream_duration(self, endpoint: str, seconds: float) -> None:
        """How long the exchange held its slot."""
        ...

    def upstream_retry(self, endpoint: str, reason: str) -> None:
        """A failed attempt is retried; ``reason`` is the error's class name."""
        ...


class _Nobody:
    """The observer of a client given none: every report is dropped."""

    def upstream_response(self, endpoint: str, status: str, code: str) -> None:
        """Dropped."""

    def upstream_duration(self, endpoint: str, seconds: float) -> None:
        """Dropped."""

    def upstream_retry(self, endpoint: str, reason: str) -> None:
        """Dropped."""


NO_OBSERVER: UpstreamObserver = _Nobody()
"""An observer that records nothing."""


def status_label(exc: GLMError) -> str:
    """The status of a failed exchange: the HTTP status, or what happened instead of one."""
    if exc.status_code is not None:
        return str(exc.status_code)
    if isinstance(exc, APITimeoutError):
        return "timeout"
    if isinstance(exc, APIConnectionError):
        return "connection_error"
    if isinstance(exc, ResponseValidationError):
        return "invalid_response"
    return "error"
