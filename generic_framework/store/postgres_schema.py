"""The PostgreSQL schema: versioned migrations, applied once under an advisory lock.

:data:`MIGRATIONS` mirrors :data:`generic_framework.store.sqlite_schema.MIGRATIONS` version by
version (1: conversations, turns, messages; 2: the turn record; 3: the conversation list's
index; 4: titles; 5: idempotency keys; 6: users, keys, owners and the limits'
counters; 7: chat states and claimed updates; 8: the turn record's ``offline`` mark; 9: the
facts personas keep, ``memories``; 10: the stored turns' pictures), so
``schema_version`` means the same on both backends and ``generic-framework db copy`` can move
a conversation between them whole. ``schema_migrations`` records every applied version.

:func:`migrate` runs each pending migration in its own transaction that first takes a
transaction-scoped advisory lock and then re-reads the version: replicas starting together
queue on the lock, and only the first applies anything (docs/design/0316).

JSON (message bodies, sources, round times) is kept as ``text``: ``jsonb`` refuses the
``\\u0000`` escape that a message may legally contain, and the bodies are read back whole,
never queried inside.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from generic_framework.errors import ConfigError, StoreUnavailableError

__all__ = [
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "NOT_INITIALISED_RETRY",
    "advisory_key",
    "migrate",
    "not_initialised",
]

logger = logging.getLogger("generic_framework.store")


def advisory_key(namespace: str, name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` within ``namespace``."""
    digest = hashlib.sha256(f"generic_framework:{namespace}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


MIGRATION_LOCK = advisory_key("schema", "migrations")
"""The advisory lock every migration transaction takes first."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE conversations ("
        " id text PRIMARY KEY, turns integer NOT NULL DEFAULT 0,"
        " created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL)",
        "CREATE TABLE turns ("
        " conversation_id text NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
        " turn integer NOT NULL, persona text NOT NULL, created_at timestamptz NOT NULL,"
        " PRIMARY KEY (conversation_id, turn))",
        "CREATE TABLE messages ("
        " conversation_id text NOT NULL, turn integer NOT NULL, seq integer NOT NULL,"
        " role text NOT NULL, body text NOT NULL,"
        " PRIMARY KEY (conversation_id, turn, seq),"
        " FOREIGN KEY (conversation_id, turn) REFERENCES turns (conversation_id, turn)"
        " ON DELETE CASCADE)",
    ),
    (
        "ALTER TABLE turns"
        " ADD COLUMN input text, ADD COLUMN model text, ADD COLUMN stop_reason text,"
        " ADD COLUMN sources text, ADD COLUMN prompt_tokens integer,"
        " ADD COLUMN completion_tokens integer, ADD COLUMN cached_tokens integer,"
        " ADD COLUMN reasoning_tokens integer, ADD COLUMN web_searches integer,"
        " ADD COLUMN rounds integer, ADD COLUMN started_at timestamptz,"
        " ADD COLUMN duration_ms double precision, ADD COLUMN round_ms text",
        # The 1302 pause of each upstream budget (docs/design/0315); PostgreSQL only.
        "CREATE TABLE upstream_pauses (budget text PRIMARY KEY, until timestamptz NOT NULL)",
    ),
    (
        # The conversation list reads newest first, a page at a time (keyset on updated_at, id).
        "CREATE INDEX conversations_by_update ON conversations (updated_at, id)",
    ),
    (
        # A title given by renaming; NULL: lists show the first input.
        "ALTER TABLE conversations ADD COLUMN title text",
    ),
    (
        # The Idempotency-Key of turn requests, per caller (store/keys.py); times from the
        # server's clock, so replicas with skewed clocks agree on leases and expiry.
        "CREATE TABLE idempotency_keys ("
        " caller text NOT NULL, key text NOT NULL, fingerprint text NOT NULL,"
        " state text NOT NULL, token text NOT NULL, lease_until timestamptz NOT NULL,"
        " expires_at timestamptz NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),"
        " status integer, content_type text, body bytea,"
        " PRIMARY KEY (caller, key))",
        "CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at)",
    ),
    (
        # Users, their keys and the counters of their limits (docs/design/0322). The owner
        # follows from the conversation's key (store/users.py), so nothing stored is rewritten:
        # conversations stored before belong to the bootstrap admin.
        "ALTER TABLE conversations ADD COLUMN owner text GENERATED ALWAYS AS"
        " (CASE WHEN strpos(id, '/') > 0 THEN split_part(id, '/', 1) ELSE 'admin' END) STORED",
        "CREATE INDEX conversations_by_owner ON conversations (owner, updated_at, id)",
        "ALTER TABLE turns ADD COLUMN user_id text, ADD COLUMN key_id text",
        "CREATE TABLE users (id text PRIMARY KEY, name text NOT NULL UNIQUE, role text NOT NULL,"
        " rpm integer, daily_tokens bigint, daily_searches integer,"
        " created_at timestamptz NOT NULL DEFAULT now())",
        "INSERT INTO users (id, name, role) VALUES ('admin', 'admin', 'admin')",
        "CREATE TABLE api_keys (id text PRIMARY KEY,"
        " user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE, hash text NOT NULL,"
        " created_at timestamptz NOT NULL, expires_at timestamptz, revoked_at timestamptz,"
        " personas text, rpm integer, daily_tokens bigint, daily_searches integer)",
        "CREATE INDEX api_keys_by_user ON api_keys (user_id)",
        "CREATE TABLE rate_events (scope text NOT NULL, at double precision NOT NULL)",
        "CREATE INDEX rate_events_by_scope ON rate_events (scope, at)",
        "CREATE TABLE usage_days (scope text NOT NULL, day date NOT NULL,"
        " tokens bigint NOT NULL DEFAULT 0, searches bigint NOT NULL DEFAULT 0,"
        " PRIMARY KEY (scope, day))",
    ),
    (
        # The chat platforms' state (store/chats.py, docs/design/0323): each chat's
        # conversation and persona, and the updates already claimed (the server's clock; the
        # index serves the purge of old claims).
        "CREATE TABLE chat_state (platform text NOT NULL, chat text NOT NULL,"
        " conversation_id text NOT NULL, persona text,"
        " updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (platform, chat))",
        "CREATE TABLE claimed_updates (platform text NOT NULL, update_id bigint NOT NULL,"
        " claimed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (platform, update_id))",
        "CREATE INDEX claimed_updates_by_time ON claimed_updates (claimed_at)",
    ),
    (
        # Whether the embedded mock of the offline demo answered the turn (docs/design/0326);
        # NULL (every turn stored before) and false: a real upstream answered.
        "ALTER TABLE turns ADD COLUMN offline boolean",
    ),
    (
        # The facts personas keep about their users (store/memories.py, docs/design/0330):
        # per user and persona, removed with their user; the index serves the listing.
        "CREATE TABLE memories (id text PRIMARY KEY,"
        " user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        " persona text NOT NULL, text text NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT clock_timestamp())",
        "CREATE INDEX memories_by_user ON memories (user_id, persona, created_at)",
    ),
    (
        # A stored turn's pictures by content hash, removed with their turn (docs/design/0329).
        "CREATE TABLE pictures ("
        " conversation_id text NOT NULL, turn integer NOT NULL, seq integer NOT NULL,"
        " sha256 text NOT NULL, mime text NOT NULL, data bytea, url text, description text,"
        " PRIMARY KEY (conversation_id, turn, seq),"
        " FOREIGN KEY (conversation_id, turn) REFERENCES turns(conversation_id, turn)"
        " ON DELETE CASCADE)",
        "CREATE INDEX pictures_by_hash ON pictures (conversation_id, sha256)",
    ),
)
"""Schema changes in order; never edit one that shipped, append a new one."""

_VERSIONS = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
)


NOT_INITIALISED_RETRY = 30.0
"""Seconds a caller is told to wait when the database was never initialised."""

_INITIALISED = "SELECT to_regclass('schema_migrations') IS NOT NULL"


async def migrate(conn: Any, *, create: bool = True) -> list[int]:
    """Apply the pending migrations on ``conn`` (a psycopg ``AsyncConnection``, not in a
    transaction); return the versions applied here (empty when another process did).

    With ``create`` false, a database that was never initialised (no schema at all) is
    refused instead of given a new, empty schema (docs/design/0325): the service's replicas
    open the store so, and ``generic-framework db upgrade`` initialises a new deployment.

    Raises:
        ConfigError: the database is at a newer version than this release knows.
        StoreUnavailableError: ``create`` is false and the database was never initialised.
    """
    applied: list[int] = []
    while True:
        async with conn.transaction():
            # A migration takes what it takes: the connections' statement_timeout is lifted.
            await conn.execute("SET LOCAL statement_timeout = 0")
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            if not create and not applied:
                cursor = await conn.execute(_INITIALISED)
                (initialised,) = await cursor.fetchone()
                if not initialised:
                    raise not_initialised()
            await conn.execute(_VERSIONS)
            cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
            (version,) = await cursor.fetchone()
            if version > len(MIGRATIONS):
                raise ConfigError(
                    f"the database is at schema version {version}, newer than this release's "
                    f"{len(MIGRATIONS)}: upgrade generic-framework"
                )
            if version == len(MIGRATIONS):
                return applied
            for statement in MIGRATIONS[version]:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (version) VALUES (%s)", (version + 1,)
            )
        applied.append(version + 1)
        logger.info("database migrated to schema version %d", version + 1)


def not_initialised() -> StoreUnavailableError:
    """The refusal of a database with no schema (never initialised, or its volume lost)."""
    return StoreUnavailableError(
        "the conversation database was never initialised for this deployment (it has no "
        "schema), and a replica does not create one: an empty database where the service "
        "expected its own is most often a lost volume, or PostgreSQL started on another "
        "machine. Restore its data; or, for a new deployment, run `generic-framework db "
        "upgrade` once with this DATABASE_URL",
        retry_after=NOT_INITIALISED_RETRY,
    )
