"""MCP servers as a persona file declares them, and the ``${VAR}`` expansion of their values.

A persona file lists its servers as an array of tables::

    [[mcp_servers]]
    name = "notes"                          # the prefix of its tools' names (notes__add_note)
    command = "python"                      # stdio: a child process speaking MCP on stdin/stdout
    args = ["tests/mcp_servers/notes_server.py"]
    env = { NOTES_DIR = "${HOME}/notes" }   # added to a minimal inherited environment
    tools = ["add_note", "list_notes"]      # optional allowlist (the server's own names)
    timeout = 20                            # seconds per call (start: 30 at least); TOOL_TIMEOUT

    [[mcp_servers]]
    name = "docs"
    url = "https://mcp.example.com/mcp"     # streamable HTTP
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

A spec is data: ``${VAR}`` stays in it as written. :meth:`MCPServerSpec.expand` replaces the
references with values from an environment mapping handed over by whoever read the environment
(``Runtime.from_env()``, the CLI, the service), so keys stay out of files and out of the library's
own reading of ``os.environ``. ``${VAR}`` is expanded in ``args``, ``env``, ``cwd``, ``url`` and
``headers``; there is no default syntax, and a variable that is not set is an error naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from generic_framework.errors import ConfigError

__all__ = ["SERVER_NAME_PATTERN", "MCPServerSpec", "missing_variables"]

SERVER_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}(?<!_)$"
"""1-32 letters, digits, ``-`` or single ``_`` (never ``__``, never a trailing ``_``): the
``__`` that joins a server's name to its tools' names then marks where the server name ends."""

_NAME = re.compile(SERVER_NAME_PATTERN)
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MCPServerSpec(BaseModel):
    """One MCP server a persona uses: stdio (``command``) or streamable HTTP (``url``).

    Attributes:
        name: identifies the server in the persona and prefixes its tools' names.
        command: the program of a stdio server. ``python`` and ``python3`` mean the interpreter
            running generic_framework, so a server written in Python sees the same packages.
        args: its arguments.
        env: variables added to the child's environment, which otherwise holds only ``HOME``,
            ``PATH``, ``SHELL``, ``TERM``, ``USER`` and ``LOGNAME`` (the API key is never passed).
        cwd: the child's working directory (default: the current one).
        url: the endpoint of a streamable-HTTP server.
        headers: HTTP headers sent with every request to ``url``.
        tools: the server's tool names to offer (all when omitted).
        timeout: seconds for each call (``TOOL_TIMEOUT`` when omitted); starting the server may
            take as long, and at least 30 seconds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = Field(default=None, min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    timeout: float | None = Field(default=None, gt=0, le=3600)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r} is invalid: use 1-32 letters, digits, '-' or single '_' "
                "(no '__', no trailing '_')"
            )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (streamable HTTP)")
        if self.url is not None:
            if self.args or self.env or self.cwd is not None:
                raise ValueError("args, env and cwd are for stdio servers (command), not url")
            if not self.url.startswith(("http://", "https://", "${")):
                raise ValueError("url must start with http:// or https://")
        elif self.headers:
            raise ValueError("headers are for streamable-HTTP servers (url), not command")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` for a child process, ``http`` for a streamable-HTTP endpoint."""
        return "stdio" if self.command is not None else "http"

    @property
    def key(self) -> str:
        """The spec as canonical JSON: one connection per distinct (expanded) spec."""
        return self.model_dump_json()

    def references(self) -> list[tuple[str, str]]:
        """Every ``(field, VARIABLE)`` this spec refers to with ``${VARIABLE}``."""
        found: list[tuple[str, str]] = []
        for where, value in self._expandable():
            found.extend((where, name) for name in _VARIABLE.findall(value))
        return found

    def expand(self, environ: Mapping[str, str]) -> MCPServerSpec:
        """A copy with every ``${VAR}`` replaced by ``environ[VAR]``.

        Raises:
            ConfigError: a referenced variable is not in ``environ`` (the message names it).
        """
        missing = missing_variables(self, environ)
        if missing:
            raise ConfigError(f"mcp server {self.name!r}: {missing}")
        if not self.references():
            return self

        def sub(value: str) -> str:
            return _VARIABLE.sub(lambda match: environ[match.group(1)], value)

        update: dict[str, Any] = {
            "args": tuple(sub(arg) for arg in self.args),
            "env": {key: sub(value) for key, value in self.env.items()},
            "headers": {key: sub(value) for key, value in self.headers.items()},
            "cwd": None if self.cwd is None else sub(self.cwd),
            "url": None if self.url is None else sub(self.url),
        }
        return self.model_copy(update=update)

    def _expandable(self) -> list[tuple[str, str]]:
        pairs = [(f"args[{i}]", arg) for i, arg in enumerate(self.args)]
        pairs += [(f"env.{key}", value) for key, value in self.env.items()]
        pairs += [(f"headers.{key}", value) for key, value in self.headers.items()]
        pairs += [(name, value) for name, value in (("cwd", self.cwd), ("url", self.url)) if value]
        return pairs


def missing_variables(server: MCPServerSpec, environ: Mapping[str, str]) -> str:
    """What ``server`` refers to that ``environ`` lacks, as one sentence ("" when nothing)."""
    missing = [(where, name) for where, name in server.references() if name not in environ]
    if not missing:
        return ""
    listed = ", ".join(f"{where} uses ${{{name}}}" for where, name in missing)
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"{listed}, which {verb} not set (persona files take ${{VAR}} from the environment that "
        "Runtime.from_env(), the CLI and the service read; a Runtime built in code is given "
        "environ=...)"
    )
