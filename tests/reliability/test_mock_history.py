"""A recorded tool round replayed twice in one conversation: ids repeat across turns."""

from __future__ import annotations

from pathlib import Path

import pytest
from mock_helpers import assistant, tool_call, tool_message, user

from generic_framework.config import Settings
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.mock.validation import MockError, validate_messages
from generic_framework.runtime import Runtime

REPO = Path(__file__).resolve().parents[2]


def test_a_call_id_made_again_in_a_later_turn_may_be_answered_again() -> None:
    call = [tool_call("call_1", "calculate", {"expression": "1 + 1"})]
    turn = [user("sum?"), assistant(calls=call), tool_message("call_1", "2"), assistant("2.")]
    validate_messages([*turn, *turn])
    with pytest.raises(MockError, match="answers tool call 'call_1' a second time"):
        validate_messages([*turn[:3], tool_message("call_1", "2")])


async def test_the_same_tool_question_twice_in_one_conversation(tmp_path: Path) -> None:
    question = "// what is 17% of 2,340?"
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=server.base_url,
            personas_dir=REPO / "personas",
            data_dir=tmp_path,
            llm_max_retries=0,
        )
        async with Runtime(settings) as runtime:
            scout = runtime.persona("scout")
            first = await scout.respond(question, conversation_id="twice")
            second = await scout.respond(question, conversation_id="twice")
    assert second.content == first.content
    assert len(second.rounds) == 2
