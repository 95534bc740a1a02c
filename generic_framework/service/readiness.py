"""``/readyz``: can this instance answer a conversation right now?

Three checks, each ``ok ...`` or ``fail: <reason>``:

- **store**: the conversation store answers a real query (reading a conversation that does not
  exist), within :data:`STORE_TIMEOUT`. A damaged file, a database that cannot be opened or
  reached, or one locked for longer than that, is not ready, with the store's own message.
- **personas**: at least one persona is loaded.
- **upstream**: a key is configured (or the endpoint is not Z.AI's, so it is taken for a mock),
  and the endpoint's host, or the proxy it is reached through, resolves and accepts a TCP
  connection. No HTTP request is sent, so a probe never costs a paid call. The verdict is kept
  for :data:`UPSTREAM_TTL` seconds, so a probe every second opens at most one connection per
  interval, and concurrent probes share one attempt.

``/healthz`` stays a liveness check: it answers as long as the process serves requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable

from generic_framework.config import DEFAULT_BASE_URL, Settings
from generic_framework.errors import GLMError
from generic_framework.redaction import redact
from generic_framework.store.base import ConversationStore

__all__ = [
    "CONNECT_TIMEOUT",
    "STORE_TIMEOUT",
    "UPSTREAM_TTL",
    "Connect",
    "UpstreamProbe",
    "check_store",
    "tcp_connect",
]

STORE_TIMEOUT = 3.0
"""Seconds the store may take to answer the readiness query."""
UPSTREAM_TTL = 10.0
"""Seconds an upstream verdict is reused."""
CONNECT_TIMEOUT = 3.0
"""Seconds to resolve the upstream host and open a connection."""

_PROBE_ID = "readyz-probe"

Connect = Callable[[str, int, float], Awaitable[None]]
"""Resolve ``host`` and open (then close) a TCP connection to ``port`` within a time limit."""


async def tcp_connect(host: str, port: int, seconds: float) -> None:
    """Resolve ``host`` and open a TCP connection to ``port``, then close it at once.

    Raises:
        OSError: the name does not resolve (:class:`socket.gaierror`) or the connection failed.
        TimeoutError: either took longer than ``seconds``.
    """
    async with asyncio.timeout(seconds):
        _, writer = await asyncio.open_connection(host, port)
    writer.close()
    with contextlib.suppress(OSError):  # the peer reset a connection we were closing anyway
        await writer.wait_closed()


async def check_store(store: ConversationStore) -> str:
    """``ok`` when the store answers a real query; else ``fail:`` and its reason."""
    try:
        async with asyncio.timeout(STORE_TIMEOUT):
            await store.get(_PROBE_ID)
    except TimeoutError:
        return f"fail: the conversation store did not answer within {STORE_TIMEOUT:g} s"
    except GLMError as exc:
        return f"fail: {exc}"
    except Exception as exc:  # any backend's driver error: reported, never raised from a probe
        return f"fail: {type(exc).__name__}: {redact(str(exc), 300)}"
    return "ok"


class UpstreamProbe:
    """The upstream check of ``/readyz`` for one endpoint (see the module's docstring).

    Args:
        settings: ``base_url`` and the key come from here.
        connect: how to resolve and connect (tests pass a fake; :func:`tcp_connect` otherwise).
        ttl: seconds a verdict is kept.
        clock: a monotonic clock (tests move it).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        connect: Connect = tcp_connect,
        ttl: float = UPSTREAM_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.connect = connect
        self.ttl = ttl
        self.clock = clock
        self._verdict: tuple[float, str] | None = None
        self._lock = asyncio.Lock()

    def target(self) -> tuple[str, int, str]:
        """``(host, port, what)``: the endpoint, or the proxy the client goes through."""
        parts = urllib.parse.urlsplit(self.settings.base_url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        # The client sends through the proxy the environment sets (wire/client.py): then the
        # proxy is what must be reachable, and the endpoint may not even resolve from here.
        proxy = (
            None
            if urllib.request.proxy_bypass(host)
            else urllib.request.getproxies().get(parts.scheme)
        )
        if proxy:
            via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            return via.hostname or "", via.port or 80, "proxy"
        return host, port, "endpoint"

    async def check(self) -> str:
        """``ok ...`` or ``fail: ...`` for the upstream, from the cache when fresh enough."""
        key = self._key_check()
        if key is not None:
            return key
        async with self._lock:
            now = self.clock()
            if self._verdict is not None and now - self._verdict[0] < self.ttl:
                return self._verdict[1]
            verdict = await self._probe()
            self._verdict = (self.clock(), verdict)
            return verdict

    def _key_check(self) -> str | None:
        s = self.settings
        if s.has_api_key:
            return None
        if s.base_url != DEFAULT_BASE_URL and "api.z.ai" not in s.base_url:
            return None  # no key: the endpoint is taken for a mock, and probed like any other
        return "fail: OPENAI_API_KEY is not set"

    async def _probe(self) -> str:
        host, port, what = self.target()
        address = f"{host}:{port}"
        try:
            await self.connect(host, port, CONNECT_TIMEOUT)
        except socket.gaierror as exc:
            return f"fail: the {what} host {host!r} does not resolve ({exc.strerror or exc})"
        except TimeoutError:
            return f"fail: no connection to the {what} {address} within {CONNECT_TIMEOUT:g} s"
        except OSError as exc:
            return f"fail: the {what} {address} refused a connection ({exc.strerror or exc})"
        note = "" if self.settings.has_api_key else "; no key, taken for a mock"
        return f"ok ({what} {address} accepts connections{note})"
