"""Tools a persona can offer the model.

- :func:`tool` / :class:`FunctionTool`: a Python function, its schema taken from its signature.
- :class:`WebSearch`: the persona's web-search settings; the built-in tool is data (``to_wire()``)
  that Z.AI executes server-side.
- :func:`make_search_tool`: the client-side ``search_web`` tool (``WEB_SEARCH_MODE=client``).
- :data:`EXAMPLE_TOOLS`: ``current_time``, ``calculate`` and ``convert_units``.
"""

from typing import TYPE_CHECKING, Any

from generic_framework.tools.base import FunctionTool, ToolOutcome, tool
from generic_framework.tools.search import SEARCH_TOOL_NAME, SearchHits, make_search_tool
from generic_framework.tools.web_search import WebSearch, WebSearchMode

if TYPE_CHECKING:
    from generic_framework.tools.examples import (
        EXAMPLE_TOOLS,
        calculate,
        convert_units,
        current_time,
    )

_EXAMPLES = frozenset({"EXAMPLE_TOOLS", "calculate", "convert_units", "current_time"})


def __getattr__(name: str) -> Any:
    # The example tools build their argument models when imported (about 8 ms): only for
    # the processes that use them, not for everyone who imports ``tool`` (docs/design/0704).
    if name in _EXAMPLES:
        from generic_framework.tools import examples

        return getattr(examples, name)
    raise AttributeError(f"module 'generic_framework.tools' has no attribute {name!r}")


__all__ = [
    "EXAMPLE_TOOLS",
    "SEARCH_TOOL_NAME",
    "FunctionTool",
    "SearchHits",
    "ToolOutcome",
    "WebSearch",
    "WebSearchMode",
    "calculate",
    "convert_units",
    "current_time",
    "make_search_tool",
    "tool",
]
