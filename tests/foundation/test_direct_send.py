"""GLMClient's own client sends straight to its transport: what ``AsyncClient.send`` did stays.

docs/design/0702: headers (ours and httpx's defaults), the timeouts, the ``httpx`` log line,
cookies (exactly as the client would keep, send and drop them), and httpx's error on a closed
client. Each behaviour is compared with a borrowed client, which goes through ``send``; the
sender is chosen once, when the client is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import APIConnectionError
from generic_framework.wire.messages import ChatRequest, UserMessage

REQUEST = ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")])
BASE_URL = "https://zai.test/api/paas/v4"
FAKE_KEY = "c0ffee00" * 4 + ".GfTestKey0Z9Y8X"
Load = Callable[[str], dict[str, Any]]


class Recorder:
    """A MockTransport handler: the given answers in order; the requests it saw."""

    def __init__(self, steps: tuple[httpx.Response | Exception, ...]) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps[len(self.requests) - 1]
        if isinstance(step, Exception):
            raise step
        return step


def _ok(payload: Load, **headers: str) -> httpx.Response:
    return httpx.Response(200, json=payload("answer_plain.json")["body"], headers=headers)


def _settings(**values: Any) -> Settings:
    return Settings.defaults(api_key=FAKE_KEY, base_url=BASE_URL, **values)


async def _both(*steps: httpx.Response) -> tuple[list[httpx.Request], list[httpx.Request]]:
    """The requests of an owned client (direct) and of a borrowed one (``send``)."""
    direct, borrowed = Recorder(steps), Recorder(steps)
    async with GLMClient(_settings(), transport=httpx.MockTransport(direct)) as client:
        for _ in steps:
            await client.chat(REQUEST)
    http = httpx.AsyncClient(transport=httpx.MockTransport(borrowed))
    async with http, GLMClient(_settings(), http_client=http) as client:
        for _ in steps:
            await client.chat(REQUEST)
    return direct.requests, borrowed.requests


def _headers(request: httpx.Request) -> dict[str, str]:
    return {k.lower(): v for k, v in request.headers.items()}


async def test_the_request_carries_what_send_would_send(payload: Load) -> None:
    (direct,), (borrowed,) = await _both(_ok(payload))

    assert str(direct.url) == str(borrowed.url) == f"{BASE_URL}/chat/completions"
    assert direct.content == borrowed.content
    mine = _headers(direct)
    assert mine["authorization"] == f"Bearer {FAKE_KEY}"
    assert mine["content-type"] == "application/json"
    assert mine["user-agent"] == "generic-framework/0.1"
    assert mine["host"] == "zai.test"
    assert mine["content-length"] == str(len(direct.content))
    assert "gzip" in mine["accept-encoding"]  # httpx's own default headers are kept
    assert set(mine) >= set(_headers(borrowed)) - {"cookie"}


async def test_timeouts_reach_the_transport(payload: Load) -> None:
    (direct,), _ = await _both(_ok(payload))

    timeout = direct.extensions["timeout"]
    assert timeout == {"connect": 60.0, "read": 240.0, "write": 240.0, "pool": 60.0}


async def test_the_httpx_log_line_is_kept(payload: Load, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="httpx"):
        await _both(_ok(payload))

    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    expected = f'HTTP Request: POST {BASE_URL}/chat/completions "HTTP/1.1 200 OK"'
    assert lines == [expected, expected]


async def test_a_cookie_set_by_the_server_is_sent_back(payload: Load) -> None:
    direct, borrowed = await _both(
        _ok(payload, **{"set-cookie": "acw_tc=abc; Path=/"}), _ok(payload)
    )

    assert "cookie" not in _headers(direct[0])
    assert _headers(direct[1])["cookie"] == _headers(borrowed[1])["cookie"] == "acw_tc=abc"


async def test_a_cookie_the_server_expires_is_no_longer_sent(payload: Load) -> None:
    direct, borrowed = await _both(
        _ok(payload, **{"set-cookie": "acw_tc=abc; Path=/"}),
        _ok(payload, **{"set-cookie": "acw_tc=gone; Path=/; Max-Age=0"}),
        _ok(payload),
    )

    assert _headers(direct[1])["cookie"] == "acw_tc=abc"
    assert "cookie" not in _headers(direct[2]) and "cookie" not in _headers(borrowed[2])


async def test_the_sender_stays_the_direct_one_after_a_cookie(
    payload: Load, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sender is chosen when the client is built; a cookie changes what is sent, not how.
    async def no_send(*args: object, **kwargs: object) -> httpx.Response:
        raise AssertionError("AsyncClient.send was used")

    monkeypatch.setattr(httpx.AsyncClient, "send", no_send)
    script = Recorder((_ok(payload, **{"set-cookie": "acw_tc=abc; Path=/"}), _ok(payload)))
    async with GLMClient(_settings(), transport=httpx.MockTransport(script)) as client:
        await client.chat(REQUEST)
        await client.chat(REQUEST)

    assert _headers(script.requests[1])["cookie"] == "acw_tc=abc"


async def test_a_closed_client_raises_httpx_error(payload: Load) -> None:
    script = Recorder((_ok(payload),))
    client = GLMClient(_settings(), transport=httpx.MockTransport(script))
    await client.aclose()

    with pytest.raises(RuntimeError, match="client has been closed"):
        await client.chat(REQUEST)
    assert script.requests == []
    assert client.in_flight == 0


async def test_a_transport_error_carries_its_request() -> None:
    script = Recorder((httpx.ConnectError("refused"),))
    settings = _settings(llm_max_retries=0)
    async with GLMClient(settings, transport=httpx.MockTransport(script)) as client:
        with pytest.raises(APIConnectionError) as caught:
            await client.chat(REQUEST.model_copy())
    cause = caught.value.__cause__
    assert isinstance(cause, httpx.ConnectError)
    assert cause.request is script.requests[0]


async def test_a_borrowed_client_is_given_the_url_as_text(payload: Load) -> None:
    # A borrowed client may be httpx-like (httpx2) with URL types of its own.
    seen: list[object] = []

    class Borrowed(httpx.AsyncClient):
        def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
            seen.append(url)
            return super().build_request(method, url, **kwargs)

    http = Borrowed(transport=httpx.MockTransport(Recorder((_ok(payload),))))
    async with http, GLMClient(_settings(), http_client=http) as client:
        await client.chat(REQUEST)

    assert seen == [f"{BASE_URL}/chat/completions"]
