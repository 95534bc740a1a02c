"""Checks shared by the fault matrix's two runs (persona in process, and through the service)."""

from __future__ import annotations

from fault_fixtures import FIXTURES, Case

from generic_framework.core.reply import Reply
from generic_framework.core.sanitize import history_problems
from generic_framework.mock import load_fixture
from generic_framework.mock.fixture import Expected, ExpectedError
from generic_framework.store import ConversationStore
from generic_framework.wire.messages import AssistantMessage, UserMessage


def expected_of(case: Case) -> Expected:
    if case.refused:
        return Expected(error=ExpectedError(type="APIConnectionError"))
    expected = load_fixture(FIXTURES / f"{case.name}.json").expected
    assert expected is not None
    return expected


async def check_store(store: ConversationStore, case: Case, reply: Reply | None) -> None:
    """A finished turn is stored whole and valid; a failed or filtered one not at all.

    With the reply's messages at hand (in this process), the stored roles must be theirs.
    """
    stored = await store.get(case.name)
    if reply is None or reply.stop_reason == "content_filter":
        assert stored is None
        return
    assert stored is not None
    messages = [item.message for item in stored]
    assert history_problems(messages) == []
    assert {item.turn for item in stored} == {1}
    assert isinstance(messages[0], UserMessage)
    assert isinstance(messages[-1], AssistantMessage) and not messages[-1].tool_calls
    if reply.messages:
        assert [m.role for m in messages] == [m.role for m in reply.messages]
