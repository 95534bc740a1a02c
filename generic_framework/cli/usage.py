"""The ``usage`` command: tokens, web searches and turns from the stored turn records.

Every turn stored with a record (input, model, usage, web searches...) is one
:class:`~generic_framework.usage.UsageRow`; :func:`~generic_framework.usage.summarize` groups
them by persona, model or day and prices them from the operator's TOML table when one is given
(no built-in prices). Turns stored before records were kept carry no usage and are counted
apart; turns the embedded mock of the offline demo answered are left out of the totals and
counted on a line of their own (not billed). The store is read one conversation at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

from generic_framework.cli.common import EXIT_OK, err, run_command
from generic_framework.cli.db import settings_url, store_at
from generic_framework.config import Settings
from generic_framework.store import ConversationStore, StoredTurn
from generic_framework.store.users import split_key
from generic_framework.usage import (
    GroupBy,
    UsageRow,
    load_prices,
    render_json,
    render_table,
    summarize,
)

__all__ = ["run_usage", "usage_rows"]


def row_of(turn: StoredTurn, owner: str = "") -> UsageRow | None:
    """The usage of one stored turn (``None`` for a turn stored without a record); ``owner``:
    who asked when the record does not say (turns stored before users existed)."""
    record = turn.record
    if record is None:
        return None
    when = datetime.fromisoformat(record.started_at or turn.created_at)
    return UsageRow(
        when=when if when.tzinfo is not None else when.replace(tzinfo=UTC),
        persona=turn.persona,
        model=record.model,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        cached_tokens=record.cached_tokens,
        reasoning_tokens=record.reasoning_tokens,
        web_searches=record.web_searches,
        user=record.user_id or owner,
        offline=record.offline,
    )


async def usage_rows(store: ConversationStore, skipped: list[int]) -> AsyncIterator[UsageRow]:
    """Every stored turn's usage, its user by name; ``skipped[0]`` counts the turns without a
    record."""
    names = {u.id: u.name for u in await store.users()}
    for conversation_id in await store.conversation_ids():
        owner = split_key(conversation_id)[0]
        for turn in await store.turns(conversation_id) or []:
            row = row_of(turn, owner)
            if row is None:
                skipped[0] += 1
            else:
                yield replace(row, user=names.get(row.user, row.user))


def run_usage(
    since: date | None, by: GroupBy, as_json: bool, prices: Path | None, user: str | None = None
) -> int:
    """``usage``: print the summary of the database ``DATABASE_URL`` names (SQLite in DATA_DIR
    when unset); a price table (``--prices FILE``) adds an estimated cost; ``user``: only the
    turns that user asked."""

    def show(settings: Settings) -> int:
        table = load_prices(prices) if prices is not None else None
        store = store_at(settings_url(settings), settings)
        skipped = [0]

        async def collect() -> list[UsageRow]:
            try:
                await store.open()
                rows = [row async for row in usage_rows(store, skipped)]
                return [r for r in rows if user is None or r.user == user]
            finally:
                await store.aclose()

        report = summarize(asyncio.run(collect()), by=by, since=since, prices=table)
        print(render_json(report) if as_json else render_table(report))
        if skipped[0]:
            err(f"{skipped[0]} turn(s) stored before turn records were kept are not counted")
        return EXIT_OK

    return run_command(show)
