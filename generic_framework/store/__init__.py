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
from typing import TYPE_CHECKING, Any

from generic_framework.store.base import (
    ConversationDump,
    ConversationStore,
    ConversationSummary,
    HeldConversation,
    StoreAdmin,
    StoredMessage,
    StoredTurn,
    TurnRecord,
    TurnStore,
    check_conversation_id,
    checksum,
)

if TYPE_CHECKING:
    from generic_framework.store.sqlite import SQLiteStore

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


def __getattr__(name: str) -> Any:
    # The SQLite backend (sqlite3 and its module, about 4 ms) is imported on first use: the
    # core's turn records come from .base, and a Persona without a conversation needs no
    # backend at all (docs/design/0704).
    if name == "SQLiteStore":
        from generic_framework.store.sqlite import SQLiteStore

        globals()[name] = SQLiteStore
        return SQLiteStore
    raise AttributeError(f"module 'generic_framework.store' has no attribute {name!r}")


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
