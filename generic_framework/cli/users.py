"""The ``users`` and ``keys`` commands: people who may use the service, and their API keys.

They work on the database ``DATABASE_URL`` names (SQLite in DATA_DIR when unset), the one the
service reads, so a key made here works on every replica at once and a revoked one stops at
once. ``keys create`` prints the new key alone on the last line of stdout (``--json``: the
whole record, the key included): it is shown this once and never kept.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, TypeVar

from generic_framework.cli.common import EXIT_ERROR, EXIT_OK, err, run_command
from generic_framework.cli.db import settings_url, store_at
from generic_framework.config import Settings
from generic_framework.errors import ConfigError, StoreUnavailableError
from generic_framework.store import ConversationStore
from generic_framework.store.users import ApiKey, Limits, Role, User, expiry, key_id_of

__all__ = [
    "run_keys_create",
    "run_keys_list",
    "run_keys_revoke",
    "run_users_add",
    "run_users_list",
    "run_users_remove",
    "run_users_set",
    "store_command",
]

_T = TypeVar("_T")


def _with_store(work: Callable[[ConversationStore], Awaitable[_T]], settings: Settings) -> _T:
    store = store_at(settings_url(settings), settings)

    async def run() -> _T:
        try:
            await store.open()
            return await work(store)
        finally:
            await store.aclose()

    return asyncio.run(run())


def store_command(work: Callable[[ConversationStore], Awaitable[int]]) -> int:
    """Run ``work`` on the configured store; a store or value problem is one line, exit 1."""

    def action(settings: Settings) -> int:
        try:
            return _with_store(work, settings)
        except StoreUnavailableError as exc:
            err(f"error: {exc}")
            return EXIT_ERROR
        except ConfigError:
            raise  # a usage error: run_command says so (exit 2)
        except ValueError as exc:
            err(f"error: {exc}")
            return EXIT_ERROR

    return run_command(action)


def _limits(value: int | None, admin: bool) -> str:
    """A limit as lists show it: an unset one is the BOT_DEFAULT_* setting's for a user, and
    none for an admin (quotas.effective_limits), the bootstrap admin included."""
    if value is None:
        return "none" if admin else "default"
    return "none" if value == 0 else str(value)


def user_json(user: User) -> dict[str, Any]:
    """A user as ``--json`` and the admin endpoints show it."""
    return {
        "id": user.id,
        "name": user.name,
        "role": user.role,
        "created_at": user.created_at,
        "limits": asdict(user.limits),
    }


def key_json(key: ApiKey, user: User | None = None) -> dict[str, Any]:
    """A key's record (never the key) as ``--json`` and the admin endpoints show it."""
    data: dict[str, Any] = {
        "id": key.id,
        "user_id": key.user_id,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
        "personas": list(key.personas) if key.personas is not None else None,
        "limits": asdict(key.limits),
        "usable": key.usable(),
    }
    if user is not None:
        data["user"] = user.name
    return data


def _user_line(user: User) -> str:
    lim, admin = user.limits, user.is_admin
    return (
        f"{user.name}\t{user.role}\trpm={_limits(lim.rpm, admin)}\t"
        f"daily_tokens={_limits(lim.daily_tokens, admin)}\t"
        f"daily_searches={_limits(lim.daily_searches, admin)}"
    )


def run_users_add(name: str, role: Role, limits: Limits, as_json: bool) -> int:
    """``users add NAME [--admin] [--rpm N ...]``."""

    async def work(store: ConversationStore) -> int:
        user = await store.add_user(name, role=role, limits=limits)
        print(json.dumps(user_json(user)) if as_json else f"added {_user_line(user)}")
        return EXIT_OK

    return store_command(work)


def run_users_set(name: str, role: Role | None, changes: dict[str, int | None]) -> int:
    """``users set NAME [--admin/--user] [--rpm N ...]``: only the options given change."""

    async def work(store: ConversationStore) -> int:
        user = await store.user(name)
        if user is None:
            err(f"error: no user named {name!r} (see: generic-framework users list)")
            return EXIT_ERROR
        limits = None
        if changes:
            limits = Limits(**{**asdict(user.limits), **changes})
        changed = await store.set_user(name, role=role, limits=limits)
        assert changed is not None
        print(f"set {_user_line(changed)}")
        return EXIT_OK

    return store_command(work)


def run_users_list(as_json: bool) -> int:
    """``users list``."""

    async def work(store: ConversationStore) -> int:
        users = await store.users()
        if as_json:
            print(json.dumps([user_json(u) for u in users]))
        for user in [] if as_json else users:
            print(_user_line(user))
        return EXIT_OK

    return store_command(work)


def run_users_remove(name: str) -> int:
    """``users remove NAME``: the user, their keys and their conversations."""

    async def work(store: ConversationStore) -> int:
        if not await store.remove_user(name):
            err(f"error: no user named {name!r} (see: generic-framework users list)")
            return EXIT_ERROR
        print(f"removed {name} with their keys and conversations")
        return EXIT_OK

    return store_command(work)


def run_keys_create(
    name: str,
    days: float | None,
    personas: tuple[str, ...] | None,
    limits: Limits,
    as_json: bool,
) -> int:
    """``keys create --user NAME``: the user is made when missing; the key is printed alone
    on the last line (``--json``: the record with the key)."""
    expires_at = expiry(days)

    async def work(store: ConversationStore) -> int:
        user = await store.user(name)
        if user is None:
            user = await store.add_user(name)
            err(f"added user {name}")
        key, text = await store.create_key(
            user.id, expires_at=expires_at, personas=personas, limits=limits
        )
        if as_json:
            print(json.dumps({**key_json(key, user), "key": text}))
        else:
            until = f", expires {key.expires_at}" if key.expires_at else ""
            print(f"key {key.id} for {user.name}{until} (shown once: keep it now)")
            print(text)
        return EXIT_OK

    return store_command(work)


def run_keys_list(name: str | None, as_json: bool) -> int:
    """``keys list [--user NAME]``: records only, never a key."""

    async def work(store: ConversationStore) -> int:
        users = {u.id: u for u in await store.users()}
        owner = None
        if name is not None:
            owner = next((u for u in users.values() if u.name == name), None)
            if owner is None:
                err(f"error: no user named {name!r} (see: generic-framework users list)")
                return EXIT_ERROR
        keys = await store.keys(owner.id if owner is not None else None)
        if as_json:
            print(json.dumps([key_json(k, users.get(k.user_id)) for k in keys]))
            return EXIT_OK
        for k in keys:
            state = "revoked" if k.revoked_at else ("ok" if k.usable() else "expired")
            who = users[k.user_id].name if k.user_id in users else k.user_id
            extra = f"\texpires={k.expires_at}" if k.expires_at else ""
            allowed = f"\tpersonas={','.join(k.personas)}" if k.personas is not None else ""
            print(f"{k.id}\t{who}\t{state}\tcreated={k.created_at}{extra}{allowed}")
        return EXIT_OK

    return store_command(work)


def key_id_argument(value: str) -> str:
    """The public id of ``KEY_OR_ID``: a whole key or its id (12 hex digits).

    Raises:
        ConfigError: neither.
    """
    text = value.strip()
    found = key_id_of(text)
    if found is not None:
        return found
    if len(text) == 12 and all(c in "0123456789abcdef" for c in text):
        return text
    raise ConfigError("KEY_OR_ID is a key (gfk_...) or its id (12 hex digits, see: keys list)")


def run_keys_revoke(value: str) -> int:
    """``keys revoke KEY_OR_ID``."""

    async def work(store: ConversationStore) -> int:
        key_id = key_id_argument(value)
        if not await store.revoke_key(key_id):
            err(
                f"error: no key {key_id} that is not revoked yet (see: generic-framework keys list)"
            )
            return EXIT_ERROR
        print(f"revoked key {key_id}")
        return EXIT_OK

    return store_command(work)
