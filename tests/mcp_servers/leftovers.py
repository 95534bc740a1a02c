"""Finding processes that run a server of this folder, wherever they were started from.

The suite checks at its end that none is left (``tests/conftest.py``): every MCP child it
started, directly or through a CLI or service process, must be gone by then. A process counts
when one of its arguments is a script of this folder of *this* checkout (a relative path is
resolved against the process's working directory), so runs of other checkouts on the same
machine are never mistaken for ours.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HERE", "mcp_children"]

HERE = Path(__file__).resolve().parent


def _runs_ours(pid: str) -> bool:
    proc = Path("/proc") / pid
    try:
        args = (proc / "cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(proc / "cwd"))
    except OSError:  # gone meanwhile, or not ours to read
        return False
    for raw in args:
        if not raw.endswith(b".py"):
            continue
        path = Path(os.fsdecode(raw))
        try:
            resolved = (path if path.is_absolute() else cwd / path).resolve()
        except OSError:
            continue
        if resolved.parent == HERE:
            return True
    return False


def mcp_children() -> set[int]:
    """The pids of live processes running a server script of this folder (Linux ``/proc``)."""
    root = Path("/proc")
    if not root.is_dir():
        return set()
    return {
        int(entry.name)
        for entry in root.iterdir()
        if entry.name.isdigit() and _runs_ours(entry.name)
    }
