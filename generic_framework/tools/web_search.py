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
from generic_framework.limits import Recency, SearchCount, SearchPrompt
from generic_framework.wire.messages import WebSearchConfig, WebSearchToolSpec

__all__ = ["DEFAULT_SEARCH_PROMPT", "Recency", "SearchMode", "WebSearch", "WebSearchMode"]

DEFAULT_SEARCH_PROMPT = (
    "You answer with the help of web search results. The current date is {{current_date}}; "
    "use it as the only time reference. Use only the results that bear on the question and "
    "answer it accurately and concisely. Every result has a reference label such as ref_1: "
    "after each statement taken from a result, cite that result as [ref_1] (several as "
    "[ref_1][ref_2]), and never write a label that is not among the results. If the results "
    "do not answer the question, say so."
)
"""The built-in tool's ``search_prompt`` unless a persona or ``WEB_SEARCH_PROMPT`` says
otherwise. Z.AI's own default ends "State the answer directly without citing data sources", so
without a prompt of ours answers come back without ``[ref_N]`` markers (docs/protocol.md §2.3).
``{{current_date}}`` is Z.AI's template variable, filled in by the server."""

WebSearchMode = Literal["auto", "builtin", "client", "mcp", "off"]
"""What a persona file or ``WEB_SEARCH_MODE`` may say; :meth:`WebSearch.resolve` turns ``auto``
into the :data:`SearchMode` that runs."""


class WebSearch(BaseModel):
    """How a persona searches the web for ``//`` messages.

    Every field left ``None`` is taken from :class:`~generic_framework.config.Settings`
    (``WEB_SEARCH_MODE``, ``WEB_SEARCH_ENGINE``, ``WEB_SEARCH_COUNT``, ``WEB_SEARCH_RECENCY``,
    ``WEB_SEARCH_PROMPT``) by
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
        prompt: the built-in tool's ``search_prompt`` (how the model treats the results; Z.AI's
            template variables such as ``{{current_date}}`` are kept); ``None`` takes
            ``WEB_SEARCH_PROMPT``, else :data:`DEFAULT_SEARCH_PROMPT`, which asks for
            ``[ref_N]`` markers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: WebSearchMode | None = None
    engine: str | None = None
    count: SearchCount | None = None
    recency: Recency | None = None
    domain_filter: str | None = None
    content_size: Literal["medium", "high"] | None = None
    prompt: SearchPrompt | None = None

    def resolve(self, settings: Settings) -> WebSearch:
        """Return a copy with every unset field filled from ``settings`` and ``auto`` resolved."""
        return self.model_copy(
            update={
                "mode": settings.run_mode(self.mode),
                "engine": self.engine or settings.web_search_engine,
                "count": self.count or settings.web_search_count,
                "recency": self.recency or settings.web_search_recency,
                "prompt": self.prompt or settings.web_search_prompt or DEFAULT_SEARCH_PROMPT,
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
                search_prompt=self.prompt,
            )
        )

    def to_wire(self) -> dict[str, Any]:
        """The ``{"type": "web_search", "web_search": {...}}`` object sent in ``tools``."""
        return self.to_spec().model_dump(exclude_none=True)
