"""Replay over HTTP: JSON and SSE layout, matching, ordering, rewinding, diagnostics, routes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mock_helpers import (
    CHAT,
    WEB_SEARCH_TOOL,
    assistant,
    chat,
    completion,
    error_body,
    exchange,
    function_tool,
    make_fixture,
    simple,
    system,
    tool_call,
    tool_message,
    user,
)

from generic_framework.mock import NO_MATCH_CODE, MockServer
from generic_framework.mock.sse import parse_sse

SOURCES = [
    {"refer": "ref_1", "title": "Weather", "link": "https://weather.example/a", "content": "9 C"},
]
TOOLS = [WEB_SEARCH_TOOL, function_tool("calculate")]
CALL = tool_call("call_1", "calculate", {"expression": "2+2"})


def events_of(response: httpx.Response) -> list[Any]:
    assert response.headers["content-type"] == "text/event-stream;charset=UTF-8"
    assert response.text.endswith("data: [DONE]\n\n")
    return parse_sse(response.text)


def two_rounds() -> Any:
    first = chat(system(), user("what is 2+2?"), tools=TOOLS)
    second = chat(
        system(),
        user("what is 2+2?"),
        assistant(calls=[{k: v for k, v in CALL.items() if k != "index"}], reasoning="add"),
        tool_message("call_1", '{"result": 4}'),
        tools=TOOLS,
    )
    return make_fixture(
        "two_rounds",
        exchange(first, completion("", calls=[CALL], reasoning="add")),
        exchange(second, completion("It is 4.")),
    )


# ------------------------------------------------------------------ JSON and SSE


def test_json_answer_is_the_recorded_body(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    body = completion("Sunny [ref_1].", web_search=SOURCES, reasoning="search done")
    serve(make_fixture("weather", exchange(chat(user("weather?"), tools=TOOLS), body)))
    response = http.post(CHAT, json=chat(system(), user("weather?"), tools=TOOLS))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    assert response.headers["x-mock-fixture"] == "weather#0"
    assert response.json() == body


def test_stream_of_a_json_fixture_has_the_real_layout(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    body = completion("It is sunny and mild today [ref_1].", web_search=SOURCES, reasoning="ok")
    serve(make_fixture("weather", exchange(chat(user("weather?"), tools=TOOLS), body)))
    response = http.post(CHAT, json=chat(user("weather?"), tools=TOOLS, stream=True))
    events = events_of(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len(chunks) > 3
    for chunk in chunks[:-1]:
        choice = chunk["choices"][0]
        assert "finish_reason" not in choice
        assert choice["delta"]["role"] == "assistant"
        assert "usage" not in chunk and "web_search" not in chunk
        assert chunk["object"] == "chat.completion.chunk"
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert last["usage"] == body["usage"]
    assert last["web_search"] == SOURCES
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == body["choices"][0]["message"]["content"]


def test_streamed_tool_calls_come_one_per_chunk_without_role(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    calls = [CALL, tool_call("call_2", "calculate", {"expression": "3*3"}, index=1)]
    serve(make_fixture("calls", exchange(chat(user("sums"), tools=TOOLS), completion(calls=calls))))
    chunks = events_of(http.post(CHAT, json=chat(user("sums"), tools=TOOLS, stream=True)))[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert [d["tool_calls"][0]["index"] for d in deltas] == [0, 1]
    assert all("role" not in d for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_recorded_stream_is_replayed_frame_for_frame(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    events = [
        {"id": "s1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"id": "s1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "lo"}}]},
        {
            "id": "s1",
            "choices": [{"index": 0, "finish_reason": "stop", "delta": {"content": ""}}],
            "usage": {"total_tokens": 3},
        },
        "[DONE]",
    ]
    serve(make_fixture("hello", exchange(chat(user("hi"), stream=True), events=events)))
    response = http.post(CHAT, json=chat(user("hi"), stream=True))
    assert response.text == "".join(
        f"data: {e if isinstance(e, str) else json.dumps(e, separators=(',', ':'))}\n\n"
        for e in events
    )
    # The same exchange asked for without streaming is assembled into one completion.
    plain = http.post(CHAT, json=chat(user("hi"))).json()
    assert plain["choices"][0]["message"]["content"] == "Hello"
    assert plain["choices"][0]["finish_reason"] == "stop"
    assert plain["usage"] == {"total_tokens": 3}


def test_an_error_frame_becomes_an_error_status_without_streaming(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    events = [{"error": {"code": "1305", "message": "overloaded"}}]
    serve(make_fixture("overloaded", exchange(chat(user("hi"), stream=True), events=events)))
    response = http.post(CHAT, json=chat(user("hi")))
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "1305"


def test_an_error_response_is_json_even_for_a_stream(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(make_fixture("busy", exchange(chat(user("hi")), error_body("1302"), status=429)))
    response = http.post(CHAT, json=chat(user("hi"), stream=True))
    assert response.status_code == 429
    assert response.json() == error_body("1302")


def test_the_variant_recorded_in_the_requested_mode_is_preferred(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(
        make_fixture("as_json", exchange(chat(user("hi")), completion("from json"))),
        make_fixture(
            "as_stream", exchange(chat(user("hi"), stream=True), completion("from stream"))
        ),
    )
    assert http.post(CHAT, json=chat(user("hi"), stream=True)).headers["x-mock-fixture"] == (
        "as_stream#0"
    )
    assert http.post(CHAT, json=chat(user("hi"))).headers["x-mock-fixture"] == "as_json#0"


# ------------------------------------------------------------------ matching and order


def test_a_tool_round_trip_is_served_in_order(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(two_rounds())
    fixture = server.app.fixtures[0]
    first = http.post(CHAT, json=fixture.exchanges[0].request.body).json()
    assert first["choices"][0]["message"]["tool_calls"][0]["id"] == "call_1"
    second = http.post(CHAT, json=fixture.exchanges[1].request.body).json()
    assert second["choices"][0]["message"]["content"] == "It is 4."
    assert server.report()["fixtures"][0]["served"] == [1, 1]


def test_volatile_fields_and_formatting_are_ignored(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(two_rounds())
    request = json.loads(json.dumps(server.app.fixtures[0].exchanges[1].request.body))
    request.update(
        temperature=0.3,
        request_id="req-123456",
        user_id="user-42",
        model="glm-4.5",
        stream_options={"include_usage": True},
        thinking={"type": "enabled"},
    )
    request["messages"][0]["content"] = "a different system prompt"
    request["messages"][1]["content"] = "  what is 2+2?\n"
    request["messages"][2]["content"] = None  # null and "" and absent are the same
    request["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{ "expression" : "2+2" }'
    request["messages"][3]["content"] = '{"result":4}'
    request["tools"] = [WEB_SEARCH_TOOL, function_tool("calculate"), function_tool("extra")]
    server.app.catalog.states[0].cursor = 1
    response = http.post(CHAT, json=request)
    assert response.status_code == 200, response.text


def test_identical_requests_replay_in_order_then_rewind(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    body = chat(user("hi"))
    server = serve(
        make_fixture(
            "flaky",
            exchange(body, error_body("1302"), status=429),
            exchange(body, error_body("1302"), status=429),
            exchange(body, completion("finally")),
        )
    )
    statuses = [http.post(CHAT, json=body).status_code for _ in range(4)]
    assert statuses == [429, 429, 200, 429]  # the fourth starts the fixture over
    state = server.report()["fixtures"][0]
    assert state["completed"] == 1
    assert state["next"] == 1


def test_a_mismatch_names_the_closest_fixture_and_the_first_difference(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(
        simple("nanaimo", "weather in Nanaimo?", "Rainy."),
        simple("capital", "capital of Canada?", "Ottawa."),
    )
    response = http.post(CHAT, json=chat(system(), user("weather in Paris?")))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == NO_MATCH_CODE
    assert error["closest_fixture"] == "nanaimo"
    assert error["difference"] == (
        "messages[1].content: expected 'weather in Nanaimo?', got 'weather in Paris?'"
    )
    assert [e["input"] for e in error["examples"]] == ["weather in Nanaimo?", "capital of Canada?"]
    assert "Recorded inputs: 'weather in Nanaimo?'; 'capital of Canada?'" in error["message"]
    report = server.report()
    assert report["unmatched"] == 1
    assert report["unmatched_requests"][0]["closest_fixture"] == "nanaimo"


def test_a_mismatch_in_a_later_round_points_at_the_tool_message(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(two_rounds())
    http.post(CHAT, json=server.app.fixtures[0].exchanges[0].request.body)
    request = server.app.fixtures[0].exchanges[1].request.model_dump()["body"]
    request["messages"][3]["content"] = '{"result": 5}'
    error = http.post(CHAT, json=request).json()["error"]
    assert error["closest_fixture"] == "two_rounds"
    assert error["closest_exchange"] == 1
    assert error["difference"].startswith("messages[3].content: expected '{\"result\":4}'")


def test_a_request_out_of_order_is_reported_as_such(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(two_rounds())
    error = http.post(CHAT, json=server.app.fixtures[0].exchanges[1].request.body).json()["error"]
    assert "expects exchange 0 next (requests out of order)" in error["difference"]


def test_an_answer_calling_a_function_the_request_does_not_offer_is_refused(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(two_rounds())
    request = chat(user("what is 2+2?"), tools=[WEB_SEARCH_TOOL, function_tool("other")])
    error = http.post(CHAT, json=request).json()["error"]
    assert error["code"] == NO_MATCH_CODE
    assert (
        error["difference"]
        == "the recorded answer calls calculate, which this request does not offer"
    )


@pytest.mark.parametrize(
    ("tools", "difference"),
    [
        (None, "tools: the recorded request offers the built-in web_search, this one does not"),
        (
            [function_tool("calculate")],
            "tools: the recorded request offers the built-in web_search",
        ),
    ],
)
def test_offering_different_tools_is_a_mismatch(
    serve: Callable[..., MockServer], http: httpx.Client, tools: Any, difference: str
) -> None:
    serve(make_fixture("web", exchange(chat(user("hi"), tools=[WEB_SEARCH_TOOL]), completion("x"))))
    error = http.post(CHAT, json=chat(user("hi"), tools=tools)).json()["error"]
    assert error["difference"].startswith(difference)


def test_earlier_turns_are_ignored_by_default_and_compared_when_exact(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(
        simple("loose", "hello", "Hi."),
        simple("strict", "bye", "Bye.", match={"history": "exact"}),
    )
    earlier = [user("first question"), assistant(content="first answer")]
    loose = http.post(CHAT, json=chat(system(), *earlier, user("hello")))
    strict = http.post(CHAT, json=chat(system(), *earlier, user("bye")))
    assert loose.status_code == 200
    assert strict.status_code == 400
    assert strict.json()["error"]["closest_fixture"] == "strict"


def test_the_forced_answer_instruction_stays_part_of_the_turn(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    forced = chat(
        user("loop"),
        assistant(calls=[{k: v for k, v in CALL.items() if k != "index"}]),
        tool_message("call_1", "4"),
        user("Answer now."),
    )
    serve(make_fixture("forced", exchange(forced, completion("Done."))))
    response = http.post(CHAT, json=chat(user("Answer now.")))
    assert response.status_code == 400  # the tool round before the instruction is compared too
    assert http.post(CHAT, json=forced).status_code == 200


def test_system_prompts_are_compared_only_when_asked(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(simple("strict", "hello", "Hi.", match={"system": "exact"}))
    other = http.post(CHAT, json=chat(system("another prompt"), user("hello")))
    same = http.post(CHAT, json=chat(system(), user("hello")))
    assert other.json()["error"]["difference"].startswith("messages[0].content")
    assert same.status_code == 200


def test_exact_tool_matching_compares_function_names(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    request = chat(user("hi"), tools=[function_tool("a"), function_tool("b")])
    serve(make_fixture("exact", exchange(request, completion("x")), match={"tools": "exact"}))
    fewer = http.post(CHAT, json=chat(user("hi"), tools=[function_tool("a")]))
    assert fewer.json()["error"]["difference"] == (
        "tools: expected function tools ('a', 'b'), got ('a',)"
    )
    assert http.post(CHAT, json=request).status_code == 200


def test_a_client_retrying_the_last_exchange_gets_it_again(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(two_rounds())
    first = server.app.fixtures[0].exchanges[0].request.body
    http.post(CHAT, json=first)
    again = http.post(CHAT, json=first)  # e.g. after a client-side timeout
    assert again.headers["x-mock-fixture"] == "two_rounds#0"


def test_an_abandoned_fixture_starts_over_on_its_first_request(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    fixture = make_fixture(
        "three",
        exchange(chat(user("a")), completion("1")),
        exchange(chat(user("b")), completion("2")),
        exchange(chat(user("c")), completion("3")),
    )
    serve(fixture)
    http.post(CHAT, json=chat(user("a")))
    http.post(CHAT, json=chat(user("b")))
    assert http.post(CHAT, json=chat(user("a"))).json()["choices"][0]["message"]["content"] == "1"
    assert http.post(CHAT, json=chat(user("b"))).json()["choices"][0]["message"]["content"] == "2"


# ------------------------------------------------------------------ routes


def test_the_coding_endpoint_serves_the_same_fixtures(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(simple("hello", "hello", "Hi."))
    response = http.post("/api/coding/paas/v4/chat/completions", json=chat(user("hello")))
    assert response.status_code == 200
    assert server.coding_base_url.endswith("/api/coding/paas/v4")


def test_the_web_search_api_replays_by_query(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    result = {"id": "ws1", "created": 1, "search_result": SOURCES}
    request = {"search_query": "weather", "search_engine": "search-prime", "count": 5}
    serve(
        make_fixture(
            "search",
            exchange(request, result, path="/api/paas/v4/web_search"),
            user_input="// weather",
        )
    )
    answer = http.post("/api/paas/v4/web_search", json={**request, "count": 3})
    assert answer.json() == result
    missing = http.post("/api/paas/v4/web_search", json={"search_query": "other"}).json()
    assert missing["error"]["difference"] == "expected ('weather',), got ('other',)"


def test_other_recorded_paths_are_served_and_unknown_ones_are_404(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    quota = {"code": 200, "msg": "Operation successful", "success": True, "data": {"level": "pro"}}
    path = "/api/monitor/usage/quota/limit"
    serve(make_fixture("quota", exchange(None, quota, path=path, method="GET"), user_input="q"))
    assert http.get(path).json() == quota
    assert http.get("/api/unknown").json()["error"]["code"] == "1222"
    assert httpx.get(str(http.base_url) + path, timeout=30).status_code == 401


def test_health_fixtures_report_and_reset(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(simple("hello", "hello", "Hi."), simple("bye", "bye", "Bye."))
    assert http.get("/healthz").json() == {"status": "ok", "fixtures": 2}
    listing = http.get("/mock/fixtures").json()
    assert [f["user_input"] for f in listing] == ["hello", "bye"]
    http.post(CHAT, json=chat(user("hello")))
    http.post(CHAT, json=chat(user("nobody recorded this")))
    report = http.get("/mock/report").json()
    assert (report["requests"], report["served"], report["unmatched"]) == (2, 1, 1)
    assert report["never_served"] == ["bye"]
    assert report["fixtures"][0] == {
        "name": "hello",
        "exchanges": 1,
        "served": [1],
        "completed": 1,
        "next": 0,
    }
    assert http.post("/mock/reset").json() == {"status": "reset"}
    assert http.get("/mock/report").json()["requests"] == 0


def test_latency_is_added_to_every_answer(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    server = serve(simple("hello", "hello", "Hi."))
    server.app.latency = 0.2
    response = http.post(CHAT, json=chat(user("hello")))
    assert response.elapsed.total_seconds() >= 0.2
