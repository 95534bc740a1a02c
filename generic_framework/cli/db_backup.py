"""``db backup --to FILE`` and ``db restore --from FILE``: a checked SQLite file as the backup.

The backup is always one SQLite file, whatever the database (docs/design/0320):

- **SQLite** (DATA_DIR, or ``--from`` a file): an online backup while the service writes
  (:func:`~generic_framework.store.sqlite_backup.backup_file`): the whole file, chat states,
  the facts personas keep and the chat platforms' recently claimed updates included.
- **PostgreSQL** (``DATABASE_URL``): every conversation copied into a new SQLite file, each one
  whole (one snapshot per conversation, verified by its checksum), after the users, keys,
  chat states and kept facts (``db copy``'s part; claimed updates stay behind), with nothing
  more than the bot image; a point-in-time copy of the whole database is PostgreSQL's own
  ``pg_dump`` (the recipe in docs/operating.md).

``db restore`` checks the backup (integrity, schema version) before anything changes. Into
SQLite it replaces the database file atomically, only with ``--replace`` when one exists (kept
as ``<name>.before-restore-<time>``), and never under a running service (its lock). Into
PostgreSQL it adds the conversations the database does not have, each in one transaction
under its lock, so replicas may keep serving; it never overwrites one (a different one is
reported, exit 1).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from generic_framework.cli.common import EXIT_ERROR, EXIT_OK, err, run_command
from generic_framework.cli.db import (
    CopyResult,
    blamed,
    copy_conversations,
    settings_url,
    store_at,
)
from generic_framework.config import Settings
from generic_framework.errors import ConfigError, StoreUnavailableError
from generic_framework.service.sole import sole_sqlite_service
from generic_framework.store import is_postgres_url, sqlite_file
from generic_framework.store.postgres_errors import redact_url
from generic_framework.store.sqlite_backup import (
    BackupCheck,
    backup_file,
    check_file,
    discard,
    partial_beside,
    restore_file,
    seal_backup,
)

__all__ = ["run_backup", "run_restore"]


def _sqlite_path(option: str, url: str | None, settings: Settings) -> Path:
    try:
        return sqlite_file(url, default=settings.database_path)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc} (got {redact_url(url or '')!r})") from None


def _report_copy(result: CopyResult) -> bool:
    for problem in result.problems:
        err(f"error: {problem}")
    return not result.problems


async def _copy(source_url: str | None, target_url: str | None, settings: Settings) -> CopyResult:
    source = store_at(source_url, settings)
    target = store_at(target_url, settings)
    try:
        return await copy_conversations(source, target)
    finally:
        await source.aclose()
        await target.aclose()


def _backup_postgres(url: str, target: Path, replace: bool, settings: Settings) -> BackupCheck:
    if target.exists() and not replace:
        raise ConfigError(f"{str(target)!r} exists: choose another name, or pass --replace")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_beside(target, "backup")
    try:
        result = asyncio.run(_copy(url, str(partial), settings))
        if not _report_copy(result):
            raise _CopyFailed
        return seal_backup(partial, target)
    finally:
        discard(partial)


def _a_file(option: str, value: str) -> None:
    """A backup is a file: a database URL given for it is refused (without its password)."""
    if "://" in value:
        raise ConfigError(
            f"{option} is the backup file's path, not a database URL (got {redact_url(value)!r})"
        )


class _CopyFailed(Exception):
    """A conversation did not copy whole (printed already)."""


def run_backup(target: str, source: str | None, replace: bool) -> int:
    """``db backup --to FILE [--from URL] [--replace]``; returns the exit code."""

    def backup(settings: Settings) -> int:
        url = source if source is not None else settings_url(settings)
        _a_file("--to", target)
        where = Path(target)
        started = time.monotonic()
        try:
            if is_postgres_url(url):
                checked = _backup_postgres(str(url), where, replace, settings)
                shown = redact_url(str(url))
            else:
                path = _sqlite_path("--from", url, settings)
                checked = backup_file(path, where, replace=replace)
                shown = str(path)
        except StoreUnavailableError as exc:
            err(blamed(exc, "--from", source) if source is not None else f"error: {exc}")
            return EXIT_ERROR
        except _CopyFailed:
            return EXIT_ERROR
        seconds = time.monotonic() - started
        print(f"{shown} -> {where}: {checked.describe()}; integrity check ok ({seconds:.1f} s)")
        return EXIT_OK

    return run_command(backup)


def _restore_postgres(backup: Path, url: str, settings: Settings) -> int:
    checked = check_file(backup)
    # The backup stays untouched: the copy read from is migrated and switched to WAL instead.
    with tempfile.TemporaryDirectory(prefix="gf-restore-") as scratch:
        copy = backup_file(backup, Path(scratch) / "backup.sqlite3")
        result = asyncio.run(_copy(str(copy.path), url, settings))
    if not _report_copy(result):
        return EXIT_ERROR
    print(
        f"{backup} -> {redact_url(url)}: restored {result.copied} conversation(s), "
        f"{result.turns} turn(s), {result.messages} message(s); {result.already_there} "
        f"already there; {result.accounts} user(s) and key(s) and {result.chats} chat "
        f"state(s) added; {result.memories} kept fact(s) added (the backup: "
        f"{checked.describe()})"
    )
    print("verified: turn and message counts and a SHA-256 per conversation match")
    return EXIT_OK


def _restore_sqlite(backup: Path, database: Path, replace: bool) -> int:
    running = (
        f"a service is running on {str(database)!r}: stop it first (docker compose stop bot), "
        "restore, then start it again"
    )
    checked, kept = restore_file(
        backup,
        database,
        replace=replace,
        hold=lambda: sole_sqlite_service(database, taken=running),
    )
    print(f"{backup} -> {database}: {checked.describe()}; integrity check ok")
    if kept is not None:
        print(f"the database it replaced is kept as {kept}")
    return EXIT_OK


def run_restore(source: str, target: str | None, replace: bool) -> int:
    """``db restore --from FILE [--to URL] [--replace]``; returns the exit code."""

    def restore(settings: Settings) -> int:
        url = target if target is not None else settings_url(settings)
        _a_file("--from", source)
        backup = Path(source)
        try:
            if is_postgres_url(url):
                if replace:
                    raise ConfigError(
                        "--replace is for SQLite: a restore into PostgreSQL only adds the "
                        "conversations it does not have (to start over, restore into a new "
                        "database)"
                    )
                return _restore_postgres(backup, str(url), settings)
            return _restore_sqlite(backup, _sqlite_path("--to", url, settings), replace)
        except StoreUnavailableError as exc:
            err(blamed(exc, "--to", target) if target is not None else f"error: {exc}")
            return EXIT_ERROR

    return run_command(restore)
