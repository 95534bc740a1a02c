"""Personas with stdio MCP servers: real child processes (tests/mcp_servers/notes_server.py)
behind a scripted GLM (every request the model would get is recorded and checked)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import EXAMPLES, alive, wait_for_file, wait_for_pid
from support import wait_for
from zai_script import Script, call, completion

from generic_framework.core.events import Done, ToolFinished
from generic_framework.core.persona import Persona
from generic_framework.mcp_tools import MCPFailure, MCPServerSpec
from generic_framework.runtime import Runtime
from generic_framework.tools import tool

pytestmark = pytest.mark.e2e

MakeRuntime = Callable[..., Runtime]
ZAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def keeper(runtime: Runtime, *servers: dict[str, Any], **extra: Any) -> Persona:
    """A persona whose only tools are its MCP servers', offered on every message."""
    return Persona(
        "keeper",
        "Keep the user's notes.",
        web_search=False,
        tools_always=True,
        mcp_servers=servers,
        runtime=runtime,
        **extra,
    )


def offered(request: dict[str, Any]) -> list[str]:
    return [spec["function"]["name"] for spec in request.get("tools") or []]


def tool_messages(script: Script, index: int) -> list[dict[str, Any]]:
    return [m for m in script.messages(index) if m["role"] == "tool"]


async def test_discovery_lists_the_servers_tools_under_zai_names(
    runtimes: MakeRuntime, notes: dict[str, Any]
) -> None:
    script = Script(completion("Nothing to save."))
    runtime = runtimes(script)
    reply = await keeper(runtime, notes).respond("hello")
    names = offered(script.requests[0])
    assert names[:4] == ["notes__add_note", "notes__list_notes", "notes__search_notes",
                         "notes__stats"]  # fmt: skip
    assert {"notes__wait", "notes__fail", "notes__crash"} <= set(names)
    dotted = [name for name in names if name.startswith("notes__notes_export_")]
    assert len(dotted) == 1 and all(ZAI_NAME.match(name) for name in names)
    add = script.requests[0]["tools"][0]["function"]
    assert add["description"] == "Save a short note and return its number."
    assert add["parameters"]["properties"]["text"]["type"] == "string"
    assert add["parameters"]["required"] == ["text"]
    assert reply.content == "Nothing to save." and reply.stop_reason == "completed"


async def test_a_two_round_turn_whose_tool_result_came_from_the_mcp_server(
    runtimes: MakeRuntime, notes: dict[str, Any]
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__add_note", {"text": "ferry leaves at 9"}, id="c1")]),
        completion("Noted: the ferry leaves at 9."),
    )
    runtime = runtimes(script)
    reply = await keeper(runtime, notes).respond("remember that the ferry leaves at 9")
    (answer,) = tool_messages(script, 1)
    # Only the server knows it is the first note: the text can only have come from it.
    assert answer["content"] == "Saved note 1: ferry leaves at 9"
    assert answer["tool_call_id"] == "c1"
    assert reply.rounds[0].results[0].ok and reply.rounds[0].results[0].name == "notes__add_note"
    assert reply.content == "Noted: the ferry leaves at 9." and len(reply.rounds) == 2


async def test_parallel_mcp_calls_run_together_and_are_answered_in_call_order(
    runtimes: MakeRuntime, notes: dict[str, Any]
) -> None:
    calls = [
        call("notes__wait", {"seconds": 1.5}, id="slow"),
        call("notes__wait", {"seconds": 0.1}, id="quick"),
        call("notes__add_note", {"text": "parallel"}, id="save"),
    ]
    script = Script(completion(tool_calls=calls), completion("All three done."))
    runtime = runtimes(script)
    finished: list[str] = []
    async for event in keeper(runtime, notes).stream("three things at once"):
        if isinstance(event, ToolFinished):
            finished.append(event.name)
        elif isinstance(event, Done):
            assert event.reply.content == "All three done."
    answers = tool_messages(script, 1)
    assert [m["tool_call_id"] for m in answers] == ["slow", "quick", "save"]
    assert [m["content"] for m in answers] == [
        "Waited 1.5 seconds.",
        "Waited 0.1 seconds.",
        "Saved note 1: parallel",
    ]
    # The slow call finished last although it was made first: the calls ran concurrently.
    assert finished[-1] == "notes__wait" and finished.index("notes__add_note") < 2


async def test_a_server_killed_mid_turn_is_an_error_text_then_restarted(
    runtimes: MakeRuntime,
    notes: dict[str, Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__wait", {"seconds": 60})]),
        completion(tool_calls=[call("notes__add_note", {"text": "after the crash"})]),
        completion("The server restarted; your note is saved."),
    )
    runtime = runtimes(script)
    pid_file, waiting = tmp_path / "notes.pid", tmp_path / "waiting"

    async def kill_during_the_call() -> int:
        pid = await asyncio.to_thread(wait_for_pid, pid_file)
        await asyncio.to_thread(wait_for_file, waiting)  # the 60-second call is under way
        os.kill(pid, signal.SIGKILL)
        return pid

    killer = asyncio.ensure_future(kill_during_the_call())
    server = {**notes, "env": {**notes["env"], "NOTES_WAITING_FILE": str(waiting)}}
    reply = await keeper(runtime, server).respond("wait a minute, then save a note")
    first_pid = await killer
    lost, saved = reply.rounds[0].results[0], reply.rounds[1].results[0]
    assert not lost.ok
    assert lost.content.startswith("Error: tool 'notes__wait' failed: the connection to the MCP "
                                   "server 'notes' was lost during the call")  # fmt: skip
    assert lost.content.endswith("it is restarted for the next call")
    assert tool_messages(script, 1)[0]["content"] == lost.content
    # A new process answered the next call (the in-memory notes started afresh).
    assert saved.ok and saved.content == "Saved note 1: after the crash"
    second_pid = wait_for_pid(pid_file, not_=first_pid)
    assert second_pid != first_pid and alive(second_pid) and not alive(first_pid)
    assert reply.stop_reason == "completed" and len(reply.rounds) == 3
    assert any("was lost during the call" in r.message for r in caplog.records)


async def test_a_hung_call_hits_the_servers_timeout_and_the_session_survives(
    runtimes: MakeRuntime, notes: dict[str, Any], tmp_path: Path
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__wait", {"seconds": 60})]),
        completion("It took too long."),
        completion(tool_calls=[call("notes__add_note", {"text": "still here"})]),
        completion("Saved."),
    )
    runtime = runtimes(script)
    persona = keeper(runtime, {**notes, "timeout": 1.5})
    loop = asyncio.get_running_loop()
    started = loop.time()
    reply = await persona.respond("wait a minute")
    took = loop.time() - started
    result = reply.rounds[0].results[0]
    assert result.content == (
        "Error: tool 'notes__wait' failed: the MCP server 'notes' did not answer 'wait' within "
        "1.5 seconds"
    )
    assert took < 45  # the start of the server (30 s at most) plus 1.5 s, not 60 s
    pid = wait_for_pid(tmp_path / "notes.pid")
    again = await persona.respond("save a note")
    assert again.rounds[0].results[0].content == "Saved note 1: still here"
    assert wait_for_pid(tmp_path / "notes.pid") == pid  # the same process answered


async def test_an_error_result_reaches_the_model_as_an_error_text(
    runtimes: MakeRuntime, notes: dict[str, Any]
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__fail", {"message": "disk full"})]),
        completion("Sorry, the notes store is full."),
    )
    reply = await keeper(runtimes(script), notes).respond("save it")
    result = reply.rounds[0].results[0]
    assert not result.ok
    assert result.content == (
        "Error: tool 'notes__fail' reported an error: Error executing tool fail: disk full"
    )
    assert tool_messages(script, 1)[0]["content"] == result.content


async def test_servers_that_fail_to_start_are_left_out_with_a_warning(
    runtimes: MakeRuntime, notes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    missing = {"name": "ghost", "command": "/nonexistent/mcp-server", "timeout": 5}
    failing = {
        "name": "broken",
        "command": sys.executable,
        "args": ["-c", "import sys; print('ImportError: no module foo', file=sys.stderr); "
                       "sys.exit(3)"],
        "timeout": 5,
    }  # fmt: skip
    script = Script(completion("Only the notes are there."))
    caplog.set_level(logging.WARNING, "generic_framework")
    reply = await keeper(runtimes(script), missing, notes, failing).respond("hello")
    names = offered(script.requests[0])
    assert "notes__add_note" in names
    assert not any(name.startswith(("ghost__", "broken__")) for name in names)
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "keeper: MCP server 'ghost' left out of this turn" in text
    assert "the MCP server 'ghost' could not be started: FileNotFoundError" in text
    assert "the MCP server 'broken' could not be started" in text
    assert "ImportError: no module foo" in text  # the child's stderr, quoted
    assert reply.content == "Only the notes are there."


async def test_sessions_are_reused_across_turns_and_children_end_with_the_runtime(
    notes: dict[str, Any], settings: Any, tmp_path: Path
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__add_note", {"text": "one"})]),
        completion("First."),
        completion(tool_calls=[call("notes__list_notes", {})]),
        completion("Second."),
    )
    runtime = Runtime(settings, transport=script)
    persona = keeper(runtime, notes)
    try:
        await persona.respond("save one", conversation_id="c1")
        pid = wait_for_pid(tmp_path / "notes.pid")
        second = await persona.respond("list them", conversation_id="c1")
        # The same process answered, and it still had the first turn's note.
        assert second.rounds[0].results[0].content.startswith("one")
        assert wait_for_pid(tmp_path / "notes.pid") == pid and alive(pid)
    finally:
        await runtime.aclose()
    assert not alive(pid)  # closed with the runtime, not later
    script.assert_done()


async def test_tool_names_never_collide(
    runtimes: MakeRuntime, notes: dict[str, Any], tmp_path: Path
) -> None:
    @tool
    def notes__add_note(text: str) -> str:
        """A function that happens to have the name an MCP tool would get."""
        return "from the function"

    second = {**notes, "name": "notes-2", "env": {"NOTES_PID_FILE": str(tmp_path / "two.pid")}}
    script = Script(completion("ok"))
    await keeper(runtimes(script), notes, second, tools=[notes__add_note]).respond("hi")
    names = offered(script.requests[0])
    assert len(names) == len(set(names)) and all(ZAI_NAME.match(name) for name in names)
    assert names[0] == "notes__add_note"  # the function keeps its name
    assert "notes-2__add_note" in names
    renamed = [n for n in names if n.startswith("notes__add_note_")]
    assert len(renamed) == 1  # the MCP tool of server "notes" got the hashed form


async def test_calls_reach_the_server_that_owns_the_tool(
    runtimes: MakeRuntime, notes: dict[str, Any], tmp_path: Path
) -> None:
    second = {**notes, "name": "notes-2", "env": {"NOTES_PID_FILE": str(tmp_path / "two.pid")}}
    script = Script(
        completion(tool_calls=[call("notes-2__add_note", {"text": "for two"})]),
        completion(tool_calls=[call("notes__stats", {}), call("notes-2__stats", {})]),
        completion("done"),
    )
    reply = await keeper(runtimes(script), notes, second).respond("save to the second")
    stats = [result.content for result in reply.rounds[1].results]
    assert stats == ['{\n  "notes": 0,\n  "characters": 0\n}',
                     '{\n  "notes": 1,\n  "characters": 7\n}']  # fmt: skip


async def test_the_example_persona_with_its_allowlist_and_environment(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLES.parents[1])  # its args are relative to the project folder
    script = Script(
        completion(tool_calls=[call("notes__add_note", {"text": "milk"})]),
        completion("Saved."),
    )
    custom = settings.model_copy(update={"personas_dir": EXAMPLES})
    runtime = Runtime(custom, transport=script, environ={"HOME": str(tmp_path)})
    try:
        assert await runtime.discover() == 1
        persona = runtime.persona("notes")
        await persona.respond("remember milk")
    finally:
        await runtime.aclose()
    assert offered(script.requests[0]) == [
        "notes__add_note",
        "notes__list_notes",
        "notes__search_notes",
    ]
    # NOTES_FILE = "${HOME}/..." came from the runtime's environment, not the process's.
    saved = tmp_path / ".generic-framework-notes.json"
    assert saved.read_text(encoding="utf-8") == '["milk"]'
    script.assert_done()


async def test_closing_the_runtime_during_a_call_ends_the_call_and_the_child(
    notes: dict[str, Any], settings: Any, tmp_path: Path
) -> None:
    runtime = Runtime(settings)
    waiting = tmp_path / "waiting"
    server = {**notes, "env": {**notes["env"], "NOTES_WAITING_FILE": str(waiting)}}
    connection = runtime.mcp.connection(MCPServerSpec.model_validate(server))
    pending = asyncio.ensure_future(connection.call("wait", {"seconds": 60}))
    pid = await asyncio.to_thread(wait_for_pid, tmp_path / "notes.pid")
    await asyncio.to_thread(wait_for_file, waiting)  # the call is under way
    await runtime.aclose()
    assert not alive(pid)
    with pytest.raises(MCPFailure, match=r"^the MCP server 'notes' was closed with its runtime$"):
        await asyncio.wait_for(pending, 10)
    with pytest.raises(MCPFailure, match="closed with its runtime"):
        await connection.listing()


async def test_a_server_that_cannot_be_restarted_answers_with_the_reason(
    runtimes: MakeRuntime,
    notes: dict[str, Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    refuse = tmp_path / "refuse"
    server = {**notes, "env": {**notes["env"], "NOTES_REFUSE_IF": str(refuse)}}
    script = Script(
        completion(tool_calls=[call("notes__add_note", {"text": "one"})]),
        completion("Saved."),
        completion(tool_calls=[call("notes__list_notes", {})]),
        completion("The notes server is down."),
    )
    persona = keeper(runtimes(script), server)
    await persona.respond("save one")
    pid = wait_for_pid(tmp_path / "notes.pid")
    refuse.touch()
    os.kill(pid, signal.SIGKILL)
    (connection,) = persona.runtime.mcp.connections
    await wait_for(lambda: not connection.running, "the session notices the child's end", 30)
    reply = await persona.respond("list my notes")
    # The tools it had are still offered, and calling one says why it is not there.
    assert "notes__list_notes" in offered(script.requests[2])
    result = reply.rounds[0].results[0]
    assert not result.ok
    assert result.content.startswith(
        "Error: tool 'notes__list_notes' failed: the MCP server 'notes' could not be started:"
    )
    assert f"refusing to start while {refuse} exists" in result.content
    assert reply.content == "The notes server is down."
    assert any("is down; its last known tools are offered" in r.getMessage()
               for r in caplog.records)  # fmt: skip


async def test_a_server_that_died_between_turns_is_restarted_before_the_next(
    runtimes: MakeRuntime, notes: dict[str, Any], tmp_path: Path
) -> None:
    script = Script(
        completion(tool_calls=[call("notes__add_note", {"text": "one"})]),
        completion("Saved."),
        completion(tool_calls=[call("notes__add_note", {"text": "two"})]),
        completion("Saved again."),
    )
    persona = keeper(runtimes(script), notes)
    await persona.respond("save one")
    first = wait_for_pid(tmp_path / "notes.pid")
    os.kill(first, signal.SIGKILL)
    (connection,) = persona.runtime.mcp.connections
    await wait_for(lambda: not connection.running, "the session notices the child's end", 30)
    reply = await persona.respond("save two")
    # No error reached the model: a new process answered (its notes started afresh).
    assert reply.rounds[0].results[0].content == "Saved note 1: two"
    assert wait_for_pid(tmp_path / "notes.pid", not_=first) != first
