"""The tool loop, driven by a strict scripted Z.AI: every request is checked, none is spare."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from zai_script import Script, call, completion, error, make_settings, source

from generic_framework.config import Settings
from generic_framework.core.events import Done, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.persona import (
    ASK_FOR_QUESTION,
    CONTENT_FILTER_NOTICE,
    FORCED_ANSWER_INSTRUCTION,
    Persona,
)
from generic_framework.errors import ToolLoopError
from generic_framework.runtime import Runtime
from generic_framework.tools import WebSearch, calculate, tool
from generic_framework.tools.web_search import DEFAULT_SEARCH_PROMPT
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import BadRequestError

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]


@tool
def lookup(key: str) -> dict[str, str]:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return {"key": key, "value": key.upper()}


@tool
async def boom(reason: str = "x") -> str:
    """Always fails."""
    raise RuntimeError(f"it broke: {reason}")


_made: list[Persona] = []


def make_persona(
    settings: Settings, client: GLMClient, tools: Any = (lookup,), **kwargs: Any
) -> Persona:
    _made.append(
        Persona("tester", "You test.", tools, runtime=Runtime(settings, client=client), **kwargs)
    )
    return _made[-1]


@pytest.fixture(autouse=True)
async def _close_personas() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().runtime.aclose()


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [
        t["function"]["name"] if t["type"] == "function" else t["type"]
        for t in request.get("tools", [])
    ]


# --------------------------------------------------------------------------- plain and //


async def test_plain_message_is_one_call_without_tools(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("Hello there."))
    persona = make_persona(settings, client_for(s))
    reply = await persona.respond("  hi  ")
    assert reply.content == "Hello there."
    assert reply.stop_reason == "completed"
    (request,) = s.requests
    assert "tools" not in request
    assert request["messages"] == [
        {"role": "system", "content": "You test."},
        {"role": "user", "content": "hi"},
    ]
    assert request["model"] == "glm-4.7" and request["stream"] is False
    assert [r.number for r in reply.rounds] == [1]
    assert reply.usage.total_tokens == 15


async def test_web_query_is_answered_server_side_in_one_call(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    answer = "The council approved it [ref_1]; it opens in 2028 [ref_2][ref_1]."
    s = script(completion(answer, web_search=[source(1), source(2)]))
    persona = make_persona(settings, client_for(s))
    reply = await persona.respond("   //  tram line news?")
    (request,) = s.requests
    assert request["messages"][-1] == {"role": "user", "content": "tram line news?"}
    web = request["tools"][0]
    assert web == {
        "type": "web_search",
        "web_search": {
            "enable": True,
            "search_engine": "search_pro_jina",
            "search_result": True,
            "search_prompt": DEFAULT_SEARCH_PROMPT,
            "count": 5,
            "search_recency_filter": "noLimit",
        },
    }
    assert tool_names(request) == ["web_search", "lookup"]
    assert reply.content == "The council approved it [1]; it opens in 2028 [2][1]."
    assert [(c.number, c.ref, c.url, c.site) for c in reply.citations] == [
        (1, "ref_1", "https://ex.org/1", "Site 1"),
        (2, "ref_2", "https://ex.org/2", "Site 2"),
    ]
    assert reply.stop_reason == "completed" and len(reply.rounds) == 1


async def test_persona_web_search_table_overrides_settings(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("ok"))
    search = WebSearch(
        count=3,
        recency="oneWeek",
        domain_filter="example.com",
        content_size="high",
        prompt="Own prompt {{current_date}}",
    )
    persona = make_persona(settings, client_for(s), web_search=search)
    await persona.respond("// q")
    assert s.requests[0]["tools"][0]["web_search"] == {
        "enable": True,
        "search_engine": "search_pro_jina",
        "search_result": True,
        "search_prompt": "Own prompt {{current_date}}",
        "count": 3,
        "search_domain_filter": "example.com",
        "search_recency_filter": "oneWeek",
        "content_size": "high",
    }


@pytest.mark.parametrize("text", ["//", "  //   ", "//\n"])
async def test_bare_prefix_asks_for_a_question_without_a_call(
    settings: Settings, script: MakeScript, client_for: MakeClient, text: str
) -> None:
    s = script()
    persona = make_persona(settings, client_for(s))
    reply = await persona.respond(text, conversation_id="c1")
    assert reply.content == ASK_FOR_QUESTION
    assert reply.messages == [] and reply.rounds == []
    assert s.requests == []
    assert await persona.runtime.store.get("c1") is None


async def test_empty_message_makes_no_call(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script()
    reply = await make_persona(settings, client_for(s)).respond("   ")
    assert reply.content and not s.requests


@pytest.mark.parametrize(
    ("text", "conversation_id", "problem"),
    [
        ("hi", "x" * 300, "a conversation id must be 1-128"),
        ("hi", "a.b", "a conversation id must be 1-128"),
        ("bad \udcff\udcfe bytes", None, "must be UTF-8 text"),
    ],
)
async def test_invalid_arguments_are_refused_before_any_call(
    settings: Settings,
    script: MakeScript,
    client_for: MakeClient,
    text: str,
    conversation_id: str | None,
    problem: str,
) -> None:
    s = script()
    persona = make_persona(settings, client_for(s))
    with pytest.raises(ValueError, match=problem):
        await persona.respond(text, conversation_id=conversation_id)
    with pytest.raises(ValueError, match=problem):
        async for _ in persona.stream(text, conversation_id=conversation_id):
            pass
    assert s.requests == []  # nothing was sent, so nothing was paid for
    assert len(persona.runtime.locks) == 0


# --------------------------------------------------------------------------- tool rounds


async def test_single_tool_round_then_answer(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(
        completion("", tool_calls=[call("lookup", {"key": "a"}, id="c-1")], reasoning="need a"),
        completion("A is A."),
    )
    reply = await make_persona(settings, client_for(s)).respond("// what is a")
    assert reply.content == "A is A."
    first, second = s.requests
    assert roles(second["messages"]) == ["system", "user", "assistant", "tool"]
    assistant = second["messages"][2]
    assert assistant["tool_calls"] == [
        {
            "id": "c-1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"key": "a"}'},
        }
    ]
    assert assistant["reasoning_content"] == "need a"
    assert assistant.get("content") is None  # never "" beside tool calls
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": "c-1",
        "content": '{"key":"a","value":"A"}',
    }
    assert tool_names(first) == tool_names(second) == ["web_search", "lookup"]
    (info,) = reply.rounds[0].tool_calls
    assert (info.id, info.name, info.arguments) == ("c-1", "lookup", '{"key": "a"}')
    (result,) = reply.rounds[0].results
    assert result.ok and result.call_id == "c-1" and result.duration_ms >= 0
    assert reply.rounds[0].finish_reason == "tool_calls"
    assert reply.usage.total_tokens == 30


async def test_two_sequential_rounds_accumulate_messages(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(
        completion("Looking up a.", tool_calls=[call("lookup", {"key": "a"}, id="x1")]),
        completion("", tool_calls=[call("lookup", {"key": "b"}, id="x2")], reasoning="now b"),
        completion("a and b", usage=(30, 7)),
    )
    reply = await make_persona(settings, client_for(s)).respond("// a then b")
    assert reply.content == "a and b" and reply.stop_reason == "completed"
    assert [len(r["messages"]) for r in s.requests] == [2, 4, 6]
    # Each request extends the previous one: nothing rewritten, nothing lost.
    for earlier, later in zip(s.requests, s.requests[1:], strict=False):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
    third = s.requests[2]["messages"]
    assert third[2]["content"] == "Looking up a." and third[4]["reasoning_content"] == "now b"
    assert [m.get("tool_call_id") for m in third if m["role"] == "tool"] == ["x1", "x2"]
    assert all(tool_names(r) == ["web_search", "lookup"] for r in s.requests)
    assert [r.number for r in reply.rounds] == [1, 2, 3]
    assert reply.usage.prompt_tokens == 50
    assert roles([m.model_dump() for m in reply.messages]) == [
        "user", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip


async def test_cap_forces_a_final_call_without_tools(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, max_tool_rounds=2)
    s = script(
        completion("", tool_calls=[call("lookup", {"key": "1"})]),
        completion("", tool_calls=[call("lookup", {"key": "2"})]),
        completion("Best I can say: 1 and 2."),
    )
    reply = await make_persona(settings, client_for(s)).respond("// loop")
    assert reply.stop_reason == "max_rounds"
    assert reply.content == "Best I can say: 1 and 2."
    assert all("tools" in r for r in s.requests[:2])
    final = s.requests[2]
    assert "tools" not in final
    assert final["messages"][-1] == {"role": "user", "content": FORCED_ANSWER_INSTRUCTION}
    # The instruction is sent, never stored.
    assert all(m.content != FORCED_ANSWER_INSTRUCTION for m in reply.messages)
    assert len(reply.rounds) == 3


async def test_forced_final_call_returning_tool_calls_anyway(
    tmp_path: Any, script: MakeScript, client_for: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(tmp_path, max_tool_rounds=1)
    s = script(
        completion("", tool_calls=[call("lookup", {"key": "1"}, id="k1")]),
        completion("", tool_calls=[call("lookup", {"key": "2"}, id="k2")]),
    )
    persona = make_persona(settings, client_for(s), final_answer_fallback="No answer, sorry.")
    reply = await persona.respond("// loop", conversation_id="conv")
    assert reply.stop_reason == "max_rounds"
    assert reply.content == "No answer, sorry."
    stored = await persona.runtime.store.get("conv")
    assert stored is not None
    ids = [
        c.id for m in stored if m.message.role == "assistant" for c in m.message.tool_calls or []
    ]
    assert ids == ["k1"]
    assert stored[-1].message.content == "No answer, sorry."
    assert "dropped 1 tool call" in caplog.text


async def test_tools_are_offered_every_round_until_the_model_stops(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, max_tool_rounds=5)
    s = script(
        *[completion("", tool_calls=[call("lookup", {"key": str(i)})]) for i in range(3)],
        completion("done"),
    )
    reply = await make_persona(settings, client_for(s)).respond("// go")
    assert reply.stop_reason == "completed" and reply.content == "done"
    assert [tool_names(r) for r in s.requests] == [["web_search", "lookup"]] * 4


async def test_max_tool_rounds_zero_means_no_tools(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("plain"))
    persona = make_persona(make_settings(tmp_path, max_tool_rounds=0), client_for(s))
    reply = await persona.respond("// anything")
    assert "tools" not in s.requests[0] and reply.stop_reason == "completed"
    assert s.requests[0]["messages"][-1]["content"] == "anything"


async def test_three_parallel_calls_run_concurrently_and_answer_in_order(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    started: list[str] = []
    all_started = asyncio.Event()

    @tool
    async def slow(name: str, delay_ms: int) -> str:
        """Wait, then echo."""
        started.append(name)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 30)  # proves all three run at once
        await asyncio.sleep(delay_ms / 1000)
        return f"{name} done"

    calls = [
        call("slow", {"name": "first", "delay_ms": 30}, id="p1"),
        call("slow", {"name": "second", "delay_ms": 0}, id="p2"),
        call("slow", {"name": "third", "delay_ms": 10}, id="p3"),
    ]
    s = script(completion("", tool_calls=calls), completion("all done"))
    events = [
        e async for e in make_persona(settings, client_for(s), tools=[slow]).stream("// three")
    ]
    tool_messages = [m for m in s.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("p1", "first done"),
        ("p2", "second done"),
        ("p3", "third done"),
    ]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert len(finished) == 3 and all(e.ok for e in finished)
    assert isinstance(events[0], RoundStarted) and events[0].tools == ["slow"] * 3
    reply = events[-1].reply  # type: ignore[union-attr]
    assert [r.call_id for r in reply.rounds[0].results] == ["p1", "p2", "p3"]


async def test_sync_tools_run_in_a_worker_thread(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "here"

    s = script(completion("", tool_calls=[call("where", "{}")]), completion("ok"))
    await make_persona(settings, client_for(s), tools=[where]).respond("// where")
    assert threads and threads[0] != threading.get_ident()


# --------------------------------------------------------------------------- model mistakes


async def test_model_mistakes_become_error_texts_the_model_reads(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, tool_timeout=0.05)

    @tool
    async def sleepy() -> str:
        """Takes too long."""
        await asyncio.sleep(5)
        return "late"

    calls = [
        call("nope", "{}", id="e1"),
        call("lookup", "{not json", id="e2"),
        call("lookup", {"key": 5}, id="e3"),
        call("lookup", {}, id="e4"),
        call("boom", {"reason": "bad"}, id="e5"),
        call("sleepy", "", id="e6"),
        call("lookup", {"key": "fine"}, id="e7"),
    ]
    s = script(completion("", tool_calls=calls), completion("recovered"))
    persona = make_persona(settings, client_for(s), tools=[lookup, boom, sleepy])
    started = time.monotonic()
    reply = await persona.respond("// try everything")
    assert time.monotonic() - started < 4  # the 0.05 s tool timeout, not the tool's 5 s
    answers = {m["tool_call_id"]: m["content"] for m in s.requests[1]["messages"][3:]}
    assert list(answers) == ["e1", "e2", "e3", "e4", "e5", "e6", "e7"]
    assert "no tool named 'nope'" in answers["e1"]
    assert "Available tools: lookup, boom, sleepy" in answers["e1"]
    assert "not valid JSON" in answers["e2"]
    assert "invalid arguments for 'lookup'" in answers["e3"] and "key" in answers["e3"]
    assert "key: Field required" in answers["e4"]
    assert "RuntimeError: it broke: bad" in answers["e5"]
    assert "timed out after 0.05 seconds" in answers["e6"]
    assert answers["e7"] == '{"key":"fine","value":"FINE"}'
    results = reply.rounds[0].results
    assert [r.ok for r in results] == [False] * 6 + [True]
    assert all(r.error == r.content for r in results if not r.ok)
    assert reply.content == "recovered"


async def test_a_framework_bug_in_a_tool_propagates(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    @tool
    async def buggy() -> str:
        """Raises a framework error."""
        raise ToolLoopError("internal invariant broken")

    s = script(completion("", tool_calls=[call("buggy", "{}"), call("lookup", {"key": "a"})]))
    persona = make_persona(settings, client_for(s), tools=[buggy, lookup])
    with pytest.raises(ToolLoopError, match="invariant"):
        await persona.respond("// bug", conversation_id="bug")
    assert await persona.runtime.store.get("bug") is None


async def test_web_search_tool_call_gets_the_empty_confirmation(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    search_call = {"id": "ws-1", "type": "web_search", "function": {"name": "web_search",
                   "arguments": '{"search_query": "tram"}'}}  # fmt: skip
    s = script(
        completion("", tool_calls=[search_call, call("lookup", {"key": "t"}, id="f-1")]),
        completion("Tram news [ref_1].", web_search=[source(1)]),
    )
    reply = await make_persona(settings, client_for(s)).respond("// tram")
    follow_up = s.requests[1]["messages"]
    assert follow_up[2]["tool_calls"][0]["type"] == "web_search"
    assert follow_up[3] == {"role": "tool", "tool_call_id": "ws-1", "content": ""}
    assert follow_up[4]["tool_call_id"] == "f-1"
    assert reply.content == "Tram news [1]."
    assert reply.rounds[0].results[0].ok and reply.rounds[0].results[0].content == ""


async def test_length_and_content_filter_stop_reasons(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path)
    s = script(
        completion("truncated answ", finish_reason="length"),
        completion("", tool_calls=[call("lookup", {"key": "a"})]),
        completion("bad", finish_reason="sensitive"),
    )
    persona = make_persona(settings, client_for(s))
    cut = await persona.respond("// long", conversation_id="len")
    assert (cut.stop_reason, cut.content) == ("length", "truncated answ")
    filtered = await persona.respond("// blocked", conversation_id="len")
    assert filtered.stop_reason == "content_filter"
    assert filtered.content == CONTENT_FILTER_NOTICE
    assert filtered.messages == [] and len(filtered.rounds) == 1
    stored = await persona.runtime.store.get("len")
    assert stored is not None and {m.turn for m in stored} == {1}


async def test_length_with_tool_calls_ends_the_turn(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("", tool_calls=[call("lookup", '{"key": "a')], finish_reason="length"))
    persona = make_persona(settings, client_for(s))
    reply = await persona.respond("// x")
    assert reply.stop_reason == "length"
    assert reply.content == persona.spec.final_answer_fallback
    assert all(not (m.role == "assistant" and m.tool_calls) for m in reply.messages)


async def test_tool_calls_without_offered_tools_are_dropped(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("Sure.", tool_calls=[call("lookup", {"key": "a"})]))
    reply = await make_persona(settings, client_for(s)).respond("no prefix")
    assert reply.content == "Sure." and reply.stop_reason == "completed"
    assert [m.role for m in reply.messages] == ["user", "assistant"]
    assert reply.messages[1].tool_calls is None  # type: ignore[union-attr]


async def test_api_errors_propagate_and_store_nothing(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(
        completion("", tool_calls=[call("lookup", {"key": "a"})]),
        error(400, "1214", "messages invalid"),
    )
    persona = make_persona(settings, client_for(s))
    with pytest.raises(BadRequestError):
        await persona.respond("// fail", conversation_id="f")
    assert await persona.runtime.store.get("f") is None


# --------------------------------------------------------------------------- modes and options


async def test_tools_always_offers_functions_on_plain_messages(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(
        completion("", tool_calls=[call("calculate", {"expression": "6*7"})]), completion("42")
    )
    persona = make_persona(settings, client_for(s), tools=[calculate], tools_always=True)
    reply = await persona.respond("what is 6*7")
    assert tool_names(s.requests[0]) == ["calculate"]
    assert json.loads(reply.rounds[0].results[0].content)["result"] == 42


async def test_mode_off_offers_only_function_tools(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("a"), completion("b"))
    settings = make_settings(tmp_path, web_search_mode="off")
    await make_persona(settings, client_for(s)).respond("// with functions")
    await make_persona(settings, client_for(s), tools=()).respond("// without any")
    assert tool_names(s.requests[0]) == ["lookup"]
    assert "tools" not in s.requests[1]


async def test_client_mode_searches_through_the_web_search_api(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, web_search_mode="client", web_search_count=2)
    results = {"id": "s1", "created": 1, "search_result": [source(7), source(8)]}
    more = {"id": "s2", "created": 1, "search_result": [source(8), source(9, link="")]}
    s = script(
        completion("", tool_calls=[call("search_web", {"query": "tram"}, id="q1"),
                                   call("search_web", {"query": "bus", "recency": "oneDay"},
                                        id="q2")]),
        results,
        more,
        completion("Trams [ref_1], buses [ref_2] and [ref_3]."),
    )  # fmt: skip
    reply = await make_persona(settings, client_for(s)).respond("// transit news")
    assert tool_names(s.requests[0]) == ["lookup", "search_web"]
    assert s.paths[1] == s.paths[2] == "/api/paas/v4/web_search"
    queries = sorted((r["search_query"], r["search_recency_filter"]) for r in s.requests[1:3])
    assert queries == [("bus", "oneDay"), ("tram", "noLimit")]
    assert all(r["count"] == 2 for r in s.requests[1:3])
    tool_messages = [m for m in s.requests[3]["messages"] if m["role"] == "tool"]
    first = json.loads(tool_messages[0]["content"])
    second = json.loads(tool_messages[1]["content"])
    assert [e["ref"] for e in first] == ["ref_1", "ref_2"]
    assert [e["ref"] for e in second] == ["ref_2", "ref_3"]  # a repeated source keeps its number
    assert first[0] == {"ref": "ref_1", "title": "Title 7", "url": "https://ex.org/7",
                        "site": "Site 7", "date": source(7)["publish_date"],
                        "snippet": "Snippet 7"}  # fmt: skip
    assert reply.content == "Trams [1], buses [2] and [3]."
    assert [c.title for c in reply.citations] == ["Title 7", "Title 8", "Title 9"]


async def test_client_mode_search_failure_is_told_to_the_model(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, web_search_mode="client")
    s = script(
        completion("", tool_calls=[call("search_web", {"query": "x"})]),
        error(429, "1113", "Insufficient balance"),
        completion("I could not search."),
    )
    reply = await make_persona(settings, client_for(s), tools=()).respond("// x")
    assert not reply.rounds[0].results[0].ok
    assert "InsufficientBalanceError" in reply.rounds[0].results[0].content
    assert reply.content == "I could not search."


async def test_settings_flow_into_the_request(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, llm_temperature=0.2, llm_thinking="disabled")
    s = script(completion("a"), completion("b"))
    await make_persona(settings, client_for(s)).respond("x")
    await make_persona(settings, client_for(s), model="glm-4.5", temperature=0.9,
                       thinking="enabled").respond("y")  # fmt: skip
    assert (s.requests[0]["temperature"], s.requests[0]["thinking"]) == (0.2, {"type": "disabled"})
    assert s.requests[1]["model"] == "glm-4.5"
    assert (s.requests[1]["temperature"], s.requests[1]["thinking"]) == (0.9, {"type": "enabled"})


# --------------------------------------------------------------------------- streaming


def conversation() -> list[dict[str, Any]]:
    return [
        completion("Let me check.", tool_calls=[call("lookup", {"key": "a"}, id="s1"),
                   call("lookup", {"key": "b"}, id="s2")], reasoning="two lookups",
                   usage=(12, 4)),
        completion("Found [ref_1] and [ref_2].", web_search=[source(1), source(2)],
                   reasoning="answer", usage=(40, 9)),
    ]  # fmt: skip


async def test_stream_and_respond_produce_the_same_reply(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    plain, streamed = script(*conversation()), script(*conversation())
    one = make_persona(make_settings(tmp_path / "a"), client_for(plain))
    two = make_persona(make_settings(tmp_path / "b"), client_for(streamed))
    reply = await one.respond("// a and b", conversation_id="same")
    events = [e async for e in two.stream("// a and b", conversation_id="same")]
    done = events[-1]
    assert isinstance(done, Done)

    def comparable(r: Any) -> dict[str, Any]:
        data = r.model_dump()
        for round_ in data["rounds"]:
            round_["duration_ms"] = 0
            for result in round_["results"]:
                result["duration_ms"] = 0
        return data

    assert comparable(done.reply) == comparable(reply)
    for a, b in zip(plain.requests, streamed.requests, strict=True):
        assert a["messages"] == b["messages"] and a["tools"] == b["tools"]
        assert (a["stream"], b["stream"]) == (False, True)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me check.Found [1] and [2]."
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextDelta)]
    assert kinds == ["RoundStarted", "ToolFinished", "ToolFinished", "Done"]
    stored_a, stored_b = await one.runtime.store.get("same"), await two.runtime.store.get("same")
    assert stored_a is not None and stored_b is not None
    assert [m.message for m in stored_a] == [m.message for m in stored_b]


async def test_stream_events_serialise(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(*conversation())
    events = [e async for e in make_persona(settings, client_for(s)).stream("// a")]
    dicts = [e.to_dict() for e in events]
    json.dumps(dicts)
    assert dicts[-1]["type"] == "done" and "messages" not in dicts[-1]["reply"]
    assert {"type": "round_started", "round": 1, "tools": ["lookup", "lookup"]} in dicts


async def test_one_info_line_per_round(
    settings: Settings, script: MakeScript, client_for: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="generic_framework.persona")
    s = script(*conversation())
    await make_persona(settings, client_for(s)).respond("// a")
    lines = [r.getMessage() for r in caplog.records if r.name == "generic_framework.persona"]
    assert len(lines) == 2
    assert lines[0].startswith("tester round 1/4: tools=lookup,lookup, ")
    assert lines[0].endswith(" 16 tokens")
    assert lines[1].startswith("tester round 2/4: tools=none, ")


async def test_closing_a_stream_early_releases_the_conversation(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    release = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns on its own."""
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    s = script(
        completion("", tool_calls=[call("wait_forever", "{}"), call("lookup", {"key": "a"})]),
        completion("next turn"),
    )
    persona = make_persona(settings, client_for(s), tools=[wait_forever, lookup])
    events = persona.stream("// go", conversation_id="early")
    async for event in events:
        if isinstance(event, ToolFinished):  # lookup finished; wait_forever still runs
            break
    await events.aclose()
    assert cancelled.is_set()  # the pending tool call was cancelled, not leaked
    reply = await asyncio.wait_for(persona.respond("again", conversation_id="early"), 30)
    assert reply.content == "next turn"
    stored = await persona.runtime.store.get("early")
    assert stored is not None and [m.message.content for m in stored] == ["again", "next turn"]


async def test_web_search_false_turns_the_builtin_tool_off(
    settings: Settings, script: MakeScript, client_for: MakeClient
) -> None:
    s = script(completion("ok"))
    persona = make_persona(settings, client_for(s), web_search=False)
    await persona.respond("// q")
    assert persona.spec.web_search.mode == "off" and tool_names(s.requests[0]) == ["lookup"]


async def test_streamed_markers_are_rewritten_as_they_arrive(
    tmp_path: Any, script: MakeScript, client_for: MakeClient
) -> None:
    # Round 1 searched server-side and asked for a lookup; round 2 searched again, and its text
    # streams before its sources arrive (on the last chunk). Its labels are its own search's, so
    # while it streams they are numbered after round 1's two sources: what the book says too.
    again = dict(source(1), link="https://ex.org/new")
    conversation = script(
        completion("Checking [ref_2].", tool_calls=[call("lookup", {"key": "a"})],
                   web_search=[source(1), source(2)]),
        completion("New: [ref_1], see [ref_1", web_search=[again]),
    )  # fmt: skip
    persona = make_persona(make_settings(tmp_path), client_for(conversation))
    events = [e async for e in persona.stream("// a", conversation_id="c")]
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(pieces) == "Checking [2].New: [3], see [ref_1"
    # No piece shows part of a marker; the unfinished one at the end comes out as written.
    assert pieces[-1] == "[ref_1"
    assert not any("ref" in piece or piece.endswith("[") for piece in pieces[:-1])
    done = events[-1]
    assert isinstance(done, Done)
    assert done.reply.content == "New: [3], see [ref_1"
    assert [c.url for c in done.reply.citations][2] == "https://ex.org/new"
