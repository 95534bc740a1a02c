"""Mock features the fault matrix and the load test need: proxy error pages, empty bodies,
connections dropped mid-body, and a seeded failure rate."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from mock_helpers import (
    AUTH,
    CHAT,
    chat,
    completion,
    exchange,
    make_fixture,
    user,
)

from generic_framework.mock import Fixture, MockServer, create_app
from generic_framework.mock.app import RandomFailures

ANSWER = completion("A complete answer, long enough to be cut in the middle of its body.")
REQUEST = chat(user("question"))


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(headers=AUTH, timeout=10) as client:
        yield client


def serve(*fixtures: Fixture, **options: object) -> MockServer:
    return MockServer(app=create_app(list(fixtures), **options))  # type: ignore[arg-type]


def faulty(*faults: dict[str, object]) -> Fixture:
    return make_fixture("faulty", exchange(REQUEST, ANSWER, faults=list(faults)))


def test_a_proxy_error_page_is_sent_verbatim(http: httpx.Client) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    fault = {"kind": "malformed_body", "status": 502, "content_type": "text/html", "body": page}
    with serve(faulty(fault)) as server:
        for stream in (False, True):
            server.reset()
            response = http.post(server.url + CHAT, json={**REQUEST, "stream": stream})
            assert response.status_code == 502
            assert response.headers["content-type"] == "text/html"
            assert response.text == page


def test_an_empty_body(http: httpx.Client) -> None:
    with serve(faulty({"kind": "malformed_body", "body": ""})) as server:
        response = http.post(server.url + CHAT, json=REQUEST)
        assert (response.status_code, response.content) == (200, b"")
        assert http.post(server.url + CHAT, json=REQUEST).json() == ANSWER


def test_a_connection_dropped_mid_body(http: httpx.Client) -> None:
    with serve(faulty({"kind": "drop_connection", "after_bytes": 20})) as server:
        received: list[bytes] = []
        with pytest.raises(httpx.RemoteProtocolError, match="without sending complete"):
            with http.stream("POST", server.url + CHAT, json=REQUEST) as response:
                assert response.status_code == 200
                assert int(response.headers["content-length"]) > 20
                received.extend(response.iter_raw())
        assert b"".join(received) == json.dumps(ANSWER, separators=(",", ":")).encode()[:20]
        assert http.post(server.url + CHAT, json=REQUEST).json() == ANSWER
        assert server.report()["faults"] == 1


def test_the_failure_rate_is_reproducible_by_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        failures = RandomFailures(0.3, seed)
        return [failures.next() for _ in range(200)]

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)
    assert 30 < sum(pattern(7)) < 90
    with pytest.raises(ValueError, match="between 0 and 1"):
        RandomFailures(1.5)


def test_the_failure_rate_answers_503_and_uses_no_exchange(http: httpx.Client) -> None:
    with serve(faulty(), fail_rate=0.5, fail_seed=3) as server:
        expected = RandomFailures(0.5, 3)
        outcomes = []
        for _ in range(40):
            response = http.post(server.url + CHAT, json=REQUEST)
            outcomes.append(response.status_code)
            assert response.status_code == (503 if expected.next() else 200)
        report = server.report()
        assert report["injected"] == outcomes.count(503) > 0
        assert report["served"] == outcomes.count(200) > 0
        failed = http.post(server.url + "/api/paas/v4/chat/completions", content=b"{")
        assert failed.status_code == 400  # invalid requests are refused before any failure draw
