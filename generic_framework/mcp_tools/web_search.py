"""``WEB_SEARCH_MODE=mcp``: ``search_web`` run through Z.AI's Web Search MCP server.

The Coding Plan's search route (docs/protocol.md §6b): a streamable-HTTP MCP server at
``{origin}/api/mcp/web_search_prime/mcp``, the API key as Bearer token. Its tool is called
``webSearchPrime`` in Z.AI's docs and ``web_search_prime`` in live listings, so the name is taken
from ``tools/list``. Arguments are mapped from the persona's search settings and sent only when
the tool's schema declares them. The result is a text block holding JSON, often encoded twice (a
JSON string whose value is the JSON array); it is parsed up to two levels into
:class:`~generic_framework.wire.messages.WebSearchResult` items, which the loop numbers as
citations. Text that holds no array is passed to the model as it is. An empty list is asked
for once more (the server has been seen answering ``"[]"`` intermittently); a second empty
answer reaches the model as a plain "nothing was found".
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from generic_framework.mcp_tools.connection import MCPConnection, MCPFailure
from generic_framework.mcp_tools.results import block_text, decode_json_text, pick_tool
from generic_framework.tools.search import SearchHits
from generic_framework.wire.messages import WebSearchResult

logger = logging.getLogger("generic_framework.mcp")

__all__ = [
    "SEARCH_SERVER_NAME",
    "WebSearchMCP",
    "find_search_tool",
    "parse_results",
    "search_arguments",
]

SEARCH_SERVER_NAME = "web_search"
"""The connection's name in log lines and in the error texts the model reads."""

_KNOWN_NAMES = frozenset({"websearchprime", "websearch"})
_LIST_KEYS = ("search_result", "results", "data")
_FIELD_ALIASES = {"url": "link", "site": "media", "date": "publish_date", "snippet": "content"}


def find_search_tool(tools: tuple[Any, ...]) -> Any:
    """The search tool among a listing: ``webSearchPrime``/``web_search_prime``, or the only one.

    Raises:
        MCPFailure: none of the listed tools is a web search tool.
    """
    return pick_tool(tools, _KNOWN_NAMES, "web search", "search")


def search_arguments(schema: Any, query: str, **options: Any) -> dict[str, Any]:
    """The call's arguments: ``search_query`` and the set options, as far as the schema allows.

    ``options`` are ``count``, ``search_recency_filter``, ``content_size`` and
    ``search_domain_filter`` (``None`` values are left out). When the schema declares
    properties, only those are sent (a server may reject unknown ones); a schema that names
    ``query`` instead of ``search_query`` gets the query under that name.
    """
    arguments: dict[str, Any] = {"search_query": query}
    arguments.update((key, value) for key, value in options.items() if value is not None)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return arguments
    if "search_query" not in properties and "query" in properties:
        arguments["query"] = arguments.pop("search_query")
    return {key: value for key, value in arguments.items() if key in properties}


def _item(raw: dict[str, Any]) -> WebSearchResult | None:
    data = {key: value for key, value in raw.items() if isinstance(key, str)}
    for alias, field in _FIELD_ALIASES.items():
        if alias in data and not data.get(field):
            data[field] = data[alias]
    data = {
        key: value if isinstance(value, str) or value is None else str(value)
        for key, value in data.items()
        if key in WebSearchResult.model_fields
    }
    try:
        return WebSearchResult.model_validate(data)
    except ValidationError:  # pragma: no cover - every field is a string by now
        return None


def parse_results(text: str) -> tuple[list[WebSearchResult], str | None]:
    """The results in a search result's text, or ``([], text)`` when it holds no list.

    Parses JSON up to two levels (a JSON string holding the JSON array, as Z.AI sends it); a
    list, or an object holding one under ``search_result``/``results``/``data``, gives the
    results (``[]`` for an empty list).
    """
    value = decode_json_text(text)
    if isinstance(value, dict):
        value = next((value[key] for key in _LIST_KEYS if isinstance(value.get(key), list)), value)
    if isinstance(value, list):
        items = [_item(raw) for raw in value if isinstance(raw, dict)]
        return [item for item in items if item is not None], None
    # Not a list: the decoded text, or the decoded JSON written once (not twice) for the model.
    plain = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return [], plain.strip() or None


class WebSearchMCP:
    """Searches through one Web Search MCP connection.

    Args:
        connection: the session with the search server.
    """

    def __init__(self, connection: MCPConnection) -> None:
        self.connection = connection

    async def search(
        self,
        query: str,
        *,
        count: int | None = None,
        recency: str | None = None,
        domain_filter: str | None = None,
        content_size: str | None = None,
    ) -> SearchHits:
        """Search and return the hits (``search_web``'s search function in ``mcp`` mode).

        Raises:
            MCPFailure: the server could not be reached, refused the call (401, quota), timed
                out, or answered with an error result.
        """
        listing = await self.connection.listing()
        tool = find_search_tool(listing.tools)
        arguments = search_arguments(
            tool.input_schema,
            query,
            count=count,
            search_recency_filter=recency,
            content_size=content_size,
            search_domain_filter=domain_filter,
        )
        results, plain = await self._call(tool.name, arguments)
        if not results and plain is None:
            # An empty "[]" with isError false comes back intermittently for queries that have
            # results (docs/protocol.md §6b): one more call, then the model is told.
            logger.info("the web search MCP server found nothing for %r; asking once more", query)
            results, plain = await self._call(tool.name, arguments)
        return SearchHits(query=query, results=results, text=plain)

    async def _call(
        self, name: str, arguments: dict[str, Any]
    ) -> tuple[list[WebSearchResult], str | None]:
        result = await self.connection.call(name, arguments)
        text = "\n".join(block_text(block) for block in result.content).strip()
        if result.is_error:
            raise MCPFailure(
                f"the web search MCP server answered with an error: {text or 'no details given'}",
                kind="refused",
            )
        return parse_results(text)
