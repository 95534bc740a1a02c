"""Conversation stores: two async interfaces and their backends.

:class:`TurnStore` is what a turn needs: :meth:`~TurnStore.lock` holds a conversation for one
turn (across processes where the backend can, without a transaction open while the model
works), and :meth:`~HeldConversation.append_turn` writes a turn's messages (user message,
assistant tool calls, tool answers, final answer) and its record atomically after the turn
completed, so a stored history never ends in an unanswered tool call. :class:`StoreAdmin` is
the rest (list, read, delete, copy, schema); :class:`~.users.UserAdmin` the users, their API
keys and the counters of their limits (:mod:`~.users`: who owns a conversation follows from its
key); :class:`ConversationStore` is all of them. The upstream
budget is not the store's: the Runtime picks it from the configuration (docs/design/0315).

Backends: :class:`~generic_framework.store.sqlite.SQLiteStore` (one file, the embedded default)
and :class:`~generic_framework.store.postgres.PostgresStore` (``DATABASE_URL``, shared by
replicas). :func:`open_store` picks one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from generic_framework.exports import on_first_use

# The names are loaded on first use (PEP 562): the SQLite backend (sqlite3 and its module,
# about 4 ms) when a conversation first needs it, and the protocols of .base (with the users,
# keys and chats they gather) when a store is opened or a turn stored, so that a Persona
# without a conversation imports neither (docs/design/0704). .users alone stays light: the
# turn's caller comes from there.
_EXPORTS: dict[str, str] = {
    "ConversationDump": "generic_framework.store.base",
    "ConversationStore": "generic_framework.store.base",
    "ConversationSummary": "generic_framework.store.base",
    "HeldConversation": "generic_framework.store.base",
    "SQLiteStore": "generic_framework.store.sqlite",
    "StoreAdmin": "generic_framework.store.base",
    "StoredMessage": "generic_framework.store.base",
    "StoredTurn": "generic_framework.store.base",
    "TurnRecord": "generic_framework.store.base",
    "TurnStore": "generic_framework.store.base",
    "check_conversation_id": "generic_framework.store.base",
    "checksum": "generic_framework.store.base",
}

if TYPE_CHECKING:
    from generic_framework.store.base import ConversationDump as ConversationDump
    from generic_framework.store.base import ConversationStore as ConversationStore
    from generic_framework.store.base import ConversationSummary as ConversationSummary
    from generic_framework.store.base import HeldConversation as HeldConversation
    from generic_framework.store.base import StoreAdmin as StoreAdmin
    from generic_framework.store.base import StoredMessage as StoredMessage
    from generic_framework.store.base import StoredTurn as StoredTurn
    from generic_framework.store.base import TurnRecord as TurnRecord
    from generic_framework.store.base import TurnStore as TurnStore
    from generic_framework.store.base import check_conversation_id as check_conversation_id
    from generic_framework.store.base import checksum as checksum
    from generic_framework.store.sqlite import SQLiteStore as SQLiteStore

__all__ = [
    "ConversationDump",
    "ConversationStore",
    "ConversationSummary",
    "HeldConversation",
    "SQLiteStore",
    "StoreAdmin",
    "StoredMessage",
    "StoredTurn",
    "TurnRecord",
    "TurnStore",
    "check_conversation_id",
    "checksum",
    "is_postgres_url",
    "open_store",
    "sqlite_file",
]


__getattr__ = on_first_use(__name__, _EXPORTS, globals())


def open_store(
    url: str | None,
    *,
    sqlite_path: str | Path,
    pool_size: int = 10,
    pool_timeout: float | None = None,
    create: bool = True,
) -> ConversationStore:
    """The store a database URL names (nothing is connected until first use).

    Args:
        url: ``postgresql://...`` (or ``postgres://``) for PostgreSQL; ``sqlite:///PATH`` (as
            SQLAlchemy writes it: ``sqlite:////abs/path`` for an absolute one) or a plain file
            path for SQLite; ``None`` or empty for ``sqlite_path``.
        sqlite_path: the SQLite file when ``url`` is empty.
        pool_size: PostgreSQL's connection pool size.
        pool_timeout: seconds a PostgreSQL request waits for a connection (the store's
            default when ``None``).
        create: give a PostgreSQL database that was never initialised its schema; when
            false it is refused (docs/design/0325). SQLite always creates its file's schema.

    Raises:
        ValueError: the URL's scheme is neither.
    """
    if is_postgres_url(url):
        from generic_framework.store.postgres import PostgresStore

        if pool_timeout is None:
            return PostgresStore(str(url), pool_size=pool_size, create=create)
        return PostgresStore(
            str(url), pool_size=pool_size, pool_timeout=pool_timeout, create=create
        )
    from generic_framework.store.sqlite import SQLiteStore

    return SQLiteStore(sqlite_file(url, default=sqlite_path))


def sqlite_file(url: str | None, *, default: str | Path) -> Path:
    """The SQLite file a database URL that is not PostgreSQL's names.

    Args:
        url: ``sqlite:///PATH`` (``sqlite:////abs/path``) or a plain file path; ``None`` or
            empty for ``default``.
        default: the file when ``url`` is empty.

    Raises:
        ValueError: the URL's scheme is neither.
    """
    if not url:
        return Path(default)
    scheme, found, rest = url.partition("://")
    if not found:
        return Path(url)
    if scheme.lower() == "sqlite" and rest.startswith("/") and len(rest) > 1:
        return Path(rest[1:])
    raise ValueError("a database URL is postgresql://..., sqlite:///PATH or a file path")


def is_postgres_url(url: str | None) -> bool:
    """True when the database URL names PostgreSQL (``postgresql://`` or ``postgres://``);
    nothing is imported or connected to tell."""
    scheme, found, _ = (url or "").partition("://")
    return bool(found) and scheme.lower() in {"postgresql", "postgres"}
