"""Auth, body and message limits, CORS, the loopback rule and slow-client timeouts."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from service_fakes import TOKEN
from service_processes import served_in_thread
from support import until

from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime
from generic_framework.service import check_bind, create_app, is_loopback, uvicorn_config
from generic_framework.service.middleware import BodyLimitMiddleware
from generic_framework.store import SQLiteStore

Client = Callable[..., httpx.AsyncClient]


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (None, 401),
        ("Bearer wrong-token", 401),
        (f"Basic {TOKEN}", 401),
        (f"Bearer {TOKEN}x", 401),
        (f"Bearer {TOKEN}", 200),
        (f"bearer {TOKEN}", 200),
    ],
)
async def test_v1_needs_the_bearer_token(
    client_for: Client, header: str | None, status: int
) -> None:
    headers = {"Authorization": header} if header else {}
    async with client_for(bot_api_token=TOKEN) as client:
        response = await client.get("/v1/models", headers=headers)
    assert response.status_code == status
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["type"] == "authentication_error"
        assert TOKEN not in response.text


JSON = {"Content-Type": "application/json"}


async def test_auth_comes_before_the_body_is_read(client_for: Client) -> None:
    async with client_for(bot_api_token=TOKEN, bot_max_body=1024) as client:
        response = await client.post("/v1/chat/completions", content=b"x" * 5000)
    assert response.status_code == 401


async def test_public_paths_need_no_token(client_for: Client) -> None:
    async with client_for(bot_api_token=TOKEN) as client:
        for path in ("/", "/healthz", "/readyz", "/openapi.json", "/static/app.js"):
            assert (await client.get(path)).status_code == 200, path


async def test_no_token_configured_means_open_api(client_for: Client) -> None:
    async with client_for() as client:
        assert (await client.get("/v1/models")).status_code == 200


async def test_body_over_the_limit_is_413(client_for: Client) -> None:
    body = json.dumps({"model": "scout", "messages": [{"role": "user", "content": "x" * 3000}]})
    async with client_for(bot_max_body=2048) as client:
        response = await client.post("/v1/chat/completions", content=body, headers=JSON)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert "BOT_MAX_BODY" in response.json()["error"]["message"]


async def test_chunked_body_without_length_is_counted(client_for: Client) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 512

    async with client_for(bot_max_body=2048) as client:
        response = await client.post("/v1/chat/completions", content=pieces(), headers=JSON)
    assert response.status_code == 413


async def _call(app: Any, messages: list[dict[str, Any]], headers: list[Any]) -> list[Any]:
    """Drive a raw ASGI app with the given receive messages; return what it sent."""
    sent: list[Any] = []
    queue = list(messages)
    forever = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        await forever.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await app(scope, receive, send)
    return sent


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": message["body"]})


async def test_a_lying_content_length_is_not_trusted() -> None:
    guard = BodyLimitMiddleware(_echo, max_body=1024)
    chunks = [{"type": "http.request", "body": b"y" * 600, "more_body": True}] * 3
    sent = await _call(guard, chunks, [(b"content-length", b"10")])
    assert sent[0]["status"] == 413


async def test_a_body_within_the_limit_is_replayed_whole() -> None:
    guard = BodyLimitMiddleware(_echo, max_body=1024)
    chunks = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    ]
    sent = await _call(guard, chunks, [])
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"abcd"


async def test_a_body_that_never_ends_gets_408() -> None:
    guard = BodyLimitMiddleware(_echo, max_body=1024, read_timeout=0.05)
    chunks = [{"type": "http.request", "body": b"ab", "more_body": True}]
    sent = await _call(guard, chunks, [])
    assert sent[0]["status"] == 408


async def test_cors_is_off_unless_configured(client_for: Client) -> None:
    preflight = {
        "Origin": "https://chat.example.org",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    async with client_for() as client:
        off = await client.options("/v1/chat/completions", headers=preflight)
        plain = await client.get("/v1/models", headers={"Origin": "https://chat.example.org"})
    assert "access-control-allow-origin" not in off.headers
    assert "access-control-allow-origin" not in plain.headers
    async with client_for(
        bot_cors_origins="https://chat.example.org, https://other.example.org",
        bot_api_token=TOKEN,
    ) as client:
        on = await client.options("/v1/chat/completions", headers=preflight)
        evil = await client.options(
            "/v1/chat/completions", headers={**preflight, "Origin": "https://evil.example"}
        )
    assert on.status_code == 200
    assert on.headers["access-control-allow-origin"] == "https://chat.example.org"
    assert "authorization" in on.headers["access-control-allow-headers"].lower()
    assert evil.status_code == 400


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("bot.example.org", False),
        ("", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_no_token_refuses_to_bind_beyond_loopback(settings_for: Callable[..., Settings]) -> None:
    open_settings = settings_for()
    check_bind(open_settings, "127.0.0.1")
    with pytest.raises(ConfigError, match="BOT_API_TOKEN"):
        check_bind(open_settings, "0.0.0.0")
    check_bind(settings_for(bot_api_token=TOKEN), "0.0.0.0")


def test_run_refuses_before_binding(settings_for: Callable[..., Settings]) -> None:
    from generic_framework.service import run

    with pytest.raises(ConfigError, match=r"refusing to bind '0\.0\.0\.0'"):
        run(settings_for(), "0.0.0.0", 0)


class _Endless:
    """Writes one piece of text, then waits forever: only a disconnect can end its turn.

    Like a real persona it holds its conversation's lock (the runtime's) for the whole turn.
    """

    spec = PersonaSpec(name="endless", system_prompt="")

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.running = 0

    async def respond(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Any = None,
        options: Any = None,
        caller: Any = None,
    ) -> Any:
        raise NotImplementedError

    async def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Any = None,
        options: Any = None,
        caller: Any = None,
    ) -> Any:
        from generic_framework.core.events import TextDelta

        async with self.runtime.locks.hold(conversation_id):
            self.running += 1
            try:
                yield TextDelta(text="thinking")
                await asyncio.Event().wait()
            finally:
                self.running -= 1


@pytest.fixture
def runtime(settings_for: Callable[..., Settings], store: SQLiteStore) -> Runtime:
    return Runtime(settings_for(), store=store)


@pytest.fixture
def endless(runtime: Runtime) -> _Endless:
    return _Endless(runtime)


@pytest.fixture
def live_server(runtime: Runtime, endless: _Endless) -> Iterator[tuple[str, int]]:
    """The app under a real uvicorn in a thread, with a short head timeout."""
    from service_fakes import FakePersona

    personas = {"scout": FakePersona(), "endless": endless}
    app = create_app(runtime=runtime, personas=personas)
    config = uvicorn_config(
        app, runtime.settings, "127.0.0.1", 0, head_timeout=0.3, log_level="warning"
    )
    with served_in_thread(config) as address:
        yield address


def test_a_silent_connection_is_closed(live_server: tuple[str, int]) -> None:
    # The head timeout is 0.3 s; the client's 30 s only bounds a hang (a busy machine is slow).
    with socket.create_connection(live_server, timeout=30) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""  # closed by the server, not by our timeout
        assert time.monotonic() - started < 20


def test_oversized_headers_are_refused(live_server: tuple[str, int]) -> None:
    host, port = live_server
    # uvicorn answers 400 and closes; the client may see the reset before the answer.
    try:
        response = httpx.get(
            f"http://{host}:{port}/healthz", headers={"X-Big": "a" * 300_000}, timeout=30
        )
    except httpx.TransportError:
        return
    assert response.status_code in (400, 431)


def test_a_normal_request_still_works(live_server: tuple[str, int]) -> None:
    host, port = live_server
    assert httpx.get(f"http://{host}:{port}/healthz", timeout=30).json() == {"status": "ok"}


def test_a_client_that_disconnects_ends_its_turn(
    live_server: tuple[str, int], endless: _Endless
) -> None:
    host, port = live_server
    body = {
        "model": "endless",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
        "conversation_id": "gone",
    }
    with httpx.stream(
        "POST", f"http://{host}:{port}/v1/chat/completions", json=body, timeout=30
    ) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")
        assert endless.running == 1
        assert len(endless.runtime.locks) == 1  # the turn holds its conversation
    until(
        lambda: not endless.running and not len(endless.runtime.locks),
        "the turn ends after the client left",
    )
