"""PostgreSQL rows: a :class:`~generic_framework.store.base.TurnRecord` as the ``turns`` table's
record columns and back, and times as the store hands them out (ISO 8601, UTC, milliseconds)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from generic_framework.store.base import TurnRecord
from generic_framework.store.sqlite_schema import RECORD_COLUMNS
from generic_framework.wire.messages import Message

__all__ = ["COLUMNS", "MESSAGE", "as_time", "iso", "record_from", "record_params"]

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
"""A stored message's JSON body, read back."""
COLUMNS = ", ".join(RECORD_COLUMNS)
"""The turn record's columns, in the order of :func:`record_params` and :func:`record_from`."""

_TIMES = ("started_at",)
_JSON = ("sources", "round_ms")


def iso(value: datetime) -> str:
    """A stored time as the store hands it out."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds")


def as_time(value: str) -> datetime:
    """An ISO 8601 time as a parameter of a ``timestamptz`` column."""
    return datetime.fromisoformat(value)


def record_params(record: TurnRecord | None) -> list[Any]:
    """The record's values in :data:`RECORD_COLUMNS` order (all ``None`` without a record)."""
    if record is None:
        return [None] * len(RECORD_COLUMNS)
    data = record.to_json()
    values: list[Any] = []
    for column in RECORD_COLUMNS:
        value = data[column]
        if column in _JSON:
            value = json.dumps(value, ensure_ascii=False)
        elif column in _TIMES:
            value = as_time(value) if value else None
        elif column == "input":
            value = value.replace("\x00", "\ufffd")  # a text column cannot hold NUL
        values.append(value)
    return values


def record_from(values: Sequence[Any]) -> TurnRecord | None:
    """The record of a ``turns`` row's record columns (``None`` for a turn stored without)."""
    data = dict(zip(RECORD_COLUMNS, values, strict=True))
    if data["input"] is None:
        return None
    data["user_id"], data["key_id"] = data["user_id"] or "", data["key_id"] or ""
    data["offline"] = bool(data["offline"])
    for name in _JSON:
        data[name] = json.loads(data[name] or "[]")
    data["started_at"] = iso(data["started_at"]) if data["started_at"] else ""
    return TurnRecord.from_json(data)
