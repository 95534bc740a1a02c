"""Pictures kept with a stored turn (docs/design/0329): by content hash, in the turn's row set.

A turn's pictures are rows of the ``pictures`` table, keyed by the conversation, the turn and
the picture's place in the message, with its SHA-256, MIME type, bytes (a ``data:`` picture)
or address (an ``https`` picture, never fetched) and description. They reference their turn
``ON DELETE CASCADE``: deleting the turn (``DELETE .../turns/last``), the conversation or its
user (whose conversations go) removes them, with no sweep. ``dump``/``restore`` carry them, so
``db copy`` moves them between backends; a SQLite backup copies the file whole.

The SQL is the same on both backends but for the bytes' type (``BLOB``, ``bytea``) and the
parameter marks; the helpers here take the marks' style.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PICTURE_COLUMNS",
    "StoredPicture",
    "picture_rows",
    "pictures_from",
]


@dataclass(frozen=True, slots=True)
class StoredPicture:
    """One picture of a stored turn.

    Attributes:
        sha256: the SHA-256 of its bytes (of its address for an ``https`` picture), hex.
        mime: its MIME type; ``""`` for an ``https`` picture.
        data: its bytes; empty for an ``https`` picture.
        url: the address of an ``https`` picture; ``None`` for one kept by its bytes.
        description: what a vision model wrote about it, when one did.
        turn: the turn it belongs to (0 until the turn is stored).
        seq: its place in the turn's message (0 for the first).
    """

    sha256: str
    mime: str
    data: bytes = b""
    url: str | None = None
    description: str | None = None
    turn: int = 0
    seq: int = 0


PICTURE_COLUMNS = "turn, seq, sha256, mime, data, url, description"
"""The ``pictures`` columns after ``conversation_id``, in the order of :func:`picture_rows`."""


def picture_rows(
    conversation_id: str, turn: int, pictures: Iterable[StoredPicture], *, renumber: bool
) -> list[tuple[Any, ...]]:
    """The rows to insert: ``conversation_id`` and :data:`PICTURE_COLUMNS`, for ``turn`` (a
    new turn's pictures, numbered in order with ``renumber``; a restored one's as they were)."""
    return [
        (
            conversation_id,
            turn if renumber else p.turn,
            seq if renumber else p.seq,
            p.sha256,
            p.mime,
            p.data,
            p.url,
            p.description,
        )
        for seq, p in enumerate(pictures)
    ]


def pictures_from(rows: Sequence[Sequence[Any]]) -> tuple[StoredPicture, ...]:
    """Pictures from rows of :data:`PICTURE_COLUMNS`."""
    return tuple(
        StoredPicture(
            turn=int(row[0]),
            seq=int(row[1]),
            sha256=str(row[2]),
            mime=str(row[3]),
            data=bytes(row[4] or b""),
            url=row[5],
            description=row[6],
        )
        for row in rows
    )
