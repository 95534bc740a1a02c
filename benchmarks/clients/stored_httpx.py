"""The stored floor: raw httpx, each turn kept in PostgreSQL by hand, in the same two round trips.

What any client pays that keeps a conversation in PostgreSQL for replicas to share, at the
least: the conversation's advisory lock taken together with the last turn's read (one simple
query of two statements), the turn's messages sent along as history, and the new turn written
together with the lock's release (one statement). One connection opened at start, plain dicts,
``json.dumps`` for the write; psycopg gives the JSON back parsed. No counters, no record
columns, no pictures, no validation: less than the library's store does, so a row compared with
this floor shows what the library adds over the round trips themselves.

Options: ``database_url`` (required). The conversation is this process's own.
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

from benchmarks import job
from benchmarks.clients import Driver
from benchmarks.clients.raw_httpx import RawHttpx

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS floor_turns (conversation text, turn integer, messages jsonb,"
    " PRIMARY KEY (conversation, turn))"
)
_WRITE = (
    "WITH t AS (INSERT INTO floor_turns VALUES (%s, %s, %s::jsonb)) SELECT pg_advisory_unlock(%s)"
)


class FloorStatements:
    """The floor's two statements for one conversation on one autocommit connection (also
    timed without the model by ``benchmarks.store_alone``)."""

    def __init__(self, conn: Any, conversation: str) -> None:
        self.cursor = conn.cursor()
        self.conversation = conversation
        self.key = zlib.crc32(conversation.encode())
        # Both values are this module's own (an integer, a name of letters, digits and "-"):
        # the read is one simple query, as a hand-written client sends two statements at once.
        self.read_query = (
            f"SELECT pg_try_advisory_lock({self.key});"  # noqa: S608 - the values above
            " SELECT turn, messages FROM floor_turns"
            f" WHERE conversation = '{self.conversation}' ORDER BY turn DESC LIMIT 1"
        ).encode()

    async def read(self) -> tuple[int, list[dict[str, Any]]]:
        """Take the conversation's lock; the last turn's number and messages."""
        cursor = await self.cursor.execute(self.read_query, prepare=False)
        (got,) = await cursor.fetchone()
        if not got:
            raise RuntimeError("the conversation's lock is held elsewhere")
        cursor.nextset()
        last = await cursor.fetchone()
        return (last[0], last[1]) if last else (0, [])

    async def write(self, turn: int, messages: list[dict[str, Any]]) -> None:
        """Store the turn and give the lock back, in one statement."""
        await self.cursor.execute(_WRITE, (self.conversation, turn, json.dumps(messages), self.key))


class StoredHttpx(RawHttpx):
    """:class:`RawHttpx`'s loop, with the last turn loaded before it and the turn stored after."""

    def __init__(self, base_url: str, options: dict[str, Any], conn: Any) -> None:
        super().__init__(base_url, {})
        self.conn = conn
        self.statements = FloorStatements(conn, f"floor-{os.getpid()}")

    async def converse(self) -> str:
        turn, history = await self.statements.read()
        messages = [
            {"role": "system", "content": job.SYSTEM},
            *history,
            {"role": "user", "content": job.QUESTION},
        ]
        start = len(messages) - 1  # this turn's messages: the question onwards
        message = await self._answer(messages)
        await self.statements.write(turn + 1, [*messages[start:], message])
        return str(message["content"])

    async def aclose(self) -> None:
        await super().aclose()
        await self.conn.close()


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Connect, make the table, and build the driver."""
    url = options.get("database_url")
    if not url:
        raise ValueError("the stored floor needs the option database_url")
    return StoredHttpx(base_url, options, await connect(url))


async def connect(url: str) -> Any:
    """An autocommit connection to ``url``, the floor's table made."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(_SCHEMA)
    return conn
