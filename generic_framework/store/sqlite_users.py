"""The SQLite store's users, keys and limit counters (:class:`~.users.UserAdmin`).

A mixin of :class:`~generic_framework.store.sqlite.SQLiteStore`: every operation runs in the
store's worker thread on its one connection (``_call``), each change in one ``BEGIN
IMMEDIATE`` transaction, so processes sharing the file count against one limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

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

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "KEY_COLUMNS",
    "USER_COLUMNS",
    "SQLiteUsers",
    "key_from_row",
    "personas_text",
    "user_from_row",
]

_T = TypeVar("_T")
USER_COLUMNS = "id, name, role, rpm, daily_tokens, daily_searches, created_at"
KEY_COLUMNS = (
    "id, user_id, created_at, expires_at, revoked_at, personas, rpm, daily_tokens, daily_searches"
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def user_from_row(row: Sequence[Any], iso: Callable[[Any], str] = str) -> User:
    """A :class:`User` of a ``users`` row (:data:`USER_COLUMNS`)."""
    role = row[2] if row[2] in ROLES else "user"
    return User(row[0], row[1], cast(Role, role), Limits(row[3], row[4], row[5]), iso(row[6]))


def key_from_row(row: Sequence[Any], iso: Callable[[Any], str] = str) -> ApiKey:
    """An :class:`ApiKey` of an ``api_keys`` row (:data:`KEY_COLUMNS`)."""
    personas = tuple(json.loads(row[5])) if row[5] is not None else None
    return ApiKey(
        id=row[0],
        user_id=row[1],
        created_at=iso(row[2]),
        expires_at=iso(row[3]) if row[3] is not None else None,
        revoked_at=iso(row[4]) if row[4] is not None else None,
        personas=personas,
        limits=Limits(row[6], row[7], row[8]),
    )


def personas_text(personas: tuple[str, ...] | None) -> str | None:
    """A key's persona allowlist as stored (JSON), ``None`` for all."""
    return json.dumps(list(personas)) if personas is not None else None


def _tx(db: sqlite3.Connection, operation: Callable[[], _T]) -> _T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = operation()
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return result


class SQLiteUsers:
    """Users, keys and limit counters in the store's SQLite file."""

    async def _call(self, operation: Callable[..., _T], *args: object) -> _T:
        raise NotImplementedError  # the store's: run in its worker thread

    async def add_user(self, name: str, *, role: Role = "user", limits: Limits = NO_LIMITS) -> User:
        """Add a user (:meth:`~.users.UserAdmin.add_user`)."""
        check_user_name(name)
        if role not in ROLES:
            raise ValueError(f"a role is one of {', '.join(ROLES)}")
        user = User(new_user_id(), name, role, limits, _now())

        def add(db: sqlite3.Connection) -> User:
            def insert() -> None:
                if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                    raise ValueError(f"a user named {name!r} exists already")
                db.execute(
                    f"INSERT INTO users ({USER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                    (user.id, name, role, limits.rpm, limits.daily_tokens,
                     limits.daily_searches, user.created_at),
                )  # fmt: skip

            _tx(db, insert)
            return user

        return await self._call(add)

    async def user(self, name: str) -> User | None:
        """The user named ``name``, or ``None``."""
        return await self._call(_one_user, "name", name)

    async def user_by_id(self, user_id: str) -> User | None:
        """The user with id ``user_id``, or ``None``."""
        return await self._call(_one_user, "id", user_id)

    async def users(self) -> list[User]:
        """Every user, by name."""

        def read(db: sqlite3.Connection) -> list[User]:
            rows = db.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name")  # noqa: S608
            return [user_from_row(row) for row in rows]

        return await self._call(read)

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

        def change(db: sqlite3.Connection) -> User | None:
            def update() -> None:
                if role is not None:
                    db.execute("UPDATE users SET role = ? WHERE name = ?", (role, name))
                if limits is not None:
                    db.execute(
                        "UPDATE users SET rpm = ?, daily_tokens = ?, daily_searches = ?"
                        " WHERE name = ?",
                        (limits.rpm, limits.daily_tokens, limits.daily_searches, name),
                    )

            _tx(db, update)
            return _one_user(db, "name", name)

        return await self._call(change)

    async def remove_user(self, name: str) -> bool:
        """Remove a user with their keys and conversations; True when the user existed."""
        if name == BOOTSTRAP_USER:
            raise ValueError("the bootstrap admin cannot be removed")

        def remove(db: sqlite3.Connection) -> bool:
            def delete() -> bool:
                row = db.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()
                if row is None:
                    return False
                db.execute("DELETE FROM conversations WHERE owner = ?", (row[0],))
                db.execute("DELETE FROM users WHERE id = ?", (row[0],))
                return True

            return _tx(db, delete)

        return await self._call(remove)

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
        key = ApiKey(key_id, user_id, _now(), expires_at, None, personas, limits)

        def insert(db: sqlite3.Connection) -> None:
            db.execute(
                f"INSERT INTO api_keys ({KEY_COLUMNS}, hash)"  # noqa: S608
                " VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)",
                (key_id, user_id, key.created_at, expires_at, personas_text(personas),
                 limits.rpm, limits.daily_tokens, limits.daily_searches, key_hash(text)),
            )  # fmt: skip

        await self._call(lambda db: _tx(db, lambda: insert(db)))
        return key, text

    async def keys(self, user_id: str | None = None) -> list[ApiKey]:
        """Every key (of one user), newest first."""

        def read(db: sqlite3.Connection) -> list[ApiKey]:
            where = "WHERE user_id = ?" if user_id is not None else ""
            rows = db.execute(
                f"SELECT {KEY_COLUMNS} FROM api_keys {where}"  # noqa: S608
                " ORDER BY created_at DESC, id",
                (user_id,) if user_id is not None else (),
            )
            return [key_from_row(row) for row in rows]

        return await self._call(read)

    async def revoke_key(self, key_id: str) -> bool:
        """Revoke a key now; True when it existed and was not revoked yet."""

        def revoke(db: sqlite3.Connection) -> bool:
            done = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_now(), key_id),
            )
            return done.rowcount > 0

        return await self._call(lambda db: _tx(db, lambda: revoke(db)))

    async def stored_key(self, key_id: str) -> StoredKey | None:
        """A key with its hash and user."""

        def read(db: sqlite3.Connection) -> StoredKey | None:
            row = db.execute(
                f"SELECT {KEY_COLUMNS}, hash FROM api_keys WHERE id = ?",  # noqa: S608
                (key_id,),
            ).fetchone()
            if row is None:
                return None
            user = _one_user(db, "id", row[1])
            return None if user is None else StoredKey(key_from_row(row), row[9], user)

        return await self._call(read)

    async def admit(self, scope: str, limit: int, window: float = 60.0) -> float:
        """Count a request against ``limit`` per ``window`` seconds of ``scope``; 0 when
        admitted, else the seconds until one would be."""

        def count(db: sqlite3.Connection) -> float:
            now = time.time()
            db.execute("DELETE FROM rate_events WHERE scope = ? AND at <= ?", (scope, now - window))
            used, oldest = db.execute(
                "SELECT count(*), min(at) FROM rate_events WHERE scope = ?", (scope,)
            ).fetchone()
            if used >= limit:
                return max(0.001, float(oldest) + window - now)
            db.execute("INSERT INTO rate_events (scope, at) VALUES (?, ?)", (scope, now))
            return 0.0

        return await self._call(lambda db: _tx(db, lambda: count(db)))

    async def add_usage(self, scopes: tuple[str, ...], tokens: int, searches: int) -> None:
        """Add a turn's tokens and searches to today's totals of each scope."""
        day = datetime.now(UTC).date().isoformat()

        def add(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT INTO usage_days (scope, day, tokens, searches) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (scope, day) DO UPDATE SET tokens = tokens + excluded.tokens,"
                " searches = searches + excluded.searches",
                [(scope, day, tokens, searches) for scope in scopes],
            )

        await self._call(lambda db: _tx(db, lambda: add(db)))

    async def usage_today(self, scope: str) -> tuple[int, int]:
        """Today's tokens and searches of ``scope``."""
        day = datetime.now(UTC).date().isoformat()

        def read(db: sqlite3.Connection) -> tuple[int, int]:
            row = db.execute(
                "SELECT tokens, searches FROM usage_days WHERE scope = ? AND day = ?", (scope, day)
            ).fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)

        return await self._call(read)

    async def dump_accounts(self) -> AccountsDump:
        """Every user and key (hashes included)."""

        def read(db: sqlite3.Connection) -> AccountsDump:
            users = db.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name")  # noqa: S608
            keys = db.execute(f"SELECT {KEY_COLUMNS}, hash FROM api_keys ORDER BY id")  # noqa: S608
            return AccountsDump(
                tuple(user_from_row(row) for row in users),
                tuple((key_from_row(row), row[9]) for row in keys),
            )

        return await self._call(read)

    async def restore_accounts(self, dump: AccountsDump) -> int:
        """Add the users and keys this file lacks (by id); how many were added."""

        def write(db: sqlite3.Connection) -> int:
            added = 0
            for u in dump.users:
                added += db.execute(
                    f"INSERT INTO users ({USER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"  # noqa: S608
                    " ON CONFLICT DO NOTHING",
                    (u.id, u.name, u.role, u.limits.rpm, u.limits.daily_tokens,
                     u.limits.daily_searches, u.created_at),
                ).rowcount  # fmt: skip
            for k, hashed in dump.keys:
                added += db.execute(
                    f"INSERT INTO api_keys ({KEY_COLUMNS}, hash)"  # noqa: S608
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (k.id, k.user_id, k.created_at, k.expires_at, k.revoked_at,
                     personas_text(k.personas), k.limits.rpm, k.limits.daily_tokens,
                     k.limits.daily_searches, hashed),
                ).rowcount  # fmt: skip
            return added

        return await self._call(lambda db: _tx(db, lambda: write(db)))


def _one_user(db: sqlite3.Connection, column: str, value: str) -> User | None:
    row = db.execute(
        f"SELECT {USER_COLUMNS} FROM users WHERE {column} = ?",  # noqa: S608 - constants
        (value,),
    ).fetchone()
    return user_from_row(row) if row else None
