"""An MCP ``tools/call`` result as the text of a ``role: "tool"`` message.

Text blocks are sent as they are; other blocks become a short bracketed note (the model cannot
see an image through a chat message anyway). ``structuredContent`` is appended as compact JSON
unless the text already says the same thing: servers built with the official SDKs put the JSON
of a structured result in a text block too, and ``{"result": x}`` wraps a plain return value.
Results are read duck-typed, so this module needs no import of the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from generic_framework.mcp_tools.connection import MCPFailure
from generic_framework.tools.base import NO_OUTPUT

__all__ = ["MAX_RESULT_CHARS", "block_text", "decode_json_text", "pick_tool", "render_result"]

MAX_RESULT_CHARS = 50_000
"""Longer results are cut: a runaway server must not fill the model's context by itself."""


def block_text(block: Any) -> str:
    """One content block as text: the text itself, or a note saying what was left out."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", "") or "unknown type"
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind} ({mime}, about {size} bytes) not shown]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        if text is not None:
            return str(text)
        return f"[resource {getattr(resource, 'uri', '')} not shown]"
    if kind == "resource_link":
        return f"[link: {getattr(block, 'name', '')} {getattr(block, 'uri', '')}]".strip()
    return f"[{kind or 'unknown'} content not shown]"


def _says_the_same(text: str, structured: Any) -> bool:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    if parsed == structured:
        return True
    return (
        isinstance(structured, dict)
        and set(structured) == {"result"}
        and (parsed == structured["result"] or text == str(structured["result"]))
    )


def render_result(content: Sequence[Any], structured: Any = None) -> str:
    """The tool-message text of a result's ``content`` blocks and ``structuredContent``."""
    text = "\n".join(part for part in (block_text(block) for block in content) if part)
    if structured is not None and not _says_the_same(text, structured):
        data = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
        text = f"{text}\n\nstructured content: {data}" if text else data
    if not text.strip():
        return NO_OUTPUT
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = f"{text[:MAX_RESULT_CHARS]}\n[... {cut} more characters cut]"
    return text


def decode_json_text(text: str) -> Any:
    """``text`` parsed as JSON up to two levels deep (as far as it parses): Z.AI's MCP tools
    answer with a JSON string that may itself hold JSON."""
    value: Any = text
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            break
    return value


def pick_tool(tools: tuple[Any, ...], known: frozenset[str], server: str, kind: str) -> Any:
    """The tool of a server's listing whose name is one of ``known`` (compared without ``_``,
    ``-`` and case), else the listing's only tool.

    Raises:
        MCPFailure: none of the listed tools is one (named as ``server`` and ``kind`` say).
    """
    for listed in tools:
        if listed.name.replace("_", "").replace("-", "").lower() in known:
            return listed
    if len(tools) == 1:
        return tools[0]
    names = ", ".join(listed.name for listed in tools) or "none"
    raise MCPFailure(f"the {server} MCP server offers no {kind} tool (it lists: {names})")
