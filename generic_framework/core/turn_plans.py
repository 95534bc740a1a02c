"""The ``//`` switch and the tool plan of each persona turn.

What a turn offers the model is decided before the conversation is held, from the message and
the caller's options alone: ``//`` after leading whitespace makes a web turn (the prefix is
stripped; the web plan, with ``read_url`` when the question holds a URL and the mode has a
reader), the caller's own tools replace the persona's, the persona's MCP servers add their
tools when the turn offers tools at all, and the turn service's tools for the turn's user
(``TurnOptions.tools``: a persona's memory) are offered on every turn with tool rounds.
:class:`TurnPlans` holds a persona's plans, built once, and the MCP-merged ones it has made;
:class:`~generic_framework.core.persona.Persona` asks it for each turn's plan. It is apart
from the persona because none of it touches the conversation, the lock or the loop: it reads
the spec, the runtime's search sources and the MCP sessions only.
:func:`as_stored` applies the same ``//`` rule to a caller's history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from generic_framework.core.options import TurnOptions
from generic_framework.core.resources import Resources
from generic_framework.core.spec import ResolvedSpec
from generic_framework.core.tooling import ToolPlan, build_plans, reserved_names, with_tools
from generic_framework.errors import ConfigError
from generic_framework.tools.base import FunctionTool, Tool
from generic_framework.tools.reader import ReadFunction, has_url, make_reader_tool
from generic_framework.tools.search import SearchFunction
from generic_framework.tools.web_search import WebSearch
from generic_framework.wire.messages import AssistantMessage, Message, ToolSpec, UserMessage

__all__ = ["ASK_FOR_MESSAGE", "ASK_FOR_QUESTION", "WEB_PREFIX", "TurnPlans", "as_stored"]

WEB_PREFIX = "//"
"""A message starting with this (after leading whitespace) is a web query."""

ASK_FOR_QUESTION = "Please write a question after //, for example: // weather in Nanaimo today"
ASK_FOR_MESSAGE = "Please write a message."

_MCP_PLANS_KEPT = 64
"""MCP-merged plans kept per persona before the cache starts over."""


def as_stored(messages: Sequence[Message]) -> tuple[Message, ...]:
    """A caller's earlier messages as a stored history holds them: a ``//`` question is
    stored as the question alone (the prefix is the user's switch, not part of the question),
    and a bare ``//`` was never stored, nor the request for a question that answered it."""
    kept: list[Message] = []
    skip_answer = False
    for message in messages:
        if skip_answer and isinstance(message, AssistantMessage):
            skip_answer = False
            continue
        skip_answer = False
        content = message.content if isinstance(message, UserMessage) else None
        if isinstance(content, str) and content.lstrip().startswith(WEB_PREFIX):
            question = content.lstrip()[len(WEB_PREFIX) :].strip()
            if not question:
                skip_answer = True
                continue
            kept.append(UserMessage(content=question))
        else:
            kept.append(message)
    return tuple(kept)


class TurnPlans:
    """A persona's tool plans: plain, web, web with the reader, and the MCP-merged ones.

    Args:
        spec: the persona, resolved (its web-search mode is never ``auto``).
        tools: the persona's function tools.
        runtime: where ``search_web`` and ``read_url`` go, and the MCP servers' sessions.
    """

    def __init__(
        self, spec: ResolvedSpec, tools: tuple[FunctionTool, ...], runtime: Resources
    ) -> None:
        self.spec = spec
        self.runtime = runtime
        taken: frozenset[str] = frozenset()
        if spec.memory.enabled:  # the memory's tools (and its store's module) for such a persona
            from generic_framework.memory.tools import MEMORY_TOOL_NAMES

            taken = MEMORY_TOOL_NAMES & {t.name for t in tools}
        if taken:
            raise ConfigError(
                f"persona {spec.name!r}: a persona with [memory] offers its own "
                f"{', '.join(sorted(taken))} tool; rename the function tool"
            )
        search = spec.web_search
        self.plain, self.web = build_plans(
            spec.name, tools, search, self._search_source(search), tools_always=spec.tools_always
        )
        # ``read_url`` joins the web plan on // messages holding a URL (client and mcp modes).
        self.read: ToolPlan | None = None
        if search.mode in ("client", "mcp"):
            self.read = with_tools(self.web, [make_reader_tool(self._read_source(search))])
        # Keyed on the tool objects themselves (held by the key, so never reused for others).
        self._mcp: dict[tuple[bool, bool, tuple[Tool, ...]], ToolPlan] = {}

    def _search_source(self, search: WebSearch) -> Callable[[], SearchFunction]:
        """Where ``search_web`` searches: the Web Search API, or the Web Search MCP server."""
        if search.mode == "mcp":
            return lambda: self.runtime.mcp.web_search
        return lambda: self.runtime.client.web_search

    def _read_source(self, search: WebSearch) -> Callable[[], ReadFunction]:
        """Where ``read_url`` reads: the Web Reader API, or the Web Reader MCP server."""
        if search.mode == "mcp":
            return lambda: self.runtime.mcp.read_url
        return lambda: self.runtime.client.read_url

    def parse(self, text: str) -> tuple[str, ToolPlan]:
        """``//`` after leading whitespace marks a web query: strip it, use the web plan (with
        ``read_url`` when the query holds a URL and the mode offers the reader)."""
        stripped = text.lstrip()
        if stripped.startswith(WEB_PREFIX):
            query = stripped[len(WEB_PREFIX) :].strip()
            if self.read is not None and has_url(query):
                return query, self.read
            return query, self.web
        return text.strip(), self.plain

    async def for_turn(self, plan: ToolPlan, options: TurnOptions) -> ToolPlan:
        """The plan of the turn: the caller's tools, or the persona's with its MCP tools."""
        web = plan is not self.plain
        if options.client_tools:
            return self._client_plan(options, web=web)
        plan = await self._with_mcp_tools(plan, web=web)
        if options.tools and self.spec.max_tool_rounds > 0:
            # The turn service's tools for this turn's user (a persona's memory).
            plan = with_tools(plan, options.tools)
        return plan

    def _client_plan(self, options: TurnOptions, *, web: bool) -> ToolPlan:
        """The plan of a turn with the caller's tools: those, beside the built-in web search
        of a ``//`` turn; none of the persona's own functions (the caller runs every call)."""
        specs: list[ToolSpec] = list(options.client_tools)
        builtin = web and self.spec.web_search.mode == "builtin"
        if builtin:
            specs.insert(0, self.spec.web_search.to_spec())
        return ToolPlan(specs, {}, builtin_search=builtin)

    async def _with_mcp_tools(self, plan: ToolPlan, *, web: bool) -> ToolPlan:
        """The turn's plan with the MCP servers' tools, when the turn offers tools at all.

        ``//`` turns offer them, and plain turns of a ``tools_always`` persona (never with
        ``max_tool_rounds = 0``: no server is started for tools that are not offered). The plan
        is cached per kind of turn and tuple of tool objects (the runtime hands out the same
        tuple while the sessions and their tool lists last).
        """
        spec = self.spec
        offers = web or spec.tools_always
        if not spec.mcp_servers or not offers or spec.max_tool_rounds == 0:
            return plan
        tools = await self.runtime.mcp.toolset(
            spec.mcp_servers, reserved=reserved_names(plan), persona=spec.name
        )
        key = (web, plan is self.read, tuple(tools))
        merged = self._mcp.get(key)
        if merged is None:
            if len(self._mcp) >= _MCP_PLANS_KEPT:
                self._mcp.clear()
            merged = self._mcp[key] = with_tools(plan, tools)
        return merged
