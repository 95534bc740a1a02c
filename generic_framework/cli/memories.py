"""The ``memories`` commands: a user's kept facts listed, one erased.

They work on the database ``DATABASE_URL`` names (SQLite in DATA_DIR when unset), the one the
service reads, so a fact forgotten here is gone from the next turn on every replica.
"""

from __future__ import annotations

import json

from generic_framework.cli.common import EXIT_ERROR, EXIT_OK, err
from generic_framework.cli.users import store_command
from generic_framework.limits import check_persona_name
from generic_framework.store import ConversationStore
from generic_framework.store.memories import check_memory_id

__all__ = ["run_memories_forget", "run_memories_list"]


def run_memories_list(name: str, persona: str | None, as_json: bool) -> int:
    """``memories list --user NAME [--persona P] [--json]``."""

    async def work(store: ConversationStore) -> int:
        if persona is not None:
            check_persona_name(persona)
        user = await store.user(name)
        if user is None:
            err(f"error: no user named {name!r} (see: generic-framework users list)")
            return EXIT_ERROR
        kept = await store.memories(user.id, persona)
        if as_json:
            print(
                json.dumps(
                    [
                        {"id": m.id, "persona": m.persona, "text": m.text,
                         "created_at": m.created_at}
                        for m in kept
                    ],
                    ensure_ascii=False,
                )
            )  # fmt: skip
            return EXIT_OK
        for memory in kept:
            print(f"{memory.id}\t{memory.persona}\t{memory.created_at}\t{memory.text}")
        if not kept:
            err(f"{name} has no kept facts" + (f" for {persona}" if persona else ""))
        return EXIT_OK

    return store_command(work)


def run_memories_forget(memory_id: str) -> int:
    """``memories forget ID``."""

    async def work(store: ConversationStore) -> int:
        check_memory_id(memory_id)
        gone = await store.forget(None, memory_id)
        if gone is None:
            err(f"error: no kept fact {memory_id!r} (see: generic-framework memories list)")
            return EXIT_ERROR
        print(f"forgot {gone.id} ({gone.persona}): {gone.text}")
        return EXIT_OK

    return store_command(work)
