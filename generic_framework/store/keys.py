"""Claims: a name claimed once, across replicas, run under a lease and then kept or let go.

A claim is taken by the first caller that asks for its ``(owner, key)``, runs under a lease
that the running replica renews, and ends either finished (its value kept until the claim
expires) or released (a retry may claim it again). The rows live in the conversation store, so
every replica sharing a database sees them (docs/design/0608).

The store knows nothing of what a claim stands for: ``tag`` and ``value`` are opaque. The
service's ``Idempotency-Key`` (service/idempotency.py) is one: the header's key, the request's
fingerprint as the tag, and the status, type and body of the answer as the value.

A running claim may also be **settled by a stored turn**: the store writes the turn and marks
the claim ``stored`` (with the turn's conversation and number) in one transaction, when the turn
is stored with the claim's :class:`ClaimRef` (``append_turn(..., settles=ref)``). A holder that
dies between storing its turn and finishing its claim then leaves a claim that says where its
answer is, instead of one whose lapsed lease lets a retry run the turn again. While the holder's
lease holds (it is keeping its answer, a matter of milliseconds), a retry is told the claim is
``running`` and to come back after :data:`FINISHING_RETRY_AFTER`: it then gets the kept answer,
byte for byte, not one rebuilt from the stored turn. A holder that lets go of a settled claim
(its client left) ends its lease, so a retry gets the stored turn at once.

:class:`ClaimStore` is what both backends implement; :class:`Claim` is the outcome of a claim.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "FINISHING_RETRY_AFTER",
    "KEEP_SECONDS",
    "LEASE_SECONDS",
    "PURGE_EVERY",
    "Claim",
    "ClaimRef",
    "ClaimStore",
    "held_claim",
    "new_token",
    "settled_turn",
    "settled_value",
]

KEEP_SECONDS = 86_400.0
"""How long a key is kept from its first use: one day; expired keys are purged."""
LEASE_SECONDS = 30.0
"""How long a claim holds without renewal: a replica that dies mid-turn frees its keys after
this; a running one renews every third of it."""
FINISHING_RETRY_AFTER = 1.0
"""Seconds a retry is told to wait while the live holder of a claim settled by its stored turn
keeps its answer."""
PURGE_EVERY = 60.0
"""Seconds between two purges of expired keys by one store (a claim runs it when due)."""
Outcome = Literal["run", "done", "stored", "running", "mismatch"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`ClaimStore.claim_key`.

    Attributes:
        outcome: ``run`` (claimed: run, then finish or release with ``token``), ``done``
            (finished before: its ``value``), ``stored`` (settled by a stored turn whose
            claim was not finished: ``value`` names the turn, read by :func:`settled_turn`),
            ``running`` (another caller holds it for ``retry_after`` more seconds at most),
            ``mismatch`` (claimed with another tag).
        token: the claim's own token (``run`` only): finishing, renewing and releasing need it,
            so a replica whose lease lapsed cannot overwrite the one that took over.
    """

    outcome: Outcome
    token: str = ""
    value: bytes = b""
    retry_after: float = 0.0


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A running claim, as a stored turn settles it (``append_turn(..., settles=ref)``)."""

    owner: str
    key: str
    token: str


def settled_value(conversation_id: str, turn: int) -> bytes:
    """The value of a claim settled by turn ``turn`` of ``conversation_id``."""
    return f"{conversation_id}\n{turn}".encode()


def settled_turn(value: bytes) -> tuple[str, int]:
    """The conversation and turn number of a ``stored`` claim's value (:func:`settled_value`).

    Raises:
        ValueError: not such a value.
    """
    conversation_id, _, turn = value.decode().rpartition("\n")
    if not conversation_id or not turn.isdigit():
        raise ValueError("not the value of a claim settled by a stored turn")
    return conversation_id, int(turn)


class ClaimStore(Protocol):
    """The claims of a store (both backends)."""

    async def claim_key(
        self, owner: str, key: str, tag: str, *, lease: float, keep: float
    ) -> Claim:
        """Claim ``key`` for ``owner`` atomically (across replicas): a new or expired key, or
        one whose holder's lease lapsed, is claimed (``run``); one settled by a stored turn is
        ``stored`` whatever its lease; otherwise see :class:`Claim`."""
        ...

    async def renew_key(self, owner: str, key: str, token: str, *, lease: float) -> bool:
        """Extend a running (or turn-settled) claim's lease; False when the claim is no longer
        this one's."""
        ...

    async def finish_key(self, owner: str, key: str, token: str, value: bytes) -> bool:
        """Keep a claim's ``value`` (running, or settled by its stored turn); False when the
        claim is no longer this one's."""
        ...

    async def release_key(self, owner: str, key: str, token: str) -> None:
        """Forget a running claim: a retry claims it again. A claim settled by a stored turn
        stays: its turn was stored, a retry gets it."""
        ...


def held_claim(tag: str, held_tag: str, state: str, remaining: float, value: Any) -> Claim | None:
    """The outcome of claiming a key someone claimed before (tag ``held_tag``, ``remaining``
    seconds of its lease left); ``None`` when its holder's lease lapsed mid-turn and the caller
    takes it over. The one rule of both backends."""
    if held_tag != tag:
        return Claim("mismatch")
    if state == "done":
        return Claim("done", value=bytes(value))
    if state == "stored":
        if remaining > 0:  # its holder is keeping the answer: that answer, not a rebuilt one
            return Claim("running", retry_after=min(remaining, FINISHING_RETRY_AFTER))
        return Claim("stored", value=bytes(value))
    if remaining > 0:
        return Claim("running", retry_after=remaining)
    return None


def new_token() -> str:
    """A fresh claim token."""
    return secrets.token_hex(16)
