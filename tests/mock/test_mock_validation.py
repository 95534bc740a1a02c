"""Every validation rule, over HTTP: what Z.AI rejects, the mock rejects before matching."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mock_helpers import (
    CHAT,
    WEB_SEARCH_TOOL,
    assistant,
    chat,
    function_tool,
    simple,
    system,
    tool_call,
    tool_message,
    user,
)

from generic_framework.mock import MockServer

CALL = tool_call("call_1", "calculate", {"expression": "1+1"})
OTHER = tool_call("call_2", "calculate", {"expression": "2+2"}, index=1)


@pytest.fixture
def server(serve: Callable[..., MockServer]) -> MockServer:
    return serve(simple("hello", "hello", "Hi there."))


def post(http: httpx.Client, body: Any, **kwargs: Any) -> httpx.Response:
    return http.post(CHAT, json=body, **kwargs)


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"]


# ------------------------------------------------------------------ authentication


def test_a_valid_request_is_answered(server: MockServer, http: httpx.Client) -> None:
    response = post(http, chat(system(), user("hello")))
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hi there."


@pytest.mark.parametrize("header", [None, "", "Bearer", "bearer"])
def test_a_missing_or_empty_key_is_401_1001(server: MockServer, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = httpx.post(
        server.base_url + "/chat/completions", json=chat(user("hello")), headers=headers, timeout=30
    )
    assert error_of(response)[:2] == (401, "1001")


def test_any_non_empty_key_is_accepted_by_default(server: MockServer) -> None:
    response = httpx.post(
        server.base_url + "/chat/completions",
        json=chat(user("hello")),
        headers={"Authorization": "Bearer whatever"},
        timeout=30,
    )
    assert response.status_code == 200


def test_an_unknown_key_is_401_1002_when_keys_are_configured(
    serve: Callable[..., MockServer],
) -> None:
    server = serve(simple("hello", "hello", "Hi."), api_keys=["good-key"])
    url = server.base_url + "/chat/completions"
    bad = httpx.post(
        url, json=chat(user("hello")), headers={"Authorization": "Bearer bad-key"}, timeout=30
    )
    good = httpx.post(
        url, json=chat(user("hello")), headers={"Authorization": "Bearer good-key"}, timeout=30
    )
    assert error_of(bad)[:2] == (401, "1002")
    assert good.status_code == 200


def test_authentication_is_checked_before_the_body(server: MockServer) -> None:
    response = httpx.post(server.base_url + "/chat/completions", content=b"not json", timeout=30)
    assert error_of(response)[:2] == (401, "1001")


# ------------------------------------------------------------------ malformed histories (1214)

HISTORIES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "tool message without the assistant call": (
        [user("hi"), tool_message("call_1", "2")],
        "no preceding assistant message made that call",
    ),
    "tool message answering an unknown id": (
        [user("hi"), assistant(calls=[CALL]), tool_message("call_9", "2")],
        "no preceding assistant message made that call",
    ),
    "a call left unanswered at the end": (
        [user("hi"), assistant(calls=[CALL, OTHER]), tool_message("call_1", "2")],
        "'call_2', which is left unanswered",
    ),
    "a call left unanswered before the next message": (
        [user("hi"), assistant(calls=[CALL]), user("and?")],
        "left unanswered before messages[2]",
    ),
    "an answer given twice": (
        [
            user("hi"),
            assistant(calls=[CALL]),
            tool_message("call_1", "2"),
            tool_message("call_1", "2"),
        ],
        "a second time",
    ),
    "an assistant message with neither content nor tool_calls": (
        [user("hi"), assistant(), user("again")],
        "content and tool_calls cannot both be empty",
    ),
    "an assistant message with empty content and no calls": (
        [user("hi"), assistant(content=""), user("again")],
        "content and tool_calls cannot both be empty",
    ),
    "no user message": ([system(), assistant(content="hello")], "there is no user message"),
    "only a system message": ([system()], "there is no user message"),
    "an unknown role": ([user("hi"), {"role": "robot", "content": "beep"}], "is unknown"),
    "an empty user message": ([user("   ")], "input cannot be empty"),
    "a tool message without tool_call_id": (
        [user("hi"), assistant(calls=[CALL]), {"role": "tool", "content": "2"}],
        "without tool_call_id",
    ),
    "a message that is not an object": ([user("hi"), "text"], "is not an object"),  # type: ignore[list-item]
    "a tool call without id": (
        [user("hi"), assistant(calls=[{"type": "function", "function": {"name": "f"}}])],
        "has no id",
    ),
}


@pytest.mark.parametrize("case", sorted(HISTORIES))
def test_malformed_histories_are_400_1214(
    server: MockServer, http: httpx.Client, case: str
) -> None:
    messages, detail = HISTORIES[case]
    status, code, message = error_of(post(http, chat(*messages)))
    assert (status, code) == (400, "1214")
    assert message.startswith("The messages parameter is illegal.")
    assert detail in message


def test_an_empty_message_list_is_1214_and_a_missing_one_1213(
    server: MockServer, http: httpx.Client
) -> None:
    assert error_of(post(http, chat()))[:2] == (400, "1214")
    assert error_of(post(http, {"model": "glm-4.7"}))[:2] == (400, "1213")


def test_a_complete_tool_round_and_an_empty_confirmation_are_accepted(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(simple("hello", "hello", "Hi."))
    body = chat(
        user("hi"),
        assistant(calls=[CALL, OTHER], reasoning="two calls"),
        tool_message("call_2", "4"),
        tool_message("call_1", ""),
    )
    # Valid history: the request passes validation and only fails to match a fixture.
    assert error_of(post(http, body))[1] == "mock_no_match"


# ------------------------------------------------------------------ parameters (1210 / 1214)

PARAMETERS: dict[str, tuple[dict[str, Any], str, str]] = {
    "temperature above 1": (
        {"temperature": 1.5},
        "1210",
        "temperature must be between 0.0 and 1.0",
    ),
    "temperature below 0": ({"temperature": -0.1}, "1210", "temperature"),
    "temperature as text": ({"temperature": "hot"}, "1210", "temperature"),
    "top_p above 1": ({"top_p": 2}, "1210", "top_p"),
    "max_tokens of 0": ({"max_tokens": 0}, "1210", "max_tokens"),
    "129 tools": (
        {"tools": [function_tool(f"tool_{n}") for n in range(129)]},
        "1210",
        "at most 128 tools, got 129",
    ),
    "a function name with a space": (
        {"tools": [function_tool("get weather")]},
        "1214",
        "get weather",
    ),
    "a function name of 65 characters": (
        {"tools": [function_tool("f" * 65)]},
        "1214",
        "must match",
    ),
    "a function without a name": (
        {"tools": [{"type": "function", "function": {"description": "x"}}]},
        "1214",
        "function.name None",
    ),
    "an unknown tool type": ({"tools": [{"type": "code_interpreter"}]}, "1214", "code_interpreter"),
    "tools that are not a list": ({"tools": {"type": "function"}}, "1214", "must be a list"),
    "no model": ({"model": ""}, "1213", "model"),
}


@pytest.mark.parametrize("case", sorted(PARAMETERS))
def test_bad_parameters_are_rejected(server: MockServer, http: httpx.Client, case: str) -> None:
    extra, code, detail = PARAMETERS[case]
    status, got, message = error_of(post(http, {**chat(user("hello")), **extra}))
    assert (status, got) == (400, code)
    assert detail in message


def test_128_tools_and_a_valid_temperature_are_accepted(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(simple("hello", "hello", "Hi."))
    tools = [WEB_SEARCH_TOOL, *[function_tool(f"tool-{n}") for n in range(127)]]
    response = post(http, chat(user("hello"), tools=tools, temperature=0.0))
    assert error_of(response)[1] == "mock_no_match"  # validation passed; the tools differ


def test_a_body_that_is_not_json_or_not_an_object_is_1210(
    server: MockServer, http: httpx.Client
) -> None:
    assert error_of(http.post(CHAT, content=b"{not json"))[:2] == (400, "1210")
    assert error_of(post(http, [1, 2]))[:2] == (400, "1210")


def test_validation_runs_before_matching_and_is_counted(
    server: MockServer, http: httpx.Client
) -> None:
    post(http, chat(user("hello"), temperature=3))
    report = server.report()
    assert report["rejected"] == 1
    assert report["served"] == 0
    assert report["unmatched"] == 0


def test_only_post_is_allowed_on_chat(server: MockServer, http: httpx.Client) -> None:
    assert error_of(http.get(CHAT))[:2] == (405, "1212")


def test_the_web_search_api_requires_a_query(server: MockServer, http: httpx.Client) -> None:
    url = "/api/paas/v4/web_search"
    assert error_of(http.post(url, json={"search_engine": "search-prime"}))[:2] == (400, "1213")
    assert error_of(http.post(url, json={"search_query": "x", "count": 99}))[:2] == (400, "1210")
