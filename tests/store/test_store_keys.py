"""Claims in the store (what the service's idempotency keys are kept as): every test runs on
SQLite and on a real PostgreSQL server. The tag and the value are opaque to the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from generic_framework.store import ConversationStore
from generic_framework.store.keys import FINISHING_RETRY_AFTER, ClaimRef, settled_turn
from generic_framework.wire.messages import AssistantMessage, UserMessage

MakeStore = Callable[[], ConversationStore]
DAY = 86_400.0


async def test_a_key_runs_once_then_replays_its_answer(store: ConversationStore) -> None:
    first = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert first.outcome == "run" and first.token
    busy = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert busy.outcome == "running" and 25 < busy.retry_after <= 30
    assert await store.finish_key("alice", "k1", first.token, b"200 x/y\n{}\x00")
    again = await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)
    assert (again.outcome, again.value) == ("done", b"200 x/y\n{}\x00")
    # A finished key cannot be finished, renewed or released again.
    assert not await store.finish_key("alice", "k1", first.token, b"")
    assert not await store.renew_key("alice", "k1", first.token, lease=30)
    await store.release_key("alice", "k1", first.token)
    assert (await store.claim_key("alice", "k1", "fp", lease=30, keep=DAY)).outcome == "done"


def _turn(text: str) -> list[UserMessage | AssistantMessage]:
    return [UserMessage(content=text), AssistantMessage(content=f"answer to {text}")]


async def test_a_turn_stored_with_its_claim_settles_it_in_the_same_transaction(
    store: ConversationStore,
) -> None:
    # The holder stores its turn with its claim, then dies before finishing it: the claim says
    # where the turn is, whatever its lease, and a retry never gets to run the turn again.
    claim = await store.claim_key("alice", "k", "fp", lease=0.3, keep=DAY)
    await store.append_turn("c1", "scout", _turn("first"))
    held = store.lock("c1")
    async with held as conversation:
        number = await conversation.append_turn(
            "scout", _turn("second"), settles=ClaimRef("alice", "k", claim.token)
        )
    assert number == 2
    await asyncio.sleep(0.5)  # the lease lapsed: unsettled, the claim would be taken over
    again = await store.claim_key("alice", "k", "fp", lease=30, keep=DAY)
    assert again.outcome == "stored" and settled_turn(again.value) == ("c1", 2)
    # A late release leaves it (its turn was stored); the holder's own finish still keeps the
    # answer, and a renewal is not refused as if the claim were lost.
    await store.release_key("alice", "k", claim.token)
    assert (await store.claim_key("alice", "k", "fp", lease=30, keep=DAY)).outcome == "stored"
    assert await store.renew_key("alice", "k", claim.token, lease=30)
    assert await store.finish_key("alice", "k", claim.token, b"200 x/y\n{}")
    done = await store.claim_key("alice", "k", "fp", lease=30, keep=DAY)
    assert (done.outcome, done.value) == ("done", b"200 x/y\n{}")


async def test_a_turn_settles_only_its_own_running_claim(store: ConversationStore) -> None:
    mine = await store.claim_key("bob", "k", "fp", lease=30, keep=DAY)
    other = await store.claim_key("bob", "k2", "fp", lease=30, keep=DAY)
    # Another token (a holder whose claim was taken over) and another key settle nothing.
    await store.append_turn("c", "scout", _turn("a"), settles=ClaimRef("bob", "k", "stale"))
    await store.append_turn("c", "scout", _turn("b"), settles=ClaimRef("bob", "k2", "x"))
    assert (await store.claim_key("bob", "k", "fp", lease=30, keep=DAY)).outcome == "running"
    assert (await store.claim_key("bob", "k2", "fp", lease=30, keep=DAY)).outcome == "running"
    # A finished claim stays finished.
    assert await store.finish_key("bob", "k2", other.token, b"kept")
    await store.append_turn("c", "scout", _turn("c"), settles=ClaimRef("bob", "k2", other.token))
    assert (await store.claim_key("bob", "k2", "fp", lease=30, keep=DAY)).value == b"kept"
    await store.append_turn("c", "scout", _turn("d"), settles=ClaimRef("bob", "k", mine.token))
    await store.release_key("bob", "k", mine.token)  # its holder lets go: the turn answers
    settled = await store.claim_key("bob", "k", "fp", lease=30, keep=DAY)
    assert settled.outcome == "stored" and settled_turn(settled.value) == ("c", 4)
    assert [t.turn for t in await store.turns("c") or []] == [1, 2, 3, 4]


async def test_a_settled_claim_whose_holder_is_alive_waits_for_its_kept_answer(
    store: ConversationStore,
) -> None:
    # Between storing its turn and keeping its answer the holder is alive: a retry is told to
    # come back shortly and then gets that answer, the same bytes, not one rebuilt from the
    # stored turn. Letting go (its client left) ends the lease: the stored turn answers at once.
    claim = await store.claim_key("eve", "k", "fp", lease=30, keep=DAY)
    await store.append_turn("c", "scout", _turn("a"), settles=ClaimRef("eve", "k", claim.token))
    early = await store.claim_key("eve", "k", "fp", lease=30, keep=DAY)
    assert early.outcome == "running" and 0 < early.retry_after <= FINISHING_RETRY_AFTER
    assert await store.finish_key("eve", "k", claim.token, b"200 x/y\n{}")
    assert (await store.claim_key("eve", "k", "fp", lease=30, keep=DAY)).value == b"200 x/y\n{}"
    left = await store.claim_key("eve", "k2", "fp", lease=30, keep=DAY)
    await store.append_turn("c", "scout", _turn("b"), settles=ClaimRef("eve", "k2", left.token))
    await store.release_key("eve", "k2", left.token)
    after = await store.claim_key("eve", "k2", "fp", lease=30, keep=DAY)
    assert after.outcome == "stored" and settled_turn(after.value) == ("c", 2)


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
    # A lease a busy machine's next claim comes well within, then waited out.
    dead = await store.claim_key("c", "k", "fp", lease=1.0, keep=DAY)
    assert (await store.claim_key("c", "k", "fp", lease=1.0, keep=DAY)).outcome == "running"
    await asyncio.sleep(1.2)
    taker = await store.claim_key("c", "k", "fp", lease=30, keep=DAY)
    assert taker.outcome == "run" and taker.token != dead.token
    assert not await store.renew_key("c", "k", dead.token, lease=30)
    assert not await store.finish_key("c", "k", dead.token, b"late")
    await store.release_key("c", "k", dead.token)  # changes nothing: not its claim any more
    assert await store.finish_key("c", "k", taker.token, b"mine")
    assert (await store.claim_key("c", "k", "fp", lease=30, keep=DAY)).value == b"mine"


async def test_renewal_keeps_a_long_turn_claimed(store: ConversationStore) -> None:
    # Renewed every 0.5 s, each time for 2 s: the turn outlives its first lease by far, and a
    # loaded machine may delay a renewal by 1.5 s before the lease lapses.
    held = await store.claim_key("c", "k", "fp", lease=2.0, keep=DAY)
    for _ in range(6):
        await asyncio.sleep(0.5)
        assert await store.renew_key("c", "k", held.token, lease=2.0)
    assert (await store.claim_key("c", "k", "fp", lease=2.0, keep=DAY)).outcome == "running"


async def test_expired_keys_are_forgotten_and_purged(store: ConversationStore) -> None:
    first = await store.claim_key("c", "old", "fp", lease=30, keep=0.3)
    await store.finish_key("c", "old", first.token, b"1")
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
