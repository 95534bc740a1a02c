"""A turn's statements on PostgreSQL: the history it loads and the one statement that stores it.

:class:`~generic_framework.store.postgres.PostgresStore` hands these a connection: the session
holding the conversation's advisory lock (:mod:`~.postgres_locks`) while a turn runs, or a
pooled one for ``append_turn`` without a hold and for ``restore``. They are apart from the store
because they are the hot path of every stored turn and its SQL, measured statement by statement
(docs/TRIED.md): a new turn is one statement (the conversation's counter raised, the turn's row
and its messages taken from two JSON arrays), and on the holding session the same
statement hands the conversation's lock to its own transaction, so another replica gets the
conversation only once the turn is committed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from generic_framework.store.base import TurnRecord
from generic_framework.store.keys import ClaimRef
from generic_framework.store.pictures import PICTURE_COLUMNS, StoredPicture, picture_rows
from generic_framework.store.postgres_locks import Hold, conversation_key
from generic_framework.store.postgres_rows import COLUMNS, MESSAGE, record_params
from generic_framework.store.sqlite_schema import RECORD_COLUMNS
from generic_framework.store.users import check_conversation_key
from generic_framework.wire.messages import Message

__all__ = [
    "HISTORY",
    "LOAD_HISTORY",
    "PREPARE",
    "append",
    "append_and_release",
    "load",
    "lock_conversation",
    "messages",
    "turn_params",
    "write_pictures",
    "write_turn",
]

_MARKS = ", ".join(["%s"] * len(RECORD_COLUMNS))
_INSERT_TURN = (
    f"INSERT INTO turns (conversation_id, turn, persona, created_at, {COLUMNS})"  # noqa: S608
    f" VALUES (%s, %s, %s, %s, {_MARKS})"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (conversation_id, turn, seq, role, body) VALUES (%s, %s, %s, %s, %s)"
)
# A new turn in one statement: the counter raised (a new conversation's row made), the turn's
# row and its messages (taken from two JSON arrays, of the roles and of the bodies), all naming
# the turn by the counter's RETURNING. One statement instead of three plus one per message
# (docs/TRIED.md). The arrays travel as two JSON texts, which json.dumps writes in C: psycopg's
# array dumpers (text or binary) walk each list in Python, several times the cost.
_TURN = (
    "WITH c AS (INSERT INTO conversations (id, turns, created_at, updated_at)"  # noqa: S608
    " VALUES (%s, 1, %s, %s) ON CONFLICT (id) DO UPDATE SET turns = conversations.turns + 1,"
    " updated_at = EXCLUDED.updated_at RETURNING turns),"
    f" t AS (INSERT INTO turns (conversation_id, turn, persona, created_at, {COLUMNS})"
    f" VALUES (%s, (SELECT turns FROM c), %s, %s, {_MARKS})),"
    " m AS (INSERT INTO messages (conversation_id, turn, seq, role, body)"
    " SELECT %s, (SELECT turns FROM c), x.n - 1, x.role, x.body"
    " FROM ROWS FROM (json_array_elements_text(%s::json), json_array_elements_text(%s::json))"
    " WITH ORDINALITY AS x(role, body, n))"
)
# A turn with pictures adds their rows, unnested from five arrays, in the same statement
# (docs/design/0329); a turn without any sends the statement above unchanged.
_PICTURES = (
    f", p AS (INSERT INTO pictures (conversation_id, {PICTURE_COLUMNS})"  # noqa: S608
    " SELECT %s, (SELECT turns FROM c), x.n - 1, x.sha256, x.mime, x.data, x.url, x.description"
    " FROM unnest(%s::text[], %s::text[], %s::bytea[], %s::text[], %s::text[])"
    " WITH ORDINALITY AS x(sha256, mime, data, url, description, n))"
)
_INSERT_PICTURE = (
    f"INSERT INTO pictures (conversation_id, {PICTURE_COLUMNS})"  # noqa: S608
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
# A claim settled by the turn (store/keys.py), in the same statement: marked ``stored`` with the
# turn's conversation and number (parameters: the conversation, then the claim's owner, key and
# token), so the turn and its claim's settling commit together.
_SETTLE = (
    ", s AS (UPDATE idempotency_keys SET state = 'stored',"
    " body = convert_to(%s::text || chr(10) || (SELECT turns FROM c)::text, 'UTF8')"
    " WHERE caller = %s AND key = %s AND token = %s AND state = 'running')"
)
_RETURN_TURN = " SELECT turns FROM c"
_WRITE_TURN = _TURN + _RETURN_TURN
# The same turn on the session holding the conversation, releasing the session's lock in the
# same statement: it takes the conversation's transaction-level lock (granted at once: the
# session holds the key already), then gives back the session-level one (the subquery with the
# volatile call is evaluated first); the transaction-level lock lasts until the statement
# commits. Another replica's try conflicts with either, so it gets the conversation only once
# the turn is committed. One round trip instead of the write and then the unlock
# (docs/TRIED.md).
_RETURN_AND_RELEASE = (
    " SELECT (SELECT turns FROM c),"
    " (SELECT pg_advisory_unlock(%s) FROM (SELECT pg_advisory_xact_lock(%s)) AS l)"
)
_WRITE_AND_RELEASE = _TURN + _RETURN_AND_RELEASE


@functools.cache
def _statement(tail: str, pictures: bool, settles: bool) -> str:
    """The turn's statement ending with ``tail``, with the pictures' rows when it has any and
    settling a claim when there is one; one text object per variant, so that psycopg knows a
    statement run again on the same cursor."""
    return _TURN + (_PICTURES if pictures else "") + (_SETTLE if settles else "") + tail


def _settle_params(conversation_id: str, settles: ClaimRef | None) -> list[Any]:
    if settles is None:
        return []
    return [conversation_id, settles.owner, settles.key, settles.token]


_HISTORY_READ = (
    "SELECT body FROM messages WHERE conversation_id = {id} AND turn >"
    " (SELECT turns FROM conversations WHERE id = {id}) - {turns} ORDER BY turn, seq"
)
LOAD_HISTORY = _HISTORY_READ.format(id="%s", turns="%s")
"""The messages of a conversation's last turns, oldest first (parameters: its id twice, then
how many turns)."""
HISTORY = "gf_history"
"""The same read prepared in the session holding the conversations (arguments: the id, then how
many turns); ``PostgresStore.lock`` sends it with the lock's try."""
PREPARE = f"PREPARE {HISTORY} (text, integer) AS " + _HISTORY_READ.format(id="$1", turns="$2")
"""What the session holding the conversations prepares when it connects."""


async def lock_conversation(conn: Any, conversation_id: str) -> None:
    """The conversation's lock for the transaction of a pooled connection (``delete``,
    ``restore``): it waits for a turn holding the conversation on any replica."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (conversation_key(conversation_id),))


async def load(conn: Any, conversation_id: str, turns: int) -> list[Message]:
    if turns <= 0:
        return []
    cursor = await conn.execute(LOAD_HISTORY, (conversation_id, conversation_id, turns))
    return messages(await cursor.fetchall())


def messages(rows: Sequence[tuple[Any, ...]]) -> list[Message]:
    return [MESSAGE.validate_json(body) for (body,) in rows]


def _picture_params(conversation_id: str, pictures: Sequence[StoredPicture]) -> list[Any]:
    """The parameters of :data:`_PICTURES`: the conversation, then one array per column."""
    return [
        conversation_id,
        [p.sha256 for p in pictures],
        [p.mime for p in pictures],
        [p.data for p in pictures],
        [p.url for p in pictures],
        [p.description for p in pictures],
    ]


async def write_pictures(
    conn: Any, conversation_id: str, pictures: Sequence[StoredPicture]
) -> None:
    """Insert restored pictures as they were (their turns and places), in the caller's
    transaction."""
    rows = picture_rows(conversation_id, 0, pictures, renumber=False)
    if rows:
        async with conn.cursor() as cursor:
            await cursor.executemany(_INSERT_PICTURE, rows)


async def write_turn(
    conn: Any,
    conversation_id: str,
    turn: int,
    persona: str,
    created_at: datetime,
    record: TurnRecord | None,
    messages: Sequence[Message],
) -> None:
    params = [conversation_id, turn, persona, created_at, *record_params(record)]
    await conn.execute(_INSERT_TURN, params)
    async with conn.cursor() as cursor:
        await cursor.executemany(
            _INSERT_MESSAGE,
            [
                (conversation_id, turn, seq, m.role, m.model_dump_json(exclude_none=True))
                for seq, m in enumerate(messages)
            ],
        )


def turn_params(
    conversation_id: str,
    persona: str,
    messages: Sequence[Message],
    record: TurnRecord | None,
) -> list[Any]:
    """The parameters of :data:`_WRITE_TURN` (the counter's update, the turn's row, its
    messages)."""
    check_conversation_key(conversation_id)
    if not messages:
        raise ValueError("a turn has at least one message")
    now = datetime.now(UTC)
    key = conversation_id
    roles = json.dumps([m.role for m in messages])
    bodies = json.dumps(
        [m.model_dump_json(exclude_none=True) for m in messages], ensure_ascii=False
    )
    return [key, now, now, key, persona, now, *record_params(record), key, roles, bodies]


async def append(
    conn: Any,
    conversation_id: str,
    persona: str,
    messages: Sequence[Message],
    record: TurnRecord | None,
    pictures: Sequence[StoredPicture] = (),
    settles: ClaimRef | None = None,
) -> int:
    """Insert a turn inside the pooled connection's open transaction and commit it (the
    claim ``settles`` settled in it, if given).

    The counter's update, the turn's row, its messages and the commit go in one pipeline:
    one round trip to the server instead of four (docs/TRIED.md).
    """
    params = [
        *turn_params(conversation_id, persona, messages, record),
        *(_picture_params(conversation_id, pictures) if pictures else ()),
        *_settle_params(conversation_id, settles),
    ]
    async with conn.pipeline():
        cursor = await conn.execute(
            _statement(_RETURN_TURN, bool(pictures), settles is not None), params
        )
        await conn.commit()
    (turn,) = await cursor.fetchone()
    return int(turn)


async def append_and_release(
    conn: Any,
    hold: Hold,
    conversation_id: str,
    persona: str,
    messages: Sequence[Message],
    record: TurnRecord | None,
    pictures: Sequence[StoredPicture] = (),
    settles: ClaimRef | None = None,
) -> int:
    """On the session holding the conversation (autocommit): the turn in one statement, which
    commits on its own and hands the session's lock over to its own transaction
    (:data:`_WRITE_AND_RELEASE`), so the conversation is free once the turn is committed; the
    claim ``settles``, if given, is settled by the same statement.

    Not a pipeline of the write and the unlock: without a Sync between them the two would
    share one implicit transaction and the unlock would come before the commit; an explicit
    transaction in a pipeline cost more client CPU than a second round trip (docs/TRIED.md).
    A write that fails rolls back; the session's lock, given back inside it or not, is
    released by :meth:`PostgresLocks.release` (an unlock of a lock not held does nothing).
    """
    params = [
        *turn_params(conversation_id, persona, messages, record),
        *(_picture_params(conversation_id, pictures) if pictures else ()),
        *_settle_params(conversation_id, settles),
        hold.key,
        hold.key,
    ]
    statement = _statement(_RETURN_AND_RELEASE, bool(pictures), settles is not None)
    cursor = await conn.execute(statement, params)
    (turn, _) = await cursor.fetchone()
    hold.released = True
    return int(turn)
