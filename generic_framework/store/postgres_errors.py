"""PostgreSQL failures as typed errors, and database addresses without their passwords.

Shared by the store (:mod:`~.postgres`) and the upstream budget (:mod:`~.postgres_slots`).
:func:`redact_url` is the wire layer's: password, query string and fragment hidden.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

from generic_framework.errors import ConfigError, StoreUnavailableError
from generic_framework.redaction import redact, redact_url, register_secret
from generic_framework.store.postgres_schema import not_initialised

__all__ = [
    "RETRY_AFTER",
    "redact_url",
    "register_password",
    "require_driver",
    "translated",
    "unavailable",
]

RETRY_AFTER = 2.0
"""Seconds a caller is told to wait after the database failed."""


def require_driver() -> None:
    """Import psycopg and its pool, or say how to install them.

    Raises:
        ConfigError: they are not installed (``DATABASE_URL`` names PostgreSQL without them).
    """
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "DATABASE_URL names PostgreSQL but psycopg is not installed: "
            "pip install 'generic-framework[postgres]'"
        ) from exc


def register_password(url: str) -> None:
    """Make :func:`~generic_framework.redaction.redact` remove the URL's password anywhere."""
    password = urllib.parse.urlsplit(url).password
    if password:
        register_secret(password)
        register_secret(urllib.parse.unquote(password))


def unavailable(exc: BaseException, where: str) -> StoreUnavailableError:
    """The typed error for a database failure (text redacted: no password, no key)."""
    detail = redact(" ".join(str(exc).split()), limit=300) or type(exc).__name__
    return StoreUnavailableError(
        f"the conversation database {where} is unavailable ({detail}); check DATABASE_URL "
        "and that PostgreSQL is running",
        retry_after=RETRY_AFTER,
    )


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Connection failures (server down, restarted, pool exhausted) and a missing schema
    become :class:`~generic_framework.errors.StoreUnavailableError`."""
    import psycopg
    import psycopg_pool

    try:
        yield
    except (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout) as exc:
        raise unavailable(exc, where) from exc
    except psycopg.errors.UndefinedTable as exc:
        # The schema vanished under a running replica: PostgreSQL came back on an empty
        # volume. Not an empty answer, and not a new schema (docs/design/0325).
        raise not_initialised() from exc
