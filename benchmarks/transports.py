"""Alternative transports tried for the concurrency scenario (see docs/benchmarks.md).

httpcore's pool re-scans every connection on every request start and end; with many connections
the scan (and a socket poll per idle connection) dominates the client's CPU. Two ways around it
are measured here: several small pools behind one transport, and httpx2's rewritten pool.

httpx is imported only when an option asks for one of these: the library's drivers import this
module before generic_framework, and an early ``import httpx`` would load httpx's command-line
client into their processes, which the library itself avoids (docs/design/0704).
"""

from __future__ import annotations

import itertools
from typing import Any


def _sharded_transport(shards: int, per_shard: int) -> Any:
    """Round-robin over ``shards`` independent pools of ``per_shard`` connections each."""
    import httpx

    class ShardedTransport(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
            self._pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(shards)]
            self._next = itertools.cycle(self._pools)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return await next(self._next).handle_async_request(request)

        async def aclose(self) -> None:
            for pool in self._pools:
                await pool.aclose()

    return ShardedTransport()


def build_http_client(options: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    """An AsyncClient for the options ``lib`` (httpx|httpx2), ``shards`` and ``max_connections``.

    Returns None when the options ask for nothing special (the caller then uses its default).
    """
    lib = options.get("lib", "httpx")
    shards = int(options.get("shards", 0))
    limit = options.get("max_connections")
    if lib == "httpx" and not shards and limit is None:
        return None
    if lib == "httpx2":
        import httpx2

        size = int(limit or 100)
        return httpx2.AsyncClient(
            headers=headers,
            timeout=60.0,
            limits=httpx2.Limits(max_connections=size, max_keepalive_connections=size),
        )
    import httpx

    if shards:
        per_shard = int(limit or 100) // shards
        return httpx.AsyncClient(
            headers=headers, timeout=60.0, transport=_sharded_transport(shards, per_shard)
        )
    size = int(limit)  # type: ignore[arg-type]
    return httpx.AsyncClient(
        headers=headers,
        timeout=60.0,
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
    )
