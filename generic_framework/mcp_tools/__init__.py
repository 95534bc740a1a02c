"""MCP servers as tools of a persona, and Z.AI's Web Search MCP server for ``//`` messages.

- :class:`MCPServerSpec`: a server as a persona file declares it (stdio or streamable HTTP).
- :class:`MCPSessions`: the runtime's sessions; tools under collision-free names; the search.
- :class:`MCPConnection`: one server's session, restarted after a loss; :class:`MCPFailure`.
- :class:`MCPTool`: one server tool, offered and run like a ``@tool`` function.
- :class:`WebSearchMCP`: ``search_web`` through the Web Search MCP server (``mcp`` mode).

The official ``mcp`` SDK is imported only when a server is first started (:mod:`.sdk`); the
rest is loaded with the Persona, which needs :mod:`.sessions` (docs/design/0704).
"""

from __future__ import annotations

from generic_framework.mcp_tools.connection import MCPConnection, MCPFailure
from generic_framework.mcp_tools.naming import offered_name
from generic_framework.mcp_tools.sessions import MCPSessions
from generic_framework.mcp_tools.spec import MCPServerSpec
from generic_framework.mcp_tools.tools import MCPTool
from generic_framework.mcp_tools.web_search import WebSearchMCP

__all__ = [
    "MCPConnection",
    "MCPFailure",
    "MCPServerSpec",
    "MCPSessions",
    "MCPTool",
    "WebSearchMCP",
    "offered_name",
]
