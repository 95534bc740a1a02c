"""The mock's report counts API requests in flight, and the most there were at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from mock_helpers import simple

from generic_framework.mock import MockServer
from generic_framework.mock.app import CHAT_PATHS, MockApp, create_app

BODY = {"model": "glm-4.7", "messages": [{"role": "user", "content": "hi"}]}


async def test_the_report_has_the_in_flight_high_water_mark() -> None:
    # Every request is answered 503 after 300 ms: long enough for the requests to overlap.
    app = create_app(fail_rate=1.0, latency_ms=300)
    async with MockServer(app=app) as server, httpx.AsyncClient(timeout=30) as client:
        url = f"{server.base_url}/chat/completions"
        headers = {"Authorization": "Bearer k"}

        async def post() -> int:
            return (await client.post(url, json=BODY, headers=headers)).status_code

        assert await asyncio.gather(*(post() for _ in range(6))) == [503] * 6
        report = server.report()
        assert (report["max_in_flight"], report["in_flight"], report["injected"]) == (6, 0, 6)

        server.reset()
        for _ in range(2):
            await post()
        report = server.report()
        assert (report["max_in_flight"], report["in_flight"]) == (1, 0)


async def _in_flight_as_the_answer_ends(app: MockApp, body: dict[str, Any]) -> list[int]:
    """Call the app directly and read ``in_flight`` as each last body message is handed over.

    Once the server has the last bytes of an answer, a client in another thread or process
    may read it whole and ask for the report before the app's coroutine runs again: the
    request must no longer be counted by then.
    """
    raw = json.dumps(body).encode()
    seen: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            seen.append(app.catalog.report()["in_flight"])

    scope = {
        "type": "http",
        "method": "POST",
        "path": CHAT_PATHS[0],
        "headers": [(b"authorization", b"Bearer k")],
    }
    await app(scope, receive, send)
    return seen


@pytest.mark.parametrize("fail_rate", [0.0, 1.0])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_leaves_the_count_before_its_last_bytes_are_sent(
    fail_rate: float, stream: bool
) -> None:
    app = create_app([simple("hello", "hi", "hello there")], fail_rate=fail_rate)
    assert await _in_flight_as_the_answer_ends(app, {**BODY, "stream": stream}) == [0]
    report = app.catalog.report()
    assert (report["in_flight"], report["max_in_flight"]) == (0, 1)


async def test_a_rejected_request_leaves_the_count_before_its_answer_is_sent() -> None:
    app = create_app([])
    assert await _in_flight_as_the_answer_ends(app, {"model": "glm-4.7"}) == [0]
    assert app.catalog.report()["rejected"] == 1
