"""A stored turn keeps its record: the input as typed, model, sources, usage, searches, timings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from zai_script import Script, call, completion, make_settings, source

from generic_framework.citation import Citation
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.service.mapping import turn_record_body
from generic_framework.store import TurnRecord
from generic_framework.testing import FunctionModel
from generic_framework.tools import tool
from generic_framework.wire.client import GLMClient


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def with_details(body: dict[str, object], cached: int, reasoning: int) -> dict[str, object]:
    usage = body["usage"]
    assert isinstance(usage, dict)
    usage["prompt_tokens_details"] = {"cached_tokens": cached}
    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return body


async def test_a_web_turn_is_stored_with_its_record(
    tmp_path: Path,
    script: Callable[..., Script],
    client_for: Callable[[Script], GLMClient],
) -> None:
    settings = make_settings(tmp_path)
    s = script(
        with_details(
            completion("", tool_calls=[call("echo", {"text": "x"}, id="e1")], usage=(100, 10)),
            cached=64,
            reasoning=3,
        ),
        with_details(
            completion("Rain [ref_1].", web_search=[source(1)], usage=(200, 20)),
            cached=128,
            reasoning=5,
        ),
    )
    runtime = Runtime(settings, client=client_for(s))
    try:
        persona = Persona("p", "S.", [echo], runtime=runtime)
        reply = await persona.respond("  //  weather?  ", conversation_id="c1")
        turns = await runtime.store.turns("c1")
    finally:
        await runtime.aclose()
    assert turns is not None and len(turns) == 1
    record = turns[0].record
    assert record is not None
    assert record.input == "  //  weather?  "
    assert (record.model, record.stop_reason, record.rounds) == ("glm-4.7", "completed", 2)
    assert (record.prompt_tokens, record.completion_tokens) == (300, 30)
    assert (record.cached_tokens, record.reasoning_tokens) == (192, 8)
    assert record.web_searches == reply.web_searches == 1
    assert [(x.number, x.url, x.site, x.published) for x in record.sources] == [
        (1, "https://ex.org/1", "Site 1", "2026-01-02")
    ]
    assert len(record.round_ms) == 2 and record.duration_ms >= sum(record.round_ms) * 0.9
    assert datetime.fromisoformat(record.started_at).tzinfo is not None
    assert list(turns[0].messages) == reply.messages
    shown = turn_record_body(turns[0])
    assert shown.input == "  //  weather?  " and shown.citations[0].title == "Title 1"
    assert shown.usage["cached_tokens"] == 192
    # One shape for a source: the stored record's sources are the reply's citations, read back
    # as the same type, and the API shows the stored ones as it shows the reply's.
    assert list(record.sources) == reply.citations
    assert [c.model_dump() for c in shown.citations] == [c.model_dump() for c in reply.citations]


def test_a_stored_source_keeps_its_keys_and_reads_back_as_a_citation() -> None:
    stored = {
        "number": 1, "title": "T", "url": "https://ex.org/1", "site": "S",
        "published": "2026-01-02", "snippet": "sn", "ref": "ref_1",
    }  # fmt: skip
    record = TurnRecord.from_json({"input": "//q", "sources": [stored]})
    assert record.sources == (Citation(**stored),)
    # Written out with the keys, in the order, records have always been written with.
    assert json.dumps(record.to_json()["sources"]) == json.dumps([stored])


async def test_a_plain_turn_without_conversation_stores_nothing(
    tmp_path: Path, script: Callable[..., Script], client_for: Callable[[Script], GLMClient]
) -> None:
    settings = make_settings(tmp_path)
    s = script(completion("Hi."))
    runtime = Runtime(settings, client=client_for(s))
    try:
        await Persona("p", "S.", runtime=runtime).respond("hello")
        assert await runtime.store.conversation_ids() == []
    finally:
        await runtime.aclose()


async def test_a_queued_turn_is_recorded_from_when_it_held_its_conversation(
    tmp_path: Path,
) -> None:
    async def slow(request: object) -> str:
        await asyncio.sleep(0.05)
        return "ok"

    async with Runtime(make_settings(tmp_path), model=FunctionModel(slow)) as runtime:
        persona = Persona("p", "S.", runtime=runtime)
        await asyncio.gather(*(persona.respond(f"hi {n}", conversation_id="c1") for n in range(2)))
        turns = await runtime.store.turns("c1")
    assert turns is not None and len(turns) == 2
    first, second = (t.record for t in turns)
    assert first is not None and second is not None
    ended = datetime.fromisoformat(first.started_at) + timedelta(milliseconds=first.duration_ms)
    # The second turn waited for the first: it began when the first ended, not when it arrived.
    assert datetime.fromisoformat(second.started_at) >= ended - timedelta(milliseconds=2)
