"""MCP servers as tools of a persona, and Z.AI's Web Search MCP server for ``//`` messages.

- :class:`MCPServerSpec`: a server as a persona file declares it (stdio or streamable HTTP).
- :class:`MCPSessions`: the runtime's sessions; tools under collision-free names; the search.
- :class:`MCPConnection`: one server's session, restarted after a loss; :class:`MCPFailure`.
- :class:`MCPTool`: one server tool, offered and run like a ``@tool`` function.
- :class:`WebSearchMCP`: ``search_web`` through the Web Search MCP server (``mcp`` mode).

The names are loaded on first use (PEP 562): the Persona imports only :mod:`.spec` and
:mod:`.sessions`, and the connection code is imported when a runtime first connects to a
server (docs/design/0704). The official ``mcp`` SDK is imported only when a server is first
started (:mod:`.sdk`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from generic_framework.mcp_tools.connection import MCPConnection, MCPFailure
    from generic_framework.mcp_tools.naming import offered_name
    from generic_framework.mcp_tools.sessions import MCPSessions
    from generic_framework.mcp_tools.spec import MCPServerSpec
    from generic_framework.mcp_tools.tools import MCPTool
    from generic_framework.mcp_tools.web_search import WebSearchMCP

_EXPORTS: dict[str, str] = {
    "MCPConnection": "generic_framework.mcp_tools.connection",
    "MCPFailure": "generic_framework.mcp_tools.connection",
    "MCPServerSpec": "generic_framework.mcp_tools.spec",
    "MCPSessions": "generic_framework.mcp_tools.sessions",
    "MCPTool": "generic_framework.mcp_tools.tools",
    "WebSearchMCP": "generic_framework.mcp_tools.web_search",
    "offered_name": "generic_framework.mcp_tools.naming",
}

__all__ = [
    "MCPConnection",
    "MCPFailure",
    "MCPServerSpec",
    "MCPSessions",
    "MCPTool",
    "WebSearchMCP",
    "offered_name",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'generic_framework.mcp_tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
