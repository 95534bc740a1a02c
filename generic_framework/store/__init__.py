"""Conversation stores: one async interface, :class:`ConversationStore`, and its backends.

A store keeps whole turns: :meth:`~ConversationStore.append_turn` writes a turn's messages (user
message, assistant tool calls, tool answers, final answer) atomically after the turn completed,
so a stored history never ends in an unanswered tool call. Serialising turns on one conversation
is not the store's job: the :class:`~generic_framework.runtime.Runtime`'s locks do that.

Backends: :class:`~generic_framework.store.sqlite.SQLiteStore` (one file, the embedded default).
"""

from __future__ import annotations

from generic_framework.store.base import ConversationStore, StoredMessage, check_conversation_id
from generic_framework.store.sqlite import SQLiteStore

__all__ = ["ConversationStore", "SQLiteStore", "StoredMessage", "check_conversation_id"]
