"""GLMClient.chat(), web_search() and read_url() against a scripted transport: wire, retries,
bad bodies."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ContentFilterError,
    InsufficientBalanceError,
    RateLimitError,
    ResponseValidationError,
    ServerError,
)
from generic_framework.wire.messages import ChatRequest, SystemMessage, UserMessage

MakeClient = Callable[..., tuple[GLMClient, Any]]
Load = Callable[[str], dict[str, Any]]

REQUEST = ChatRequest(
    model="glm-4.7",
    messages=[SystemMessage(content="You are Tomas."), UserMessage(content="Say thanks.")],
)


def ok(payload: Load, name: str = "answer_plain.json") -> httpx.Response:
    return httpx.Response(200, json=payload(name)["body"])


def zai_error(status: int, code: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"code": code, "message": f"upstream says {code}"}}
    return httpx.Response(status, json=body, headers=headers)


# ---------------------------------------------------------------- the request on the wire


async def test_chat_posts_the_request_with_bearer_auth(
    make_client: MakeClient, payload: Load, fake_key: str
) -> None:
    client, script = make_client(ok(payload))

    completion = await client.chat(REQUEST.model_copy(update={"stream": True}))

    assert completion.message.content == "Takk fyrir!"
    (request,) = script.requests
    assert request.method == "POST"
    assert str(request.url) == "https://zai.test/api/paas/v4/chat/completions"
    assert request.headers["authorization"] == f"Bearer {fake_key}"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    assert body["stream"] is False
    assert body["model"] == "glm-4.7"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "temperature" not in body  # unset fields are never sent


async def test_timeouts_come_from_settings(make_client: MakeClient, payload: Load) -> None:
    client, script = make_client(
        ok(payload), llm_timeout=11, llm_connect_timeout=3, llm_pool_timeout=4
    )

    await client.chat(REQUEST)

    timeout = script.requests[0].extensions["timeout"]
    assert (timeout["read"], timeout["connect"], timeout["pool"]) == (11, 3, 4)


@pytest.mark.parametrize(
    "name",
    [
        "answer_plain.json",
        "answer_parallel_tools.json",
        "followup_after_tools.json",
        "answer_with_sources.json",
        "answer_without_sources.json",
    ],
)
async def test_every_completion_fixture_goes_through_the_client(
    make_client: MakeClient, payload: Load, name: str
) -> None:
    fixture = payload(name)
    client, script = make_client(httpx.Response(200, json=fixture["body"]))
    request = ChatRequest.model_validate(fixture["request"]["body"])

    completion = await client.chat(request)

    assert completion.id == fixture["body"]["id"]
    assert completion.finish_reason == fixture["body"]["choices"][0]["finish_reason"]
    sent = script.bodies[0]
    sent.pop("stream")
    expected = dict(fixture["request"]["body"])
    expected.pop("stream", None)
    for tool in expected.get("tools", []):
        if tool["type"] == "web_search":  # the library always asks for the sources
            tool["web_search"].setdefault("search_result", True)
    assert sent == expected


# ---------------------------------------------------------------- retry counts


async def test_503_503_200_makes_three_requests(make_client: MakeClient, payload: Load) -> None:
    client, script = make_client(
        httpx.Response(503, text="busy"), httpx.Response(503, text="busy"), ok(payload)
    )

    completion = await client.chat(REQUEST)

    assert completion.message.content == "Takk fyrir!"
    assert len(script.requests) == 3


async def test_1113_makes_one_request(make_client: MakeClient) -> None:
    client, script = make_client(zai_error(429, "1113"))

    with pytest.raises(InsufficientBalanceError) as caught:
        await client.chat(REQUEST)

    assert len(script.requests) == 1
    assert caught.value.status_code == 429
    assert caught.value.code == "1113"
    assert caught.value.retryable is False


async def test_1302_twice_then_200_makes_three_requests(
    make_client: MakeClient, payload: Load
) -> None:
    client, script = make_client(zai_error(429, "1302"), zai_error(429, "1302"), ok(payload))

    await client.chat(REQUEST)

    assert len(script.requests) == 3


async def test_connection_error_then_success(make_client: MakeClient, payload: Load) -> None:
    client, script = make_client(httpx.ConnectError("connection refused"), ok(payload))

    await client.chat(REQUEST)

    assert len(script.requests) == 2


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx.ConnectError("refused"), APIConnectionError),
        (httpx.RemoteProtocolError("peer closed"), APIConnectionError),
        (httpx.ReadTimeout("slow"), APITimeoutError),
        (httpx.PoolTimeout("pool"), APITimeoutError),
    ],
)
async def test_transport_failures_become_typed_and_exhaust_the_attempts(
    make_client: MakeClient, failure: Exception, error: type[Exception]
) -> None:
    client, script = make_client(failure, failure, llm_max_retries=1)

    with pytest.raises(error) as caught:
        await client.chat(REQUEST)

    assert len(script.requests) == 2
    assert caught.value.__cause__ is failure


@pytest.mark.parametrize("max_retries", [0, 1, 4])
async def test_attempts_are_llm_max_retries_plus_one(
    make_client: MakeClient, max_retries: int
) -> None:
    client, script = make_client(
        *(httpx.Response(500, text="") for _ in range(max_retries + 1)),
        llm_max_retries=max_retries,
    )

    with pytest.raises(ServerError):
        await client.chat(REQUEST)

    assert len(script.requests) == max_retries + 1


async def test_retry_after_seconds_is_honoured(
    make_client: MakeClient, payload: Load, waits: list[float]
) -> None:
    client, _ = make_client(zai_error(429, "1305", {"Retry-After": "7"}), ok(payload))

    await client.chat(REQUEST)

    assert waits == [7.0]


async def test_retry_after_http_date_is_honoured(
    make_client: MakeClient, payload: Load, waits: list[float]
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    client, _ = make_client(zai_error(503, "1305", {"Retry-After": when}), ok(payload))

    await client.chat(REQUEST)

    assert len(waits) == 1
    assert 27.0 <= waits[0] <= 30.0


@pytest.mark.parametrize(
    "headers", [{"Retry-After": "86400"}, {"retry-after-ms": "600000"}], ids=["s", "ms"]
)
async def test_retry_after_is_capped_at_120_seconds(
    make_client: MakeClient, payload: Load, waits: list[float], headers: dict[str, str]
) -> None:
    client, _ = make_client(zai_error(429, "1302", headers), ok(payload))

    await client.chat(REQUEST)

    assert waits == [120.0]


async def test_retry_after_ms_is_honoured(
    make_client: MakeClient, payload: Load, waits: list[float]
) -> None:
    client, _ = make_client(
        httpx.Response(503, text="overloaded", headers={"retry-after-ms": "1500"}), ok(payload)
    )

    await client.chat(REQUEST)

    assert waits == [1.5]


async def test_retry_after_on_a_non_retryable_error_changes_nothing(
    make_client: MakeClient, waits: list[float]
) -> None:
    client, script = make_client(zai_error(429, "1113", {"Retry-After": "5"}))

    with pytest.raises(InsufficientBalanceError) as caught:
        await client.chat(REQUEST)

    assert caught.value.retry_after == 5.0
    assert len(script.requests) == 1
    assert waits == []


async def test_deadline_stops_retrying(make_client: MakeClient, waits: list[float]) -> None:
    client, script = make_client(
        zai_error(429, "1302", {"Retry-After": "60"}), llm_retry_deadline=30
    )

    with pytest.raises(RateLimitError):
        await client.chat(REQUEST)

    assert len(script.requests) == 1
    assert waits == []


async def test_testing_switch_makes_retries_instant(make_client: MakeClient, payload: Load) -> None:
    client, script = make_client(
        zai_error(429, "1302", {"Retry-After": "100"}),
        httpx.Response(503),
        ok(payload),
    )
    started = time.monotonic()

    await client.chat(REQUEST)

    assert len(script.requests) == 3
    assert time.monotonic() - started < 10  # not the 100 s the first answer asked for


# ---------------------------------------------------------------- finish reasons


async def test_network_error_finish_is_retried(make_client: MakeClient, payload: Load) -> None:
    failed = payload("answer_plain.json")["body"]
    failed["choices"][0]["finish_reason"] = "network_error"
    client, script = make_client(httpx.Response(200, json=failed), ok(payload))

    completion = await client.chat(REQUEST)

    assert completion.finish_reason == "stop"
    assert len(script.requests) == 2


async def test_network_error_finish_every_time_is_a_server_error(
    make_client: MakeClient, payload: Load
) -> None:
    failed = payload("answer_plain.json")["body"]
    failed["choices"][0]["finish_reason"] = "network_error"
    client, script = make_client(
        *(httpx.Response(200, json=failed) for _ in range(2)), llm_max_retries=1
    )

    with pytest.raises(ServerError) as caught:
        await client.chat(REQUEST)

    assert caught.value.request_id == failed["id"]
    assert len(script.requests) == 2


async def test_sensitive_finish_is_a_content_filter_error(
    make_client: MakeClient, payload: Load
) -> None:
    blocked = payload("answer_plain.json")["body"]
    blocked["choices"][0]["finish_reason"] = "sensitive"
    client, script = make_client(httpx.Response(200, json=blocked))

    with pytest.raises(ContentFilterError):
        await client.chat(REQUEST)

    assert len(script.requests) == 1


# ---------------------------------------------------------------- bodies that are not a completion


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"", "application/json"),
        (b"not json at all", "text/plain"),
        (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
        (b"{}", "application/json"),
        (b"[]", "application/json"),
        (b'"a string"', "application/json"),
        (b'{"choices": "many"}', "application/json"),
        (b'{"choices": []}', "application/json"),
        (b'{"id": "x", "choices": [{"message": {"role": "user"}}]}', "application/json"),
        (b'{"choices": [{"message": {"content": "unterminated', "application/json"),
    ],
    ids=[
        "empty",
        "text",
        "html",
        "empty-object",
        "list",
        "string",
        "bad-type",
        "no-choices",
        "bad-role",
        "truncated",
    ],
)
async def test_unusable_200_body_is_a_validation_error(
    make_client: MakeClient, content: bytes, content_type: str
) -> None:
    response = httpx.Response(200, content=content, headers={"content-type": content_type})
    client, script = make_client(response)

    with pytest.raises(ResponseValidationError) as caught:
        await client.chat(REQUEST)

    assert len(script.requests) == 1
    assert caught.value.status_code == 200
    assert caught.value.body == content.decode()


async def test_validation_error_body_is_truncated_and_redacted(
    make_client: MakeClient, fake_key: str
) -> None:
    content = ("<p>" + fake_key + "</p>") * 500
    client, _ = make_client(httpx.Response(200, text=content))

    with pytest.raises(ResponseValidationError) as caught:
        await client.chat(REQUEST)

    body = caught.value.body
    assert fake_key not in body
    assert body.startswith("<p>***</p>")
    assert len(body) < 2100
    assert body.endswith("more characters]")


@pytest.mark.parametrize(
    ("status", "content", "error", "retried"),
    [
        (502, b"<html><title>Bad gateway</title></html>", ServerError, True),
        (503, b"", ServerError, True),
        (504, b"upstream timed out", ServerError, True),
        (400, b"plain words", BadRequestError, False),
        (401, b"", AuthenticationError, False),
        (429, b"<html>slow down</html>", RateLimitError, True),
    ],
)
async def test_error_status_with_a_body_that_is_not_zai_json(
    make_client: MakeClient,
    status: int,
    content: bytes,
    error: type[Exception],
    retried: bool,
) -> None:
    responses = [httpx.Response(status, content=content) for _ in range(2)]
    client, script = make_client(*responses, llm_max_retries=1)

    with pytest.raises(error) as caught:
        await client.chat(REQUEST)

    assert len(script.requests) == (2 if retried else 1)
    message = str(caught.value)
    assert f"HTTP {status}" in message
    if b"<html" in content:
        assert "HTML page" in message
    elif not content:
        assert "empty body" in message
    else:
        assert content.decode() in message


async def test_error_status_excerpt_is_redacted_before_it_is_cut(
    make_client: MakeClient, fake_key: str
) -> None:
    # The key straddles the excerpt's cut: cutting first would leave half of it behind.
    content = "x" * 290 + fake_key + " and more text" * 50
    client, _ = make_client(httpx.Response(400, text=content))

    with pytest.raises(BadRequestError) as caught:
        await client.chat(REQUEST)

    assert fake_key[:8] not in str(caught.value)
    assert "***" in str(caught.value)


async def test_error_object_in_a_200_body_is_a_typed_error(make_client: MakeClient) -> None:
    client, script = make_client(zai_error(200, "1214"))

    with pytest.raises(BadRequestError) as caught:
        await client.chat(REQUEST)

    assert caught.value.code == "1214"
    assert caught.value.message == "upstream says 1214"
    assert len(script.requests) == 1


async def test_undecodable_body_is_a_validation_error(make_client: MakeClient) -> None:
    response = httpx.Response(
        200, stream=httpx.ByteStream(b"not gzip"), headers={"content-encoding": "gzip"}
    )
    client, _ = make_client(response)

    with pytest.raises(ResponseValidationError, match="could not be decoded"):
        await client.chat(REQUEST)


# ---------------------------------------------------------------- the envelope


async def test_envelope_success_is_unwrapped(make_client: MakeClient, payload: Load) -> None:
    client, _ = make_client(httpx.Response(200, json=payload("envelope_success.json")["body"]))

    completion = await client.chat(REQUEST)

    assert completion.message.content == "Wrapped hello."
    assert completion.model_extra == {}


async def test_envelope_failure_carries_msg(make_client: MakeClient, payload: Load) -> None:
    client, script = make_client(httpx.Response(200, json=payload("envelope_failure.json")["body"]))

    with pytest.raises(AuthenticationError) as caught:
        await client.chat(REQUEST)

    assert caught.value.code == "1001"
    assert caught.value.message == "Header carries no authentication parameter"
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    ("envelope", "error", "retried"),
    [
        ({"code": 500, "msg": "gateway broke", "success": False}, ServerError, True),
        ({"code": 1302, "msg": "too many", "success": False}, RateLimitError, True),
        ({"code": 1113, "msg": "no balance", "success": False}, InsufficientBalanceError, False),
        ({"code": 401, "msg": "who are you", "success": False}, AuthenticationError, False),
        ({"msg": "no code at all", "success": False, "data": None}, BadRequestError, False),
    ],
)
async def test_envelope_failure_codes(
    make_client: MakeClient, envelope: dict[str, Any], error: type[Exception], retried: bool
) -> None:
    responses = [httpx.Response(200, json=envelope) for _ in range(2)]
    client, script = make_client(*responses, llm_max_retries=1)

    with pytest.raises(error) as caught:
        await client.chat(REQUEST)

    assert str(envelope["msg"]) in str(caught.value)
    assert len(script.requests) == (2 if retried else 1)


async def test_envelope_on_an_error_status(make_client: MakeClient) -> None:
    envelope = {"code": 1309, "msg": "plan expired", "success": False}
    client, _ = make_client(httpx.Response(429, json=envelope))

    with pytest.raises(Exception, match="plan expired") as caught:
        await client.chat(REQUEST)

    assert caught.value.code == "1309"  # type: ignore[attr-defined]


async def test_envelope_success_without_a_completion_is_invalid(
    make_client: MakeClient, payload: Load
) -> None:
    client, _ = make_client(httpx.Response(200, json=payload("envelope_quota.json")["body"]))

    with pytest.raises(ResponseValidationError):
        await client.chat(REQUEST)


# ---------------------------------------------------------------- web_search()


async def test_web_search_sends_the_documented_body(
    make_client: MakeClient, payload: Load, fake_key: str
) -> None:
    client, script = make_client(httpx.Response(200, json=payload("search_api_zai.json")["body"]))

    result = await client.web_search("harbour ferry late sailing")

    (request,) = script.requests
    assert str(request.url) == "https://zai.test/api/paas/v4/web_search"
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {fake_key}"
    assert json.loads(request.content) == {
        "search_query": "harbour ferry late sailing",
        "search_engine": "search-prime",
        "count": 5,
        "search_recency_filter": "noLimit",
    }
    assert result.search_result[0].title == "Harbour ferry adds a late sailing"


async def test_web_search_arguments_and_settings(make_client: MakeClient, payload: Load) -> None:
    fixture = payload("search_api_bigmodel.json")
    client, script = make_client(
        httpx.Response(200, json=fixture["body"]),
        httpx.Response(200, json=fixture["body"]),
        web_search_engine="search_std",
        web_search_count=9,
        web_search_recency="oneYear",
    )

    first = await client.web_search("ferry")
    await client.web_search(
        "ferry", count=2, recency="oneWeek", engine="search_pro", domain_filter="news.example.org"
    )

    assert first.request_id == "travel-desk-0007"
    assert first.search_intent is not None
    assert first.search_intent[0]["intent"] == "SEARCH_ALL"
    assert script.bodies == [
        {
            "search_query": "ferry",
            "search_engine": "search_std",
            "count": 9,
            "search_recency_filter": "oneYear",
        },
        {
            "search_query": "ferry",
            "search_engine": "search_pro",
            "count": 2,
            "search_recency_filter": "oneWeek",
            "search_domain_filter": "news.example.org",
        },
    ]


async def test_web_search_retries_and_maps_errors(make_client: MakeClient, payload: Load) -> None:
    body = payload("search_api_zai.json")["body"]
    client, script = make_client(
        httpx.Response(503), httpx.Response(200, json=body), zai_error(429, "1113")
    )

    assert (await client.web_search("q")).search_result
    with pytest.raises(InsufficientBalanceError):
        await client.web_search("q")

    assert len(script.requests) == 3


async def test_web_search_envelope_is_unwrapped(make_client: MakeClient, payload: Load) -> None:
    client, _ = make_client(
        httpx.Response(200, json=payload("envelope_search_success.json")["body"])
    )

    result = await client.web_search("q")

    assert [item.refer for item in result.search_result] == ["ref_2"]


@pytest.mark.parametrize("content", [b"{}", b"[]", b"<html></html>", b""])
async def test_web_search_unusable_body(make_client: MakeClient, content: bytes) -> None:
    client, _ = make_client(httpx.Response(200, content=content))

    with pytest.raises(ResponseValidationError):
        await client.web_search("q")


async def test_web_search_empty_results_are_fine(make_client: MakeClient) -> None:
    client, _ = make_client(httpx.Response(200, json={"id": "x", "search_result": []}))

    assert (await client.web_search("q")).search_result == []


# ---------------------------------------------------------------- ownership of the http client


class ClosingTransport(httpx.MockTransport):
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(self.answer)
        self.body = body
        self.closed = False
        self.requests: list[httpx.Request] = []

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=self.body)

    async def aclose(self) -> None:
        self.closed = True


async def test_borrowed_http_client_is_not_closed(payload: Load, fake_key: str) -> None:
    transport = ClosingTransport(payload("answer_plain.json")["body"])
    http = httpx.AsyncClient(transport=transport)
    settings = Settings.defaults(api_key=fake_key, base_url="https://zai.test/api/paas/v4")

    async with GLMClient(settings, http_client=http) as client:
        await client.chat(REQUEST)
    await client.aclose()

    assert not http.is_closed
    assert not transport.closed
    assert transport.requests[0].headers["authorization"] == f"Bearer {fake_key}"
    assert "authorization" not in http.headers  # the borrowed client was not altered
    response = await http.get("https://zai.test/still-usable")
    assert response.status_code == 200
    await http.aclose()
    assert transport.closed


async def test_owned_http_client_is_closed(payload: Load, fake_key: str) -> None:
    transport = ClosingTransport(payload("answer_plain.json")["body"])
    settings = Settings.defaults(api_key=fake_key, base_url="https://zai.test/api/paas/v4")

    async with GLMClient(settings, transport=transport) as client:
        await client.chat(REQUEST)
        assert not transport.closed

    assert transport.closed


async def test_client_without_key_still_sends(payload: Load) -> None:
    seen: list[httpx.Request] = []
    body = payload("answer_plain.json")["body"]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=body)

    settings = Settings.defaults(base_url="https://zai.test/api/paas/v4")
    async with GLMClient(settings, transport=httpx.MockTransport(handler)) as client:
        await client.chat(REQUEST)

    assert seen[0].headers["authorization"].startswith("Bearer")


def test_client_repr_holds_no_key(fake_key: str) -> None:
    client = GLMClient(Settings.defaults(api_key=fake_key))

    assert fake_key not in repr(client)
    assert "api.z.ai" in repr(client)


# ---------------------------------------------------------------- read_url()

READER_BODY = {
    "id": "20260109reader01",
    "created": 1767950000,
    "request_id": "20260109reader01",
    "model": "",
    "reader_result": {
        "content": "# Ferry notice\n\nA 23:40 sailing runs on Fridays.",
        "description": "Timetable change",
        "title": "Ferry notice",
        "url": "https://ferries.example.org/notice",
        "external": {},
        "metadata": {"keywords": "ferry"},
    },
}


async def test_read_url_sends_the_documented_body(make_client: MakeClient) -> None:
    client, script = make_client(httpx.Response(200, json=READER_BODY))

    page = await client.read_url("https://ferries.example.org/notice")

    (request,) = script.requests
    assert str(request.url) == "https://zai.test/api/paas/v4/reader"
    assert json.loads(request.content) == {
        "url": "https://ferries.example.org/notice",
        "return_format": "markdown",
        "retain_images": False,
    }
    assert page.reader_result is not None
    assert page.reader_result.title == "Ferry notice"
    assert page.reader_result.content.startswith("# Ferry notice")


async def test_read_url_errors_and_a_body_without_a_page(make_client: MakeClient) -> None:
    client, _ = make_client(
        zai_error(429, "1113"), httpx.Response(200, json={"id": "x", "created": 1})
    )

    with pytest.raises(InsufficientBalanceError):
        await client.read_url("https://ferries.example.org/notice")
    with pytest.raises(ResponseValidationError, match="ReaderResponse"):
        await client.read_url("https://ferries.example.org/notice")
