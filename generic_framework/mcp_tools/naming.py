"""The names MCP tools are offered under: collision-free and valid Z.AI function names.

Z.AI accepts function names matching ``^[a-zA-Z0-9_-]{1,64}$`` (docs/protocol.md §2.3); MCP
tool names are free text, and two servers may both have a ``search`` tool. The rule:

1. ``{server}__{tool}`` when the tool's own name uses only ``[a-zA-Z0-9_-]``, the result is at
   most 64 characters, and no other tool of the persona (its ``@tool`` functions, ``search_web``,
   ``web_search``) already has it. Server names are 1-32 characters and never contain ``__``,
   so two servers' tools can never meet on this form.
2. Otherwise ``{server}__{cleaned}_{hash}``: every character outside ``[a-zA-Z0-9_-]``
   replaced by ``_``, cut so the whole stays within 64 characters, and ``hash`` the first 8 hex
   digits of SHA-256 over the server and tool names (rehashed with a counter in the
   astronomically unlikely case that this is taken too).

A name depends only on the server's name, the tool's name and the persona's other tool names,
never on discovery order or timing, so a tool keeps its name across turns and restarts and the
calls in a stored conversation keep pointing at it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

__all__ = ["MAX_NAME", "SEPARATOR", "offered_name"]

MAX_NAME = 64
SEPARATOR = "__"
_VALID = re.compile(r"^[a-zA-Z0-9_-]+$")
_INVALID_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_HASH = 8


def offered_name(server: str, tool: str, taken: Collection[str]) -> str:
    """The name the model calls ``tool`` of ``server`` by (see the module's rule).

    Args:
        server: the server's name in the persona (already a valid prefix).
        tool: the tool's name as the server lists it.
        taken: names the persona already uses.
    """
    plain = f"{server}{SEPARATOR}{tool}"
    if _VALID.match(tool) and len(plain) <= MAX_NAME and plain not in taken:
        return plain
    cleaned = _INVALID_CHAR.sub("_", tool)
    room = MAX_NAME - len(server) - len(SEPARATOR) - 1 - _HASH
    for attempt in range(100):
        salt = f"{server}\0{tool}" if attempt == 0 else f"{server}\0{tool}\0{attempt}"
        digest = hashlib.sha256(salt.encode()).hexdigest()[:_HASH]
        name = f"{server}{SEPARATOR}{cleaned[:room]}_{digest}"
        if name not in taken:
            return name
    raise RuntimeError(f"no free name for {tool!r} of MCP server {server!r}")  # pragma: no cover
