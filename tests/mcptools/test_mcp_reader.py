"""``read_url``: offered on ``//`` messages holding a URL in the client and mcp modes, read
through Z.AI's Web Reader (the API, or the MCP server's ``webReader``), cited by title and link.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, call, completion, make_settings

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.mcp_tools.web_reader import parse_page
from generic_framework.mock import Fixture, MockServer, bundled_fixture_paths
from generic_framework.mock.mcp_endpoint import MCP_READER_PATH
from generic_framework.runtime import Runtime
from generic_framework.tools.reader import has_url

pytestmark = pytest.mark.e2e

KEY = "reader-test-key-0123456789"
REPO = Path(__file__).resolve().parents[2]
URL = "https://tides.example.ca/faq/king-tides"
QUESTION = f"// what does {URL} say about when king tides happen?"
_open: list[Any] = []


@pytest.fixture(autouse=True)
async def _close() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", []) if t["type"] == "function"]


def test_has_url() -> None:
    assert has_url("see https://example.org/a?b=1, please")
    assert has_url("HTTP://EXAMPLE.ORG")
    assert not has_url("example.org without a scheme") and not has_url("ftp://x.org/file")


@pytest.mark.parametrize(
    ("text", "page"),
    [
        (json.dumps({"title": "T", "url": "https://a.org/x", "content": "Body"}), ("T", "Body")),
        (json.dumps(json.dumps({"title": "T", "content": "Body"})), ("T", "Body")),
        (json.dumps({"reader_result": {"title": "T", "content": "Body"}}), ("T", "Body")),
        ("# Plain markdown\n\nBody", ("", "# Plain markdown\n\nBody")),
    ],
)
def test_the_reader_result_shapes(text: str, page: tuple[str, str]) -> None:
    read = parse_page(text, "https://asked.example/")
    assert (read.title, read.content) == page
    assert read.url in ("https://a.org/x", "https://asked.example/")


@pytest.mark.parametrize("mode", ["client", "mcp"])
async def test_read_url_is_offered_only_with_a_url(tmp_path: Path, mode: str) -> None:
    script = Script(completion("a"), completion("b"), completion("c"))
    settings = make_settings(tmp_path, web_search_mode=mode)
    runtime = Runtime(settings, transport=script)
    _open.append(runtime)
    persona = Persona("reader", "Read.", runtime=runtime)
    await persona.respond(QUESTION)
    await persona.respond("// king tides this winter")
    await persona.respond(f"what is at {URL}?")  # no //: no tools at all
    assert offered(script.requests[0]) == ["search_web", "read_url"]
    assert offered(script.requests[1]) == ["search_web"]
    assert "tools" not in script.requests[2]


async def test_builtin_mode_offers_no_reader(tmp_path: Path) -> None:
    script = Script(completion("a"))
    runtime = Runtime(make_settings(tmp_path, web_search_mode="builtin"), transport=script)
    _open.append(runtime)
    await Persona("reader", "Read.", runtime=runtime).respond(QUESTION)
    assert [t["type"] for t in script.requests[0]["tools"]] == ["web_search"]


async def test_client_mode_reads_through_the_reader_api_and_cites_the_page(
    tmp_path: Path,
) -> None:
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(
            api_key=KEY, base_url=server.base_url, data_dir=tmp_path, web_search_mode="client",
            personas_dir=tmp_path,
        )  # fmt: skip
        async with Runtime(settings) as runtime:
            scout = Persona(
                "scout-client",
                "You are Scout, a friendly research assistant. Answer briefly and plainly. "
                "When you use web sources, cite them.",
                runtime=runtime,
            )
            reply = await scout.respond(QUESTION)
        served = {f["name"]: f["served"] for f in server.report()["fixtures"]}
    assert served["web_reader_client_mode"] == [1, 1, 1]
    assert reply.content.endswith("often in the morning [1].")
    (cited,) = reply.citations
    assert (cited.url, cited.title, cited.site) == (
        URL,
        "King tides: questions and answers",
        "tides.example.ca",
    )
    page = json.loads(reply.rounds[0].results[0].content)
    assert page["ref"] == "ref_1" and "highest tides of the year" in page["content"]


async def test_mcp_mode_reads_through_web_reader_on_the_coding_endpoint(tmp_path: Path) -> None:
    async with MockServer(bundled_fixture_paths(), api_keys={KEY}) as server:
        settings = Settings.defaults(
            api_key=KEY, base_url=server.coding_base_url, personas_dir=REPO / "personas",
            data_dir=tmp_path,
        )  # fmt: skip
        assert settings.reader_mcp_url == server.url + MCP_READER_PATH
        async with Runtime(settings) as runtime:
            reply = await runtime.persona("scout").respond(
                f"// when do king tides happen, according to {URL}?"
            )
        served = {f["name"]: f["served"] for f in server.report()["fixtures"]}
    assert served["web_reader_mcp_mode"] == [1, 1, 1]
    assert [(c.url, c.title) for c in reply.citations] == [
        (URL, "King tides: questions and answers")
    ]


def reader_fixture(text: str, *, is_error: bool = False) -> Fixture:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "webReader", "arguments": {"url": URL}}}  # fmt: skip
    result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    return Fixture.model_validate(
        {
            "name": "reader",
            "user_input": QUESTION,
            "exchanges": [
                {
                    "request": {"method": "POST", "path": MCP_READER_PATH, "body": body},
                    "response": {"body": {"jsonrpc": "2.0", "id": 1, "result": result}},
                }
            ],
        }
    )


async def test_a_reader_error_reaches_the_model_as_a_readable_text(tmp_path: Path) -> None:
    async with MockServer([reader_fixture("Page not reachable", is_error=True)]) as server:
        script = Script(
            completion(tool_calls=[call("read_url", {"url": URL}, id="r1")]),
            completion("I could not read the page."),
        )
        settings = make_settings(
            tmp_path, api_key=KEY, web_search_mode="mcp",
            web_reader_mcp_url=server.url + MCP_READER_PATH,
        )  # fmt: skip
        async with Runtime(settings, transport=script) as runtime:
            reply = await Persona("reader", "Read.", runtime=runtime).respond(QUESTION)
    result = reply.rounds[0].results[0]
    assert not result.ok and reply.citations == []
    assert "web reader MCP server answered with an error: Page not reachable" in result.content
