"""The store interfaces: :class:`TurnStore` (what a turn needs), :class:`StoreAdmin`
(administration), :class:`ConversationStore` (both), and the records they keep and hand out.

Two backends implement it (SQLite, PostgreSQL) and pass one contract test suite
(``tests/store/test_store_contract.py``). A store keeps whole turns: each turn's messages and
its :class:`TurnRecord` (what was typed, who answered with which model, the sources, the token
counts, the timings), written atomically once the turn completed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from generic_framework.citation import Citation
from generic_framework.limits import check_conversation_id
from generic_framework.store.chats import ChatAdmin, ChatStore
from generic_framework.store.keys import ClaimRef, ClaimStore
from generic_framework.store.memories import MemoryAdmin, MemoryStore
from generic_framework.store.pictures import StoredPicture
from generic_framework.store.users import UserAdmin
from generic_framework.wire.messages import Message

__all__ = [
    "CURSOR_PATTERN",
    "LIST_LIMIT_MAX",
    "TITLE_CHARS",
    "ConversationDump",
    "ConversationStore",
    "ConversationSummary",
    "Conversations",
    "HeldConversation",
    "StoreAdmin",
    "StoredMessage",
    "StoredPicture",
    "StoredTurn",
    "TurnRecord",
    "TurnStore",
    "check_conversation_id",
    "check_limit",
    "checksum",
    "cursor_of",
    "split_cursor",
    "title_of",
]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: its turn, the persona that answered, and when."""

    turn: int
    persona: str
    created_at: str
    message: Message


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a turn is kept with beside its messages.

    Attributes:
        input: the user's message as typed, ``//`` included (the stored user message has it
            stripped).
        model: the model that answered.
        stop_reason: ``completed``, ``max_rounds``, ``length`` (``content_filter`` turns are
            not stored).
        sources: the reply's citations (the same :class:`~generic_framework.citation.Citation`
            objects), numbered as cited.
        prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens: usage summed over
            the turn's model calls.
        web_searches: model calls that returned sources plus answered ``search_web`` calls.
        rounds: model calls made for the turn.
        started_at: when the turn started (ISO 8601, UTC).
        duration_ms: from the start to the reply, storage excluded.
        round_ms: each model call's duration (tools included), in order.
        user_id, key_id: who asked: the user's id and the API key's public id ("" when
            unknown: turns stored before users existed, or asked without a key).
        offline: the answer came from the embedded mock of the offline demo (no API key, or
            ``--mock``), not from Z.AI: its tokens and searches were never billed, and
            ``usage`` counts the turn apart (docs/design/0326).
    """

    input: str
    model: str = ""
    stop_reason: str = ""
    sources: tuple[Citation, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    web_searches: int = 0
    rounds: int = 0
    started_at: str = ""
    duration_ms: float = 0.0
    round_ms: tuple[float, ...] = ()
    user_id: str = ""
    key_id: str = ""
    offline: bool = False

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values (sources and round times as lists).

        Written out field by field: ``dataclasses.asdict`` deep-copies every value and cost
        about a third of a stored turn's own CPU (docs/TRIED.md).
        """
        data = {name: getattr(self, name) for name in _TURN_FIELDS}
        data["sources"] = [
            {name: getattr(s, name) for name in _SOURCE_FIELDS} for s in self.sources
        ]
        data["round_ms"] = list(self.round_ms)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnRecord:
        """The inverse of :meth:`to_json`."""
        values = dict(data)
        values["sources"] = tuple(Citation(**s) for s in values.get("sources") or ())
        values["round_ms"] = tuple(float(ms) for ms in values.get("round_ms") or ())
        return cls(**values)


_SOURCE_FIELDS = ("number", "title", "url", "site", "published", "snippet", "ref")
"""A stored source's keys, in the order records have always been written."""
_TURN_FIELDS = tuple(f.name for f in fields(TurnRecord))


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """One stored turn: its number, persona, time, record (``None`` for turns stored before
    records were kept) and messages in order."""

    turn: int
    persona: str
    created_at: str
    record: TurnRecord | None
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class ConversationDump:
    """Everything stored for one conversation, as ``db copy`` moves it between backends."""

    id: str
    created_at: str
    updated_at: str
    turns: tuple[StoredTurn, ...] = field(default=())
    title: str | None = None
    pictures: tuple[StoredPicture, ...] = field(default=())

    @property
    def message_count(self) -> int:
        """Messages over all turns."""
        return sum(len(t.messages) for t in self.turns)


def checksum(dump: ConversationDump) -> str:
    """A SHA-256 over a conversation's canonical form: equal on both backends when the
    conversation was copied whole (ids, turn numbers, personas, times, records, messages)."""
    canonical = {
        "id": dump.id,
        "created_at": dump.created_at,
        "updated_at": dump.updated_at,
        # Only when set: the checksum of a conversation without a title of its own is unchanged.
        **({"title": dump.title} if dump.title is not None else {}),
        # Only when there are any, likewise (docs/design/0329).
        **({"pictures": [_canonical_picture(p) for p in dump.pictures]} if dump.pictures else {}),
        "turns": [
            {
                "turn": t.turn,
                "persona": t.persona,
                "created_at": t.created_at,
                "record": _canonical_record(t.record),
                "messages": [m.model_dump(mode="json", exclude_none=True) for m in t.messages],
            }
            for t in dump.turns
        ],
    }
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical_picture(picture: StoredPicture) -> dict[str, Any]:
    return {
        "turn": picture.turn,
        "seq": picture.seq,
        "sha256": picture.sha256,
        "mime": picture.mime,
        "data": hashlib.sha256(picture.data).hexdigest(),
        "url": picture.url,
        "description": picture.description,
    }


def _canonical_record(record: TurnRecord | None) -> dict[str, Any] | None:
    """A record's JSON for :func:`checksum`; who asked only when known and ``offline`` only
    when set, so the checksum of a turn stored before either existed is unchanged."""
    if record is None:
        return None
    data = record.to_json()
    for name in ("user_id", "key_id", "offline"):
        if not data[name]:
            del data[name]
    return data


TITLE_CHARS = 80
"""A listed conversation's title: at most this many characters of its first input, then ``…``."""
LIST_LIMIT_MAX = 100
"""The most conversations one :meth:`StoreAdmin.list_conversations` call returns."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One conversation as a list shows it.

    Attributes:
        id: the conversation's key (its id for the bootstrap admin's; store/users.py).
        persona: the persona of its latest turn.
        title: its first turn's input as typed (``//`` kept), cut to :data:`TITLE_CHARS`
            characters plus ``…``; the stored user message for a turn stored without a record.
        created_at, updated_at: ISO 8601, UTC, milliseconds (``updated_at``: the latest turn).
        turns: how many turns it has.
        cursor: pass it as ``before`` to list the conversations after this one.
    """

    id: str
    persona: str
    title: str
    created_at: str
    updated_at: str
    turns: int
    cursor: str


TITLE_MAX = 200
"""The longest title :meth:`ConversationStore.rename` stores."""


def check_title(title: str) -> str:
    """``title`` without surrounding spaces, if it is a valid conversation title.

    Raises:
        ValueError: empty, longer than :data:`TITLE_MAX` characters, or holding a control
            character (a line break included).
    """
    text = title.strip() if isinstance(title, str) else ""
    if not text:
        raise ValueError("the title must not be empty")
    if len(text) > TITLE_MAX:
        raise ValueError(f"the title is longer than {TITLE_MAX} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("the title must be one line without control characters")
    return text


def title_of(text: str) -> str:
    """A title from a conversation's first input: at most :data:`TITLE_CHARS` characters."""
    return text if len(text) <= TITLE_CHARS else text[:TITLE_CHARS] + "\u2026"


CURSOR_PATTERN = r"^[0-9]{1,17}~(?:u[0-9a-f]{12}/)?[A-Za-z0-9_-]{1,128}$"
"""A :attr:`ConversationSummary.cursor`: ``updated_at`` in microseconds since 1970, ``~``, the
conversation's key (store/users.py). Every string of this form is a valid cursor."""
_CURSOR = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cursor_of(updated_at: datetime, conversation_id: str) -> str:
    """The cursor of a listed conversation (``updated_at`` exactly as stored)."""
    return f"{(updated_at - _EPOCH) // timedelta(microseconds=1)}~{conversation_id}"


def split_cursor(cursor: str) -> tuple[datetime, str]:
    """The (``updated_at``, id) of a :attr:`ConversationSummary.cursor`.

    Raises:
        ValueError: not of the form :data:`CURSOR_PATTERN`.
    """
    if not isinstance(cursor, str) or not _CURSOR.fullmatch(cursor):
        raise ValueError(
            f"{str(cursor)[:60]!r} is not a conversation list cursor (pass one returned as is)"
        )
    micros, _, conversation_id = cursor.partition("~")
    return _EPOCH + timedelta(microseconds=int(micros)), conversation_id


def check_limit(limit: int) -> int:
    """``limit`` if it is a valid :meth:`StoreAdmin.list_conversations` limit.

    Raises:
        ValueError: not between 1 and :data:`LIST_LIMIT_MAX`.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValueError(f"limit must be an integer from 1 to {LIST_LIMIT_MAX}")
    return limit


class HeldConversation(Protocol):
    """A conversation held for one turn (see :meth:`TurnStore.lock`)."""

    async def load(self, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first: one short read."""
        ...

    async def append_turn(
        self,
        persona: str,
        messages: Sequence[Message],
        record: TurnRecord | None = None,
        pictures: Sequence[StoredPicture] = (),
        *,
        settles: ClaimRef | None = None,
    ) -> int:
        """Store one whole turn (with its ``pictures``) in one short transaction and make it
        durable; return its number. ``settles``: a running claim the turn settles in the same
        transaction (:mod:`~generic_framework.store.keys`)."""
        ...


class TurnStore(Protocol):
    """What a turn needs: hold its conversation, load the history, append the turn."""

    async def open(self) -> None:
        """Connect and apply pending migrations (once; other methods call it on first use)."""
        ...

    def lock(
        self, conversation_id: str, *, history: int = 0
    ) -> AbstractAsyncContextManager[HeldConversation]:
        """Hold the conversation for one turn: load, answer, append, with no other turn of
        that conversation in between (across processes where the backend can). Holding it
        keeps no transaction open while the model works. ``history``: the turns the holder
        will :meth:`~HeldConversation.load`, which a backend may read with the lock."""
        ...

    async def load(self, conversation_id: str, turns: int) -> list[Message]:
        """The messages of the last ``turns`` turns, oldest first (empty for a new id)."""
        ...

    async def append_turn(
        self,
        conversation_id: str,
        persona: str,
        messages: Sequence[Message],
        record: TurnRecord | None = None,
        pictures: Sequence[StoredPicture] = (),
        *,
        settles: ClaimRef | None = None,
    ) -> int:
        """Store one whole turn (with its ``pictures``) atomically, settling the claim
        ``settles``, if given, with it; return its number (1 for the first)."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...


class StoreAdmin(Protocol):
    """Administration: reading, listing, deleting and copying conversations, the schema
    (``generic-framework db``, usage, the service's conversation endpoints)."""

    async def open(self) -> None:
        """Connect and apply pending migrations (once; other methods call it on first use)."""
        ...

    async def get(self, conversation_id: str) -> list[StoredMessage] | None:
        """Every stored message of a conversation, or ``None`` when it does not exist."""
        ...

    async def turns(self, conversation_id: str) -> list[StoredTurn] | None:
        """Every stored turn with its record, or ``None`` when the conversation does not exist."""
        ...

    async def delete(self, conversation_id: str) -> bool:
        """Delete a conversation (after a running turn of it ends); True when it existed."""
        ...

    async def rename(self, conversation_id: str, title: str) -> bool:
        """Give a conversation a title of its own, shown by lists instead of its first input;
        True when the conversation exists.

        Raises:
            ValueError: not a valid title (:func:`check_title`).
        """
        ...

    async def delete_last_turn(self, conversation_id: str) -> bool:
        """Remove the newest turn whole (its question, tool rounds and answer; never a part),
        after a running turn of it ends; the next turn takes its number. Removing the only turn
        removes the conversation. True when there was a turn to remove."""
        ...

    async def conversation_ids(self) -> list[str]:
        """Every conversation id, sorted."""
        ...

    async def list_conversations(
        self, *, limit: int = 20, before: str | None = None, owner: str | None = None
    ) -> list[ConversationSummary]:
        """Conversations, most recently updated first (ties by id, descending).

        Args:
            owner: only this user's (by id); every user's when ``None``. The summaries' ids
                are the conversations' keys (store/users.py).
            limit: at most this many (1 to :data:`LIST_LIMIT_MAX`).
            before: a :attr:`ConversationSummary.cursor`: only the conversations listed after
                that one.

        Raises:
            ValueError: ``limit`` is out of range or ``before`` is not a cursor.
        """
        ...

    async def picture(self, conversation_id: str, sha256: str) -> StoredPicture | None:
        """A picture of the conversation by its hash (the first kept), or ``None``."""
        ...

    async def dump(self, conversation_id: str) -> ConversationDump | None:
        """Everything stored for a conversation, or ``None``."""
        ...

    async def restore(self, dump: ConversationDump) -> None:
        """Write a dumped conversation as it was (numbers and times kept), in one transaction.

        Raises:
            ValueError: the conversation already exists here.
        """
        ...

    async def schema_version(self) -> int:
        """How many migrations this database has applied."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...


class Conversations(TurnStore, StoreAdmin, Protocol):
    """The stored conversations: a turn's side and the administration's."""


class ConversationStore(
    Conversations, ClaimStore, UserAdmin, ChatStore, ChatAdmin, MemoryStore, MemoryAdmin, Protocol
):
    """What each backend (SQLite, PostgreSQL) implements and the Runtime owns, whole: the
    conversations (:class:`Conversations`), the users and keys that own them
    (:class:`~.users.UserAdmin`), claims (:class:`~.keys.ClaimStore`), the chat platforms'
    chats and claimed updates (:class:`~.chats.ChatStore`, :class:`~.chats.ChatAdmin`), the
    facts personas keep (:class:`~.memories.MemoryStore`, :class:`~.memories.MemoryAdmin`).

    Nothing that only uses one part takes it whole: the runtime hands each part out on its own
    (:attr:`~generic_framework.core.resources.Resources.conversations`, ``users``,
    ``chat_states``, ``claims``, ``memories``), and the backups and copies of
    ``generic-framework db`` are what takes the store whole."""
