"""The ``db`` commands: ``db upgrade`` (apply migrations) and ``db copy --from URL --to URL``.

A URL is ``postgresql://user:password@host:port/database``, ``sqlite:///path/to/file.sqlite3``
(``sqlite:////abs/path``) or a plain file path. Nothing printed shows a password.

``db copy`` copies the users and API keys (their hashes) and the chat platforms' chat states
(each chat's conversation and persona; store/chats.py) the target lacks, then every
conversation of the source (its owner is part of its key) that the target does not have, each in one
transaction with its turn numbers, times and records, then reads it back from the target and
compares the counts (turns, messages) and a SHA-256 over the whole conversation
(:func:`~generic_framework.store.base.checksum`). A conversation already in the target is left
alone when its checksum is equal and reported as a conflict otherwise. The exit code is 1 when
anything did not match.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from generic_framework.cli.common import EXIT_ERROR, EXIT_OK, err, run_command
from generic_framework.config import Settings
from generic_framework.errors import ConfigError, StoreUnavailableError
from generic_framework.redaction import redact
from generic_framework.store import ConversationStore, checksum, open_store
from generic_framework.store.postgres_errors import redact_url

__all__ = [
    "CopyResult",
    "blamed",
    "copy_conversations",
    "run_copy",
    "run_upgrade",
    "settings_url",
    "store_at",
]


def _where(url: str | None, settings: Settings) -> str:
    return redact_url(url) if url else str(settings.database_path)


def settings_url(settings: Settings) -> str | None:
    """``DATABASE_URL``, or None for the SQLite file in DATA_DIR."""
    return settings.database_url.get_secret_value() if settings.database_url else None


def store_at(url: str | None, settings: Settings) -> ConversationStore:
    """The store ``url`` names (None: the SQLite file in DATA_DIR), not opened yet.

    Raises:
        ValueError: ``url`` is not a database URL or path.
    """
    return open_store(
        url,
        sqlite_path=settings.database_path,
        pool_size=settings.database_pool_size,
        pool_timeout=settings.database_pool_timeout,
    )


def run_upgrade() -> int:
    """``db upgrade``: migrate the database ``DATABASE_URL`` names (SQLite in DATA_DIR when
    unset) to the latest schema; safe to run while replicas run and to repeat."""

    def upgrade(settings: Settings) -> int:
        url = settings_url(settings)
        store = store_at(url, settings)

        async def run() -> int:
            try:
                await store.open()
                return await store.schema_version()
            finally:
                await store.aclose()

        try:
            version = asyncio.run(run())
        except StoreUnavailableError as exc:
            err(f"error: {exc}")
            return EXIT_ERROR
        print(f"{_where(url, settings)}: schema version {version} (up to date)")
        return EXIT_OK

    return run_command(upgrade)


@dataclass
class CopyResult:
    """What ``db copy`` did."""

    copied: int = 0
    accounts: int = 0
    chats: int = 0
    memories: int = 0
    turns: int = 0
    messages: int = 0
    already_there: int = 0
    problems: list[str] = field(default_factory=list)


async def _copy_one(
    source: ConversationStore, target: ConversationStore, cid: str, result: CopyResult
) -> None:
    dump = await source.dump(cid)
    if dump is None:  # deleted while copying
        return
    existing = await target.dump(cid)
    if existing is not None:
        if checksum(existing) == checksum(dump):
            result.already_there += 1
        else:
            result.problems.append(f"{cid}: already in the target, with different content")
        return
    await target.restore(dump)
    copied = await target.dump(cid)
    if copied is None or (len(copied.turns), copied.message_count) != (
        len(dump.turns),
        dump.message_count,
    ):
        result.problems.append(f"{cid}: the counts differ after the copy")
    elif checksum(copied) != checksum(dump):
        result.problems.append(f"{cid}: the checksum differs after the copy")
    else:
        result.copied += 1
        result.turns += len(dump.turns)
        result.messages += dump.message_count


async def copy_conversations(source: ConversationStore, target: ConversationStore) -> CopyResult:
    """Copy the users, keys, chat states and kept facts ``target`` lacks, then every
    conversation of ``source`` (its owner in its key: store/users.py), verifying each one.
    Claimed updates stay behind: they only matter for the two days a platform may redeliver
    an update."""
    result = CopyResult()
    await source.open()
    await target.open()
    result.accounts = await target.restore_accounts(await source.dump_accounts())
    result.chats = await target.restore_chat_states(await source.dump_chat_states())
    result.memories = await target.restore_memories(await source.dump_memories())
    for cid in await source.conversation_ids():
        await _copy_one(source, target, cid, result)
    return result


class _Unavailable(Exception):
    """A side of ``db copy`` could not be opened; the text names its option."""


def blamed(exc: StoreUnavailableError, option: str, url: str | None) -> str:
    """The line for a database of ``db copy`` that failed: it names the option, not
    ``DATABASE_URL`` (which ``db copy`` does not read)."""
    cause = exc.__cause__
    detail = redact(" ".join(str(cause).split()), 300) if cause is not None else exc.message
    where = f" {redact_url(url)}" if url else ""
    return (
        f"error: the database of {option}{where} is unavailable ({detail}); check {option} and "
        "that PostgreSQL is running"
    )


def _store_for(option: str, url: str, settings: Settings) -> ConversationStore:
    try:
        return store_at(url, settings)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc} (got {redact_url(url)!r})") from None


async def _open(store: ConversationStore, option: str, url: str) -> None:
    try:
        await store.open()
    except StoreUnavailableError as exc:
        raise _Unavailable(blamed(exc, option, url)) from exc


def run_copy(source_url: str, target_url: str) -> int:
    """``db copy --from URL --to URL``; returns the exit code."""

    def copy(settings: Settings) -> int:
        source = _store_for("--from", source_url, settings)
        target = _store_for("--to", target_url, settings)

        async def run() -> CopyResult:
            try:
                await _open(source, "--from", source_url)
                await _open(target, "--to", target_url)
                return await copy_conversations(source, target)
            finally:
                await source.aclose()
                await target.aclose()

        try:
            result = asyncio.run(run())
        except _Unavailable as exc:
            err(str(exc))
            return EXIT_ERROR
        except StoreUnavailableError as exc:  # a side failed during the copy
            err(blamed(exc, "--from/--to", None))
            return EXIT_ERROR
        print(
            f"{redact_url(source_url)} -> {redact_url(target_url)}: copied {result.copied} "
            f"conversation(s), {result.turns} turn(s), {result.messages} message(s); "
            f"{result.already_there} already there; {result.accounts} user(s) and key(s) added; "
            f"{result.chats} chat state(s) added; {result.memories} kept fact(s) added"
        )
        for problem in result.problems:
            err(f"error: {problem}")
        if result.problems:
            return EXIT_ERROR
        print("verified: turn and message counts and a SHA-256 per conversation match")
        return EXIT_OK

    return run_command(copy)
