"""Idempotency keys: what a retried request with the same ``Idempotency-Key`` finds.

A key is claimed by the first request that carries it (per caller), runs under a lease that the
running replica renews, and ends either finished (the response kept until the key expires) or
released (the turn failed and stored nothing: a retry may run it again). The rows live in the
conversation store, so every replica sharing a database sees them (docs/design/0608).

:class:`KeyStore` is what both backends implement; :class:`Claim` is the outcome of a claim.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "KEEP_SECONDS",
    "KEY_MAX",
    "LEASE_SECONDS",
    "PURGE_EVERY",
    "Claim",
    "KeyStore",
    "check_key",
    "fingerprint",
    "new_token",
]

KEEP_SECONDS = 86_400.0
"""How long a key is kept from its first use: one day; expired keys are purged."""
LEASE_SECONDS = 30.0
"""How long a claim holds without renewal: a replica that dies mid-turn frees its keys after
this; a running one renews every third of it."""
PURGE_EVERY = 60.0
"""Seconds between two purges of expired keys by one store (a claim runs it when due)."""
KEY_MAX = 255
"""The longest key accepted (Stripe's limit too)."""

Outcome = Literal["run", "replay", "running", "mismatch"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`KeyStore.claim_key`.

    Attributes:
        outcome: ``run`` (claimed: run the request, then finish or release with ``token``),
            ``replay`` (finished before: answer ``status``, ``content_type``, ``body``),
            ``running`` (another request holds it for ``retry_after`` more seconds at most),
            ``mismatch`` (the key was used with another request body).
        token: the claim's own token (``run`` only): finishing, renewing and releasing need it,
            so a replica whose lease lapsed cannot overwrite the one that took over.
    """

    outcome: Outcome
    token: str = ""
    status: int = 0
    content_type: str = ""
    body: bytes = b""
    retry_after: float = 0.0


class KeyStore(Protocol):
    """The idempotency keys of a conversation store (both backends)."""

    async def claim_key(
        self, caller: str, key: str, fingerprint: str, *, lease: float, keep: float
    ) -> Claim:
        """Claim ``key`` for ``caller`` atomically (across replicas): a new or expired key, or
        one whose holder's lease lapsed, is claimed (``run``); otherwise see :class:`Claim`."""
        ...

    async def renew_key(self, caller: str, key: str, token: str, *, lease: float) -> bool:
        """Extend a running claim's lease; False when the claim is no longer this one's."""
        ...

    async def finish_key(
        self, caller: str, key: str, token: str, status: int, content_type: str, body: bytes
    ) -> bool:
        """Keep the response of a claimed key; False when the claim is no longer this one's."""
        ...

    async def release_key(self, caller: str, key: str, token: str) -> None:
        """Forget a claimed key (its request stored nothing): a retry runs again."""
        ...


def check_key(value: str) -> str:
    """The key of an ``Idempotency-Key`` header: 1-:data:`KEY_MAX` visible ASCII characters,
    the quotes of a structured-field string (``"abc"``, as the IETF draft writes it) removed.

    Raises:
        ValueError: empty, too long, or with other characters.
    """
    key = value.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= KEY_MAX or not all("!" <= ch <= "~" for ch in key):
        raise ValueError(
            f"the Idempotency-Key header must be 1-{KEY_MAX} visible ASCII characters (e.g. a UUID)"
        )
    return key


def fingerprint(method: str, path: str, body: bytes) -> str:
    """A SHA-256 over the request: method, path and the JSON body in canonical form (key order
    and spacing do not count); a body that is not JSON counts byte for byte."""
    try:
        canonical = json.dumps(
            json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    except ValueError:
        canonical = body
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(canonical)
    return digest.hexdigest()


def new_token() -> str:
    """A fresh claim token."""
    return secrets.token_hex(16)
