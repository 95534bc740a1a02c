"""The ``read_url`` tool: one web page read through Z.AI's Web Reader, cited like a search result.

Offered on ``//`` messages that contain a URL, in the ``client`` and ``mcp`` web search modes
(docs/design/0321). In ``client`` mode it calls the Web Reader API
(:meth:`GLMClient.read_url <generic_framework.wire.client.GLMClient.read_url>`, ``POST
{base}/reader``); in ``mcp`` mode the ``webReader`` tool of Z.AI's Web Reader MCP server
(:class:`~generic_framework.mcp_tools.web_reader.WebReaderMCP`). Either way the tool returns a
:class:`PageRead`; the loop numbers the page as a citation (its title and link) and sends the
model the page's text with the ``ref_N`` label to cite.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from generic_framework.tools.base import FunctionTool, tool
from generic_framework.wire.messages import ReaderResponse

__all__ = ["READ_TOOL_NAME", "PageRead", "ReadFunction", "has_url", "make_reader_tool"]

READ_TOOL_NAME = "read_url"

PAGE_CHARS = 12_000
"""The most of a page's text the model reads (a page can be far longer than a search
snippet; this keeps one read within a few thousand tokens)."""

_URL = re.compile(r"https?://[^\s<>\"']+", re.IGNORECASE)

ReadFunction = Callable[[str], Awaitable["ReaderResponse | PageRead"]]
"""``GLMClient.read_url``-shaped: ``(url)``, returning the Web Reader API's answer or a
:class:`PageRead`."""


class PageRead(BaseModel):
    """What ``read_url`` returns: the page as read.

    Attributes:
        url: the page's address (as the reader reports it, else as asked).
        title: its title (may be empty).
        content: its text (markdown from the API; whatever the MCP tool returns).
    """

    model_config = ConfigDict(frozen=True)

    url: str
    title: str = ""
    content: str = ""


def has_url(text: str) -> bool:
    """Whether ``text`` holds an ``http://`` or ``https://`` address."""
    return _URL.search(text) is not None


def make_reader_tool(read: Callable[[], ReadFunction]) -> FunctionTool:
    """Build the ``read_url`` tool; ``read`` returns the function to call (looked up per call,
    so the runtime's client or MCP session is made on first use)."""

    async def read_url(
        url: Annotated[str, Field(min_length=8, max_length=2000, pattern=r"^https?://\S+$")],
    ) -> PageRead:
        """Read one web page and return its title and text, to cite as [ref_N].

        Args:
            url: the page's full address, starting with http:// or https://.
        """
        answer = await read()(url)
        if isinstance(answer, PageRead):
            return answer
        page = answer.reader_result
        if page is None:  # pragma: no cover - parse_model refuses a response without one
            return PageRead(url=url)
        return PageRead(url=page.url or url, title=page.title, content=page.content)

    return tool(read_url, name=READ_TOOL_NAME)
