"""What the turn service adds to the turn of a persona with memory (docs/design/0331).

:func:`with_memory` reads the kept facts of the turn's own user for the persona (one short
store read) and returns the turn's options with the block of facts in its instructions and
``remember``/``forget`` among its tools, both bound to that user and persona. Whose memory:
the owner of the turn's conversation (its key names the owner: the caller's own, or in a
group chat the group's own user, while the member asking is the caller counted for limits),
so a member's private memory is never used in a group; a turn without a stored conversation
is the caller's; the process's own operator (no caller: the CLI's chat) is the bootstrap
admin. A persona without memory, and a turn with the caller's own tools (the caller runs
every call), get nothing.
"""

from __future__ import annotations

import dataclasses

from generic_framework.core.options import NO_OPTIONS, TurnOptions
from generic_framework.core.spec import PersonaSpec
from generic_framework.memory.block import memory_block
from generic_framework.memory.tools import memory_tools
from generic_framework.store.memories import MemoryStore
from generic_framework.store.users import BOOTSTRAP_USER, Caller, split_key

__all__ = ["memory_owner", "with_memory"]


def memory_owner(caller: Caller | None, conversation_id: str | None = None) -> str:
    """Whose memory a turn uses: the owner of its conversation; without one the caller's
    user, or the bootstrap admin without a caller."""
    if conversation_id is not None:
        return split_key(conversation_id)[0]
    return caller.user.id if caller is not None else BOOTSTRAP_USER


async def with_memory(
    store: MemoryStore,
    spec: PersonaSpec,
    caller: Caller | None,
    options: TurnOptions | None,
    conversation_id: str | None = None,
) -> TurnOptions | None:
    """``options`` with the persona's memory of the caller added (see the module); as given
    when the persona keeps none or the caller brings their own tools."""
    if not spec.memory.enabled or (options is not None and options.client_tools):
        return options
    user_id = memory_owner(caller, conversation_id)
    kept = await store.memories(user_id, spec.name)
    base = options or NO_OPTIONS
    tools = memory_tools(store, user_id, spec.name, spec.memory.max_items)
    return dataclasses.replace(
        base,
        instructions=(*base.instructions, memory_block(kept)),
        tools=(*base.tools, *tools),
    )
