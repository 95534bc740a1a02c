"""A one-line progress indicator on stderr: live on a terminal, plain lines when piped."""

from __future__ import annotations

import asyncio
import sys
import time

__all__ = ["Status"]


class Status:
    """Shows what a turn is doing (``thinking...``, ``round 1: searching the web...``).

    On a terminal the line is redrawn with the elapsed seconds (see :meth:`tick`) and erased
    before answer text is written; when stderr is piped each label is printed once.
    """

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.label = ""
        self.started = time.monotonic()
        self.visible = False

    def show(self, label: str) -> None:
        """Replace the label and restart the clock."""
        self.label = label
        self.started = time.monotonic()
        if self.tty:
            self.visible = True
            self.draw()
        else:
            print(f"... {label}", file=sys.stderr, flush=True)

    def draw(self) -> None:
        """Redraw the live line, if shown."""
        if self.visible:
            elapsed = time.monotonic() - self.started
            sys.stderr.write(f"\r\x1b[2K{self.label} {elapsed:.0f}s")
            sys.stderr.flush()

    def clear(self) -> None:
        """Erase the live line, if shown."""
        if self.visible:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
            self.visible = False

    async def tick(self) -> None:
        """Redraw twice a second until cancelled."""
        while True:
            await asyncio.sleep(0.5)
            self.draw()
