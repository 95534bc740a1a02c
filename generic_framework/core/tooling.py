"""Tool plans and tool execution for the persona's loop.

A :class:`ToolPlan` is what one kind of turn offers the model (plain message or ``//`` web
query): the wire specs, built once per persona, and the tools by name (``@tool`` functions, the
``search_web`` tool, and, added per turn by :func:`with_tools`, the tools of the persona's MCP
servers). :func:`execute` runs one round's calls concurrently and reports each as it finishes;
:func:`tool_result` turns the outcomes into the round's results in call order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from urllib.parse import urlsplit

from pydantic_core import to_json

from generic_framework.core.account import SearchRoute
from generic_framework.core.citations import CitationBook
from generic_framework.core.reply import ToolResult
from generic_framework.errors import ConfigError
from generic_framework.redaction import redact
from generic_framework.tools.base import FunctionTool, Tool, ToolOutcome
from generic_framework.tools.reader import PAGE_CHARS, READ_TOOL_NAME, PageRead
from generic_framework.tools.search import (
    SEARCH_TOOL_NAME,
    SearchFunction,
    SearchHits,
    compact_results,
    make_search_tool,
)
from generic_framework.tools.web_search import WebSearch
from generic_framework.wire.messages import ToolCall, ToolSpec, WebSearchResult

__all__ = [
    "BUILTIN_SEARCH_CONFIRMATION",
    "NO_TOOLS",
    "CallOutcome",
    "ToolPlan",
    "build_plans",
    "call_name",
    "execute",
    "nothing_found",
    "page_content",
    "reserved_names",
    "tool_result",
    "with_tools",
]

logger = logging.getLogger("generic_framework.persona")

PLAIN_RESULTS_CHARS = 8000
"""The most of a search answered in plain text (no result list) that the model reads."""

BUILTIN_SEARCH_CONFIRMATION = ""
"""The tool message answering a built-in ``web_search`` call: Z.AI runs the search itself and
the call only needs acknowledging (DESIGN §1). docs/design/0302 explains why it is empty."""


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """What one kind of turn offers: the wire specs (built once) and the tools by name.

    ``builtin_search``: the built-in ``web_search`` tool is offered. ``search_mode``: the mode
    (``client`` or ``mcp``) of the ``search_web`` tool among the functions, if there is one.
    """

    specs: list[ToolSpec] | None
    functions: Mapping[str, Tool]
    builtin_search: bool = False
    search_mode: SearchRoute | None = None


def with_tools(plan: ToolPlan, tools: Sequence[Tool]) -> ToolPlan:
    """``plan`` with ``tools`` (an MCP server's, named apart from the plan's own) offered too."""
    if not tools:
        return plan
    specs: list[ToolSpec] = [*(plan.specs or ()), *(tool.spec for tool in tools)]
    functions = {**plan.functions, **{tool.name: tool for tool in tools}}
    return ToolPlan(
        specs, functions, builtin_search=plan.builtin_search, search_mode=plan.search_mode
    )


def reserved_names(plan: ToolPlan) -> frozenset[str]:
    """Names MCP tools must not take in ``plan``: its tools, and both search tools' names."""
    return frozenset({*plan.functions, SEARCH_TOOL_NAME, READ_TOOL_NAME, "web_search"})


NO_TOOLS = ToolPlan(None, {})


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """One finished call: the tool's name, what it produced and how long it took."""

    name: str
    result: ToolOutcome
    ms: float

    @property
    def ok(self) -> bool:
        """False when the model is sent an error text instead of a result."""
        return self.result.ok


def call_name(call: ToolCall) -> str:
    """The called tool's name (a built-in call may carry only its type)."""
    return call.function.name or call.type


def build_plans(
    persona: str,
    tools: Iterable[FunctionTool],
    search: WebSearch,
    search_function: Callable[[], SearchFunction],
    *,
    tools_always: bool,
) -> tuple[ToolPlan, ToolPlan]:
    """Build the plans for plain messages and for ``//`` messages.

    ``search_function`` returns the search ``search_web`` calls in the ``client`` and ``mcp``
    modes (the Web Search API, or the Web Search MCP server).

    Raises:
        ConfigError: a tool is not a :class:`FunctionTool`, two share a name, or one takes
            the name of the search tool of the persona's mode.
    """
    functions = _by_name(persona, tools)
    specs: list[ToolSpec] = [function.spec for function in functions.values()]
    plain = ToolPlan(specs, functions) if tools_always and specs else NO_TOOLS
    if search.mode == "builtin":
        if "web_search" in functions:
            raise ConfigError(
                f"persona {persona!r}: a function named 'web_search' clashes with the built-in "
                "web_search tool (docs/protocol.md §5); rename it"
            )
        return plain, ToolPlan([search.to_spec(), *specs], functions, builtin_search=True)
    if search.mode in ("client", "mcp"):
        for reserved in (SEARCH_TOOL_NAME, READ_TOOL_NAME):
            if reserved in functions:
                raise ConfigError(f"persona {persona!r}: the name {reserved!r} is reserved")
        search_tool = make_search_tool(search_function, search)
        return plain, ToolPlan(
            [*specs, search_tool.spec],
            {**functions, SEARCH_TOOL_NAME: search_tool},
            search_mode=search.mode,
        )
    return plain, ToolPlan(specs or None, functions)


def _by_name(persona: str, tools: Iterable[FunctionTool]) -> dict[str, FunctionTool]:
    functions: dict[str, FunctionTool] = {}
    for function in tools:
        if not isinstance(function, FunctionTool):
            raise ConfigError(f"persona {persona!r}: {function!r} is not a @tool function")
        if function.name in functions:
            raise ConfigError(f"persona {persona!r}: two tools are named {function.name!r}")
        functions[function.name] = function
    return functions


async def execute(
    calls: Sequence[ToolCall], plan: ToolPlan, *, time_limit: float, persona: str
) -> AsyncGenerator[tuple[int, CallOutcome], None]:
    """Run the calls concurrently; yield ``(call index, outcome)`` as each finishes.

    A framework bug raised by one call cancels the others and propagates.
    """
    if len(calls) == 1:
        yield 0, await run_call(calls[0], plan, time_limit=time_limit, persona=persona)
        return
    tasks = [
        asyncio.ensure_future(run_call(call, plan, time_limit=time_limit, persona=persona))
        for call in calls
    ]
    position: dict[asyncio.Future[CallOutcome], int] = {t: i for i, t in enumerate(tasks)}
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=position.__getitem__):
                yield position[task], task.result()
    finally:
        # Closed early (a stream abandoned, a sibling's framework bug): stop the other calls
        # and wait for them, so no tool keeps running for a turn that is over.
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


async def run_call(
    call: ToolCall, plan: ToolPlan, *, time_limit: float, persona: str
) -> CallOutcome:
    """One call: the built-in search confirmation, an unknown tool, or a function run."""
    started = perf_counter()
    name = call_name(call)
    if plan.builtin_search and (
        call.type == "web_search" or (name == "web_search" and name not in plan.functions)
    ):
        return CallOutcome(name, ToolOutcome(ok=True, content=BUILTIN_SEARCH_CONFIRMATION), 0.0)
    function = plan.functions.get(name)
    if function is None:
        known = ", ".join(plan.functions) or "none"
        text = f"Error: there is no tool named {name!r}. Available tools: {known}."
        outcome = ToolOutcome(ok=False, content=text, error=text)
    else:
        outcome = await function.run(call.function.arguments, time_limit=time_limit)
    ms = (perf_counter() - started) * 1000.0
    if not outcome.ok:
        logger.warning("%s: tool %s failed: %s", persona, name, outcome.error)
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: tool %s -> %s", persona, name, redact(outcome.content, 500))
    return CallOutcome(name, outcome, ms)


def nothing_found(query: str) -> str:
    """What the model reads when a search found nothing: plainly that, and what to do."""
    return (
        f"The web search found nothing for {query!r}. Say plainly that nothing was found, "
        "or search again with other words; do not answer as if it had found something."
    )


def page_content(page: PageRead, citations: CitationBook) -> str:
    """A page read by ``read_url``, numbered as a citation (its title and link); the model
    gets its label, title, address and text."""
    site = urlsplit(page.url).hostname or ""
    item = WebSearchResult(
        title=page.title or page.url, link=page.url, content=page.content[:600], media=site
    )
    ((label, _),) = citations.add_client_results([item])
    text = page.content[:PAGE_CHARS] if page.content.strip() else "(the page has no text)"
    entry = {"ref": label, "title": page.title, "url": page.url, "content": text}
    return to_json(entry).decode()


def tool_result(call: ToolCall, done: CallOutcome, citations: CitationBook) -> ToolResult:
    """The call's result; client-side search hits and read pages are numbered here, so in
    call order."""
    outcome, content = done.result, done.result.content
    if outcome.ok and isinstance(outcome.value, SearchHits):
        hits = outcome.value
        labelled = citations.add_client_results(hits.results)
        if labelled:
            content = to_json(compact_results(labelled)).decode()
        elif hits.text:
            content = hits.text[:PLAIN_RESULTS_CHARS]
        else:
            content = nothing_found(hits.query)
    elif outcome.ok and isinstance(outcome.value, PageRead):
        content = page_content(outcome.value, citations)
    return ToolResult(
        call_id=call.id,
        name=done.name,
        ok=outcome.ok,
        content=content,
        error=outcome.error,
        duration_ms=done.ms,
    )
