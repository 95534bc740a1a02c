"""The mock's report counts API requests in flight, and the most there were at once."""

from __future__ import annotations

import asyncio

import httpx

from generic_framework.mock import MockServer
from generic_framework.mock.app import create_app

BODY = {"model": "glm-4.7", "messages": [{"role": "user", "content": "hi"}]}


async def test_the_report_has_the_in_flight_high_water_mark() -> None:
    # Every request is answered 503 after 300 ms: long enough for the requests to overlap.
    app = create_app(fail_rate=1.0, latency_ms=300)
    async with MockServer(app=app) as server, httpx.AsyncClient() as client:
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
