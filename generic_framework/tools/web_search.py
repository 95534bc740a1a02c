"""Web search as data: the persona's search settings and the built-in tool's wire form.

On the general endpoint Z.AI runs the built-in ``web_search`` tool itself, in the same call, and
returns its sources as a top-level ``web_search[]`` array (docs/protocol.md §0.1, §5). Nothing here
executes a search: :class:`WebSearch` only says which mode a persona uses and how the built-in
tool is configured. The ``search_web`` function tool of the ``client`` and ``mcp`` modes lives in
:mod:`generic_framework.tools.search`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from generic_framework.config import SearchMode, Settings
from generic_framework.limits import Recency, SearchCount
from generic_framework.wire.messages import WebSearchConfig, WebSearchToolSpec

__all__ = ["Recency", "SearchMode", "WebSearch", "WebSearchMode"]

WebSearchMode = Literal["auto", "builtin", "client", "mcp", "off"]
"""What a persona file or ``WEB_SEARCH_MODE`` may say; :meth:`WebSearch.resolve` turns ``auto``
into the :data:`SearchMode` that runs."""


class WebSearch(BaseModel):
    """How a persona searches the web for ``//`` messages.

    Every field left ``None`` is taken from :class:`~generic_framework.config.Settings`
    (``WEB_SEARCH_MODE``, ``WEB_SEARCH_ENGINE``, ``WEB_SEARCH_COUNT``, ``WEB_SEARCH_RECENCY``) by
    :meth:`resolve`, which also turns ``auto`` into ``mcp`` on a Coding Plan endpoint and
    ``builtin`` elsewhere.

    Attributes:
        mode: ``auto`` (the default), ``builtin`` (Z.AI searches server-side), ``client`` (a
            ``search_web`` function tool calls the Web Search API), ``mcp`` (the same function,
            run through Z.AI's Web Search MCP server: the Coding Plan's search route), or
            ``off`` (``//`` offers only function tools).
        engine: ``search_engine`` of the built-in tool (``search_pro_jina`` on docs.z.ai). The
            client-side mode leaves the Web Search API's engine to the client.
        count: how many results (1-50).
        recency: ``oneDay`` ... ``noLimit``.
        domain_filter: a single domain to restrict results to.
        content_size: ``medium`` (400-600 characters per result) or ``high`` (~2500).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: WebSearchMode | None = None
    engine: str | None = None
    count: SearchCount | None = None
    recency: Recency | None = None
    domain_filter: str | None = None
    content_size: Literal["medium", "high"] | None = None

    def resolve(self, settings: Settings) -> WebSearch:
        """Return a copy with every unset field filled from ``settings`` and ``auto`` resolved."""
        return self.model_copy(
            update={
                "mode": settings.run_mode(self.mode),
                "engine": self.engine or settings.web_search_engine,
                "count": self.count or settings.web_search_count,
                "recency": self.recency or settings.web_search_recency,
            }
        )

    def to_spec(self) -> WebSearchToolSpec:
        """The built-in tool as a wire model; ``search_result`` is always true (§0.2)."""
        return WebSearchToolSpec(
            web_search=WebSearchConfig(
                enable=True,
                search_engine=self.engine or "search_pro_jina",
                search_result=True,
                count=self.count,
                search_recency_filter=self.recency,
                search_domain_filter=self.domain_filter,
                content_size=self.content_size,
            )
        )

    def to_wire(self) -> dict[str, Any]:
        """The ``{"type": "web_search", "web_search": {...}}`` object sent in ``tools``."""
        return self.to_spec().model_dump(exclude_none=True)
