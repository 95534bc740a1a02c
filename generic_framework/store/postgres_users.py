"""The PostgreSQL store's users, keys and limit counters (:class:`~.users.UserAdmin`).

A mixin of :class:`~generic_framework.store.postgres.PostgresStore`, on its pooled connections
(``_connection``). A request's count against a requests-per-minute limit runs in one
transaction under an advisory lock on the limit's scope, with the server's clock: every replica
counts against one sliding window, as the upstream budget is shared (docs/design/0315).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from generic_framework.store.postgres_rows import as_time, iso
from generic_framework.store.postgres_schema import advisory_key
from generic_framework.store.sqlite_users import (
    KEY_COLUMNS,
    USER_COLUMNS,
    key_from_row,
    personas_text,
    user_from_row,
)
from generic_framework.store.users import (
    BOOTSTRAP_USER,
    NO_LIMITS,
    ROLES,
    AccountsDump,
    ApiKey,
    Limits,
    Role,
    StoredKey,
    User,
    check_user_name,
    key_hash,
    new_key,
    new_user_id,
)

__all__ = ["PostgresUsers"]


def _time(value: str | None) -> datetime | None:
    return as_time(value) if value else None


async def _one_user(conn: Any, column: str, value: str) -> User | None:
    cursor = await conn.execute(
        f"SELECT {USER_COLUMNS} FROM users WHERE {column} = %s",  # noqa: S608 - constants
        (value,),
    )
    row = await cursor.fetchone()
    return user_from_row(row, iso) if row else None


class PostgresUsers:
    """Users, keys and limit counters in the store's database."""

    def _connection(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError  # the store's: a pooled connection

    async def add_user(self, name: str, *, role: Role = "user", limits: Limits = NO_LIMITS) -> User:
        """Add a user (:meth:`~.users.UserAdmin.add_user`)."""
        check_user_name(name)
        if role not in ROLES:
            raise ValueError(f"a role is one of {', '.join(ROLES)}")
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"INSERT INTO users ({USER_COLUMNS})"  # noqa: S608
                " VALUES (%s, %s, %s, %s, %s, %s, now()) ON CONFLICT (name) DO NOTHING"
                f" RETURNING {USER_COLUMNS}",
                (new_user_id(), name, role, limits.rpm, limits.daily_tokens,
                 limits.daily_searches),
            )  # fmt: skip
            row = await cursor.fetchone()
        if row is None:
            raise ValueError(f"a user named {name!r} exists already")
        return user_from_row(row, iso)

    async def user(self, name: str) -> User | None:
        """The user named ``name``, or ``None``."""
        async with self._connection() as conn:
            return await _one_user(conn, "name", name)

    async def user_by_id(self, user_id: str) -> User | None:
        """The user with id ``user_id``, or ``None``."""
        async with self._connection() as conn:
            return await _one_user(conn, "id", user_id)

    async def users(self) -> list[User]:
        """Every user, by name."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT {USER_COLUMNS} FROM users ORDER BY name"  # noqa: S608
            )
            return [user_from_row(row, iso) for row in await cursor.fetchall()]

    async def set_user(
        self, name: str, *, role: Role | None = None, limits: Limits | None = None
    ) -> User | None:
        """Change a user's role and/or limits; ``None`` when there is no such user."""
        if role is not None and role not in ROLES:
            raise ValueError(f"a role is one of {', '.join(ROLES)}")
        if role is not None and role != "admin" and name == BOOTSTRAP_USER:
            raise ValueError("the bootstrap admin stays an admin")
        if limits is not None and name == BOOTSTRAP_USER:
            raise ValueError(
                "the bootstrap admin (BOT_API_TOKEN) is the operator: it has no limits"
            )
        async with self._connection() as conn:
            if role is not None:
                await conn.execute("UPDATE users SET role = %s WHERE name = %s", (role, name))
            if limits is not None:
                await conn.execute(
                    "UPDATE users SET rpm = %s, daily_tokens = %s, daily_searches = %s"
                    " WHERE name = %s",
                    (limits.rpm, limits.daily_tokens, limits.daily_searches, name),
                )
            return await _one_user(conn, "name", name)

    async def remove_user(self, name: str) -> bool:
        """Remove a user with their keys and conversations; True when the user existed."""
        if name == BOOTSTRAP_USER:
            raise ValueError("the bootstrap admin cannot be removed")
        async with self._connection() as conn:
            cursor = await conn.execute("DELETE FROM users WHERE name = %s RETURNING id", (name,))
            row = await cursor.fetchone()
            if row is None:
                return False
            await conn.execute("DELETE FROM conversations WHERE owner = %s", (row[0],))
            return True

    async def create_key(
        self,
        user_id: str,
        *,
        expires_at: str | None = None,
        personas: tuple[str, ...] | None = None,
        limits: Limits = NO_LIMITS,
    ) -> tuple[ApiKey, str]:
        """A new key for the user: its record and the key (shown once, never kept)."""
        key_id, text = new_key()
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"INSERT INTO api_keys ({KEY_COLUMNS}, hash)"  # noqa: S608
                " VALUES (%s, %s, now(), %s, NULL, %s, %s, %s, %s, %s)"
                f" RETURNING {KEY_COLUMNS}",
                (key_id, user_id, _time(expires_at), personas_text(personas), limits.rpm,
                 limits.daily_tokens, limits.daily_searches, key_hash(text)),
            )  # fmt: skip
            row = await cursor.fetchone()
        return key_from_row(row, iso), text

    async def keys(self, user_id: str | None = None) -> list[ApiKey]:
        """Every key (of one user), newest first."""
        where = "WHERE user_id = %s" if user_id is not None else ""
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT {KEY_COLUMNS} FROM api_keys {where}"  # noqa: S608
                " ORDER BY created_at DESC, id",
                (user_id,) if user_id is not None else (),
            )
            return [key_from_row(row, iso) for row in await cursor.fetchall()]

    async def revoke_key(self, key_id: str) -> bool:
        """Revoke a key now; True when it existed and was not revoked yet."""
        async with self._connection() as conn:
            cursor = await conn.execute(
                "UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL",
                (key_id,),
            )
            return bool(cursor.rowcount)

    async def stored_key(self, key_id: str) -> StoredKey | None:
        """A key with its hash and user (one read)."""
        columns = ", ".join(f"k.{c.strip()}" for c in KEY_COLUMNS.split(","))
        users = ", ".join(f"u.{c.strip()}" for c in USER_COLUMNS.split(","))
        async with self._connection() as conn:
            cursor = await conn.execute(
                f"SELECT {columns}, k.hash, {users} FROM api_keys k"  # noqa: S608
                " JOIN users u ON u.id = k.user_id WHERE k.id = %s",
                (key_id,),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return StoredKey(key_from_row(row[:9], iso), row[9], user_from_row(row[10:], iso))

    async def admit(self, scope: str, limit: int, window: float = 60.0) -> float:
        """Count a request against ``limit`` per ``window`` seconds of ``scope`` (every
        replica, the server's clock); 0 when admitted, else the seconds until one would be."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("rate", scope),))
            cursor = await conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
            (now,) = await cursor.fetchone()
            await conn.execute(
                "DELETE FROM rate_events WHERE scope = %s AND at <= %s", (scope, now - window)
            )
            cursor = await conn.execute(
                "SELECT count(*), min(at) FROM rate_events WHERE scope = %s", (scope,)
            )
            used, oldest = await cursor.fetchone()
            if used >= limit:
                return max(0.001, float(oldest) + window - float(now))
            await conn.execute("INSERT INTO rate_events (scope, at) VALUES (%s, %s)", (scope, now))
            return 0.0

    async def add_usage(self, scopes: tuple[str, ...], tokens: int, searches: int) -> None:
        """Add a turn's tokens and searches to today's (UTC) totals of each scope."""
        day = datetime.now(UTC).date()
        async with self._connection() as conn, conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO usage_days (scope, day, tokens, searches) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (scope, day) DO UPDATE SET"
                " tokens = usage_days.tokens + EXCLUDED.tokens,"
                " searches = usage_days.searches + EXCLUDED.searches",
                [(scope, day, tokens, searches) for scope in scopes],
            )

    async def usage_today(self, scope: str) -> tuple[int, int]:
        """Today's (UTC) tokens and searches of ``scope``."""
        day = datetime.now(UTC).date()
        async with self._connection() as conn:
            cursor = await conn.execute(
                "SELECT tokens, searches FROM usage_days WHERE scope = %s AND day = %s",
                (scope, day),
            )
            row = await cursor.fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def dump_accounts(self) -> AccountsDump:
        """Every user and key (hashes included)."""
        async with self._connection() as conn:
            users = await (
                await conn.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name")  # noqa: S608
            ).fetchall()
            keys = await (
                await conn.execute(
                    f"SELECT {KEY_COLUMNS}, hash FROM api_keys ORDER BY id"  # noqa: S608
                )
            ).fetchall()
        return AccountsDump(
            tuple(user_from_row(row, iso) for row in users),
            tuple((key_from_row(row, iso), row[9]) for row in keys),
        )

    async def restore_accounts(self, dump: AccountsDump) -> int:
        """Add the users and keys this database lacks (by id); how many were added."""
        added = 0
        async with self._connection() as conn, conn.transaction():
            for u in dump.users:
                cursor = await conn.execute(
                    f"INSERT INTO users ({USER_COLUMNS})"  # noqa: S608
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (u.id, u.name, u.role, u.limits.rpm, u.limits.daily_tokens,
                     u.limits.daily_searches, as_time(u.created_at)),
                )  # fmt: skip
                added += cursor.rowcount
            for k, hashed in dump.keys:
                cursor = await conn.execute(
                    f"INSERT INTO api_keys ({KEY_COLUMNS}, hash)"  # noqa: S608
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (k.id, k.user_id, as_time(k.created_at), _time(k.expires_at),
                     _time(k.revoked_at), personas_text(k.personas), k.limits.rpm,
                     k.limits.daily_tokens, k.limits.daily_searches, hashed),
                )  # fmt: skip
                added += cursor.rowcount
        return added
