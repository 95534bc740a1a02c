"""MCPSessions: every MCP session of one runtime, opened on first use and closed together.

The :class:`~generic_framework.runtime.Runtime` (through
:class:`~generic_framework.core.resources.Resources`) owns one :class:`MCPSessions`. It keeps
one :class:`~generic_framework.mcp_tools.connection.MCPConnection` per distinct server spec
(personas that declare the same server share its session), hands personas their MCP tools under
collision-free names (:meth:`toolset`), runs ``search_web`` in ``mcp`` mode
(:meth:`web_search`), and closes everything in :meth:`aclose`, which is what stops stdio
children: none outlives the runtime.

Discovery is lazy: a server is started, and its tools listed, the first time a turn of a persona
that declares it offers tools (or when :meth:`discover` warms them up, as the service does at
start-up). A server that has never started is left out of the turn with a warning (its tools are
unknown) and tried again on a later turn. A server that ran before and cannot be restarted keeps
its last known tools, so the model that calls one reads why the server is down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from generic_framework.config import Settings
from generic_framework.errors import ConfigError
from generic_framework.mcp_tools.connection import Listing, MCPConnection, MCPFailure
from generic_framework.mcp_tools.naming import offered_name
from generic_framework.mcp_tools.spec import MCPServerSpec, missing_variables
from generic_framework.mcp_tools.tools import MCPTool
from generic_framework.mcp_tools.web_reader import READER_SERVER_NAME, WebReaderMCP
from generic_framework.mcp_tools.web_search import SEARCH_SERVER_NAME, WebSearchMCP
from generic_framework.redaction import register_secret
from generic_framework.tools.reader import PageRead

if TYPE_CHECKING:
    from generic_framework.tools.search import SearchHits

__all__ = ["MCPSessions"]

logger = logging.getLogger("generic_framework.mcp")

_TOOLSETS_KEPT = 256
Toolset = tuple[MCPTool, ...]


class MCPSessions:
    """The MCP sessions of one runtime.

    Args:
        settings: ``TOOL_TIMEOUT`` (each server's default timeout), the API key and
            ``WEB_SEARCH_MCP_URL`` (the search server of ``mcp`` mode).
        environ: where ``${VAR}`` in persona files is looked up; the caller that read the
            environment passes it (empty: no variable is set).
    """

    def __init__(self, settings: Settings, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.environ: Mapping[str, str] = dict(environ or {})
        self._connections: dict[str, MCPConnection] = {}
        self._toolsets: dict[tuple[object, ...], Toolset] = {}
        self._warned: set[tuple[str, int]] = set()
        self._search: WebSearchMCP | None = None
        self._reader: WebReaderMCP | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"MCPSessions(connections={len(self._connections)})"

    @property
    def connections(self) -> list[MCPConnection]:
        """The connections made so far (started or not)."""
        return list(self._connections.values())

    def check(self, servers: Sequence[MCPServerSpec], *, source: str) -> None:
        """Fail now if a server refers to a ``${VAR}`` that is not set.

        Raises:
            ConfigError: naming the persona, the server, the field and the variable.
        """
        for index, server in enumerate(servers):
            missing = missing_variables(server, self.environ)
            if missing:
                raise ConfigError(f"{source}: mcp_servers[{index}] ({server.name}): {missing}")

    def connection(self, server: MCPServerSpec) -> MCPConnection:
        """The connection for ``server`` (its ``${VAR}`` expanded), made on first request.

        Raises:
            ConfigError: the runtime is closed, or a variable is not set.
        """
        if self._closed:
            raise ConfigError(f"{self!r} is closed")
        expanded = server.expand(self.environ)
        key = expanded.key
        found = self._connections.get(key)
        if found is None:
            # Header values hold tokens (often from ${VAR}): keep them out of every log line.
            for value in expanded.headers.values():
                register_secret(value)
                register_secret(value.partition(" ")[2])
            found = MCPConnection(expanded, timeout=self.settings.tool_timeout)
            self._connections[key] = found
        return found

    async def toolset(
        self, servers: Sequence[MCPServerSpec], *, reserved: Iterable[str], persona: str
    ) -> Toolset:
        """The tools of ``servers`` to offer a persona, named so none clashes with ``reserved``.

        Servers are started (concurrently) when needed; one that cannot be started is left
        out with a warning. The same servers, names and sessions give the same tuple of
        :class:`MCPTool` objects, so a persona's tool plans can be cached by identity.
        """
        taken = frozenset(reserved)
        connections = [self.connection(server) for server in servers]
        listings = await asyncio.gather(*(self._listing(c, persona) for c in connections))
        generations = tuple(0 if listing is None else listing.generation for listing in listings)
        key = (tuple(c.server.key for c in connections), taken, generations)
        cached = self._toolsets.get(key)
        if cached is not None:
            return cached
        tools: list[MCPTool] = []
        names = set(taken)
        for connection, listing in zip(connections, listings, strict=True):
            if listing is not None:
                for tool in self._allowed(connection, listing, persona):
                    name = offered_name(connection.name, tool.name, names)
                    names.add(name)
                    tools.append(MCPTool(connection, tool, name))
        if len(self._toolsets) >= _TOOLSETS_KEPT:
            self._toolsets.clear()
        self._toolsets[key] = toolset = tuple(tools)
        return toolset

    async def discover(self, servers: Sequence[MCPServerSpec], *, persona: str) -> int:
        """Start ``servers`` now and list their tools (a warm-up); failures are only logged.

        Returns:
            How many of them are running.
        """
        listings = await asyncio.gather(
            *(self._listing(self.connection(server), persona) for server in servers)
        )
        return sum(listing is not None for listing in listings)

    async def web_search(
        self,
        query: str,
        *,
        count: int | None = None,
        recency: str | None = None,
        domain_filter: str | None = None,
        content_size: str | None = None,
    ) -> SearchHits:
        """``search_web`` through the Web Search MCP server (``WEB_SEARCH_MODE=mcp``).

        The server is ``settings.search_mcp_url`` with the API key as Bearer token.

        Raises:
            MCPFailure: the search failed; its text is what the model reads.
        """
        if self._search is None:
            headers = {}
            if self.settings.api_key is not None:
                headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
            server = MCPServerSpec(
                name=SEARCH_SERVER_NAME, url=self.settings.search_mcp_url, headers=headers
            )
            self._search = WebSearchMCP(self.connection(server))
        return await self._search.search(
            query,
            count=count,
            recency=recency,
            domain_filter=domain_filter,
            content_size=content_size,
        )

    async def read_url(self, url: str) -> PageRead:
        """``read_url`` through the Web Reader MCP server (``WEB_SEARCH_MODE=mcp``).

        The server is ``settings.reader_mcp_url`` with the API key as Bearer token.

        Raises:
            MCPFailure: the read failed; its text is what the model reads.
        """
        if self._reader is None:
            server = MCPServerSpec(
                name=READER_SERVER_NAME, url=self.settings.reader_mcp_url, headers=self._bearer()
            )
            self._reader = WebReaderMCP(self.connection(server))
        return await self._reader.read(url)

    def _bearer(self) -> dict[str, str]:
        if self.settings.api_key is None:
            return {}
        return {"Authorization": f"Bearer {self.settings.api_key.get_secret_value()}"}

    async def aclose(self) -> None:
        """Close every session (stopping stdio children), once; later use is an error."""
        if self._closed:
            return
        self._closed = True
        connections, self._connections = list(self._connections.values()), {}
        self._toolsets.clear()
        await asyncio.gather(*(connection.aclose() for connection in connections))

    async def _listing(self, connection: MCPConnection, persona: str) -> Listing | None:
        try:
            return await connection.listing()
        except MCPFailure as failure:
            known = connection.known
            if known is None:
                logger.warning(
                    "%s: MCP server %r left out of this turn: %s", persona, connection.name, failure
                )
            else:
                logger.warning(
                    "%s: MCP server %r is down; its last known tools are offered and answer "
                    "why: %s",
                    persona,
                    connection.name,
                    failure,
                )
            return known

    def _allowed(self, connection: MCPConnection, listing: Listing, persona: str) -> list[Any]:
        wanted = connection.server.tools
        if wanted is None:
            return list(listing.tools)
        offered = {tool.name for tool in listing.tools}
        absent = [name for name in wanted if name not in offered]
        note = (connection.server.key, listing.generation)
        if absent and note not in self._warned:
            self._warned.add(note)
            logger.warning(
                "%s: MCP server %r has no tool named %s (it lists: %s)",
                persona,
                connection.name,
                ", ".join(repr(name) for name in absent),
                ", ".join(sorted(offered)) or "none",
            )
        return [tool for tool in listing.tools if tool.name in wanted]
