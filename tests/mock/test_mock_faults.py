"""Every fault kind, over HTTP, and the "fail N times, then succeed" schedule."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mock_helpers import CHAT, chat, completion, exchange, make_fixture, user

from generic_framework.mock import MockServer
from generic_framework.mock.fixture import Exchange, MatchOptions
from generic_framework.mock.prepared import prepare
from generic_framework.mock.sse import parse_sse

ANSWER = completion("The answer is forty-two, as everyone knows by now.", reasoning="easy")
REQUEST = chat(user("question"))


def faulty(serve: Callable[..., MockServer], *faults: dict[str, Any]) -> MockServer:
    return serve(make_fixture("faulty", exchange(REQUEST, ANSWER, faults=list(faults))))


def content_of(response: httpx.Response) -> str:
    return str(response.json()["choices"][0]["message"]["content"])


def test_delay_holds_the_answer(serve: Callable[..., MockServer], http: httpx.Client) -> None:
    faulty(serve, {"kind": "delay", "ms": 250})
    started = time.monotonic()
    response = http.post(CHAT, json=REQUEST)
    assert time.monotonic() - started >= 0.25
    assert content_of(response).startswith("The answer")


def test_delay_limited_to_the_first_attempts(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    # A delay long against what one request takes on a busy machine, so that "not delayed"
    # cannot be a slow request's time.
    faulty(serve, {"kind": "delay", "ms": 2000, "times": 1})
    started = time.monotonic()
    http.post(CHAT, json=REQUEST)
    assert time.monotonic() - started >= 2.0
    started = time.monotonic()
    http.post(CHAT, json=REQUEST)
    assert time.monotonic() - started < 1.5


def test_http_error_with_retry_after_then_success(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = faulty(
        serve,
        {"kind": "http_error", "status": 429, "code": "1302", "retry_after": 1.5, "times": 2},
    )
    first, second, third = (http.post(CHAT, json=REQUEST) for _ in range(3))
    for failed in (first, second):
        assert failed.status_code == 429
        assert failed.headers["retry-after"] == "1.5"
        assert failed.json()["error"]["code"] == "1302"
    assert content_of(third).startswith("The answer")
    report = server.report()
    assert (report["faults"], report["served"]) == (2, 1)
    assert [entry.outcome for entry in server.app.catalog.log] == [
        "http_error",
        "http_error",
        "served",
    ]


def test_http_error_every_time(serve: Callable[..., MockServer], http: httpx.Client) -> None:
    faulty(serve, {"kind": "http_error", "status": 500, "code": "500", "times": None})
    assert {http.post(CHAT, json=REQUEST).status_code for _ in range(4)} == {500}


def test_faults_apply_in_sequence(serve: Callable[..., MockServer], http: httpx.Client) -> None:
    faulty(
        serve,
        {"kind": "http_error", "status": 503, "code": "1305", "times": 1},
        {"kind": "malformed_body", "times": 1},
    )
    assert http.post(CHAT, json=REQUEST).status_code == 503
    with pytest.raises(json.JSONDecodeError):
        http.post(CHAT, json=REQUEST).json()
    assert content_of(http.post(CHAT, json=REQUEST)).startswith("The answer")


def test_drop_connection_closes_without_a_response(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "drop_connection", "times": 1})
    with pytest.raises(httpx.RemoteProtocolError, match="without sending"):
        http.post(CHAT, json=REQUEST)
    assert content_of(http.post(CHAT, json=REQUEST)).startswith("The answer")


def test_malformed_body_is_cut_short_json(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "malformed_body"})
    response = http.post(CHAT, json=REQUEST)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert json.dumps(ANSWER, separators=(",", ":")).startswith(response.text[:20])
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_malformed_body_can_be_given(serve: Callable[..., MockServer], http: httpx.Client) -> None:
    faulty(serve, {"kind": "malformed_body", "body": "<html>502 Bad Gateway</html>"})
    assert http.post(CHAT, json=REQUEST).text == "<html>502 Bad Gateway</html>"


def test_malformed_stream_frame(serve: Callable[..., MockServer], http: httpx.Client) -> None:
    faulty(serve, {"kind": "malformed_body"})
    response = http.post(CHAT, json={**REQUEST, "stream": True})
    events = parse_sse(response.text)
    assert isinstance(events[0], str) and events[0].startswith('{"id"')  # not valid JSON
    assert events[-1] == "[DONE]"


def test_break_stream_drops_the_connection_after_n_events(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "break_stream", "after_events": 2})
    received: list[bytes] = []
    with pytest.raises(httpx.RemoteProtocolError):
        with http.stream("POST", CHAT, json={**REQUEST, "stream": True}) as response:
            assert response.status_code == 200
            received.extend(response.iter_bytes())
    events = parse_sse(b"".join(received).decode())
    assert len(events) == 2
    assert "[DONE]" not in events
    whole = http.post(CHAT, json={**REQUEST, "stream": True})
    assert parse_sse(whole.text)[-1] == "[DONE]"


def test_break_stream_on_a_json_request_drops_the_connection(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "break_stream", "after_events": 2})
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(CHAT, json=REQUEST)


def test_stall_stream_until_the_client_gives_up_then_a_retry_succeeds(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = faulty(serve, {"kind": "stall_stream", "after_events": 1, "seconds": 30})
    received: list[bytes] = []
    with pytest.raises(httpx.ReadTimeout):
        with http.stream(
            "POST", CHAT, json={**REQUEST, "stream": True}, timeout=httpx.Timeout(5, read=0.3)
        ) as response:
            received.extend(response.iter_bytes())
    assert len(parse_sse(b"".join(received).decode())) == 1
    retry = http.post(CHAT, json={**REQUEST, "stream": True})  # the same exchange, no stall now
    assert parse_sse(retry.text)[-1] == "[DONE]"
    assert server.report()["served"] == 2


def test_a_short_stall_then_the_rest_of_the_stream(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "stall_stream", "after_events": 2, "seconds": 0.3})
    started = time.monotonic()
    response = http.post(CHAT, json={**REQUEST, "stream": True})
    assert time.monotonic() - started >= 0.3
    assert parse_sse(response.text)[-1] == "[DONE]"


def test_stall_on_a_json_request_delays_the_body(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    faulty(serve, {"kind": "stall_stream", "seconds": 30})
    with pytest.raises(httpx.ReadTimeout):
        http.post(CHAT, json=REQUEST, timeout=httpx.Timeout(5, read=0.3))


def test_the_fault_schedule() -> None:
    prepared = prepare(
        Exchange.model_validate(
            exchange(
                REQUEST,
                ANSWER,
                faults=[
                    {"kind": "delay", "ms": 100, "times": 2},
                    {"kind": "delay", "ms": 50},
                    {"kind": "http_error", "times": 2},
                    {"kind": "drop_connection"},
                ],
            )
        ),
        0,
        MatchOptions(),
    )
    kinds = [getattr(prepared.failure_for(n), "kind", None) for n in range(5)]
    assert kinds == ["http_error", "http_error", "drop_connection", None, None]
    assert [prepared.delay_for(n) for n in (0, 1, 2)] == pytest.approx([0.15, 0.15, 0.05])
