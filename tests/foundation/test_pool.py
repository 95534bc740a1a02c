"""ShardedTransport: small pools, least-busy routing, counters that always come back to zero,
and connections reused after a stream (a real keep-alive server on loopback)."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient, _proxy_for
from generic_framework.wire.messages import ChatRequest, StreamCompleted, UserMessage
from generic_framework.wire.pool import SHARD_SIZE, ShardedTransport, needs_tls

CHUNK = {
    "id": "1",
    "model": "glm-4.7",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}],
}
LAST = {
    "id": "1",
    "model": "glm-4.7",
    "choices": [{"index": 0, "finish_reason": "stop", "delta": {"role": "assistant"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class KeepAliveServer:
    """HTTP/1.1 with keep-alive: answers every request with a short chunked SSE stream."""

    def __init__(self, delay: float = 0.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.delay = delay
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests = 0
        self.busy = 0
        self.peak = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/api/paas/v4"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                self.busy += 1
                self.peak = max(self.peak, self.busy)
                await asyncio.sleep(self.delay)
                self.busy -= 1
                writer.write(self._response())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _response() -> bytes:
        events = [f"data: {json.dumps(CHUNK)}\n\n", f"data: {json.dumps(LAST)}\n\n"]
        events.append("data: [DONE]\n\n")
        body = b"".join(f"{len(e.encode()):x}\r\n".encode() + e.encode() + b"\r\n" for e in events)
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        return head + body + b"0\r\n\r\n"


@pytest.fixture
async def server() -> AsyncIterator[KeepAliveServer]:
    async with KeepAliveServer() as srv:
        yield srv


def request() -> ChatRequest:
    return ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")])


@pytest.mark.parametrize("total", [1, 15, 16, 17, 64, 100, 1000])
def test_pools_are_small_and_add_up(total: int) -> None:
    sizes = ShardedTransport(total).pool_sizes
    assert sum(sizes) == total
    assert max(sizes) <= SHARD_SIZE
    assert max(sizes) - min(sizes) <= 1


async def test_requests_spread_over_pools_and_counters_return_to_zero() -> None:
    transport = ShardedTransport(48)
    async with KeepAliveServer(delay=0.05) as srv:
        async with httpx.AsyncClient(transport=transport) as http:
            results = await asyncio.gather(
                *(http.post(srv.base_url + "/chat/completions", content=b"{}") for _ in range(48))
            )
    assert all(r.status_code == 200 for r in results)
    assert transport.in_flight == [0, 0, 0]
    assert srv.peak == 48  # all 48 ran at once: no pool queued what another pool could take
    assert srv.connections == 48


async def test_a_failed_request_gives_its_slot_back() -> None:
    transport = ShardedTransport(4)
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("http://127.0.0.1:9/")
    assert transport.in_flight == [0]


async def test_a_streamed_chat_leaves_its_connection_for_the_next(
    server: KeepAliveServer,
) -> None:
    settings = Settings.defaults(api_key="k", base_url=server.base_url)
    async with GLMClient(settings) as client:
        for _ in range(3):
            events = [event async for event in client.chat_stream(request())]
            assert isinstance(events[-1], StreamCompleted)
            assert events[-1].completion.message.content == "hi"
    assert server.requests == 3
    assert server.connections == 1


def test_proxy_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert _proxy_for("https://api.z.ai/api/paas/v4") == "http://proxy.internal:3128"
    monkeypatch.setenv("NO_PROXY", "api.z.ai")
    assert _proxy_for("https://api.z.ai/api/paas/v4") is None


@pytest.mark.parametrize(
    ("url", "proxy", "tls"),
    [
        ("http://127.0.0.1:8000/api/paas/v4", None, False),
        ("HTTP://mock:8000/v4", "http://proxy:3128", False),
        ("https://api.z.ai/api/paas/v4", None, True),
        ("http://127.0.0.1:8000/v4", "https://proxy:3128", True),
        ("https://api.z.ai/api/paas/v4", "http://proxy:3128", True),
    ],
)
def test_tls_is_needed_for_an_https_upstream_or_proxy_only(
    url: str, proxy: str | None, tls: bool
) -> None:
    assert needs_tls(url, proxy) is tls


def test_a_plain_http_client_loads_no_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx reads SSL_CERT_FILE when it loads the CA bundle: a missing file makes any load fail.
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca-bundle.pem")
    GLMClient(Settings.defaults(api_key="k", base_url="http://127.0.0.1:9/api/paas/v4"))
    with pytest.raises(OSError):
        GLMClient(Settings.defaults(api_key="k", base_url="https://127.0.0.1:9/api/paas/v4"))


async def test_a_transport_without_tls_never_connects_unverified(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with KeepAliveServer(ssl_context=context) as srv:
        https = srv.base_url.replace("http:", "https:") + "/chat/completions"
        async with httpx.AsyncClient(transport=ShardedTransport(2, tls=False)) as http:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.post(https, content=b"{}")
        # The same server is reachable by a transport that trusts its certificate.
        trusted = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(cert)))
        async with httpx.AsyncClient(transport=trusted) as http:
            assert (await http.post(https, content=b"{}")).status_code == 200
    assert srv.requests == 1
