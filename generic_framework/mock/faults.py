"""The mock's faults: delays that notice a departed client, dropped connections, error answers
and reproducible random failures.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

from generic_framework.mock.asgi import Receive, Scope, Send
from generic_framework.mock.fixture import HTTPErrorFault
from generic_framework.mock.prepared import JSON_TYPE
from generic_framework.mock.validation import MockError

__all__ = [
    "RAW_SEND",
    "RandomFailures",
    "drop",
    "drop_mid_body",
    "http_error",
    "sleep_unless_disconnected",
]

RAW_SEND = "generic_framework.mock.send"
"""The scope key under which the app keeps the server's own ``send`` (see :func:`drop`)."""


def _transport(scope: Scope) -> Any:
    """The connection's transport under uvicorn (the owner of the raw ``send``), else None."""
    cycle = getattr(scope.get(RAW_SEND), "__self__", None)
    return getattr(cycle, "transport", None)


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def sleep_unless_disconnected(receive: Receive, seconds: float) -> bool:
    """Sleep; return True early if the client went away meanwhile."""
    waiter = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        await asyncio.wait_for(asyncio.shield(waiter), timeout=seconds)
    except TimeoutError:
        return False
    finally:
        waiter.cancel()
    return True


async def drop(scope: Scope, receive: Receive, send: Send) -> None:
    """Close the connection abruptly, whether or not a response has started.

    Under uvicorn the raw ``send`` is a method of the request cycle that owns the transport;
    aborting it is a real dropped connection. Elsewhere the fallback starts a response and
    leaves it unfinished, which the server turns into a closed connection.
    """
    transport = _transport(scope)
    if transport is not None:
        transport.abort()
        await _wait_for_disconnect(receive)
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1000")]}
    )
    await send({"type": "http.response.body", "body": b"{", "more_body": True})


async def drop_mid_body(
    scope: Scope, receive: Receive, send: Send, body: bytes, after_bytes: int
) -> None:
    """Promise the whole body, send its first ``after_bytes`` bytes, then close the connection.

    The transport is closed (not aborted) so the bytes already written reach the client first.
    """
    head = body[: min(after_bytes, max(len(body) - 1, 0))]
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", JSON_TYPE), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": head, "more_body": True})
    transport = _transport(scope)
    if transport is not None:
        transport.close()
        await _wait_for_disconnect(receive)


def http_error(fault: HTTPErrorFault) -> MockError:
    """The error an ``http_error`` fault answers with (its ``Retry-After``, if any)."""
    retry = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
    return MockError(fault.status, fault.code, fault.message, headers=retry)


class RandomFailures:
    """Fail a fraction of valid API requests with HTTP 503, reproducibly.

    The n-th valid request fails when the n-th draw of a generator seeded with ``seed`` is below
    ``rate``: the same seed gives the same sequence of failures and successes, whichever
    requests they land on. A failed request uses no exchange; a retry asks again.

    Args:
        rate: the fraction of requests to fail, 0-1.
        seed: the generator's seed.
    """

    error = MockError(
        503, "1305", "The service may be temporarily overloaded, please try again later"
    )

    def __init__(self, rate: float, seed: int = 0) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"the failure rate must be between 0 and 1 (got {rate})")
        self.rate = rate
        self._random = random.Random(seed)  # noqa: S311 - reproducible faults, not secrets
        self._lock = threading.Lock()

    def next(self) -> bool:
        """True when the next request must fail."""
        with self._lock:
            return self._random.random() < self.rate
