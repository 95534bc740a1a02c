"""``/memory`` and ``/forget``: what the chat's persona keeps, shown and erased on every platform.

- ``/memory`` lists the facts the chat's persona keeps about the chat's own user, newest first,
  each with the command that deletes it (``/forget mem_...``).
- ``/forget ID`` erases that one; ``/forget`` alone erases every fact the persona keeps there.

Whose facts: a private chat's person; in a group (or a forum topic) the group's own user, the
owner of the group's conversation and so of the memory its turns use (docs/design/0331): a
member's private facts are never listed or erased from a group. A persona without memory says
so. :mod:`~generic_framework.chats.commands` registers them with the others, so every platform
offers them (docs/design/0332).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from generic_framework.chats.people import platform_user
from generic_framework.errors import ConfigError
from generic_framework.store.memories import check_memory_id

if TYPE_CHECKING:
    from generic_framework.chats.commands import CommandContext

__all__ = ["forget_memory", "show_memory"]


async def _scope(ctx: CommandContext) -> tuple[str, str, bool]:
    """The chat's persona, the user whose facts it keeps here, and whether it keeps any."""
    state = await ctx.runtime.chat_states.chat_state(ctx.platform, ctx.key)
    spec = None
    if state is not None and state.persona is not None:
        with contextlib.suppress(ConfigError):  # a persona file removed since it was chosen
            spec = ctx.runtime.spec(state.persona)
    if spec is None:
        spec = ctx.runtime.spec(None)
    owner = ctx.user
    if not ctx.private:
        owner = await platform_user(ctx.runtime.users, ctx.platform, ctx.surface.chat.chat_id)
    return spec.name, owner.id, spec.memory.enabled


async def show_memory(ctx: CommandContext, argument: str) -> None:
    """``/memory``: the kept facts, each with the command that deletes it."""
    persona, owner, enabled = await _scope(ctx)
    if not enabled:
        await ctx.say(f"{persona} keeps no memory.")
        return
    kept = await ctx.runtime.memories.memories(owner, persona)
    whom = "you" if ctx.private else "this group"
    if not kept:
        await ctx.say(f"{persona} keeps nothing about {whom}. Ask it to remember something.")
        return
    lines = [f"{persona} keeps {len(kept)} fact(s) about {whom}, newest first:"]
    for memory in kept:
        lines += ["", f"- {memory.text}", f"  delete: /forget {memory.id}"]
    lines += ["", "/forget alone erases them all."]
    await ctx.say("\n".join(lines))


async def forget_memory(ctx: CommandContext, argument: str) -> None:
    """``/forget [ID]``: erase one kept fact, or all of the persona's here."""
    persona, owner, enabled = await _scope(ctx)
    if not enabled:
        await ctx.say(f"{persona} keeps no memory.")
        return
    memory_id = argument.strip()
    store = ctx.runtime.memories
    if not memory_id:
        gone = await store.forget_all(owner, persona)
        await ctx.say(f"{persona} forgot {gone} fact(s).")
        return
    try:
        check_memory_id(memory_id)
    except ValueError:
        await ctx.say(f"{memory_id[:40]!r} is not a fact's id: /memory lists them.")
        return
    erased = await store.forget(owner, memory_id, persona=persona)
    if erased is None:
        await ctx.say(f"{persona} keeps no fact {memory_id}: /memory lists them.")
        return
    await ctx.say(f"Forgotten: {erased.text}")
