"""``WEB_SEARCH_MODE=mcp`` and ``auto`` against the mock's Web Search MCP endpoint, a real
streamable-HTTP server on loopback.

The end-to-end turns use the mock for the model too (the bundled fixtures). The failure cases
script the model (so every text the model would read is checked) and let the mock's MCP endpoint
answer the search from small fixtures with faults: 401 on call, empty results, a slow search,
plain text, an error result for an exhausted quota.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, call, completion, make_settings

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.core.tooling import nothing_found
from generic_framework.mock import Fixture, MockServer
from generic_framework.mock.mcp_endpoint import MCP_SEARCH_PATH
from generic_framework.runtime import Runtime
from generic_framework.wire.messages import WebSearchResult

pytestmark = pytest.mark.e2e

KEY = "mcp-test-key-0123456789"
REPO = Path(__file__).resolve().parents[2]
TRAM = "// did the council approve the tram line extension?"
ITEMS = [
    {"title": "Ferry timetable change", "link": "https://ferries.example.org/late-sailing",
     "content": "From March a 23:40 sailing runs on Fridays.", "media": "Ferries Example",
     "refer": "ref_1", "publish_date": "2026-02-01"},
    {"title": "Harbour news", "link": "https://harbour.example.net/news/42",
     "content": "The late ferry was requested by local businesses.", "refer": "ref_2"},
]  # fmt: skip


def search_fixture(
    name: str,
    query: str,
    *,
    text: str | None = None,
    tool: str = "web_search_prime",
    faults: list[dict[str, Any]] | None = None,
    is_error: bool = False,
) -> Fixture:
    """One recorded tools/call of the search server (the result double-encoded by default)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {"search_query": query}}}  # fmt: skip
    result = {
        "content": [
            {"type": "text", "text": json.dumps(json.dumps(ITEMS)) if text is None else text}
        ],
        "isError": is_error,
    }
    return Fixture.model_validate(
        {
            "name": name,
            "user_input": f"// {query}",
            "exchanges": [
                {
                    "request": {"method": "POST", "path": MCP_SEARCH_PATH, "body": body},
                    "response": {"body": {"jsonrpc": "2.0", "id": 1, "result": result}},
                    "faults": faults or [],
                }
            ],
        }
    )


Turn = Callable[..., Any]


@pytest.fixture
async def searched(tmp_path: Path) -> Any:
    """Run one ``//`` turn whose search_web call the mock's MCP endpoint answers."""
    servers: list[MockServer] = []
    runtimes: list[Runtime] = []
    served: dict[str, list[int]] = {}

    async def run(fixture: Fixture, final: str = "Done.", **overrides: Any) -> tuple[Any, Script]:
        server = await MockServer([fixture], api_keys={KEY}).__aenter__()
        servers.append(server)
        query = fixture.user_input.removeprefix("// ")
        script = Script(
            completion(tool_calls=[call("search_web", {"query": query}, id="s1")]),
            completion(final),
        )
        values = {"api_key": KEY, "web_search_mode": "mcp",
                  "web_search_mcp_url": server.url + MCP_SEARCH_PATH, **overrides}  # fmt: skip
        runtime = Runtime(make_settings(tmp_path, **values), transport=script)
        runtimes.append(runtime)
        persona = Persona("seeker", "Search, then answer.", runtime=runtime)
        reply = await persona.respond(fixture.user_input)
        script.assert_done()
        served.update({f["name"]: f["served"] for f in server.report()["fixtures"]})
        return reply, script

    run.served = served  # type: ignore[attr-defined]
    yield run
    for runtime in runtimes:
        await runtime.aclose()
    for server in servers:
        await server.__aexit__(None, None, None)


def tool_message(script: Script) -> str:
    (message,) = [m for m in script.messages(1) if m["role"] == "tool"]
    return str(message["content"])


# ------------------------------------------------------------------------------ end to end


async def test_an_mcp_mode_turn_against_the_mock_cites_the_mcp_results(tmp_path: Path) -> None:
    async with MockServer(api_keys={KEY}) as server:
        settings = Settings.defaults(
            api_key=KEY, base_url=server.coding_base_url, personas_dir=REPO / "personas",
            data_dir=tmp_path, llm_max_retries=0,
        )  # fmt: skip
        assert settings.web_search_mode == "auto" and settings.search_mode == "mcp"
        async with Runtime(settings) as runtime:
            scout = runtime.persona("scout")
            assert scout.spec.web_search.mode == "mcp"
            reply = await scout.respond(TRAM, conversation_id="c1")
            again = await scout.respond(TRAM, conversation_id="c2")
        report = server.report()
    assert reply.content.startswith("Yes. The city council approved the 4.2 km tram line")
    assert "[1]" in reply.content and "[2]" in reply.content and "[ref_" not in reply.content
    assert [(c.number, c.url, c.site, c.published) for c in reply.citations] == [
        (1, "https://news.example.com/2026/01/tram-line-approved", "Example News", "2026-01-13"),
        (2, "https://transit.example.org/tram-extension-timeline", "Transit Example",
         "2026-01-14"),
    ]  # fmt: skip
    search = reply.rounds[0].results[0]
    assert search.name == "search_web" and search.ok
    assert json.loads(search.content)[0]["ref"] == "ref_1"
    served = {f["name"]: f["served"] for f in report["fixtures"]}
    # Both turns went model -> MCP tools/call -> model, and only the right key was accepted.
    assert served["web_search_mcp_mode"] == [2, 2, 2]
    assert report["unmatched"] == 0 and report["rejected"] == 0
    assert again.content == reply.content


async def test_auto_is_the_builtin_tool_on_the_general_endpoint(tmp_path: Path) -> None:
    async with MockServer() as server:
        settings = Settings.defaults(
            api_key=KEY, base_url=server.base_url, personas_dir=REPO / "personas",
            data_dir=tmp_path, llm_max_retries=0,
        )  # fmt: skip
        async with Runtime(settings) as runtime:
            scout = runtime.persona("scout")
            reply = await scout.respond("// what's the weather in Nanaimo?")
            assert not runtime.mcp.connections  # no MCP session was ever opened
        served = {f["name"]: f["served"] for f in server.report()["fixtures"]}
    assert scout.spec.web_search.mode == "builtin"
    assert served["web_search_nanaimo"] == [1] and len(reply.citations) == 3


async def test_the_search_names_either_tool_name_and_sends_zai_arguments(searched: Turn) -> None:
    fixture = search_fixture("prime", "late ferry", tool="webSearchPrime")
    reply, script = await searched(fixture, "A late ferry runs on Fridays [ref_1].",
                                   web_search_recency="oneWeek")  # fmt: skip
    assert reply.content == "A late ferry runs on Fridays [1]."
    assert [c.url for c in reply.citations] == [item["link"] for item in ITEMS]
    labelled = json.loads(tool_message(script))
    assert [(r["ref"], r["title"]) for r in labelled] == [("ref_1", ITEMS[0]["title"]),
                                                          ("ref_2", ITEMS[1]["title"])]  # fmt: skip
    offered = [t["function"]["name"] for t in script.requests[0]["tools"]]
    assert offered == ["search_web"]


# ------------------------------------------------------------------------------ failures


async def test_a_401_on_call_reaches_the_model_as_a_readable_error(
    searched: Turn, caplog: pytest.LogCaptureFixture
) -> None:
    fault = {"kind": "http_error", "status": 401, "code": "1001", "message": "Api key not found",
             "times": None}  # fmt: skip
    reply, script = await searched(search_fixture("denied", "late ferry", faults=[fault]),
                                   "The search was refused.")  # fmt: skip
    text = tool_message(script)
    assert text == (
        "Error: tool 'search_web' failed: the MCP server 'web_search' refused the call with "
        "HTTP 401 Unauthorized: Api key not found; check the credentials sent to it (the "
        "Authorization header)"
    )
    assert reply.content == "The search was refused." and reply.citations == []
    assert not reply.rounds[0].results[0].ok
    assert any("tool search_web failed" in r.getMessage() for r in caplog.records)


async def test_an_empty_result_is_asked_for_once_more_then_told_plainly(searched: Turn) -> None:
    empty = search_fixture("empty", "late ferry", text='"[]"')
    reply, script = await searched(empty)
    assert tool_message(script) == nothing_found("late ferry") and reply.citations == []
    assert "found nothing for 'late ferry'" in tool_message(script)
    assert searched.served["empty"] == [2]  # type: ignore[attr-defined]


async def test_an_empty_result_then_results_cites_the_second_answer(searched: Turn) -> None:
    first = search_fixture("flaky", "late ferry", text='"[]"')
    second = search_fixture("flaky", "late ferry").exchanges[0]
    flaky = first.model_copy(update={"exchanges": [first.exchanges[0], second]})
    reply, script = await searched(flaky, "A late ferry runs on Fridays [ref_1].")
    assert [c.url for c in reply.citations] == [item["link"] for item in ITEMS]
    assert json.loads(tool_message(script))[0]["ref"] == "ref_1"
    assert searched.served["flaky"] == [1, 1]  # type: ignore[attr-defined]


async def test_a_plain_text_result_is_passed_on(searched: Turn) -> None:
    plain = "Search service notice: results are unavailable for this region."
    reply, script = await searched(search_fixture("plain", "late ferry", text=plain))
    assert tool_message(script) == plain and reply.citations == []


async def test_an_exhausted_quota_is_an_error_text(searched: Turn) -> None:
    fixture = search_fixture(
        "quota", "late ferry", text="Monthly search quota exhausted (100/100)", is_error=True
    )
    _, script = await searched(fixture)
    assert tool_message(script) == (
        "Error: tool 'search_web' failed: the web search MCP server answered with an error: "
        "Monthly search quota exhausted (100/100)"
    )


async def test_a_slow_search_hits_the_tool_timeout(searched: Turn) -> None:
    slow = search_fixture("slow", "late ferry", faults=[{"kind": "delay", "ms": 8000}])
    _, script = await searched(slow, tool_timeout=2.0)
    assert tool_message(script) == "Error: tool 'search_web' timed out after 2 seconds."


async def test_a_wrong_key_fails_the_connection_with_the_status(
    searched: Turn, caplog: pytest.LogCaptureFixture
) -> None:
    _, script = await searched(search_fixture("any", "late ferry"), api_key="a-wrong-key-42")
    assert tool_message(script).startswith(
        "Error: tool 'search_web' failed: the MCP server 'web_search' could not be started: it "
        "answered HTTP 401 Unauthorized: Authorization Token is invalid"
    )
    assert any("could not be started" in r.getMessage() for r in caplog.records)


async def test_results_keep_their_fields_as_citations(searched: Turn) -> None:
    reply, _ = await searched(search_fixture("fields", "late ferry"), "See [ref_2].")
    assert reply.content == "See [2]."
    first = reply.citations[0]
    expected = WebSearchResult.model_validate(ITEMS[0])
    assert (first.title, first.url, first.site, first.published, first.snippet) == (
        expected.title, expected.link, expected.media, expected.publish_date, expected.content,
    )  # fmt: skip


async def test_an_expired_session_is_replaced_without_the_model_noticing(tmp_path: Path) -> None:
    fixture = search_fixture("again", "late ferry")
    async with MockServer([fixture], api_keys={KEY}) as server:
        script = Script(
            completion(tool_calls=[call("search_web", {"query": "late ferry"})]),
            completion("First [ref_1]."),
            completion(tool_calls=[call("search_web", {"query": "late ferry"})]),
            completion("Second [ref_1]."),
        )
        settings = make_settings(tmp_path, api_key=KEY, web_search_mode="mcp",
                                 web_search_mcp_url=server.url + MCP_SEARCH_PATH)  # fmt: skip
        async with Runtime(settings, transport=script) as runtime:
            persona = Persona("seeker", "Search, then answer.", runtime=runtime)
            first = await persona.respond("// late ferry")
            server.end_mcp_sessions()  # as a restarted server, or an idle session's expiry
            second = await persona.respond("// late ferry")
        served = server.report()["fixtures"][0]["served"]
    script.assert_done()
    assert first.content == "First [1]." and second.content == "Second [1]."
    assert second.rounds[0].results[0].ok and served == [2]
