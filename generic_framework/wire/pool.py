"""A connection pool made of several small httpcore pools, for many concurrent requests.

httpcore's pool re-examines every connection it holds whenever a request starts or ends (and
polls the socket of each idle one), so its CPU cost per request grows with its size: 500
concurrent two-round chats cost about 12 s of client CPU through one pool of 100 connections,
against about 1.5 s through pools of 16 (``docs/benchmarks.md``; upstream: encode/httpcore#1035).
:class:`ShardedTransport` keeps every pool at most :data:`SHARD_SIZE` connections and sends each
request to the pool with the fewest requests in flight. The pools share one SSL context, so the
CA bundle is loaded once, and only when some request can need it: for a plain-http upstream
reached directly or through a plain-http proxy no connection is ever encrypted, and loading the
bundle (about 25 ms, the largest single cost of building a client) would be spent on nothing.
Such a transport gets a context that verifies and trusts nothing, so a TLS connection it was
never meant to make fails instead of going out unverified.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import httpx

__all__ = ["SHARD_SIZE", "ShardedTransport", "needs_tls"]

SHARD_SIZE = 16
"""Connections per httpcore pool: small enough that its bookkeeping stays cheap."""


class _Tracked(httpx.AsyncByteStream):
    """A response body that tells its pool's counter when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, counts: list[int], index: int) -> None:
        self._stream, self._counts, self._index = stream, counts, index
        self._open = True

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The pool's own iterator, not a generator around it: no extra frame per chunk.
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            if self._open:
                self._open = False
                self._counts[self._index] -= 1


class ShardedTransport(httpx.AsyncBaseTransport):
    """``max_connections`` split over pools of at most :data:`SHARD_SIZE` connections each.

    Args:
        max_connections: connections in all, kept alive between requests.
        proxy: an HTTP(S) proxy URL for every pool (httpx reads ``HTTPS_PROXY`` only for the
            transports it builds itself, so the caller passes it on).
        tls: whether any request may be encrypted (an ``https`` URL or proxy); when False the
            CA bundle is not loaded and a TLS connection fails verification.
    """

    def __init__(self, max_connections: int, *, proxy: str | None = None, tls: bool = True) -> None:
        shards = -(-max_connections // SHARD_SIZE)
        sizes = [max_connections // shards + (i < max_connections % shards) for i in range(shards)]
        # One CA bundle load (about 25 ms), not one per pool, and none when nothing is encrypted.
        context = httpx.create_ssl_context() if tls else _trusting_nothing()
        self._pools = [
            httpx.AsyncHTTPTransport(
                verify=context,
                proxy=proxy,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            )
            for n in sizes
        ]
        self._sizes = sizes
        self._in_flight = [0] * shards

    @property
    def pool_sizes(self) -> list[int]:
        """The connection limit of each pool."""
        return list(self._sizes)

    @property
    def in_flight(self) -> list[int]:
        """Requests each pool is serving now (a response counts until its body is closed)."""
        return list(self._in_flight)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the least busy pool."""
        counts = self._in_flight
        index = counts.index(min(counts))
        counts[index] += 1
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            counts[index] -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Tracked(response.stream, counts, index)
        return response

    async def aclose(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            await pool.aclose()


def needs_tls(url: str, proxy: str | None) -> bool:
    """Whether a request to ``url`` (through ``proxy``) can open an encrypted connection."""
    schemes = {url.partition(":")[0].lower()}
    if proxy is not None:
        schemes.add(proxy.partition(":")[0].lower())
    return schemes != {"http"}


def _trusting_nothing() -> ssl.SSLContext:
    """A client context that checks certificates and host names but holds no CA: every
    handshake fails, so a connection that should not be encrypted never goes out unverified."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
