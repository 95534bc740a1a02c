"""Memory the user can see: facts a persona keeps about each person, per persona.

A persona whose file says ``[memory] enabled = true`` (:class:`~.spec.MemorySpec`) offers the
model two function tools, ``remember(fact)`` and ``forget(id)`` (:mod:`~.tools`), run by the
turn service for the turn's own user, and gets that user's kept facts in its instructions on
every turn, inside a delimited block the model is told is data, not instructions
(:mod:`~.block`). :mod:`~.turns` is what the turn service calls; the facts themselves are the
store's (:mod:`generic_framework.store.memories`). docs/design/0330-0332.
"""

from __future__ import annotations

from generic_framework.memory.spec import DEFAULT_MAX_ITEMS, MemorySpec

__all__ = ["DEFAULT_MAX_ITEMS", "MemorySpec"]
