"""The mock's Web Search MCP endpoint on the wire: a plain HTTP client, no SDK in between."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from generic_framework.mock import Fixture, MockServer, load_fixtures
from generic_framework.mock.mcp_endpoint import DEFAULT_TOOL_NAME, MCP_SEARCH_PATH

KEY = "endpoint-key-123"
AUTH = {"Authorization": f"Bearer {KEY}", "Accept": "application/json, text/event-stream"}
QUERY = "tram line extension council decision"


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer(api_keys={KEY}) as running:
        yield running


def mcp_only(name: str, faults: list[dict[str, Any]] | None = None) -> Fixture:
    """The bundled fixture's recorded tools/call alone (there it follows a chat exchange)."""
    (bundled,) = [f for f in load_fixtures() if f.name == "web_search_mcp_mode"]
    exchange = bundled.exchanges[1].model_dump(mode="json", exclude_none=True)
    exchange["faults"] = faults or []
    return Fixture.model_validate({"name": name, "user_input": "// x", "exchanges": [exchange]})


def rpc(method: str, rpc_id: int | None = 1, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rpc_id is not None:
        message["id"] = rpc_id
    if params:
        message["params"] = params
    return message


def session(client: httpx.Client) -> dict[str, str]:
    init = rpc("initialize", 0, protocolVersion="2025-03-26", capabilities={},
               clientInfo={"name": "t", "version": "1"})  # fmt: skip
    answer = client.post(MCP_SEARCH_PATH, json=init, headers=AUTH)
    assert answer.status_code == 200
    assert answer.json()["result"]["protocolVersion"] == "2025-03-26"
    assert answer.json()["result"]["capabilities"] == {"tools": {"listChanged": False}}
    return {**AUTH, "Mcp-Session-Id": answer.headers["mcp-session-id"]}


def test_the_bearer_key_is_checked_on_every_request(server: MockServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        missing = client.post(MCP_SEARCH_PATH, json=rpc("initialize"))
        wrong = client.post(MCP_SEARCH_PATH, json=rpc("initialize"),
                            headers={"Authorization": "Bearer nope"})  # fmt: skip
        headers = session(client)
        later = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"),
                            headers={**headers, "Authorization": "Bearer nope"})  # fmt: skip
    assert missing.status_code == wrong.status_code == later.status_code == 401
    assert missing.json()["error"]["code"] == "1001" and wrong.json()["error"]["code"] == "1002"


def test_sessions_methods_and_the_transport_rules(server: MockServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        headers = session(client)
        no_session = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"), headers=AUTH)
        unknown = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"),
                              headers={**AUTH, "Mcp-Session-Id": "nope"})  # fmt: skip
        note = client.post(MCP_SEARCH_PATH, json=rpc("notifications/initialized", None),
                           headers=headers)  # fmt: skip
        ping = client.post(MCP_SEARCH_PATH, json=rpc("ping", 7), headers=headers)
        discover = client.post(MCP_SEARCH_PATH, json=rpc("server/discover", 8), headers=headers)
        stream = client.get(MCP_SEARCH_PATH, headers=headers)
        broken = client.post(MCP_SEARCH_PATH, content=b"{", headers=headers)
        ended = client.delete(MCP_SEARCH_PATH, headers=headers)
        after = client.post(MCP_SEARCH_PATH, json=rpc("ping"), headers=headers)
    assert no_session.status_code == 400 and unknown.status_code == 404
    assert note.status_code == 202
    assert ping.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert discover.json()["error"]["code"] == -32601
    assert stream.status_code == 405 and stream.headers["allow"] == "POST, DELETE"
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
    assert ended.status_code == 200 and after.status_code == 404


def test_tools_list_names_the_tools_the_fixtures_call(server: MockServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        tools = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"), headers=session(client))
    (listed,) = tools.json()["result"]["tools"]
    assert listed["name"] == DEFAULT_TOOL_NAME
    assert listed["inputSchema"]["required"] == ["search_query"]
    assert set(listed["inputSchema"]["properties"]) == {
        "search_query", "count", "content_size", "location", "search_domain_filter",
        "search_recency_filter",
    }  # fmt: skip
    server.set_fixtures([])
    with httpx.Client(base_url=server.url, timeout=30) as client:
        tools = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"), headers=session(client))
    assert [t["name"] for t in tools.json()["result"]["tools"]] == [DEFAULT_TOOL_NAME]


def test_tools_call_is_answered_from_the_fixture_with_the_requests_id(server: MockServer) -> None:
    server.set_fixtures([mcp_only("search")])
    call = rpc("tools/call", 41, name="web_search_prime",
               arguments={"search_query": QUERY, "count": 3})  # fmt: skip
    other = rpc("tools/call", 42, name="web_search_prime", arguments={"search_query": "no such"})
    with httpx.Client(base_url=server.url, timeout=30) as client:
        headers = session(client)
        answer = client.post(MCP_SEARCH_PATH, json=call, headers=headers)
        unmatched = client.post(MCP_SEARCH_PATH, json=other, headers=headers)
    assert answer.status_code == 200 and answer.json()["id"] == 41
    result = answer.json()["result"]
    assert result["isError"] is False
    # The recorded text is a JSON string holding the JSON array: encoded twice.
    items = json.loads(json.loads(result["content"][0]["text"]))
    assert items[0]["title"] == "Council approves tram line extension"
    assert unmatched.json()["id"] == 42
    assert unmatched.json()["error"]["message"].startswith("mock_no_match: No recorded answer")
    assert "Closest fixture: 'search'" in unmatched.json()["error"]["message"]
    report = server.report()
    assert report["fixtures"][0]["served"] == [1] and report["unmatched"] == 1


def test_faults_apply_to_tools_call(server: MockServer) -> None:
    fault = {"kind": "http_error", "status": 401, "code": "1001", "message": "Api key not found"}
    faulty = mcp_only("denied", [fault])
    server.set_fixtures([faulty])
    call = rpc("tools/call", 3, name="web_search_prime", arguments={"search_query": QUERY})
    with httpx.Client(base_url=server.url, timeout=30) as client:
        headers = session(client)
        listed = client.post(MCP_SEARCH_PATH, json=rpc("tools/list"), headers=headers)
        denied = client.post(MCP_SEARCH_PATH, json=call, headers=headers)
        retried = client.post(MCP_SEARCH_PATH, json=call, headers=headers)
    # tools/list succeeds while tools/call answers 401 (as reported for the real server).
    assert listed.status_code == 200
    assert denied.status_code == 401 and denied.json()["error"]["message"] == "Api key not found"
    assert retried.status_code == 200 and retried.json()["id"] == 3
