"""The chats behind the fake Bot API: what users sent, what the bot sent, edited and drafted.

Kept apart from the HTTP server (``fake_bot_api.py``) so each stays readable. Message ids count
per chat and are shared by the users' and the bot's messages, so a chat reads in order. Updates
built here are registered at once (the user "sent" them), so the bot may reply to them however
the update then reaches it (getUpdates or a webhook).
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from telegram_html import HtmlError, Parsed, parse_html, utf16_len

__all__ = ["MESSAGE_LIMIT", "ApiError", "Chats", "render", "update_kind"]

MESSAGE_LIMIT = 4096
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
# fmt: off
_ACTIONS = frozenset((
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
))
# fmt: on
# What Telegram marks in a user's text by itself: commands and mentions.
_AUTO_ENTITIES = re.compile(
    r"(?P<bot_command>(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?)"
    r"|(?P<mention>(?<![\w@])@[A-Za-z0-9_]{5,32})"
)


class ApiError(Exception):
    """A refusal, answered as ``{"ok": false, "error_code": status, "description": ...}``."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def update_kind(update: dict[str, Any]) -> str:
    """The update's type as ``allowed_updates`` names it (``message``, ``callback_query``...)."""
    return next((key for key in update if key != "update_id"), "")


def render(params: dict[str, Any], too_long: str, *, allow_empty: bool = False) -> Parsed:
    """The visible text, entities and links of ``params["text"]`` under its parse mode."""
    text = str(params.get("text") or "")
    mode = str(params.get("parse_mode") or "").lower()
    if mode == "html":
        try:
            parsed = parse_html(text)
        except HtmlError as error:
            raise ApiError(400, f"Bad Request: can't parse entities: {error}") from None
    elif mode in ("", "markdown", "markdownv2"):  # Markdown is recorded, not parsed
        entities = list(params.get("entities") or [])
        links = [e["url"] for e in entities if e.get("type") == "text_link"]
        parsed = Parsed(text, entities, links)
    else:
        raise ApiError(400, "Bad Request: unsupported parse_mode")
    if not parsed.text.strip() and not allow_empty:
        raise ApiError(400, "Bad Request: message text is empty")
    if utf16_len(parsed.text) > MESSAGE_LIMIT:
        raise ApiError(400, f"Bad Request: {too_long}")
    return parsed


def _auto_entities(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": match.lastgroup,
            "offset": utf16_len(text[: match.start()]),
            "length": utf16_len(match.group()),
        }
        for match in _AUTO_ENTITIES.finditer(text)
    ]


def _inline_markup(params: dict[str, Any]) -> dict[str, Any] | None:
    """The markup a Message keeps: inline keyboards only (reply keyboards are not echoed)."""
    markup = params.get("reply_markup")
    if isinstance(markup, dict) and markup.get("inline_keyboard"):
        return markup
    return None


@dataclass
class _Sent:
    message: dict[str, Any]
    sent_text: str
    parse_mode: str | None
    links: list[str]
    edits: int = 0


class Chats:
    """Chats, users and messages; the server calls the method handlers with its lock held."""

    def __init__(self, bot_user: dict[str, Any]) -> None:
        self.bot_user = bot_user
        self._lock = threading.RLock()
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._next_ids: dict[int, int] = {}
        self._sent: dict[int, list[_Sent]] = {}
        self._received: dict[int, dict[int, dict[str, Any]]] = {}
        self._drafts: dict[int, list[dict[str, Any]]] = {}
        self._callback_ids = itertools.count(4_000_000_001)

    # -- updates from users ------------------------------------------------------------------

    def text(
        self,
        text: str,
        *,
        user_id: int = 1001,
        chat_id: int | None = None,
        chat_type: str = "private",
        first_name: str = "Ada",
        username: str | None = "ada",
        reply_to_message: dict[str, Any] | None = None,
        thread_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A message update from a user, not queued (``push`` or ``deliver`` it). Commands and
        mentions get their entities as Telegram adds them, unless ``entities`` is given."""
        with self._lock:
            message = self._user_message(user_id, chat_id, chat_type, first_name, username)
            if thread_id is not None:
                message["chat"]["is_forum"] = True
                message.update(message_thread_id=thread_id, is_topic_message=True)
            message["text"] = text
            found = _auto_entities(text) if entities is None else entities
            if found:
                message["entities"] = found
            if reply_to_message is not None:
                message["reply_to_message"] = reply_to_message
            self.received(message)
            return {"message": message}

    def photo(
        self,
        *,
        user_id: int = 1001,
        chat_id: int | None = None,
        sizes: list[tuple[str, int]] | None = None,
        caption: str | None = None,
    ) -> dict[str, Any]:
        """A message update with a photo (``sizes``: its sizes' file ids and byte sizes,
        smallest first) and its ``caption``, or no text, not queued."""
        with self._lock:
            message = self._user_message(user_id, chat_id, None, "Ada", "ada")
            sizes = sizes or [(f"photo-{message['message_id']}", 1024)]
            message["photo"] = [
                {"file_id": file_id, "file_unique_id": file_id, "width": 90 * (n + 1),
                 "height": 90 * (n + 1), "file_size": size}
                for n, (file_id, size) in enumerate(sizes)
            ]  # fmt: skip
            if caption is not None:
                message["caption"] = caption
            self.received(message)
            return {"message": message}

    def document(
        self, file_id: str, mime: str, size: int, *, caption: str | None = None
    ) -> dict[str, Any]:
        """A message update with a document (a file sent as a file), not queued."""
        with self._lock:
            message = self._user_message(1001, None, None, "Ada", "ada")
            message["document"] = {"file_id": file_id, "file_unique_id": file_id,
                                   "file_name": f"{file_id}.bin", "mime_type": mime,
                                   "file_size": size}  # fmt: skip
            if caption is not None:
                message["caption"] = caption
            self.received(message)
            return {"message": message}

    def callback(
        self,
        data: str,
        *,
        user_id: int = 1001,
        chat_id: int | None = None,
        message: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A button press (callback_query update), on ``message`` or the bot's last message in
        the chat (the user's private chat by default), not queued."""
        with self._lock:
            if message is None:
                chat = user_id if chat_id is None else chat_id
                sent = self._sent.get(chat)
                assert sent, f"the bot has no message in chat {chat} to press a button on"
                message = copy.deepcopy(sent[-1].message)
            user = self._users.get(user_id) or self._user(user_id, "Ada", "ada")
            query = {
                "id": str(next(self._callback_ids)),
                "from": user,
                "chat_instance": f"instance-{message['chat']['id']}",
                "data": data,
                "message": message,
            }
            return {"callback_query": query}

    def received(self, message: dict[str, Any]) -> None:
        """Register a user's message (its chat and id) unless known."""
        with self._lock:
            chat = message["chat"]
            self._chats.setdefault(chat["id"], chat)
            known = self._received.setdefault(chat["id"], {})
            known.setdefault(message["message_id"], message)
            following = max(self._next_ids.get(chat["id"], 1), message["message_id"] + 1)
            self._next_ids[chat["id"]] = following

    def _user(self, user_id: int, first_name: str, username: str | None) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        user["language_code"] = "en"
        self._users[user_id] = user
        return user

    def _user_message(
        self,
        user_id: int,
        chat_id: int | None,
        chat_type: str | None,
        first_name: str,
        username: str | None,
    ) -> dict[str, Any]:
        user = self._user(user_id, first_name, username)
        chat = self._chat(user, chat_id, chat_type)
        return {"message_id": self._new_id(chat["id"]), "date": int(time.time()), "chat": chat,
                "from": user}  # fmt: skip

    def _chat(self, user: dict[str, Any], chat_id: int | None, kind: str | None) -> dict[str, Any]:
        if chat_id is not None and chat_id in self._chats:
            return self._chats[chat_id]
        if kind is None:
            kind = "private" if chat_id is None or chat_id > 0 else "supergroup"
        if chat_id is None:
            chat_id = {"private": user["id"], "group": -4_000_001}.get(kind, -1_001_000_000_001)
        chat: dict[str, Any] = {"id": chat_id, "type": kind}
        if kind == "private":
            chat.update({k: v for k, v in user.items() if k in ("first_name", "username")})
        else:
            chat["title"] = "Test group"
        self._chats[chat_id] = chat
        return chat

    def _new_id(self, chat_id: int) -> int:
        message_id = self._next_ids.get(chat_id, 1)
        self._next_ids[chat_id] = message_id + 1
        return message_id

    # -- the bot's methods (the server's lock is held) ---------------------------------------

    def _chat_id(self, params: dict[str, Any]) -> int:
        value = params.get("chat_id")
        if value is None or value == "":
            raise ApiError(400, "Bad Request: chat_id is empty")
        if isinstance(value, int):
            return value
        for chat in self._chats.values():
            if f"@{chat.get('username', '')}" == value:
                return int(chat["id"])
        raise ApiError(400, "Bad Request: chat not found")

    def _chat_object(self, chat_id: int) -> dict[str, Any]:
        if chat_id in self._chats:
            return self._chats[chat_id]
        if chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "User"}
        return {"id": chat_id, "type": "supergroup", "title": "Test group"}

    def send(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        parsed = render(params, "message is too long")
        message: dict[str, Any] = {
            "message_id": 0,
            "date": int(time.time()),
            "chat": self._chat_object(chat_id),
            "from": self.bot_user,
            "text": parsed.text,
        }
        thread = params.get("message_thread_id")
        if thread:
            message.update(message_thread_id=thread, is_topic_message=True)
        reply = params.get("reply_parameters") or {}
        reply_id = reply.get("message_id") or params.get("reply_to_message_id")
        if reply_id:
            target = self._find(chat_id, int(reply_id))
            if target is not None:
                message["reply_to_message"] = {
                    k: v for k, v in target.items() if k != "reply_to_message"
                }
            elif not reply.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
        message["message_id"] = self._new_id(chat_id)
        record = _Sent(message, str(params.get("text")), params.get("parse_mode"), [])
        self._apply(record, parsed, _inline_markup(params))
        self._sent.setdefault(chat_id, []).append(record)
        return copy.deepcopy(message)

    def edit_text(self, params: dict[str, Any]) -> dict[str, Any]:
        record = self._sent_record(params, "message to edit not found")
        parsed = render(params, "MESSAGE_TOO_LONG")
        markup = _inline_markup(params)
        message = record.message
        unchanged = (parsed.text, parsed.entities, markup) == (
            message["text"],
            message.get("entities", []),
            message.get("reply_markup"),
        )
        if unchanged:
            raise ApiError(400, _NOT_MODIFIED)
        record.sent_text, record.parse_mode = str(params.get("text")), params.get("parse_mode")
        self._apply(record, parsed, markup)
        record.edits += 1
        message["edit_date"] = int(time.time())
        return copy.deepcopy(message)

    def edit_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        record = self._sent_record(params, "message to edit not found")
        markup = _inline_markup(params)
        if markup == record.message.get("reply_markup"):
            raise ApiError(400, _NOT_MODIFIED)
        parsed = Parsed(record.message["text"], record.message.get("entities", []), record.links)
        self._apply(record, parsed, markup)
        record.message["edit_date"] = int(time.time())
        return copy.deepcopy(record.message)

    def delete(self, params: dict[str, Any]) -> bool:
        record = self._sent_record(params, "message to delete not found")
        self._sent[record.message["chat"]["id"]].remove(record)
        return True

    def draft(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        if self._chat_object(chat_id)["type"] != "private":
            raise ApiError(400, "Bad Request: drafts can be sent to private chats only")
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise ApiError(400, "Bad Request: draft_id must be a non-zero integer")
        parsed = render(params, "message is too long", allow_empty=True)
        self._drafts.setdefault(chat_id, []).append(
            {
                "draft_id": draft_id,
                "text": parsed.text,
                "sent_text": params.get("text"),
                "parse_mode": params.get("parse_mode"),
                "message_thread_id": params.get("message_thread_id"),
                "links": parsed.links,
                "at": time.monotonic(),
            }
        )
        return True

    def chat_action(self, params: dict[str, Any]) -> bool:
        self._chat_id(params)
        if params.get("action") not in _ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    def _apply(self, record: _Sent, parsed: Parsed, markup: dict[str, Any] | None) -> None:
        message = record.message
        message["text"] = parsed.text
        record.links = list(parsed.links)
        for key, value in (("entities", parsed.entities), ("reply_markup", markup)):
            if value:
                message[key] = value
            else:
                message.pop(key, None)

    def _sent_record(self, params: dict[str, Any], missing: str) -> _Sent:
        chat_id = self._chat_id(params)
        message_id = params.get("message_id")
        for record in self._sent.get(chat_id, []):
            if record.message["message_id"] == message_id:
                return record
        raise ApiError(400, f"Bad Request: {missing}")

    def _find(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        for record in self._sent.get(chat_id, []):
            if record.message["message_id"] == message_id:
                return record.message
        return self._received.get(chat_id, {}).get(message_id)

    # -- reading -----------------------------------------------------------------------------

    def chat_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """The bot's messages in the chat as they stand after edits and deletions: the Message
        Telegram keeps (``text`` is the visible text) plus ``links`` (the hrefs), ``sent_text``
        and ``parse_mode`` (as sent) and ``edits`` (how many edits)."""
        with self._lock:
            return [
                {
                    **copy.deepcopy(record.message),
                    "links": list(record.links),
                    "sent_text": record.sent_text,
                    "parse_mode": record.parse_mode,
                    "edits": record.edits,
                }
                for record in self._sent.get(chat_id, [])
            ]

    def drafts(self, chat_id: int) -> list[dict[str, Any]]:
        """Every sendMessageDraft the chat got, in order: draft_id, text (visible), sent_text,
        parse_mode, message_thread_id, links, at (``time.monotonic()``)."""
        with self._lock:
            return copy.deepcopy(self._drafts.get(chat_id, []))

    def transcript(self, chat_id: int) -> list[str]:
        """The chat as its people saw it, in order: ``name: text`` per message (the bot's as
        they stand after edits; a message without text shows as ``[photo]`` or ``[message]``)."""
        with self._lock:
            lines = [
                (m["message_id"], m.get("from", {}).get("first_name", "?"), m.get("text"), m)
                for m in self._received.get(chat_id, {}).values()
            ] + [
                (r.message["message_id"], self.bot_user["first_name"], r.message["text"], {})
                for r in self._sent.get(chat_id, [])
            ]
            return [
                f"{name}: {_shown(text, m)}"
                for _, name, text, m in sorted(lines, key=lambda line: line[0])
            ]


def _shown(text: str | None, message: dict[str, Any]) -> str:
    if text is not None:
        return text
    return "[photo]" if "photo" in message else "[message]"
