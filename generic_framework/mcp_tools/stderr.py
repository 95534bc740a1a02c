"""A stdio server's stderr: each line logged at DEBUG, the last few kept for failure messages.

MCP servers write their logs and tracebacks to stderr. Passed straight through they would mix
into the CLI's output; dropped, a server that fails to start would leave nothing to go on. Each
child gets a pipe whose lines go to the ``generic_framework.mcp`` logger, and the last
:data:`TAIL_LINES` are quoted in the warning when the server fails to start.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import TextIO

from generic_framework.redaction import redact

__all__ = ["TAIL_LINES", "StderrPipe"]

logger = logging.getLogger("generic_framework.mcp")

TAIL_LINES = 8
_LINE_LIMIT = 500


class _LineReader(asyncio.Protocol):
    def __init__(self, pipe: StderrPipe) -> None:
        self.pipe = pipe
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self.pipe.add(line.decode("utf-8", "replace"))

    def eof_received(self) -> bool | None:
        if self.buffer:
            self.pipe.add(self.buffer.decode("utf-8", "replace"))
            self.buffer = b""
        return None


class StderrPipe:
    """A pipe to hand a child as its stderr, read on the event loop.

    Args:
        server: the server's name, for the log lines.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        self._read = os.fdopen(read_fd, "rb", buffering=0)
        self._transport: asyncio.ReadTransport | None = None

    async def start(self) -> None:
        """Start reading (on the running loop)."""
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(lambda: _LineReader(self), self._read)

    def add(self, line: str) -> None:
        """One line from the child: logged at DEBUG and kept in the tail."""
        line = redact(line.rstrip(), _LINE_LIMIT)
        if line:
            self.tail.append(line)
            logger.debug("mcp %s stderr: %s", self.server, line)

    def spawned(self) -> None:
        """The child holds its copy of the write end now: drop ours, so its exit ends the pipe."""
        if not self.file.closed:
            self.file.close()

    def close(self) -> None:
        """Stop reading and close both ends (idempotent)."""
        self.spawned()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        elif not self._read.closed:
            self._read.close()

    def summary(self) -> str:
        """The kept lines, joined for a log message ("" when the child wrote nothing)."""
        return " | ".join(self.tail)
