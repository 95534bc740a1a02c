"""``remember(fact)`` and ``forget(id)``: the function tools of a persona with memory.

They are made for one turn (:func:`memory_tools`) and bound to its user and persona, so a
call can only ever keep or erase that user's facts for that persona, whatever the model
writes. A refused fact (too long, a key or token, the memory full) and an unknown id come
back to the model as a failed call with the reason, never as an exception of the turn.
"""

from __future__ import annotations

import json
from typing import Any

from generic_framework.store.memories import MemoryStore, check_memory_id
from generic_framework.tools.base import ToolOutcome
from generic_framework.wire.messages import FunctionToolSpec

__all__ = [
    "FORGET",
    "MEMORY_TOOL_NAMES",
    "MEMORY_TOOL_SPECS",
    "REMEMBER",
    "MemoryTool",
    "memory_tools",
]

REMEMBER = "remember"
FORGET = "forget"

_SPECS = {
    REMEMBER: FunctionToolSpec.model_validate(
        {
            "type": "function",
            "function": {
                "name": REMEMBER,
                "description": (
                    "Keep one short fact about the user for later conversations (at most a "
                    "few hundred characters; never a password, key or token). Call it when "
                    "the user asks you to remember something about them."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "fact": {"type": "string", "description": "the fact, one sentence"}
                    },
                    "required": ["fact"],
                },
            },
        }
    ),
    FORGET: FunctionToolSpec.model_validate(
        {
            "type": "function",
            "function": {
                "name": FORGET,
                "description": "Erase one kept fact about the user, by its id (mem_...).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "the fact's id, mem_..."}
                    },
                    "required": ["id"],
                },
            },
        }
    ),
}


MEMORY_TOOL_NAMES = frozenset({REMEMBER, FORGET})
"""The names a persona with memory keeps for its two tools."""
MEMORY_TOOL_SPECS: tuple[FunctionToolSpec, ...] = (_SPECS[REMEMBER], _SPECS[FORGET])
"""The two tools' wire forms, in the order a turn offers them."""


def _failed(text: str) -> ToolOutcome:
    return ToolOutcome(ok=False, content=f"Error: {text}", error=text)


class MemoryTool:
    """One of the two tools, bound to a user and persona (see the module).

    Args:
        name: :data:`REMEMBER` or :data:`FORGET`.
        store: where the facts are kept.
        user_id: whose facts.
        persona: which persona's.
        max_items: the persona's bound.
    """

    __slots__ = ("max_items", "name", "persona", "store", "user_id")

    def __init__(
        self, name: str, store: MemoryStore, user_id: str, persona: str, max_items: int
    ) -> None:
        self.name = name
        self.store = store
        self.user_id = user_id
        self.persona = persona
        self.max_items = max_items

    @property
    def spec(self) -> FunctionToolSpec:
        """The tool's wire form (built once for all turns)."""
        return _SPECS[self.name]

    async def run(self, arguments: str, *, time_limit: float) -> ToolOutcome:
        """Keep or erase one fact; a refusal is a failed call the model reads."""
        key = "fact" if self.name == REMEMBER else "id"
        value = _argument(arguments, key)
        if value is None:
            return _failed(f"{self.name} takes one argument, {key!r}, a string")
        if self.name == REMEMBER:
            return await self._remember(value)
        return await self._forget(value)

    async def _remember(self, fact: str) -> ToolOutcome:
        try:
            kept = await self.store.remember(
                self.user_id, self.persona, fact, max_items=self.max_items
            )
        except ValueError as exc:
            return _failed(f"not remembered: {exc}")
        # The text alone, no id: the answer is the same for everyone (so a recorded turn
        # replays), and the fact's id is in the memory block from the next turn on.
        return ToolOutcome(ok=True, content=f"Remembered: {kept.text}", value=kept)

    async def _forget(self, memory_id: str) -> ToolOutcome:
        try:
            check_memory_id(memory_id)
        except ValueError as exc:
            return _failed(str(exc))
        gone = await self.store.forget(self.user_id, memory_id, persona=self.persona)
        if gone is None:
            return _failed(f"there is no kept fact {memory_id!r}")
        return ToolOutcome(ok=True, content=f"Forgotten: {memory_id}.", value=gone)


def _argument(arguments: str, key: str) -> str | None:
    """The string argument ``key`` of a call's JSON arguments, or ``None``."""
    try:
        data: Any = json.loads(arguments or "{}")
    except ValueError:
        return None
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def memory_tools(
    store: MemoryStore, user_id: str, persona: str, max_items: int
) -> tuple[MemoryTool, MemoryTool]:
    """The turn's ``remember`` and ``forget``, bound to its user and persona."""
    return (
        MemoryTool(REMEMBER, store, user_id, persona, max_items),
        MemoryTool(FORGET, store, user_id, persona, max_items),
    )
