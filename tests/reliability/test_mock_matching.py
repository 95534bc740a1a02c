"""Matching: a fixture with ``tools: exact`` replays a call to a tool the request did not offer."""

from __future__ import annotations

import httpx
from mock_helpers import (
    AUTH,
    CHAT,
    chat,
    completion,
    exchange,
    function_tool,
    make_fixture,
    tool_call,
    user,
)

from generic_framework.mock import MockServer, create_app


def test_an_exact_fixture_replays_a_call_to_a_tool_it_did_not_offer() -> None:
    offered = [function_tool("calculate")]
    request = chat(user("teleport me"), tools=offered)
    answer = completion(calls=[tool_call("call_1", "teleport", {"to": "Mars"})])
    presence = make_fixture("presence", exchange(request, answer))
    exact = make_fixture("exact", exchange(request, answer), match={"tools": "exact"})
    with (
        MockServer(app=create_app([presence])) as server,
        httpx.Client(headers=AUTH, timeout=30) as http,
    ):
        refused = http.post(server.url + CHAT, json=request)
        assert refused.status_code == 400
        assert "teleport, which this request does not offer" in refused.json()["error"]["message"]
    with (
        MockServer(app=create_app([exact])) as server,
        httpx.Client(headers=AUTH, timeout=30) as http,
    ):
        served = http.post(server.url + CHAT, json=request)
        assert served.status_code == 200
        assert served.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
            "teleport"
        )
