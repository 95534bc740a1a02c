"""The SQL of the SQLite store's conversations: each function runs on the store's connection.

:class:`~generic_framework.store.sqlite.SQLiteStore` checks the arguments on the event loop and
hands one of these, with the connection, to its worker thread
(``SQLiteStore._run``); they are apart from the store because they are the one place that
knows the tables ``conversations``, ``turns`` and ``messages``, and read as plain functions of
a connection (as :mod:`~.sqlite_keys` does for the idempotency keys). Every write is one
``BEGIN IMMEDIATE`` transaction, rolled back whole on any error, so a turn is stored whole or
not at all and processes sharing the file number turns without gaps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from generic_framework.store import sqlite_keys
from generic_framework.store.base import (
    ConversationDump,
    ConversationSummary,
    StoredMessage,
    StoredTurn,
    cursor_of,
    title_of,
)
from generic_framework.store.keys import ClaimRef
from generic_framework.store.listing import LIST_SQL, TITLE_CUT, list_filter, message_text
from generic_framework.store.pictures import (
    PICTURE_COLUMNS,
    StoredPicture,
    picture_rows,
    pictures_from,
)
from generic_framework.store.sqlite_schema import RECORD_COLUMNS, record_from, record_values
from generic_framework.wire.messages import Message

__all__ = [
    "append",
    "delete",
    "delete_last_turn",
    "dump",
    "get",
    "ids",
    "list_page",
    "load",
    "rename",
    "restore",
]

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def load(db: sqlite3.Connection, conversation_id: str, turns: int) -> list[Message]:
    rows = db.execute(
        "SELECT body FROM messages WHERE conversation_id = ?1 AND turn > "
        "(SELECT turns FROM conversations WHERE id = ?1) - ?2 ORDER BY turn, seq",
        (conversation_id, turns),
    ).fetchall()
    return [_MESSAGE.validate_json(body) for (body,) in rows]


def append(
    db: sqlite3.Connection,
    conversation_id: str,
    persona: str,
    bodies: list[tuple[str, str]],
    values: tuple[Any, ...],
    pictures: Sequence[StoredPicture] = (),
    settles: ClaimRef | None = None,
) -> int:
    now = _now()
    db.execute("BEGIN IMMEDIATE")
    try:
        (turn,) = db.execute(
            "INSERT INTO conversations (id, turns, created_at, updated_at)"
            " VALUES (?1, 1, ?2, ?2)"
            " ON CONFLICT (id) DO UPDATE SET turns = turns + 1, updated_at = ?2"
            " RETURNING turns",
            (conversation_id, now),
        ).fetchone()
        _insert_turn(db, conversation_id, turn, persona, now, values, bodies)
        _insert_pictures(db, picture_rows(conversation_id, turn, pictures, renumber=True))
        if settles is not None:
            sqlite_keys.settle(db, settles, conversation_id, turn)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return int(turn)


def ids(db: sqlite3.Connection) -> list[str]:
    return [row[0] for row in db.execute("SELECT id FROM conversations ORDER BY id")]


def dump(db: sqlite3.Connection, conversation_id: str) -> ConversationDump | None:
    head = db.execute(
        "SELECT created_at, updated_at, title FROM conversations WHERE id = ?",
        (conversation_id,),
    ).fetchone()
    if head is None:
        return None
    columns = ", ".join(RECORD_COLUMNS)
    rows = db.execute(
        f"SELECT turn, persona, created_at, {columns} FROM turns"  # noqa: S608 - constants
        " WHERE conversation_id = ? ORDER BY turn",
        (conversation_id,),
    ).fetchall()
    bodies: dict[int, list[Message]] = {}
    for turn, body in db.execute(
        "SELECT turn, body FROM messages WHERE conversation_id = ? ORDER BY turn, seq",
        (conversation_id,),
    ):
        bodies.setdefault(turn, []).append(_MESSAGE.validate_json(body))
    turns = tuple(
        StoredTurn(row[0], row[1], row[2], record_from(row[3:]), tuple(bodies.get(row[0], ())))
        for row in rows
    )
    pictures = db.execute(
        f"SELECT {PICTURE_COLUMNS} FROM pictures"  # noqa: S608 - constants
        " WHERE conversation_id = ? ORDER BY turn, seq",
        (conversation_id,),
    ).fetchall()
    return ConversationDump(
        conversation_id, head[0], head[1], turns, head[2], pictures_from(pictures)
    )


def picture(db: sqlite3.Connection, conversation_id: str, sha256: str) -> StoredPicture | None:
    row = db.execute(
        f"SELECT {PICTURE_COLUMNS} FROM pictures"  # noqa: S608 - constants
        " WHERE conversation_id = ? AND sha256 = ? ORDER BY turn, seq LIMIT 1",
        (conversation_id, sha256),
    ).fetchone()
    return pictures_from([row])[0] if row is not None else None


def _insert_pictures(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        db.executemany(
            f"INSERT INTO pictures (conversation_id, {PICTURE_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def restore(db: sqlite3.Connection, dump: ConversationDump) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("SELECT 1 FROM conversations WHERE id = ?", (dump.id,)).fetchone():
            raise ValueError(f"conversation {dump.id!r} already exists")
        last = max((t.turn for t in dump.turns), default=0)
        db.execute(
            "INSERT INTO conversations (id, turns, created_at, updated_at, title)"
            " VALUES (?, ?, ?, ?, ?)",
            (dump.id, last, dump.created_at, dump.updated_at, dump.title),
        )
        for t in dump.turns:
            bodies = [(m.role, m.model_dump_json(exclude_none=True)) for m in t.messages]
            values = record_values(t.record)
            _insert_turn(db, dump.id, t.turn, t.persona, t.created_at, values, bodies)
        _insert_pictures(db, picture_rows(dump.id, 0, dump.pictures, renumber=False))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def get(db: sqlite3.Connection, conversation_id: str) -> list[StoredMessage] | None:
    if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone():
        rows = db.execute(
            "SELECT m.turn, t.persona, t.created_at, m.body FROM messages m JOIN turns t"
            " ON t.conversation_id = m.conversation_id AND t.turn = m.turn"
            " WHERE m.conversation_id = ? ORDER BY m.turn, m.seq",
            (conversation_id,),
        ).fetchall()
        return [
            StoredMessage(turn, persona, created, _MESSAGE.validate_json(body))
            for turn, persona, created, body in rows
        ]
    return None


def delete(db: sqlite3.Connection, conversation_id: str) -> bool:
    db.execute("BEGIN IMMEDIATE")
    try:
        deleted = db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return deleted.rowcount > 0


def _insert_turn(
    db: sqlite3.Connection,
    conversation_id: str,
    turn: int,
    persona: str,
    created_at: str,
    values: tuple[Any, ...],
    bodies: Sequence[tuple[str, str]],
) -> None:
    """Insert one turn's row (with its record) and its messages, inside the caller's
    transaction."""
    columns = ", ".join(RECORD_COLUMNS)
    marks = ", ".join("?" * len(RECORD_COLUMNS))
    db.execute(
        f"INSERT INTO turns (conversation_id, turn, persona, created_at, {columns})"  # noqa: S608
        f" VALUES (?, ?, ?, ?, {marks})",
        (conversation_id, turn, persona, created_at, *values),
    )
    db.executemany(
        "INSERT INTO messages (conversation_id, turn, seq, role, body) VALUES (?, ?, ?, ?, ?)",
        [(conversation_id, turn, seq, role, body) for seq, (role, body) in enumerate(bodies)],
    )


def list_page(
    db: sqlite3.Connection, limit: int, after: tuple[str, str] | None, owner: str | None
) -> list[ConversationSummary]:
    where, params = list_filter(after, owner, "?")
    sql = LIST_SQL.format(cut=TITLE_CUT, where=where, mark="?")
    rows = db.execute(sql, (*params, limit)).fetchall()
    return [
        ConversationSummary(
            id=cid,
            persona=persona or "",
            title=title or title_of(first if first is not None else _first_text(db, cid)),
            created_at=created,
            updated_at=updated,
            turns=turns,
            cursor=cursor_of(datetime.fromisoformat(updated), cid),
        )
        for cid, created, updated, turns, title, persona, first in rows
    ]


def rename(db: sqlite3.Connection, conversation_id: str, title: str) -> bool:
    db.execute("BEGIN IMMEDIATE")
    try:
        renamed = db.execute(
            "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
        )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return renamed.rowcount > 0


def delete_last_turn(db: sqlite3.Connection, conversation_id: str) -> bool:
    """The newest turn's row goes, and its messages with it (ON DELETE CASCADE)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT turns FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is not None and row[0] <= 1:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        elif row is not None:
            db.execute(
                "DELETE FROM turns WHERE conversation_id = ? AND turn = ?",
                (conversation_id, row[0]),
            )
            db.execute(
                "UPDATE conversations SET turns = turns - 1 WHERE id = ?", (conversation_id,)
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return row is not None


def _first_text(db: sqlite3.Connection, conversation_id: str) -> str:
    """The first stored message's text (for a first turn stored without a record)."""
    row = db.execute(
        "SELECT body FROM messages WHERE conversation_id = ? ORDER BY turn, seq LIMIT 1",
        (conversation_id,),
    ).fetchone()
    return message_text(row[0]) if row else ""
