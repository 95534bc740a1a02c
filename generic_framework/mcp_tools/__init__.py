"""MCP servers as tools of a persona, and Z.AI's Web Search MCP server for ``//`` messages.

- :class:`MCPServerSpec`: a server as a persona file declares it (stdio or streamable HTTP).
- :class:`MCPSessions`: the runtime's sessions; tools under collision-free names; the search.
- :class:`MCPConnection`: one server's session, restarted after a loss; :class:`MCPFailure`.
- :class:`MCPTool`: one server tool, offered and run like a ``@tool`` function.
- :class:`WebSearchMCP`: ``search_web`` through the Web Search MCP server (``mcp`` mode).

The official ``mcp`` SDK is imported only when a server is first started (:mod:`.sdk`); the
package's names are loaded on first use (PEP 562), so that a persona file's
:class:`MCPServerSpec` (:mod:`.spec`, which every persona's spec imports) loads no connection
code: the sessions are built when a persona with MCP servers, or ``mcp`` search mode, first
needs them (docs/design/0704).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from generic_framework.exports import on_first_use

_EXPORTS: dict[str, str] = {
    "MCPConnection": "generic_framework.mcp_tools.connection",
    "MCPFailure": "generic_framework.mcp_tools.connection",
    "MCPServerSpec": "generic_framework.mcp_tools.spec",
    "MCPSessions": "generic_framework.mcp_tools.sessions",
    "MCPTool": "generic_framework.mcp_tools.tools",
    "WebSearchMCP": "generic_framework.mcp_tools.web_search",
    "offered_name": "generic_framework.mcp_tools.naming",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from generic_framework.mcp_tools.connection import MCPConnection as MCPConnection
    from generic_framework.mcp_tools.connection import MCPFailure as MCPFailure
    from generic_framework.mcp_tools.naming import offered_name as offered_name
    from generic_framework.mcp_tools.sessions import MCPSessions as MCPSessions
    from generic_framework.mcp_tools.spec import MCPServerSpec as MCPServerSpec
    from generic_framework.mcp_tools.tools import MCPTool as MCPTool
    from generic_framework.mcp_tools.web_search import WebSearchMCP as WebSearchMCP


__getattr__ = on_first_use(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
