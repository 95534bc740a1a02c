"""/readyz tells the truth: a real store query and personas decide it, the upstream is reported;
/healthz lives."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_fakes import FakePersona

from generic_framework.config import Settings
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UPSTREAM_TTL, UpstreamProbe, tcp_connect
from generic_framework.store import SQLiteStore

Client = Callable[..., httpx.AsyncClient]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Resolver:
    """A fake ``connect``: the name resolves once ``fixed``; counts its attempts."""

    def __init__(self) -> None:
        self.fixed = False
        self.attempts: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int, seconds: float) -> None:
        self.attempts.append((host, port))
        await asyncio.sleep(0)
        if not self.fixed:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def app_client(store: Any, settings: Settings, probe: UpstreamProbe) -> httpx.AsyncClient:
    runtime = Runtime(settings, store=store)
    app = create_app(runtime=runtime, personas={"scout": FakePersona()}, upstream_probe=probe)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def test_a_damaged_database_is_not_ready_until_repaired(
    client_for: Client, tmp_path: Path
) -> None:
    database = tmp_path / "data" / "conversations.sqlite3"
    async with client_for() as client:
        database.write_bytes(b"this is not a database " * 100)
        broken = await client.get("/readyz")
        assert (await client.get("/healthz")).status_code == 200  # alive, just not ready
        database.rename(tmp_path / "data" / "broken.sqlite3")  # the operator moves it aside
        repaired = await client.get("/readyz")
    assert broken.status_code == 503
    assert broken.json()["status"] == "not ready"
    store = broken.json()["checks"]["store"]
    assert store.startswith("fail: ") and "is damaged (file is not a database)" in store
    assert repaired.status_code == 200
    assert repaired.json()["checks"]["store"] == "ok"


async def test_a_store_that_does_not_answer_is_not_ready(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stuck:
        """A store whose database never answers (a lock held elsewhere, a lost network)."""

        async def get(self, conversation_id: str) -> None:
            await asyncio.sleep(60)

    monkeypatch.setattr("generic_framework.service.readiness.STORE_TIMEOUT", 0.05)
    settings = settings_for()
    async with app_client(Stuck(), settings, UpstreamProbe(settings, connect=Resolver())) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["store"] == (
        "fail: the conversation store did not answer within 0.05 s"
    )


def reachable_gauge(exposition: str) -> str | None:
    """The ``generic_framework_upstream_reachable`` sample's value, if exposed."""
    for line in exposition.splitlines():
        if line.startswith("generic_framework_upstream_reachable "):
            return line.split()[1]
    return None


async def test_an_unresolvable_upstream_degrades_but_keeps_the_replica_ready(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> None:
    # A proxy checks /readyz: an upstream outage must not take every replica out of rotation
    # (the page and the history still work); the detail and a gauge say what is wrong.
    settings = settings_for(
        base_url="https://zai-gateway.invalid/api/paas/v4", bot_metrics_public=True
    )
    resolver, clock = Resolver(), Clock()
    probe = UpstreamProbe(settings, connect=resolver, clock=clock)
    async with app_client(store, settings, probe) as client:
        assert reachable_gauge((await client.get("/metrics")).text) is None  # not probed yet
        failing = await client.get("/readyz")
        down = reachable_gauge((await client.get("/metrics")).text)
        resolver.fixed = True
        cached = await client.get("/readyz")  # within the interval: the verdict is reused
        clock.now += UPSTREAM_TTL + 0.1
        fixed = await client.get("/readyz")
        up = reachable_gauge((await client.get("/metrics")).text)
    assert failing.status_code == 200
    assert failing.json()["status"] == "ready" and failing.json()["degraded"] == ["upstream"]
    upstream = failing.json()["checks"]["upstream"]
    assert upstream.startswith("fail: the endpoint host 'zai-gateway.invalid' does not resolve")
    assert (down, up) == ("0.0", "1.0")
    assert cached.json()["degraded"] == ["upstream"]
    assert fixed.status_code == 200 and "degraded" not in fixed.json()
    assert fixed.json()["checks"]["upstream"] == (
        "ok (endpoint zai-gateway.invalid:443 accepts connections)"
    )
    assert resolver.attempts == [("zai-gateway.invalid", 443)] * 2


async def test_concurrent_probes_share_one_connection_attempt(
    settings_for: Callable[..., Settings],
) -> None:
    resolver = Resolver()
    probe = UpstreamProbe(settings_for(base_url="http://mock.test:8090/v4"), connect=resolver)
    verdicts = await asyncio.gather(*(probe.check() for _ in range(5)))
    assert len(set(verdicts)) == 1 and verdicts[0].startswith("fail:")
    assert resolver.attempts == [("mock.test", 8090)]


async def test_a_real_connection_refused_then_accepted(
    settings_for: Callable[..., Settings], store: SQLiteStore
) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    settings = settings_for(base_url=f"http://127.0.0.1:{port}/api/paas/v4")
    clock = Clock()
    probe = UpstreamProbe(settings, connect=tcp_connect, clock=clock)
    async with app_client(store, settings, probe) as client:
        refused = await client.get("/readyz")
        server = await asyncio.start_server(accept, "127.0.0.1", port)  # the upstream is back
        clock.now += UPSTREAM_TTL + 0.1
        try:
            back = await client.get("/readyz")
        finally:
            server.close()
            await server.wait_closed()
    assert refused.status_code == 200 and refused.json()["degraded"] == ["upstream"]
    assert refused.json()["checks"]["upstream"].startswith(
        f"fail: the endpoint 127.0.0.1:{port} refused a connection"
    )
    assert back.status_code == 200
    assert (
        back.json()["checks"]["upstream"] == f"ok (endpoint 127.0.0.1:{port} accepts connections)"
    )


def test_behind_a_proxy_the_proxy_is_probed(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(base_url="https://api.example.test/api/paas/v4")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert UpstreamProbe(settings).target() == ("proxy.example.test", 3128, "proxy")
    monkeypatch.setenv("NO_PROXY", "api.example.test")
    assert UpstreamProbe(settings).target() == ("api.example.test", 443, "endpoint")
