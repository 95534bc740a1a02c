"""One service per SQLite database: a second ``serve`` on the same file refuses to start.

SQLite cannot serialise the turns of one conversation across processes (the store's lock is the
process's own), so replicas sharing one file interleave turns and one conversation's history
overlaps; PostgreSQL (``DATABASE_URL``) is what several replicas need. A forgotten
``DATABASE_URL`` under the compose ``scale`` profile gave exactly that, silently. So ``serve``
holds an exclusive lock on ``<database>.serve.lock``, beside the database, for as long as it
runs: the kernel releases it when the process ends, however it ends, so a crashed replica leaves
no stale lock behind. Replicas of one volume share the kernel, so the lock holds across them.
The CLI's one-shot commands (``chat``, ``usage``...) take no lock: they may run beside a service.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from generic_framework.errors import ConfigError

__all__ = ["sole_sqlite_service"]


@contextlib.contextmanager
def sole_sqlite_service(database: Path, *, taken: str | None = None) -> Iterator[None]:
    """Hold the service's lock on the SQLite ``database`` while the block runs (``db
    restore`` holds it too, so no service starts on a file being replaced).

    Args:
        database: the SQLite file.
        taken: the error's text when the lock is held (default: another service's).

    Raises:
        ConfigError: another process holds it (another ``serve`` on the same file), or the
            lock file cannot be created (the message says where).
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        yield
        return
    path = database.with_name(database.name + ".serve.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        reason = exc.strerror or exc
        raise ConfigError(f"cannot create {str(path)!r} ({reason}): check DATA_DIR") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(taken or _taken(database)) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _taken(database: Path) -> str:
    return (
        f"another service already uses the SQLite database {str(database)!r}: replicas sharing "
        "one SQLite file interleave the turns of a conversation; set DATABASE_URL to a "
        "PostgreSQL database for several replicas (the compose scale profile needs it), or give "
        "each service its own DATA_DIR"
    )
