"""A turn's lifecycle hooks (core/hooks.py), fired by its watch, and the turn service's use of
them: every hook sees the turn's own account, ``on_end`` fires once whatever the end, and a
turn with nothing to count and no hook registered runs the persona without any."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from generic_framework.config import Settings
from generic_framework.core.account import TurnAccount
from generic_framework.core.events import Done, ToolFinished
from generic_framework.core.hooks import HookChain, TurnHooks
from generic_framework.core.persona import Persona
from generic_framework.core.reply import Reply, ToolResult
from generic_framework.core.spec import PersonaSpec
from generic_framework.runtime import Runtime
from generic_framework.testing import FunctionModel, tool_call
from generic_framework.tools.examples import calculate
from generic_framework.turns import Ask
from generic_framework.wire.errors import ServerError
from generic_framework.wire.messages import ChatCompletion, ChatRequest, ToolCall


class Journal(TurnHooks):
    """Writes down every hook call, with the account's tokens at that moment."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_start(self, persona: str, account: TurnAccount) -> None:
        self.seen.append(("start", persona))

    def on_model_call(self, account: TurnAccount, completion: ChatCompletion) -> None:
        self.seen.append(("model", account.total))

    def on_tool_call(self, account: TurnAccount, call: ToolCall, result: ToolResult) -> None:
        self.seen.append(("tool", (call.function.name, result.ok)))

    def on_end(self, account: TurnAccount, outcome: str) -> None:
        self.seen.append(("end", (outcome, account.total)))


def _tool_then(answer: str | Exception) -> Any:
    def answering(request: ChatRequest) -> Any:
        if request.messages[-1].role != "tool":
            return [tool_call("calculate", {"expression": "2 + 2"})]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return answering


def _runtime(tmp_path: Path, model: FunctionModel) -> Runtime:
    settings = Settings.defaults(api_key="k", data_dir=tmp_path / "d", personas_dir=tmp_path)
    return Runtime(settings, model=model)


def _helper(runtime: Runtime) -> Persona:
    return Persona("helper", "You help.", tools=[calculate], tools_always=True, runtime=runtime)


async def test_hooks_see_each_call_and_one_end_with_the_account(tmp_path: Path) -> None:
    model = FunctionModel(_tool_then("four"))
    journal = Journal()
    async with _runtime(tmp_path, model) as runtime:
        reply = await _helper(runtime).respond("2 + 2?", hooks=journal)
    kinds = [kind for kind, _ in journal.seen]
    assert kinds == ["start", "model", "tool", "model", "end"]
    assert journal.seen[0] == ("start", "helper")
    assert journal.seen[2] == ("tool", ("calculate", True))
    assert journal.seen[-1] == ("end", (reply.stop_reason, reply.usage.total_tokens))
    assert journal.seen[1][1] < reply.usage.total_tokens  # the first call's tokens only


async def test_on_end_fires_once_for_a_failed_and_an_abandoned_turn(tmp_path: Path) -> None:
    failing = Journal()
    async with _runtime(tmp_path, FunctionModel(_tool_then(ServerError("down")))) as runtime:
        with pytest.raises(ServerError):
            await _helper(runtime).respond("2 + 2?", hooks=failing)
    ends = [value for kind, value in failing.seen if kind == "end"]
    assert len(ends) == 1 and ends[0][0] == "error" and ends[0][1] > 0

    # The reader leaves while the second call runs: the turn is cancelled, and its end carries
    # the first call's billed tokens.
    never = asyncio.Event()

    async def answering(request: ChatRequest) -> Any:
        if request.messages[-1].role != "tool":
            return [tool_call("calculate", {"expression": "2 + 2"})]
        await never.wait()
        return "four"

    left = Journal()
    async with _runtime(tmp_path, FunctionModel(answering)) as runtime:
        events = _helper(runtime).stream("2 + 2?", hooks=left)
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if isinstance(event, ToolFinished):
                    break  # the reader leaves mid-turn
    ends = [value for kind, value in left.seen if kind == "end"]
    assert len(ends) == 1 and ends[0][0] == "cancelled" and ends[0][1] > 0


async def test_a_chain_calls_every_hook_in_order(tmp_path: Path) -> None:
    first, second = Journal(), Journal()
    async with _runtime(tmp_path, FunctionModel(lambda r: "hi")) as runtime:
        await _helper(runtime).respond("hello", hooks=HookChain([first, second]))
    assert first.seen == second.seen and first.seen[-1][0] == "end"


class Recording:
    """A persona that records the keyword arguments each turn gets."""

    spec = PersonaSpec(name="recording", system_prompt="")

    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []

    async def respond(self, text: str, **kwargs: Any) -> Reply:
        self.kwargs.append(kwargs)
        return Reply(content=text, model="m")

    async def stream(self, text: str, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        yield Done(Reply(content=text, model="m"))


async def test_the_service_passes_hooks_only_when_there_is_something_to_hook(
    tmp_path: Path,
) -> None:
    persona = Recording()
    async with _runtime(tmp_path, FunctionModel(lambda r: "hi")) as runtime:
        await runtime.turns.respond(Ask(persona, "hello", None))
        assert "hooks" not in persona.kwargs[-1]  # the local operator, no hook: none at all
        journal = Journal()
        runtime.turns.add_hooks(journal)
        await runtime.turns.respond(Ask(persona, "hello", None))
        assert persona.kwargs[-1]["hooks"] is journal
        events = await runtime.turns.stream(Ask(persona, "hello", None))
        assert [e async for e in events][-1].reply.content == "hello"
        assert persona.kwargs[-1]["hooks"] is journal


async def test_registered_hooks_reach_every_turn_of_the_service(tmp_path: Path) -> None:
    journal = Journal()
    async with _runtime(tmp_path, FunctionModel(_tool_then("four"))) as runtime:
        runtime.turns.add_hooks(journal)
        await runtime.turns.respond(Ask(_helper(runtime), "2 + 2?", None))
    assert [kind for kind, _ in journal.seen] == ["start", "model", "tool", "model", "end"]
