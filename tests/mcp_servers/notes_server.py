"""A small MCP server over stdio, built with the official SDK's server API (``MCPServer``).

It keeps short notes, in memory or in the JSON file named by ``NOTES_FILE``. The example
persona ``personas/examples/notes.toml`` offers its notes tools; the tests also use the tools
that exist to misbehave on purpose (``wait`` hangs, ``fail`` answers with an error, ``crash``
kills the process mid-call), ``NOTES_PID_FILE`` (the process writes its pid there), so a test
can kill it or check that it is gone, ``NOTES_WAITING_FILE`` (``wait`` creates it once it is
waiting), so a test can act while a call is surely under way, and ``NOTES_REFUSE_IF`` (it
exits at once, with a message on stderr, while the file named there exists), so a test can make
a restart fail.

Run it as ``python tests/mcp_servers/notes_server.py``; it speaks MCP on stdin/stdout and logs
to stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes", instructions="Keeps short notes.")
_notes: list[str] = []


def _load() -> None:
    path = os.environ.get("NOTES_FILE")
    if path and Path(path).is_file():
        _notes.extend(json.loads(Path(path).read_text(encoding="utf-8")))


def _save() -> None:
    path = os.environ.get("NOTES_FILE")
    if path:
        Path(path).write_text(json.dumps(_notes, ensure_ascii=False), encoding="utf-8")


@server.tool()
def add_note(text: str) -> str:
    """Save a short note and return its number."""
    _notes.append(text.strip())
    _save()
    return f"Saved note {len(_notes)}: {text.strip()}"


@server.tool()
def list_notes() -> list[str]:
    """All saved notes, oldest first."""
    return list(_notes)


@server.tool()
def search_notes(query: str) -> str:
    """The saved notes that contain the query (case-insensitive)."""
    found = [f"{n}. {note}" for n, note in enumerate(_notes, 1) if query.lower() in note.lower()]
    return "\n".join(found) if found else f"No note mentions {query!r}."


@server.tool()
def stats() -> dict[str, int]:
    """How many notes there are and how long they are in total."""
    return {"notes": len(_notes), "characters": sum(len(note) for note in _notes)}


@server.tool(name="notes.export")
def export() -> str:
    """The notes as one text (a tool name with a dot, which Z.AI does not accept as is)."""
    return "\n".join(_notes)


@server.tool()
async def wait(seconds: float) -> str:
    """Wait, then say so (for timeouts and for killing the server mid-call)."""
    if os.environ.get("NOTES_WAITING_FILE"):
        Path(os.environ["NOTES_WAITING_FILE"]).touch()
    await asyncio.sleep(seconds)
    return f"Waited {seconds:g} seconds."


@server.tool()
def fail(message: str) -> str:
    """Answer with an error result carrying ``message``."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """End the process at once, in the middle of the call."""
    print("notes server: crashing on request", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    refuse = os.environ.get("NOTES_REFUSE_IF")
    if refuse and Path(refuse).exists():
        print(f"notes server: refusing to start while {refuse} exists", file=sys.stderr)
        sys.exit(4)
    _load()
    if os.environ.get("NOTES_PID_FILE"):
        Path(os.environ["NOTES_PID_FILE"]).write_text(str(os.getpid()), encoding="utf-8")
    print("notes server: ready", file=sys.stderr, flush=True)
    server.run("stdio")
