"""PostgreSQL's administrative reads, on a pooled connection the store hands in: a page of the
conversation list and a whole conversation (``PostgresStore.list_conversations`` and ``dump``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from generic_framework.store.base import (
    ConversationDump,
    ConversationSummary,
    StoredTurn,
    cursor_of,
    title_of,
)
from generic_framework.store.listing import LIST_SQL, TITLE_CUT, list_filter, message_text
from generic_framework.store.pictures import PICTURE_COLUMNS, StoredPicture, pictures_from
from generic_framework.store.postgres_rows import COLUMNS, MESSAGE, iso, record_from
from generic_framework.wire.messages import Message

__all__ = ["read_dump", "read_page", "read_picture"]


async def read_page(
    conn: Any, limit: int, after: tuple[datetime, str] | None, owner: str | None = None
) -> list[ConversationSummary]:
    where, params = list_filter(after, owner, "%s")
    cursor = await conn.execute(
        LIST_SQL.format(cut=TITLE_CUT, where=where, mark="%s"), (*params, limit)
    )
    summaries = []
    for cid, created, updated, turns, title, persona, first in await cursor.fetchall():
        text = first if first is not None else await _first_text(conn, cid)
        summaries.append(
            ConversationSummary(
                id=cid,
                persona=persona or "",
                title=title or title_of(text),
                created_at=iso(created),
                updated_at=iso(updated),
                turns=turns,
                # Microseconds: the next page must start exactly after this row.
                cursor=cursor_of(updated, cid),
            )
        )
    return summaries


async def _first_text(conn: Any, conversation_id: str) -> str:
    """The first stored message's text (for a first turn stored without a record)."""
    cursor = await conn.execute(
        "SELECT body FROM messages WHERE conversation_id = %s ORDER BY turn, seq LIMIT 1",
        (conversation_id,),
    )
    row = await cursor.fetchone()
    return message_text(row[0]) if row else ""


async def read_dump(conn: Any, conversation_id: str) -> ConversationDump | None:
    cursor = await conn.execute(
        "SELECT created_at, updated_at, title FROM conversations WHERE id = %s",
        (conversation_id,),
    )
    head = await cursor.fetchone()
    if head is None:
        return None
    cursor = await conn.execute(
        f"SELECT turn, persona, created_at, {COLUMNS} FROM turns"  # noqa: S608 - constants
        " WHERE conversation_id = %s ORDER BY turn",
        (conversation_id,),
    )
    rows = await cursor.fetchall()
    cursor = await conn.execute(
        "SELECT turn, body FROM messages WHERE conversation_id = %s ORDER BY turn, seq",
        (conversation_id,),
    )
    bodies: dict[int, list[Message]] = {}
    for turn, body in await cursor.fetchall():
        bodies.setdefault(turn, []).append(MESSAGE.validate_json(body))
    turns = tuple(
        StoredTurn(row[0], row[1], iso(row[2]), record_from(row[3:]), tuple(bodies.get(row[0], ())))
        for row in rows
    )
    cursor = await conn.execute(
        f"SELECT {PICTURE_COLUMNS} FROM pictures"  # noqa: S608 - constants
        " WHERE conversation_id = %s ORDER BY turn, seq",
        (conversation_id,),
    )
    pictures = pictures_from(await cursor.fetchall())
    return ConversationDump(conversation_id, iso(head[0]), iso(head[1]), turns, head[2], pictures)


async def read_picture(conn: Any, conversation_id: str, sha256: str) -> StoredPicture | None:
    cursor = await conn.execute(
        f"SELECT {PICTURE_COLUMNS} FROM pictures"  # noqa: S608 - constants
        " WHERE conversation_id = %s AND sha256 = %s ORDER BY turn, seq LIMIT 1",
        (conversation_id, sha256),
    )
    row = await cursor.fetchone()
    return pictures_from([row])[0] if row is not None else None
