"""A turn whose tool round Z.AI billed and whose next call failed, for the tests of every edge
that counts turns against a daily limit (tests/service, tests/telegram).

The persona asks the example tool ``calculate`` in its first call (billed :data:`BILLED`
tokens); the second call, with the tool's result, fails upstream.
"""

from __future__ import annotations

from pathlib import Path

from generic_framework.store import ConversationStore, open_store
from generic_framework.testing import tool_call
from generic_framework.wire.errors import ServerError
from generic_framework.wire.messages import (
    AssistantMessage,
    ChatCompletion,
    ChatRequest,
    Choice,
    Usage,
)

BILLED = 500
TOOL = "calculate"


def billed_tool_round() -> ChatCompletion:
    """The first call: one tool call, billed :data:`BILLED` tokens."""
    call = tool_call(TOOL, {"expression": "2 + 2"}).model_copy(update={"index": 0})
    return ChatCompletion(
        id="billed-round",
        model="function-model",
        choices=[Choice(finish_reason="tool_calls", message=AssistantMessage(tool_calls=[call]))],
        usage=Usage(prompt_tokens=400, completion_tokens=100, total_tokens=BILLED),
    )


def fail_after_the_tool(request: ChatRequest) -> ChatCompletion:
    """A :class:`~generic_framework.testing.FunctionModel` function: the billed round, then a
    failure (Z.AI's 500) once the tool's result is in."""
    if request.messages[-1].role == "tool":
        raise ServerError("the second call failed", status_code=500)
    return billed_tool_round()


async def opened_store(backend: str, tmp_path: Path, postgres_server: object) -> ConversationStore:
    """A real store, open: a SQLite file, or a fresh database of the test PostgreSQL server."""
    if backend == "postgres":
        url = postgres_server.create_database()  # type: ignore[attr-defined]
    else:
        url = str(tmp_path / "data" / "conversations.sqlite3")
    store = open_store(url, sqlite_path="unused", pool_size=4)
    await store.open()
    return store
