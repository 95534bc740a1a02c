"""The PostgreSQL side of the claims (:mod:`~generic_framework.store.keys`): a claim's tag is
kept in the ``fingerprint`` column and its value in ``body`` (``status`` and ``content_type``,
from when the store kept HTTP answers, are no longer written).

A claim is one transaction on a pooled connection that first takes a transaction-scoped
advisory lock on the (caller, key) pair: replicas claiming the same key at the same moment
queue there, and the second one reads what the first wrote, so two never both run. Leases and
expiry use the server's clock (``now()``), which every replica shares.
"""

from __future__ import annotations

from typing import Any

from generic_framework.store.keys import Claim, held_claim, new_token
from generic_framework.store.postgres_schema import advisory_key

__all__ = ["claim", "finish", "purge", "release", "renew"]

_SELECT = (
    "SELECT fingerprint, state, extract(epoch FROM lease_until - now()),"
    " expires_at <= now(), body"
    " FROM idempotency_keys WHERE caller = %s AND key = %s"
)


async def claim(conn: Any, caller: str, key: str, tag: str, lease: float, keep: float) -> Claim:
    """:meth:`~generic_framework.store.keys.ClaimStore.claim_key` in the connection's
    transaction (the pool commits it when the connection comes back)."""
    lock = advisory_key("idempotency", f"{caller}\n{key}")
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
    row = await (await conn.execute(_SELECT, (caller, key))).fetchone()
    if row is not None and row[3]:
        await conn.execute(
            "DELETE FROM idempotency_keys WHERE caller = %s AND key = %s", (caller, key)
        )
        row = None
    token = new_token()
    if row is None:
        await conn.execute(
            "INSERT INTO idempotency_keys (caller, key, fingerprint, state, token, lease_until,"
            " expires_at) VALUES (%s, %s, %s, 'running', %s, now() + make_interval(secs => %s),"
            " now() + make_interval(secs => %s))",
            (caller, key, tag, token, lease, keep),
        )
        return Claim("run", token)
    held_tag, state, remaining, _, value = row
    found = held_claim(tag, held_tag, state, float(remaining), value)
    if found is not None:
        return found
    # The holder's lease lapsed (its replica died mid-turn): this request takes the key over.
    await conn.execute(
        "UPDATE idempotency_keys SET token = %s, lease_until = now() + make_interval(secs => %s)"
        " WHERE caller = %s AND key = %s",
        (token, lease, caller, key),
    )
    return Claim("run", token)


async def renew(conn: Any, caller: str, key: str, token: str, lease: float) -> bool:
    """Extend a running (or turn-settled) claim's lease."""
    cursor = await conn.execute(
        "UPDATE idempotency_keys SET lease_until = now() + make_interval(secs => %s)"
        " WHERE caller = %s AND key = %s AND token = %s AND state IN ('running', 'stored')",
        (lease, caller, key, token),
    )
    return bool(cursor.rowcount)


async def finish(conn: Any, caller: str, key: str, token: str, value: bytes) -> bool:
    """Keep a claim's value."""
    cursor = await conn.execute(
        "UPDATE idempotency_keys SET state = 'done', body = %s"
        " WHERE caller = %s AND key = %s AND token = %s AND state IN ('running', 'stored')",
        (value, caller, key, token),
    )
    return bool(cursor.rowcount)


async def release(conn: Any, caller: str, key: str, token: str) -> None:
    """Forget a claimed key; a claim its stored turn settled is kept, its lease ended."""
    await conn.execute(
        "WITH gone AS (DELETE FROM idempotency_keys"
        " WHERE caller = %s AND key = %s AND token = %s AND state = 'running')"
        " UPDATE idempotency_keys SET lease_until = now()"
        " WHERE caller = %s AND key = %s AND token = %s AND state = 'stored'",
        (caller, key, token, caller, key, token),
    )


async def purge(conn: Any) -> int:
    """Delete every expired key; return how many."""
    cursor = await conn.execute("DELETE FROM idempotency_keys WHERE expires_at <= now()")
    return int(cursor.rowcount)
