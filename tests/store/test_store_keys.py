"""Idempotency keys in the store: every test runs on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from generic_framework.store import ConversationStore
from generic_framework.store.keys import check_key, fingerprint

MakeStore = Callable[[], ConversationStore]
DAY = 86_400.0


async def test_a_key_runs_once_then_replays_its_answer(store: ConversationStore) -> None:
    first = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert first.outcome == "run" and first.token
    busy = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert busy.outcome == "running" and 25 < busy.retry_after <= 30
    assert await store.finish_key("alice", "k1", first.token, 200, "application/json", b"{}\x00")
    again = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert (again.outcome, again.status, again.content_type, again.body) == (
        "replay",
        200,
        "application/json",
        b"{}\x00",
    )
    # A finished key cannot be finished, renewed or released again.
    assert not await store.finish_key("alice", "k1", first.token, 500, "x", b"")
    assert not await store.renew_key("alice", "k1", first.token, lease=30)
    await store.release_key("alice", "k1", first.token)
    assert (await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)).outcome == "replay"


async def test_keys_are_per_caller_and_bound_to_their_request(store: ConversationStore) -> None:
    assert (await store.claim_key("alice", "k", "fp1", lease=30, keep=DAY)).outcome == "run"
    assert (await store.claim_key("bob", "k", "fp2", lease=30, keep=DAY)).outcome == "run"
    assert (await store.claim_key("alice", "k", "fp2", lease=30, keep=DAY)).outcome == "mismatch"


async def test_a_released_key_runs_again(store: ConversationStore) -> None:
    first = await store.claim_key("c", "k", "fp", lease=30, keep=DAY)
    await store.release_key("c", "k", first.token)
    second = await store.claim_key("c", "k", "fp", lease=30, keep=DAY)
    assert second.outcome == "run" and second.token != first.token


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_cannot_finish(
    store: ConversationStore,
) -> None:
    # The holder died mid-turn: it stops renewing, and once the lease lapses a retry runs.
    dead = await store.claim_key("c", "k", "fp", lease=0.3, keep=DAY)
    assert (await store.claim_key("c", "k", "fp", lease=0.3, keep=DAY)).outcome == "running"
    await asyncio.sleep(0.5)
    taker = await store.claim_key("c", "k", "fp", lease=30, keep=DAY)
    assert taker.outcome == "run" and taker.token != dead.token
    assert not await store.renew_key("c", "k", dead.token, lease=30)
    assert not await store.finish_key("c", "k", dead.token, 200, "text/plain", b"late")
    await store.release_key("c", "k", dead.token)  # changes nothing: not its claim any more
    assert await store.finish_key("c", "k", taker.token, 200, "text/plain", b"mine")
    assert (await store.claim_key("c", "k", "fp", lease=30, keep=DAY)).body == b"mine"


async def test_renewal_keeps_a_long_turn_claimed(store: ConversationStore) -> None:
    held = await store.claim_key("c", "k", "fp", lease=0.4, keep=DAY)
    for _ in range(4):
        await asyncio.sleep(0.2)
        assert await store.renew_key("c", "k", held.token, lease=0.4)
    assert (await store.claim_key("c", "k", "fp", lease=0.4, keep=DAY)).outcome == "running"


async def test_expired_keys_are_forgotten_and_purged(store: ConversationStore) -> None:
    first = await store.claim_key("c", "old", "fp", lease=30, keep=0.3)
    await store.finish_key("c", "old", first.token, 200, "application/json", b"1")
    await store.claim_key("c", "other", "fp", lease=30, keep=0.3)
    await asyncio.sleep(0.5)
    # Expired: the same key with another body is a new request, not a mismatch.
    assert (await store.claim_key("c", "old", "fp2", lease=30, keep=DAY)).outcome == "run"
    store._next_purge = 0.0  # type: ignore[attr-defined]  # a purge is due now
    await store.claim_key("c", "new", "fp", lease=30, keep=DAY)
    assert await _keys(store) == ["new", "old"]


async def _keys(store: ConversationStore) -> list[str]:
    from generic_framework.store.postgres import PostgresStore

    if isinstance(store, PostgresStore):
        async with store._connection() as conn:
            cursor = await conn.execute("SELECT key FROM idempotency_keys ORDER BY key")
            return [row[0] for row in await cursor.fetchall()]
    return await store._offload.run(  # type: ignore[attr-defined, no-any-return]
        store._run,  # type: ignore[attr-defined]
        lambda db: [r[0] for r in db.execute("SELECT key FROM idempotency_keys ORDER BY key")],
    )


async def test_concurrent_claims_from_several_stores_run_one(make_store: MakeStore) -> None:
    # Several processes (one store each) claiming one key at the same moment: one runs.
    stores = [make_store() for _ in range(4)]
    for s in stores:
        await s.open()
    for round_ in range(5):
        key = f"race-{round_}"
        claims = await asyncio.gather(
            *(s.claim_key("c", key, "fp", lease=30, keep=DAY) for s in stores for _ in range(3))
        )
        assert sorted(c.outcome for c in claims) == ["run"] + ["running"] * 11


def test_key_header_rules() -> None:
    assert check_key(' "8e03978e-40d5" ') == "8e03978e-40d5"
    assert check_key("abc") == "abc"
    for bad in ("", '""', "a b", "x" * 256, "é"):
        try:
            check_key(bad)
        except ValueError as exc:
            assert "Idempotency-Key" in str(exc)
        else:
            raise AssertionError(bad)


def test_fingerprint_ignores_json_spacing_and_key_order_only() -> None:
    a = fingerprint("POST", "/v1/x", b'{"a": 1, "b": [1, 2]}')
    assert a == fingerprint("POST", "/v1/x", b'{"b":[1,2],"a":1}')
    assert a != fingerprint("POST", "/v1/x", b'{"a": 1, "b": [2, 1]}')
    assert a != fingerprint("POST", "/v1/y", b'{"a": 1, "b": [1, 2]}')
    assert fingerprint("POST", "/v1/x", b"not json") != fingerprint("POST", "/v1/x", b"not  json")
