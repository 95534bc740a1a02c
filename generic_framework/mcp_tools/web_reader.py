"""``read_url`` in ``mcp`` mode: Z.AI's Web Reader MCP server (its ``webReader`` tool).

The Coding Plan's sibling of the Web Search MCP server (docs/protocol.md §6c): streamable HTTP
at ``{origin}/api/mcp/web_reader/mcp``, the API key as Bearer token, one tool that takes ``url``
and returns the page's title, main content and metadata. The shape of its result text is not
documented: a JSON object (possibly encoded twice, as the search server's is) with ``title``,
``content`` and ``url`` (or ``reader_result`` holding them) is read as such; any other text is
taken as the page's content.
"""

from __future__ import annotations

import json
from typing import Any

from generic_framework.mcp_tools.connection import MCPConnection, MCPFailure
from generic_framework.mcp_tools.results import block_text, decode_json_text, pick_tool
from generic_framework.tools.reader import PageRead

__all__ = ["READER_SERVER_NAME", "WebReaderMCP", "find_reader_tool", "parse_page"]

READER_SERVER_NAME = "web_reader"
"""The connection's name in log lines and in the error texts the model reads."""

_KNOWN_NAMES = frozenset({"webreader", "reader", "readurl"})


def find_reader_tool(tools: tuple[Any, ...]) -> Any:
    """The reader tool among a listing: ``webReader`` (any spelling), or the only one.

    Raises:
        MCPFailure: none of the listed tools reads pages.
    """
    return pick_tool(tools, _KNOWN_NAMES, "web reader", "reader")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_page(text: str, url: str) -> PageRead:
    """The page in a reader result's text (see the module docstring); ``url`` is the one asked
    for, used when the result names none."""
    value = decode_json_text(text)
    if isinstance(value, dict) and isinstance(value.get("reader_result"), dict):
        value = value["reader_result"]
    if isinstance(value, dict) and ("content" in value or "title" in value):
        return PageRead(
            url=_text(value.get("url")) or url,
            title=_text(value.get("title")),
            content=_text(value.get("content")) or _text(value.get("description")),
        )
    plain = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return PageRead(url=url, content=plain.strip())


class WebReaderMCP:
    """Reads pages through one Web Reader MCP connection."""

    def __init__(self, connection: MCPConnection) -> None:
        self.connection = connection

    async def read(self, url: str) -> PageRead:
        """Read ``url`` (``read_url``'s function in ``mcp`` mode).

        Raises:
            MCPFailure: the server could not be reached, refused the call, timed out, or
                answered with an error result or nothing at all.
        """
        listing = await self.connection.listing()
        reader = find_reader_tool(listing.tools)
        result = await self.connection.call(reader.name, {"url": url})
        text = "\n".join(block_text(block) for block in result.content).strip()
        if result.is_error:
            raise MCPFailure(
                f"the web reader MCP server answered with an error: {text or 'no details given'}",
                kind="refused",
            )
        if not text:
            raise MCPFailure(f"the web reader MCP server returned nothing for {url}")
        return parse_page(text, url)
