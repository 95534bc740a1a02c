"""The SQLite schema: versioned migrations and the turn record's columns.

:data:`MIGRATIONS` is an ordered list of small functions; ``PRAGMA user_version`` records how
many have run. :func:`migrate` runs each pending one in its own ``BEGIN IMMEDIATE``
transaction that re-reads the version, so processes opening one file migrate it once
(docs/design/0316). :data:`RECORD_COLUMNS` are the turn record's columns of the ``turns``
table; :func:`record_values` and :func:`record_from` convert a
:class:`~generic_framework.store.base.TurnRecord` to and from them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from generic_framework.errors import ConfigError
from generic_framework.store.base import TurnRecord

if TYPE_CHECKING:
    import sqlite3

__all__ = ["MIGRATIONS", "RECORD_COLUMNS", "migrate", "record_from", "record_values"]


def _m001_tables(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE conversations ("
        " id TEXT PRIMARY KEY, turns INTEGER NOT NULL DEFAULT 0,"
        " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE turns ("
        " conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
        " turn INTEGER NOT NULL, persona TEXT NOT NULL, created_at TEXT NOT NULL,"
        " PRIMARY KEY (conversation_id, turn)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE messages ("
        " conversation_id TEXT NOT NULL, turn INTEGER NOT NULL, seq INTEGER NOT NULL,"
        " role TEXT NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (conversation_id, turn, seq),"
        " FOREIGN KEY (conversation_id, turn) REFERENCES turns(conversation_id, turn)"
        " ON DELETE CASCADE) WITHOUT ROWID"
    )


def _m002_turn_records(db: sqlite3.Connection) -> None:
    # Added columns only: rows written before stay as they were (NULL = not recorded then).
    for column, kind in _RECORD_TYPES.items():
        db.execute(f"ALTER TABLE turns ADD COLUMN {column} {kind}")


_RECORD_TYPES = {
    "input": "TEXT",
    "model": "TEXT",
    "stop_reason": "TEXT",
    "sources": "TEXT",
    "prompt_tokens": "INTEGER",
    "completion_tokens": "INTEGER",
    "cached_tokens": "INTEGER",
    "reasoning_tokens": "INTEGER",
    "web_searches": "INTEGER",
    "rounds": "INTEGER",
    "started_at": "TEXT",
    "duration_ms": "REAL",
    "round_ms": "TEXT",
}
_CALLER_TYPES = {"user_id": "TEXT", "key_id": "TEXT"}
RECORD_COLUMNS = (*_RECORD_TYPES, *_CALLER_TYPES, "offline")
"""The turn record's columns of the ``turns`` table (``sources`` and ``round_ms`` hold JSON;
``user_id`` and ``key_id``: who asked, added by migration 6; ``offline``: answered by the
embedded mock, added by migration 8)."""


def _m003_list_index(db: sqlite3.Connection) -> None:
    # The conversation list reads newest first, a page at a time (keyset on updated_at, id).
    db.execute("CREATE INDEX conversations_by_update ON conversations (updated_at, id)")


def _m004_titles(db: sqlite3.Connection) -> None:
    # A title given by renaming; NULL: lists show the first input.
    db.execute("ALTER TABLE conversations ADD COLUMN title TEXT")


def _m005_idempotency_keys(db: sqlite3.Connection) -> None:
    # The Idempotency-Key of turn requests, per caller (store/keys.py); times in seconds since
    # 1970. The index serves the purge of expired keys.
    db.execute(
        "CREATE TABLE idempotency_keys ("
        " caller TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
        " state TEXT NOT NULL, token TEXT NOT NULL, lease_until REAL NOT NULL,"
        " expires_at REAL NOT NULL, created_at REAL NOT NULL,"
        " status INTEGER, content_type TEXT, body BLOB,"
        " PRIMARY KEY (caller, key)) WITHOUT ROWID"
    )
    db.execute("CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at)")


def _m006_users(db: sqlite3.Connection) -> None:
    # Users, their keys and the counters of their limits (docs/design/0322). A conversation's
    # owner follows from its key (store/users.py: "<user id>/<id>", or a bare id for the
    # bootstrap admin, who thereby owns every conversation stored before): a generated
    # column, indexed for the per-user list, so nothing stored is rewritten.
    db.execute(
        "ALTER TABLE conversations ADD COLUMN owner TEXT GENERATED ALWAYS AS"
        " (CASE WHEN instr(id, '/') > 0 THEN substr(id, 1, instr(id, '/') - 1)"
        " ELSE 'admin' END) VIRTUAL"
    )
    db.execute("CREATE INDEX conversations_by_owner ON conversations (owner, updated_at, id)")
    for column, kind in _CALLER_TYPES.items():
        db.execute(f"ALTER TABLE turns ADD COLUMN {column} {kind}")
    db.execute(
        "CREATE TABLE users (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
        " role TEXT NOT NULL, rpm INTEGER, daily_tokens INTEGER, daily_searches INTEGER,"
        " created_at TEXT NOT NULL)"
    )
    db.execute(
        "INSERT INTO users (id, name, role, created_at)"
        " VALUES ('admin', 'admin', 'admin', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    )
    db.execute(
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY,"
        " user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, hash TEXT NOT NULL,"
        " created_at TEXT NOT NULL, expires_at TEXT, revoked_at TEXT, personas TEXT,"
        " rpm INTEGER, daily_tokens INTEGER, daily_searches INTEGER)"
    )
    db.execute("CREATE INDEX api_keys_by_user ON api_keys (user_id)")
    db.execute("CREATE TABLE rate_events (scope TEXT NOT NULL, at REAL NOT NULL)")
    db.execute("CREATE INDEX rate_events_by_scope ON rate_events (scope, at)")
    db.execute(
        "CREATE TABLE usage_days (scope TEXT NOT NULL, day TEXT NOT NULL,"
        " tokens INTEGER NOT NULL DEFAULT 0, searches INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (scope, day)) WITHOUT ROWID"
    )


def _m007_chats(db: sqlite3.Connection) -> None:
    # The chat platforms' state (store/chats.py, docs/design/0323): each chat's conversation
    # and persona, and the updates already claimed (seconds since 1970; the index serves the
    # purge of old claims).
    db.execute(
        "CREATE TABLE chat_state (platform TEXT NOT NULL, chat TEXT NOT NULL,"
        " conversation_id TEXT NOT NULL, persona TEXT, updated_at TEXT NOT NULL,"
        " PRIMARY KEY (platform, chat)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE claimed_updates (platform TEXT NOT NULL, update_id INTEGER NOT NULL,"
        " claimed_at REAL NOT NULL, PRIMARY KEY (platform, update_id)) WITHOUT ROWID"
    )
    db.execute("CREATE INDEX claimed_updates_by_time ON claimed_updates (claimed_at)")


def _m008_offline_turns(db: sqlite3.Connection) -> None:
    # Whether the embedded mock of the offline demo answered the turn (docs/design/0326): 1
    # when it did; NULL (every turn stored before) and 0: a real upstream answered.
    db.execute("ALTER TABLE turns ADD COLUMN offline INTEGER")


def _m009_memories(db: sqlite3.Connection) -> None:
    # The facts personas keep about their users (store/memories.py, docs/design/0330): per
    # user and persona, removed with their user; the index serves the listing, newest first.
    db.execute(
        "CREATE TABLE memories (id TEXT PRIMARY KEY,"
        " user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        " persona TEXT NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX memories_by_user ON memories (user_id, persona, created_at)")


def _m010_pictures(db: sqlite3.Connection) -> None:
    # A stored turn's pictures by content hash, removed with their turn (docs/design/0329).
    db.execute(
        "CREATE TABLE pictures ("
        " conversation_id TEXT NOT NULL, turn INTEGER NOT NULL, seq INTEGER NOT NULL,"
        " sha256 TEXT NOT NULL, mime TEXT NOT NULL, data BLOB, url TEXT, description TEXT,"
        " PRIMARY KEY (conversation_id, turn, seq),"
        " FOREIGN KEY (conversation_id, turn) REFERENCES turns(conversation_id, turn)"
        " ON DELETE CASCADE) WITHOUT ROWID"
    )
    db.execute("CREATE INDEX pictures_by_hash ON pictures (conversation_id, sha256)")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _m001_tables,
    _m002_turn_records,
    _m003_list_index,
    _m004_titles,
    _m005_idempotency_keys,
    _m006_users,
    _m007_chats,
    _m008_offline_turns,
    _m009_memories,
    _m010_pictures,
)
"""Schema changes in order; never edit one that shipped, append a new one."""


def record_values(record: TurnRecord | None) -> tuple[Any, ...]:
    """The :data:`RECORD_COLUMNS` values of a record (all ``None`` without one)."""
    if record is None:
        return (None,) * len(RECORD_COLUMNS)
    data = record.to_json()
    return tuple(
        json.dumps(data[c], ensure_ascii=False) if c in ("sources", "round_ms") else data[c]
        for c in RECORD_COLUMNS
    )


def record_from(values: Sequence[Any]) -> TurnRecord | None:
    """The record of a row's :data:`RECORD_COLUMNS` (``None`` for a turn stored without one)."""
    data = dict(zip(RECORD_COLUMNS, values, strict=True))
    if data["input"] is None:
        return None
    for name in _CALLER_TYPES:
        data[name] = data[name] or ""
    data["offline"] = bool(data["offline"])
    for name in ("sources", "round_ms"):
        data[name] = json.loads(data[name] or "[]")
    return TurnRecord.from_json(data)


def migrate(db: sqlite3.Connection) -> None:
    """Run the migrations this file has not seen, each in its own immediate transaction."""
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            if version > len(MIGRATIONS):
                raise ConfigError(
                    f"the conversation store is at schema version {version}, newer than this "
                    f"release's {len(MIGRATIONS)}: upgrade generic-framework"
                )
            if version == len(MIGRATIONS):
                db.execute("COMMIT")
                return
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
