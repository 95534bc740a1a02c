"""A turn's public events, live: the turn runs in its own task and puts its events in a sink;
the stream hands them to its consumer as they come, then ``Done``.

:meth:`Persona.stream() <generic_framework.core.persona.Persona.stream>` is :func:`live` over
the same turn coroutine :meth:`~generic_framework.core.persona.Persona.respond` awaits with
:func:`~generic_framework.core.events.ignore` for its sink: the loop's methods return their
steps (:mod:`~generic_framework.core.steps`) and only ever put public events in the sink, so no
layer between the loop and the consumer filters values that are not events (as openai-agents'
streamed run does with its queue of events beside the steps its functions return).

The consumer keeps the pace of a generator: closing the stream (``aclose()``, a client gone)
cancels the turn's task and waits for it, so the turn ends (and frees its conversation) before
``aclose()`` returns, as an abandoned turn always did; the turn's error, if any, is raised to
the consumer after the events that came before it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from generic_framework.core.events import Done, EventSink, PersonaEvent
from generic_framework.core.reply import Reply

__all__ = ["live"]

Run = Callable[[EventSink], Coroutine[Any, Any, Reply]]
"""A turn given its sink: the coroutine that runs it and returns its reply."""


class _Mailbox:
    """The events a turn has put and its consumer has not taken yet, and the consumer's wait."""

    __slots__ = ("_waiter", "items")

    def __init__(self) -> None:
        self.items: deque[PersonaEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, event: PersonaEvent) -> None:
        """The turn's sink: keep ``event`` and wake the consumer."""
        self.items.append(event)
        self.wake()

    def wake(self) -> None:
        """Wake the consumer if it waits (an event came, or the turn ended)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next :meth:`wake`."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


async def _run(run: Run, box: _Mailbox) -> Reply:
    try:
        return await run(box.put)
    finally:
        box.wake()  # within the task's last step: the consumer finds it done when it wakes


async def live(run: Run) -> AsyncGenerator[PersonaEvent, None]:
    """The events ``run`` puts in its sink, as they come, then ``Done`` with its reply."""
    box = _Mailbox()
    task = asyncio.get_running_loop().create_task(_run(run, box))
    try:
        while True:
            while box.items:
                yield box.items.popleft()
            if task.done():
                break
            await box.wait()
        reply = task.result()  # the turn's error, after the events before it
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))
        if not task.cancelled():
            task.exception()  # retrieved: raised above, or not wanted by a closed stream
    yield Done(reply)
