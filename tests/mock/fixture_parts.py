"""Building blocks of the bundled fixtures (see fixture_factory.py): ids, completions, calls,
sources, and :class:`Conversation`, which builds requests the way ``Persona`` does."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from typing import Any

from pydantic_core import to_json

from generic_framework.core.citations import CitationBook
from generic_framework.core.persona import FORCED_ANSWER_INSTRUCTION
from generic_framework.core.tooling import page_content
from generic_framework.memory.tools import MEMORY_TOOL_SPECS
from generic_framework.mock.fixture import Fixture
from generic_framework.mock.sse import completion_to_events
from generic_framework.tools import EXAMPLE_TOOLS, WebSearch, make_search_tool
from generic_framework.tools.reader import PageRead, make_reader_tool
from generic_framework.tools.search import compact_results
from generic_framework.tools.web_search import DEFAULT_SEARCH_PROMPT
from generic_framework.wire.messages import WebSearchResult

MODEL = "glm-4.7"
CHAT = "/api/paas/v4/chat/completions"
CODING_CHAT = "/api/coding/paas/v4/chat/completions"
SEARCH = "/api/paas/v4/web_search"
MCP_SEARCH = "/api/mcp/web_search_prime/mcp"
JSON_HEADERS = {"Content-Type": "application/json; charset=UTF-8"}
SSE_HEADERS = {"Content-Type": "text/event-stream;charset=UTF-8"}
SYSTEM = (
    "You are Scout, a friendly research assistant. Answer briefly and plainly. When you use "
    "web sources, cite them."
)
SEARCH_TOOL = WebSearch(
    mode="builtin",
    engine="search_pro_jina",
    count=5,
    recency="noLimit",
    prompt=DEFAULT_SEARCH_PROMPT,
).to_wire()
FUNCTION_TOOLS = [tool.to_wire() for tool in EXAMPLE_TOOLS.values()]
CLIENT_SEARCH_TOOL = make_search_tool(
    lambda: _no_search, WebSearch(mode="client", count=5, recency="noLimit")
).to_wire()
READER_TOOL = make_reader_tool(lambda: _no_search).to_wire()
READER = "/api/paas/v4/reader"
MCP_READER = "/api/mcp/web_reader/mcp"
CREATED = 1767950000


async def _no_search(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the factory never searches")


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def _completion_id(seed: str) -> str:
    return "2026010909" + _hex(seed, 20)


def _call_id(seed: str, stream: bool) -> str:
    if stream:
        return "call_" + _hex(seed, 24)
    return f"call_-{int(_hex(seed, 15), 16)}"


def tool_output(name: str, arguments: dict[str, Any]) -> str:
    """What the persona sends back for a call of one of the example tools."""
    outcome = asyncio.run(EXAMPLE_TOOLS[name].run(json.dumps(arguments), time_limit=5))
    return outcome.content


def completion(
    seed: str,
    content: str = "",
    *,
    reasoning: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int, int] = (120, 40, 10),
    web_search: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat completion in Z.AI's layout (docs/protocol.md §3)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    prompt, output, thinking = usage
    body: dict[str, Any] = {
        "id": _completion_id(seed),
        "request_id": _completion_id(seed),
        "created": CREATED,
        "model": MODEL,
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": thinking},
        },
    }
    if web_search is not None:
        body["web_search"] = web_search
    return body


def call(
    seed: str,
    name: str,
    arguments: dict[str, Any],
    index: int,
    *,
    stream: bool = False,
    kind: str = "function",
) -> dict[str, Any]:
    """One tool call as Z.AI returns it (arguments as a JSON string, an index)."""
    return {
        "id": _call_id(f"{seed}/{index}", stream),
        "index": index,
        "type": kind,
        "function": {"name": name, "arguments": json.dumps(arguments, separators=(",", ":"))},
    }


def source(
    refer: int, title: str, link: str, media: str, content: str, date: str
) -> dict[str, str]:
    """One ``web_search[]`` item."""
    return {
        "refer": f"ref_{refer}",
        "title": title,
        "link": link,
        "media": media,
        "icon": "",
        "content": content,
        "publish_date": date,
    }


class Conversation:
    """Builds the requests of one turn the way Persona does."""

    def __init__(
        self,
        user_input: str,
        *,
        stream: bool = False,
        web_tools: list[dict[str, Any]] | None = None,
        path: str = CHAT,
        always: list[dict[str, Any]] | None = None,
    ) -> None:
        web = user_input.lstrip().startswith("//")
        text = user_input.lstrip()[2:].strip() if web else user_input.strip()
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": text},
        ]
        # ``always``: the tools of a persona that offers them without // too (tools_always).
        self.tools = (web_tools or [SEARCH_TOOL, *FUNCTION_TOOLS]) if web else always
        self.stream = stream
        self.path = path
        self.exchanges: list[dict[str, Any]] = []

    def request(self, *, tools: bool = True, forced: bool = False) -> dict[str, Any]:
        messages = copy.deepcopy(self.messages)
        if forced:
            messages.append({"role": "user", "content": FORCED_ANSWER_INSTRUCTION})
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "stream": self.stream}
        if tools and self.tools:
            body["tools"] = copy.deepcopy(self.tools)
            if self.stream and any(tool["type"] == "function" for tool in self.tools):
                body["tool_stream"] = True  # the model takes it (docs/design/0318)
        return {"method": "POST", "path": self.path, "body": body}

    def search(self, query: str, results: list[dict[str, Any]]) -> str:
        """Record a Web Search API exchange; return the tool message the persona sends."""
        request = {
            "search_query": query,
            "search_engine": "search-prime",
            "count": 5,
            "search_recency_filter": "noLimit",
        }
        answer = {"id": _completion_id(query), "created": CREATED, "search_result": results}
        self.exchanges.append(
            {
                "request": {"method": "POST", "path": SEARCH, "body": request},
                "response": {"status": 200, "headers": JSON_HEADERS, "body": answer},
                "note": "the client-side search_web tool calls the Web Search API",
            }
        )
        labelled = CitationBook().add_client_results(
            WebSearchResult.model_validate(item) for item in results
        )
        return to_json(compact_results(labelled)).decode()

    def mcp_search(
        self,
        arguments: dict[str, Any],
        results: list[dict[str, Any]],
        *,
        tool: str = "web_search_prime",
        rpc_id: int = 2,
    ) -> str:
        """Record a Web Search MCP ``tools/call`` whose text is the results encoded twice, as
        Z.AI sends it (docs/protocol.md §6b); return the tool message the persona sends."""
        text = json.dumps(json.dumps(results, ensure_ascii=False), ensure_ascii=False)
        call_body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        self.exchanges.append(
            {
                "request": {"method": "POST", "path": MCP_SEARCH, "body": call_body},
                "response": {
                    "status": 200,
                    "headers": JSON_HEADERS,
                    "body": {"jsonrpc": "2.0", "id": rpc_id, "result": result},
                },
                "note": "WEB_SEARCH_MODE=mcp: search_web calls the Web Search MCP server",
            }
        )
        labelled = CitationBook().add_client_results(
            WebSearchResult.model_validate(item) for item in results
        )
        return to_json(compact_results(labelled)).decode()

    def read(self, url: str, title: str, content: str, *, path: str = READER) -> str:
        """Record a Web Reader API exchange; return the tool message the persona sends."""
        request = {"url": url, "return_format": "markdown", "retain_images": False}
        answer = {
            "id": _completion_id(url),
            "created": CREATED,
            "request_id": _completion_id(url),
            "reader_result": {"content": content, "title": title, "url": url,
                              "description": "", "metadata": {}},
        }  # fmt: skip
        self.exchanges.append(
            {
                "request": {"method": "POST", "path": path, "body": request},
                "response": {"status": 200, "headers": JSON_HEADERS, "body": answer},
                "note": "read_url in client mode calls the Web Reader API",
            }
        )
        return page_content(PageRead(url=url, title=title, content=content), CitationBook())

    def mcp_read(self, url: str, title: str, content: str, *, rpc_id: int = 2) -> str:
        """Record a Web Reader MCP ``tools/call`` of ``webReader``; its text is a JSON object
        with the page's title, content and url (the shape is not documented: ours)."""
        page = {"title": title, "url": url, "content": content}
        call_body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": "tools/call",
            "params": {"name": "webReader", "arguments": {"url": url}},
        }
        text = json.dumps(page, ensure_ascii=False)
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        self.exchanges.append(
            {
                "request": {"method": "POST", "path": MCP_READER, "body": call_body},
                "response": {
                    "status": 200,
                    "headers": JSON_HEADERS,
                    "body": {"jsonrpc": "2.0", "id": rpc_id, "result": result},
                },
                "note": "read_url in mcp mode calls the Web Reader MCP server's webReader",
            }
        )
        return page_content(PageRead(url=url, title=title, content=content), CitationBook())

    def exchange(
        self,
        answer: dict[str, Any],
        *,
        status: int = 200,
        tools: bool = True,
        forced: bool = False,
        faults: list[dict[str, Any]] | None = None,
        note: str = "",
        fragments: bool = False,
    ) -> None:
        """Record one request (the conversation so far) and its answer (streamed with each
        call's arguments in pieces with ``fragments``, as ``tool_stream`` sends them)."""
        streamed = self.stream and status == 200
        response: dict[str, Any] = {
            "status": status,
            "headers": SSE_HEADERS if streamed else JSON_HEADERS,
        }
        if streamed:
            response["events"] = completion_to_events(answer, tool_stream=fragments)
        else:
            response["body"] = answer
        entry: dict[str, Any] = {
            "request": self.request(tools=tools, forced=forced),
            "response": response,
        }
        if faults:
            entry["faults"] = faults
        if note:
            entry["note"] = note
        self.exchanges.append(entry)

    def run_tools(self, answer: dict[str, Any], results: list[str] | None = None) -> None:
        """Append the assistant echo and one tool message per call, as the persona does."""
        message = answer["choices"][0]["message"]
        calls = [{k: v for k, v in c.items() if k != "index"} for c in message["tool_calls"]]
        echo: dict[str, Any] = {"role": "assistant"}
        if (message.get("content") or "").strip():
            echo["content"] = message["content"]
        if message.get("reasoning_content") is not None:
            echo["reasoning_content"] = message["reasoning_content"]
        echo["tool_calls"] = calls
        self.messages.append(echo)
        for number, item in enumerate(calls):
            if results is not None:
                content = results[number]
            elif item["type"] == "web_search" or item["function"]["name"] == "web_search":
                content = ""
            else:
                arguments = json.loads(item["function"]["arguments"])
                content = tool_output(item["function"]["name"], arguments)
            self.messages.append({"role": "tool", "tool_call_id": item["id"], "content": content})


def fixture(
    name: str,
    description: str,
    user_input: str,
    conversation: Conversation,
    settings: dict[str, Any] | None = None,
    persona: str = "scout",
    endpoint: str = "general",
    **expected: Any,
) -> Fixture:
    """Assemble and validate a fixture."""
    return Fixture.model_validate(
        {
            "name": name,
            "description": description,
            "model": MODEL,
            "endpoint": endpoint,
            "persona": persona,
            "user_input": user_input,
            "settings": settings or {},
            "expected": expected,
            "exchanges": conversation.exchanges,
        }
    )


KEEPER_SYSTEM = "You are Keeper, a warm and brief companion with a memory."
MEMORY_TOOLS = [spec.model_dump(mode="json", exclude_none=True) for spec in MEMORY_TOOL_SPECS]
"""The tools of a persona with memory (personas/examples/keeper.toml), as its requests offer
them."""
