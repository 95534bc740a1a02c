"""What personas remember about the people they talk to: facts kept per user and per persona.

A persona whose file says ``[memory] enabled = true`` may keep short facts about its user
(:mod:`generic_framework.memory`); they live here, in the conversation store, so every replica
sharing a database sees the same memory and ``db backup``/``restore``/``copy`` carry it:

- **Per user, per persona.** A :class:`Memory` belongs to one user (by id; the bootstrap admin
  ``admin`` for the process's own operator) and one persona. Nothing here reads across users:
  every read and erase names the user, and another user's id is simply not found.
- **Bounded, atomically.** :meth:`MemoryStore.remember` adds a fact only while the user keeps
  fewer than ``max_items`` for the persona, counted and inserted in one transaction that
  replicas take one at a time (SQLite's write lock; PostgreSQL's advisory lock of the
  user and persona), so concurrent ``remember`` calls never overshoot. The same fact twice is
  kept once.
- **Safe to keep.** :func:`check_fact` refuses what must not be stored: an empty or over-long
  fact (:data:`FACT_CHARS`), control characters, and anything the project's redaction rules
  (:func:`~generic_framework.redaction.redact`) take for a key or a token.
- **Removed with their user**: the rows reference the user, ``ON DELETE CASCADE``.

Both backends implement :class:`MemoryStore` (docs/design/0330).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from generic_framework.limits import MAX_ITEMS_LIMIT, check_persona_name
from generic_framework.redaction import redact

__all__ = [
    "FACT_CHARS",
    "MAX_ITEMS_LIMIT",
    "MEMORY_ID_PATTERN",
    "Memory",
    "MemoryAdmin",
    "MemoryStore",
    "check_fact",
    "check_max_items",
    "check_memory_id",
    "memory_full",
    "new_memory_id",
]

FACT_CHARS = 300
"""The longest fact kept, in characters."""
MEMORY_ID_PATTERN = r"^mem_[0-9a-f]{16}$"
"""A memory's id: ``mem_`` and 16 hexadecimal digits, random."""
_MEMORY_ID = re.compile(MEMORY_ID_PATTERN)


def new_memory_id() -> str:
    """A fresh memory id (:data:`MEMORY_ID_PATTERN`)."""
    return f"mem_{secrets.token_hex(8)}"


def check_memory_id(memory_id: str) -> str:
    """``memory_id`` if it is a memory's id.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(memory_id, str) or not _MEMORY_ID.fullmatch(memory_id):
        raise ValueError("a memory id is 'mem_' followed by 16 hexadecimal digits")
    return memory_id


def check_max_items(max_items: int) -> int:
    """``max_items`` if it is a valid bound: an integer from 1 to :data:`MAX_ITEMS_LIMIT`.

    Raises:
        ValueError: anything else.
    """
    if isinstance(max_items, bool) or not isinstance(max_items, int):
        raise ValueError("max_items is an integer")
    if not 1 <= max_items <= MAX_ITEMS_LIMIT:
        raise ValueError(f"max_items is from 1 to {MAX_ITEMS_LIMIT} (got {max_items})")
    return max_items


def check_fact(text: str) -> str:
    """``text`` as it is kept (its runs of spaces made one), if it may be kept.

    Raises:
        ValueError: saying why not: not text, empty, longer than :data:`FACT_CHARS`
            characters, holding a control character, or holding what looks like a key or a
            token (the redaction rules of :func:`~generic_framework.redaction.redact`).
    """
    if not isinstance(text, str):
        raise ValueError("a fact is text")
    fact = re.sub(r" {2,}", " ", text.strip())
    if not fact:
        raise ValueError("a fact must not be empty")
    if len(fact) > FACT_CHARS:
        raise ValueError(
            f"a fact is at most {FACT_CHARS} characters (this one has {len(fact)}): keep it short"
        )
    if any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in fact):
        raise ValueError("a fact is one line of text without control characters")
    if redact(fact) != fact:
        raise ValueError(
            "a fact must not hold a key, a token or a password: such a thing is never kept"
        )
    return fact


def memory_full(max_items: int) -> ValueError:
    """The refusal of a fact beyond ``max_items``: the user keeps that many for the persona."""
    return ValueError(
        f"the memory is full ({max_items} facts kept for this persona): forget one first"
    )


@dataclass(frozen=True, slots=True)
class Memory:
    """One kept fact.

    Attributes:
        id: its id (:data:`MEMORY_ID_PATTERN`).
        user_id: whose it is.
        persona: the persona that keeps it.
        text: the fact.
        created_at: when it was kept (ISO 8601, UTC, microseconds).
    """

    id: str
    user_id: str
    persona: str
    text: str
    created_at: str


def check_memory(memory: Memory) -> Memory:
    """``memory`` if its id, persona and text are valid (what a restore writes).

    Raises:
        ValueError: one of them is not.
    """
    check_memory_id(memory.id)
    check_persona_name(memory.persona)
    check_fact(memory.text)
    return memory


class MemoryStore(Protocol):
    """The users' kept facts (both backends)."""

    async def remember(self, user_id: str, persona: str, text: str, *, max_items: int) -> Memory:
        """Keep ``text`` for the user and persona (the one already kept when it is the same
        fact), counted against ``max_items`` atomically across processes.

        Raises:
            ValueError: the fact may not be kept (:func:`check_fact`), the persona's name
                or ``max_items`` is invalid, or the user keeps ``max_items`` facts for the
                persona already (:func:`memory_full`).
        """
        ...

    async def memories(self, user_id: str, persona: str | None = None) -> list[Memory]:
        """The user's facts (for one persona, or all), newest first."""
        ...

    async def forget(
        self, user_id: str | None, memory_id: str, *, persona: str | None = None
    ) -> Memory | None:
        """Erase one fact of the user (``None``: of anyone, for the operator), and of
        ``persona`` when given; the fact erased, or ``None`` when there is no such fact."""
        ...

    async def forget_all(self, user_id: str, persona: str) -> int:
        """Erase every fact the user keeps for the persona; how many."""
        ...


class MemoryAdmin(Protocol):
    """Every kept fact at once, for ``db copy``, ``db backup`` and ``db restore``."""

    async def dump_memories(self) -> tuple[Memory, ...]:
        """Every fact, oldest first."""
        ...

    async def restore_memories(self, memories: tuple[Memory, ...]) -> int:
        """Add the facts this store lacks (by id; one of a user it does not have is left
        out); how many were added."""
        ...
