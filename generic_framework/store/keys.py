"""Claims: a name claimed once, across replicas, run under a lease and then kept or let go.

A claim is taken by the first caller that asks for its ``(owner, key)``, runs under a lease
that the running replica renews, and ends either finished (its value kept until the claim
expires) or released (a retry may claim it again). The rows live in the conversation store, so
every replica sharing a database sees them (docs/design/0608).

The store knows nothing of what a claim stands for: ``tag`` and ``value`` are opaque. The
service's ``Idempotency-Key`` (service/idempotency.py) is one: the header's key, the request's
fingerprint as the tag, and the status, type and body of the answer as the value.

:class:`ClaimStore` is what both backends implement; :class:`Claim` is the outcome of a claim.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "KEEP_SECONDS",
    "LEASE_SECONDS",
    "PURGE_EVERY",
    "Claim",
    "ClaimStore",
    "new_token",
]

KEEP_SECONDS = 86_400.0
"""How long a key is kept from its first use: one day; expired keys are purged."""
LEASE_SECONDS = 30.0
"""How long a claim holds without renewal: a replica that dies mid-turn frees its keys after
this; a running one renews every third of it."""
PURGE_EVERY = 60.0
"""Seconds between two purges of expired keys by one store (a claim runs it when due)."""
Outcome = Literal["run", "done", "running", "mismatch"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`ClaimStore.claim_key`.

    Attributes:
        outcome: ``run`` (claimed: run, then finish or release with ``token``), ``done``
            (finished before: its ``value``), ``running`` (another caller holds it for
            ``retry_after`` more seconds at most), ``mismatch`` (claimed with another tag).
        token: the claim's own token (``run`` only): finishing, renewing and releasing need it,
            so a replica whose lease lapsed cannot overwrite the one that took over.
    """

    outcome: Outcome
    token: str = ""
    value: bytes = b""
    retry_after: float = 0.0


class ClaimStore(Protocol):
    """The claims of a store (both backends)."""

    async def claim_key(
        self, owner: str, key: str, tag: str, *, lease: float, keep: float
    ) -> Claim:
        """Claim ``key`` for ``owner`` atomically (across replicas): a new or expired key, or
        one whose holder's lease lapsed, is claimed (``run``); otherwise see :class:`Claim`."""
        ...

    async def renew_key(self, owner: str, key: str, token: str, *, lease: float) -> bool:
        """Extend a running claim's lease; False when the claim is no longer this one's."""
        ...

    async def finish_key(self, owner: str, key: str, token: str, value: bytes) -> bool:
        """Keep a claim's ``value``; False when the claim is no longer this one's."""
        ...

    async def release_key(self, owner: str, key: str, token: str) -> None:
        """Forget a claim: a retry claims it again."""
        ...


def new_token() -> str:
    """A fresh claim token."""
    return secrets.token_hex(16)
