"""``stream()``'s bridge (core/live.py): the turn runs in its own task and puts public events in a
sink; the consumer gets them in order, then ``Done``, or the turn's error after the events
that came before it; closing the stream ends the turn before ``aclose()`` returns."""

from __future__ import annotations

import asyncio
import gc

import pytest

from generic_framework.core.events import Done, EventSink, PersonaEvent, TextDelta, ToolFinished
from generic_framework.core.live import live
from generic_framework.core.reply import Reply


async def test_the_events_come_in_order_then_done_with_the_reply() -> None:
    async def turn(events: EventSink) -> Reply:
        events(TextDelta("a"))
        await asyncio.sleep(0)
        events(ToolFinished("t", True, 1.0))
        events(TextDelta("b"))
        return Reply(content="ab")

    got: list[PersonaEvent] = [event async for event in live(turn)]
    assert got[:3] == [TextDelta("a"), ToolFinished("t", True, 1.0), TextDelta("b")]
    assert isinstance(got[3], Done) and got[3].reply.content == "ab" and len(got) == 4


async def test_the_turn_s_error_comes_after_the_events_before_it() -> None:
    async def turn(events: EventSink) -> Reply:
        events(TextDelta("partial"))
        raise ValueError("broken")

    got: list[PersonaEvent] = []
    with pytest.raises(ValueError, match="broken"):
        async for event in live(turn):
            got.append(event)
    assert got == [TextDelta("partial")]


async def test_closing_the_stream_ends_the_turn_before_aclose_returns() -> None:
    ended: list[str] = []
    gate = asyncio.Event()

    async def turn(events: EventSink) -> Reply:
        events(TextDelta("first"))
        try:
            await gate.wait()  # only a cancellation ends it
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # its clean-up takes a step of the loop
            ended.append("cancelled")
            raise
        return Reply(content="never")

    stream = live(turn)
    assert await anext(stream) == TextDelta("first")
    await stream.aclose()
    assert ended == ["cancelled"]


async def test_a_turn_that_fails_after_the_stream_was_closed_leaves_no_unretrieved_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def turn(events: EventSink) -> Reply:
        events(TextDelta("x"))
        raise RuntimeError("after")

    stream = live(turn)
    assert await anext(stream) == TextDelta("x")
    await asyncio.sleep(0)  # the turn fails before the consumer comes back
    await stream.aclose()
    del stream
    gc.collect()
    assert "never retrieved" not in caplog.text
