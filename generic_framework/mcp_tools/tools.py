"""An MCP server's tool offered to the model beside the ``@tool`` functions.

:class:`MCPTool` has the same face as :class:`~generic_framework.tools.base.FunctionTool` (a
name, a wire spec, ``run()``), so the loop offers, runs and answers it the same way: concurrently
with the round's other calls, its result (or the error text) as the call's tool message.
Arguments are checked for being a JSON object here; the server validates them against its own
schema and its error answer goes back to the model.
"""

from __future__ import annotations

import json
from typing import Any

from generic_framework.mcp_tools.connection import MCPConnection, MCPFailure
from generic_framework.mcp_tools.results import render_result
from generic_framework.redaction import redact
from generic_framework.tools.base import ToolOutcome
from generic_framework.wire.messages import FunctionDefinition, FunctionToolSpec

__all__ = ["MCPTool", "tool_parameters"]

_ERROR_LIMIT = 4000


def tool_parameters(schema: Any) -> dict[str, Any]:
    """The tool's input schema as Z.AI wants ``parameters``: an object schema with properties."""
    parameters = dict(schema) if isinstance(schema, dict) else {}
    parameters.pop("$schema", None)
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return parameters


def _error(text: str) -> ToolOutcome:
    text = redact(text, _ERROR_LIMIT)
    return ToolOutcome(ok=False, content=text, error=text)


class MCPTool:
    """One tool of an MCP server, under the name the model calls it by.

    Args:
        connection: the server's session.
        tool: the tool as the server listed it (``name``, ``description``, ``input_schema``).
        name: the offered name (:func:`~generic_framework.mcp_tools.naming.offered_name`).

    Attributes:
        name: the offered name.
        remote: the tool's name on the server.
        spec: the wire form, built once.
    """

    __slots__ = ("connection", "name", "remote", "spec")

    def __init__(self, connection: MCPConnection, tool: Any, name: str) -> None:
        self.connection = connection
        self.name = name
        self.remote: str = tool.name
        description = (tool.description or getattr(tool, "title", None) or "").strip()
        if not description:
            description = f"The {tool.name!r} tool of the MCP server {connection.name!r}."
        self.spec = FunctionToolSpec(
            function=FunctionDefinition(
                name=name, description=description, parameters=tool_parameters(tool.input_schema)
            )
        )

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.connection.name!r})"

    async def run(self, arguments: str, *, time_limit: float) -> ToolOutcome:
        """Call the tool with the model's JSON ``arguments``; failures become error texts.

        The server's own timeout (``timeout`` in the persona file, else ``TOOL_TIMEOUT``)
        bounds the call; ``time_limit`` is the loop's ``TOOL_TIMEOUT`` and is used when the
        connection has none.
        """
        try:
            parsed = json.loads(arguments.strip() or "{}")
        except ValueError:
            return _error(
                f"Error: the arguments for {self.name!r} are not valid JSON. Send a JSON object."
            )
        if not isinstance(parsed, dict):
            return _error(f"Error: the arguments for {self.name!r} must be a JSON object.")
        try:
            result = await self.connection.call(
                self.remote, parsed, seconds=self.connection.timeout or time_limit
            )
        except MCPFailure as failure:
            return _error(f"Error: tool {self.name!r} failed: {failure}")
        text = render_result(result.content, getattr(result, "structured_content", None))
        if result.is_error:
            return _error(f"Error: tool {self.name!r} reported an error: {text}")
        return ToolOutcome(ok=True, content=text, value=result)
