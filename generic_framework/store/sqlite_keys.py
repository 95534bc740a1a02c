"""The SQLite side of the claims (:mod:`~generic_framework.store.keys`): a claim's tag is kept
in the ``fingerprint`` column and its value in ``body`` (``status`` and ``content_type``, from
when the store kept HTTP answers, are no longer written).

Each operation is one ``BEGIN IMMEDIATE`` transaction on the store's connection, run in its
worker thread: processes sharing the file claim a key one at a time. Times are seconds since
1970 from this machine's clock (every process on one SQLite file shares it).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from generic_framework.store.keys import Claim, ClaimRef, held_claim, new_token, settled_value

if TYPE_CHECKING:
    import sqlite3

__all__ = ["claim", "finish", "purge", "release", "renew", "settle", "write_one"]

_SELECT = (
    "SELECT fingerprint, state, lease_until, expires_at, body"
    " FROM idempotency_keys WHERE caller = ? AND key = ?"
)


def write_one(db: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> int:
    """``sql`` alone in one ``BEGIN IMMEDIATE`` transaction (rolled back on any error); the
    rows it changed."""
    db.execute("BEGIN IMMEDIATE")
    try:
        changed = db.execute(sql, params).rowcount
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return int(changed)


def claim(
    db: sqlite3.Connection, caller: str, key: str, tag: str, lease: float, keep: float
) -> Claim:
    """:meth:`~generic_framework.store.keys.ClaimStore.claim_key` in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = _claim(db, caller, key, tag, lease, keep, time.time())
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return result


def _claim(
    db: sqlite3.Connection,
    caller: str,
    key: str,
    tag: str,
    lease: float,
    keep: float,
    now: float,
) -> Claim:
    row = db.execute(_SELECT, (caller, key)).fetchone()
    if row is not None and row[3] <= now:
        db.execute("DELETE FROM idempotency_keys WHERE caller = ? AND key = ?", (caller, key))
        row = None
    token = new_token()
    if row is None:
        db.execute(
            "INSERT INTO idempotency_keys (caller, key, fingerprint, state, token, lease_until,"
            " expires_at, created_at) VALUES (?, ?, ?, 'running', ?, ?, ?, ?)",
            (caller, key, tag, token, now + lease, now + keep, now),
        )
        return Claim("run", token)
    held_tag, state, lease_until, _, value = row
    found = held_claim(tag, held_tag, state, lease_until - now, value)
    if found is not None:
        return found
    # The holder's lease lapsed (its replica died mid-turn): this request takes the key over.
    db.execute(
        "UPDATE idempotency_keys SET token = ?, lease_until = ? WHERE caller = ? AND key = ?",
        (token, now + lease, caller, key),
    )
    return Claim("run", token)


def renew(db: sqlite3.Connection, caller: str, key: str, token: str, lease: float) -> bool:
    """Extend a running (or turn-settled) claim's lease."""
    sql = (
        "UPDATE idempotency_keys SET lease_until = ?"
        " WHERE caller = ? AND key = ? AND token = ? AND state IN ('running', 'stored')"
    )
    return write_one(db, sql, (time.time() + lease, caller, key, token)) > 0


def finish(db: sqlite3.Connection, caller: str, key: str, token: str, value: bytes) -> bool:
    """Keep a claim's value."""
    sql = (
        "UPDATE idempotency_keys SET state = 'done', body = ?"
        " WHERE caller = ? AND key = ? AND token = ? AND state IN ('running', 'stored')"
    )
    return write_one(db, sql, (value, caller, key, token)) > 0


def settle(db: sqlite3.Connection, ref: ClaimRef, conversation_id: str, turn: int) -> None:
    """Mark a running claim settled by turn ``turn`` of ``conversation_id``, inside the
    transaction that stores the turn (the caller's; nothing when the claim is no longer
    ``ref``'s)."""
    db.execute(
        "UPDATE idempotency_keys SET state = 'stored', body = ?"
        " WHERE caller = ? AND key = ? AND token = ? AND state = 'running'",
        (settled_value(conversation_id, turn), ref.owner, ref.key, ref.token),
    )


def release(db: sqlite3.Connection, caller: str, key: str, token: str) -> None:
    """Forget a claimed key; a claim its stored turn settled is kept, its lease ended."""
    sql = (
        "DELETE FROM idempotency_keys"
        " WHERE caller = ? AND key = ? AND token = ? AND state = 'running'"
    )
    if not write_one(db, sql, (caller, key, token)):
        sql = (
            "UPDATE idempotency_keys SET lease_until = ?"
            " WHERE caller = ? AND key = ? AND token = ? AND state = 'stored'"
        )
        write_one(db, sql, (time.time(), caller, key, token))


def purge(db: sqlite3.Connection) -> int:
    """Delete every expired key; return how many."""
    return write_one(db, "DELETE FROM idempotency_keys WHERE expires_at <= ?", (time.time(),))
