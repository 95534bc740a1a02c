"""What both backends' conversation lists share: the query, the title's cut, a message's text.

Kept apart from either backend so that neither imports the other (the PostgreSQL store does
not load ``sqlite3``).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from generic_framework.store.base import TITLE_CHARS
from generic_framework.wire.messages import Message

__all__ = ["LIST_SQL", "TITLE_CUT", "list_filter", "message_text"]

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)

LIST_SQL = (
    "SELECT c.id, c.created_at, c.updated_at, c.turns, c.title,"
    " (SELECT t.persona FROM turns t WHERE t.conversation_id = c.id ORDER BY t.turn DESC LIMIT 1),"
    " (SELECT substr(t.input, 1, {cut}) FROM turns t WHERE t.conversation_id = c.id"
    " ORDER BY t.turn LIMIT 1)"
    " FROM conversations c {where} ORDER BY c.updated_at DESC, c.id DESC LIMIT {mark}"
)
"""The conversation list's query (both backends fill in the cut, the filter and the mark)."""


def list_filter(
    after: tuple[Any, str] | None, owner: str | None, mark: str
) -> tuple[str, tuple[Any, ...]]:
    """The list's ``WHERE`` (one owner's conversations, those after a cursor) and its values."""
    conditions: list[str] = []
    values: list[Any] = []
    if owner is not None:
        conditions.append(f"c.owner = {mark}")
        values.append(owner)
    if after is not None:
        conditions.append(f"(c.updated_at, c.id) < ({mark}, {mark})")
        values.extend(after)
    return ("WHERE " + " AND ".join(conditions) if conditions else ""), tuple(values)


TITLE_CUT = TITLE_CHARS + 1
"""Characters of the first input read for a title: one more than a title shows."""


def message_text(body: str) -> str:
    """The text of a stored message body ("" when it has none)."""
    content = getattr(_MESSAGE.validate_json(body), "content", None)
    return content if isinstance(content, str) else ""
