"""Backups of a SQLite conversation store, taken while it serves, and restoring one.

- **Online backup** (:func:`backup_file`): SQLite's backup API copies every page in one step,
  inside one read transaction of the source, so the copy is one consistent point in time while
  the service keeps writing (WAL: readers and the writer do not wait for each other). The copy
  is made in a hidden file beside the target, switched to a rollback journal (one
  self-contained file), flushed to disk and checked (:func:`check_file`) before it is renamed
  onto the target: a backup name either holds a whole, checked backup or nothing.
- **Restore** (:func:`restore_file`): the backup is checked first (SQLite's integrity check,
  a conversation store, a schema version this release knows), copied beside the database,
  migrated to the current schema and checked again; only then does one atomic rename put it in
  place. The database it replaces is checkpointed and kept beside it (hard link) as
  ``<name>.before-restore-<time>``, so a restore loses nothing. Refusing a database that a
  running service holds is the caller's part (the service's lock, ``service.sole``).

The choice of the backup API over ``VACUUM INTO``, with the figures, is in docs/design/0320.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from generic_framework.errors import ConfigError
from generic_framework.store.sqlite_schema import MIGRATIONS, migrate

__all__ = [
    "BackupCheck",
    "backup_file",
    "check_file",
    "checkpoint",
    "discard",
    "partial_beside",
    "restore_file",
    "seal_backup",
]

_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class BackupCheck:
    """What a checked backup (or restored database) holds."""

    path: Path
    schema_version: int
    conversations: int
    turns: int
    messages: int

    def describe(self) -> str:
        """``3 conversation(s), 7 turn(s), 16 message(s), schema version 4``."""
        return (
            f"{self.conversations} conversation(s), {self.turns} turn(s), "
            f"{self.messages} message(s), schema version {self.schema_version}"
        )


def _name(path: Path) -> str:
    return repr(str(path))


def partial_beside(target: Path, what: str) -> Path:
    """A hidden file name beside ``target`` for the copy being made (same file system, so the
    final rename is atomic)."""
    return target.with_name(f".{target.name}.{what}-{os.getpid()}.partial")


def discard(partial: Path) -> None:
    """Remove an unfinished copy and its log files, if any."""
    for path in (partial, *_sidecars(partial), partial.with_name(partial.name + "-journal")):
        path.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs a directory
        _fsync(path)


def _copy(source: Path, target: Path) -> None:
    """Copy ``source`` (a database, possibly being written) into the new file ``target`` in one
    step of the backup API, as one self-contained file with a rollback journal."""
    src = sqlite3.connect(source, timeout=_TIMEOUT_S)
    try:
        src.execute(f"PRAGMA busy_timeout = {int(_TIMEOUT_S * 1000)}")
        dst = sqlite3.connect(target)
        try:
            # pages=-1: every page in one step, within one read transaction of the source, so
            # the copy is one point in time; stepping page by page would restart the copy each
            # time another connection writes.
            src.backup(dst, pages=-1)
        finally:
            dst.close()
    finally:
        src.close()
    _single_file(target)


def _single_file(path: Path) -> None:
    """Switch ``path`` to a rollback journal (one self-contained file) and flush it to disk."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode = DELETE")
    finally:
        db.close()
    _fsync(path)


def _open_existing(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise ConfigError(f"no database file at {_name(path)}")
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open {_name(path)} ({exc})") from None


def check_file(path: Path) -> BackupCheck:
    """Check that ``path`` is a whole conversation store this release can use.

    Raises:
        ConfigError: not a database, damaged (``PRAGMA integrity_check`` is not ``ok``), not a
            conversation store, or a schema newer than this release knows.
    """
    db = _open_existing(path)
    try:
        try:
            problems = [row[0] for row in db.execute("PRAGMA integrity_check(20)")]
            (version,) = db.execute("PRAGMA user_version").fetchone()
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            if (getattr(exc, "sqlite_errorname", "") or "").startswith("SQLITE_CORRUPT"):
                problems = [str(exc)]
            else:
                raise ConfigError(
                    f"{_name(path)} is not a usable SQLite database ({exc})"
                ) from None
        if problems != ["ok"]:
            raise ConfigError(
                f"{_name(path)} is damaged: it fails SQLite's integrity check "
                f"({'; '.join(problems[:3])})"
            )
        if version < 1 or not {"conversations", "turns", "messages"} <= tables:
            raise ConfigError(f"{_name(path)} is not a conversation store (no conversations)")
        if version > len(MIGRATIONS):
            raise ConfigError(
                f"{_name(path)} is at schema version {version}, newer than this release's "
                f"{len(MIGRATIONS)}: restore it with a newer generic-framework"
            )
        counts = [
            int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608
            for table in ("conversations", "turns", "messages")
        ]
    finally:
        db.close()
    return BackupCheck(path, int(version), *counts)


def backup_file(source: Path, target: Path, *, replace: bool = False) -> BackupCheck:
    """Back up the SQLite database ``source`` (in use or not) to ``target``, checked.

    Raises:
        ConfigError: ``source`` is missing or unusable, ``target`` exists and ``replace`` is
            false, or the copy fails its check (``target`` is then left as it was).
    """
    if not source.is_file():
        raise ConfigError(f"no database file at {_name(source)} (check DATA_DIR or --from)")
    if target.exists() and not replace:
        raise ConfigError(f"{_name(target)} exists: choose another name, or pass --replace")
    if target.resolve() == source.resolve():
        raise ConfigError("the backup cannot be the database itself")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_beside(target, "backup")
    try:
        try:
            _copy(source, partial)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot back up {_name(source)} ({exc})") from None
        return seal_backup(partial, target)
    finally:
        discard(partial)


def seal_backup(partial: Path, target: Path) -> BackupCheck:
    """Make the finished copy ``partial`` one self-contained file on disk, check it, and rename
    it onto ``target`` (atomic: ``target`` holds the old file or the new one, never a part).

    Raises:
        ConfigError: the copy fails :func:`check_file`; ``target`` is left as it was.
    """
    _single_file(partial)
    checked = check_file(partial)
    os.replace(partial, target)
    _fsync_dir(target.parent)
    return BackupCheck(target, *_fields(checked))


def _fields(checked: BackupCheck) -> tuple[int, int, int, int]:
    return checked.schema_version, checked.conversations, checked.turns, checked.messages


def checkpoint(database: Path) -> None:
    """Move everything of ``database``'s write-ahead log into the file itself and end the log,
    so the file alone is the whole database.

    Raises:
        ConfigError: another connection is using the database (the log could not be ended).
    """
    db = sqlite3.connect(database, timeout=_TIMEOUT_S)
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"cannot use the current database {_name(database)} ({exc})") from None
    finally:
        db.close()
    leftovers = [p for p in _sidecars(database) if p.exists() and p.stat().st_size > 0]
    if busy or leftovers:
        raise ConfigError(
            f"{_name(database)} is in use by another process: stop whatever uses it "
            "(the service, a chat) and try again"
        )


def _sidecars(database: Path) -> tuple[Path, Path]:
    return database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")


def _keep_aside(database: Path) -> Path:
    """A second name for the current database (a hard link, else a copy); that name."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = database.with_name(f"{database.name}.before-restore-{stamp}")
    counter = 1
    while aside.exists():
        counter += 1
        aside = database.with_name(f"{database.name}.before-restore-{stamp}-{counter}")
    try:
        os.link(database, aside)
    except OSError:
        _copy(database, aside)
    return aside


def restore_file(
    backup: Path,
    database: Path,
    *,
    replace: bool = False,
    hold: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> tuple[BackupCheck, Path | None]:
    """Put the backup ``backup`` in place of the SQLite ``database``.

    Returns the check of the restored database and where the replaced one was kept (``None``
    when there was none).

    Args:
        backup: the backup file (left unchanged).
        database: the database file to create or replace.
        replace: replace an existing ``database`` (else refused).
        hold: entered once the backup passed its check, for the replacement: the caller's
            guard that no service runs on ``database`` (it raises when one does).

    Raises:
        ConfigError: the backup fails its check, ``database`` exists and ``replace`` is false,
            or ``database`` is in use; nothing was changed then.
    """
    check_file(backup)
    with hold():
        return _replace(backup, database, replace)


def _replace(backup: Path, database: Path, replace: bool) -> tuple[BackupCheck, Path | None]:
    exists = database.exists()
    if exists and not replace:
        raise ConfigError(
            f"{_name(database)} already exists: pass --replace to replace it (it is kept "
            "beside it as <name>.before-restore-<time>)"
        )
    if exists and database.resolve() == backup.resolve():
        raise ConfigError("the backup is the database itself")
    database.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_beside(database, "restore")
    aside = None
    try:
        _copy(backup, partial)
        upgraded = sqlite3.connect(partial, isolation_level=None)
        try:
            migrate(upgraded)
        finally:
            upgraded.close()
        checked = check_file(partial)
        if exists:
            checkpoint(database)
            aside = _keep_aside(database)
        os.replace(partial, database)
    finally:
        discard(partial)
    for sidecar in _sidecars(database):  # empty after the checkpoint; never the new file's
        sidecar.unlink(missing_ok=True)
    _fsync_dir(database.parent)
    return BackupCheck(database, *_fields(checked)), aside
