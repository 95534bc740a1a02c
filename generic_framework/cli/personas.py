"""The ``personas`` command: one ``name<TAB>description<TAB>tools`` line per persona file.

The third column says how the persona's ``//`` messages search (``auto`` resolved for the
configured endpoint) and which MCP servers it uses; stderr says once how ``WEB_SEARCH_MODE``
resolves.
"""

from __future__ import annotations

from pathlib import Path

from generic_framework.cli.common import EXIT_OK, err, open_runtime, run_command
from generic_framework.config import Settings
from generic_framework.core.spec import PersonaSpec

__all__ = ["list_personas"]


def _tools_column(spec: PersonaSpec, settings: Settings) -> str:
    text = f"web search: {settings.run_mode(spec.web_search.mode)}"
    if spec.mcp_servers:
        text += "; MCP servers: " + ", ".join(server.name for server in spec.mcp_servers)
    return text


def list_personas(directory: Path | None) -> int:
    """The ``personas`` command; returns the exit code (2 when there are none, as ``chat``)."""

    def show(settings: Settings) -> int:
        # Reading the specs opens nothing (no client, no store, no MCP server): nothing to close.
        specs = open_runtime(settings).specs(required=True)
        err(settings.describe_search())
        for name, spec in sorted(specs.items()):
            print(f"{name}\t{spec.description}\t{_tools_column(spec, settings)}")
        return EXIT_OK

    return run_command(show, personas_dir=directory)
