"""The client-side search tool ``search_web`` (``WEB_SEARCH_MODE=client`` and ``mcp``).

For endpoints that do not run the built-in ``web_search`` tool (reported for the coding endpoint,
docs/protocol.md §0.4), the model gets an ordinary function tool instead. In ``client`` mode its
calls go through :meth:`GLMClient.web_search <generic_framework.wire.client.GLMClient.web_search>`
(``POST {base}/web_search``); in ``mcp`` mode through Z.AI's Web Search MCP server
(:class:`~generic_framework.mcp_tools.web_search.WebSearchMCP`). The function returns
:class:`SearchHits`; the persona numbers the results as citations and sends the model a compact
JSON list in which each result carries the ``ref_N`` label to cite, so client-side and
server-side answers cite the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from generic_framework.tools.base import FunctionTool, tool
from generic_framework.tools.web_search import Recency, WebSearch
from generic_framework.wire.messages import WebSearchResponse, WebSearchResult

__all__ = ["SEARCH_TOOL_NAME", "SearchFunction", "SearchHits", "make_search_tool"]

SEARCH_TOOL_NAME = "search_web"
"""Not ``web_search``: docs/protocol.md §5 advises a distinct name so the model's tool prompt and
proxies never confuse it with the built-in tool."""

SNIPPET_CHARS = 600

SearchFunction = Callable[..., Awaitable["WebSearchResponse | SearchHits"]]
"""``GLMClient.web_search``-shaped: ``(query, *, count, recency, domain_filter, content_size)``,
returning the Web Search API's response or :class:`SearchHits`."""


class SearchHits(BaseModel):
    """What ``search_web`` returns: the query and the results, before they are numbered.

    Attributes:
        query: what was searched for.
        results: the results (empty when there were none).
        text: what the search answered when it was not a list of results (an MCP search
            server may answer in plain text); passed to the model as it is.
    """

    model_config = ConfigDict(frozen=True)

    query: str
    results: list[WebSearchResult]
    text: str | None = None


def compact_results(results: list[tuple[str, WebSearchResult]]) -> list[dict[str, Any]]:
    """The JSON the model reads for ``(ref label, result)`` pairs: short keys, trimmed snippets."""
    out: list[dict[str, Any]] = []
    for ref, item in results:
        entry: dict[str, Any] = {"ref": ref, "title": item.title, "url": item.link}
        if item.media:
            entry["site"] = item.media
        if item.publish_date:
            entry["date"] = item.publish_date
        entry["snippet"] = item.content[:SNIPPET_CHARS]
        out.append(entry)
    return out


def make_search_tool(search: Callable[[], SearchFunction], config: WebSearch) -> FunctionTool:
    """Build the ``search_web`` tool for one persona.

    Args:
        search: returns the function to call (``client.web_search``, or the runtime's MCP
            search), looked up on each call so the persona can create its client lazily.
        config: the persona's resolved search settings (count, recency, domain filter).

    Returns:
        A :class:`FunctionTool` whose schema is built once, here.
    """

    async def search_web(
        query: Annotated[str, Field(min_length=1, max_length=500)],
        recency: Recency | None = None,
    ) -> SearchHits:
        """Search the web and return results to cite as [ref_N].

        Args:
            query: what to search for, as a short search-engine query.
            recency: only results from this period (oneDay, oneWeek, oneMonth, oneYear, noLimit).
        """
        response = await search()(
            query,
            count=config.count,
            recency=recency or config.recency,
            domain_filter=config.domain_filter,
            content_size=config.content_size,
        )
        if isinstance(response, SearchHits):
            return response
        return SearchHits(query=query, results=response.search_result)

    return tool(search_web, name=SEARCH_TOOL_NAME)
