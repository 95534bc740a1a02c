"""A foreign history: earlier messages a caller sends with a turn instead of a stored conversation.

:meth:`Persona.respond(text, history=...) <generic_framework.core.persona.Persona.respond>`
takes them as **OpenAI-style message dicts** (what an OpenAI client sends in ``messages``)::

    [{"role": "system", "content": "Answer in French."},
     {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Bonjour !"}]

The rules, in one place (:func:`foreign_history`):

- ``content`` is a string, or a list of text parts (``{"type": "text", "text": ...}``) joined;
  a user message's image parts become a mark (:data:`~generic_framework.pictures.EARLIER_PICTURE`):
  an earlier picture is not sent again (docs/design/0329); other parts are refused. It must be
  UTF-8 text (:func:`~generic_framework.limits.check_text`).
- ``user`` and ``assistant`` messages become the turn's history; ``system`` and ``developer``
  messages become extra system messages, sent after the persona's own prompt (when the persona
  allows it: ``allow_client_system``).
- ``tool`` messages and assistant ``tool_calls`` are dropped: they answer the caller's tools,
  not the persona's, so they cannot be replayed as the persona's calls.

The history then goes through the same sanitiser as a stored one
(:func:`~generic_framework.core.sanitize.sanitize_history`): empty assistant messages and
messages before the first user message are dropped, and only the last ``HISTORY_TURNS`` turns
are kept (the oldest dropped first). Its length alone is never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from generic_framework.limits import check_text
from generic_framework.pictures.content import EARLIER_PICTURE, split_content
from generic_framework.wire.messages import AssistantMessage, Message, SystemMessage, UserMessage

__all__ = ["ForeignHistory", "HistoryItem", "foreign_history", "message_text"]

HistoryItem = Mapping[str, Any]
"""One message of a foreign history: an OpenAI-style dict with ``role`` and ``content``."""

_ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ForeignHistory:
    """A foreign history split for sending.

    Attributes:
        system: the caller's system (and developer) messages, in order.
        messages: the user and assistant messages, in order (not yet sanitised).
    """

    system: tuple[SystemMessage, ...]
    messages: tuple[Message, ...]


def message_text(content: object, where: str, *, pictures: bool = False) -> str:
    """The text of an OpenAI ``content``: a string, its text parts joined, or ``""`` for None.

    With ``pictures`` (a user message of a history), each image part becomes the mark
    :data:`~generic_framework.pictures.EARLIER_PICTURE` after the text; without, it is refused.

    Raises:
        ValueError: a part that is neither text nor (with ``pictures``) an image, or text
            that is not UTF-8; ``where`` names it.
    """
    text, urls = split_content(content, where)
    if urls and not pictures:
        raise ValueError(
            f"{where}.content: only text content parts are supported here (pictures go in "
            "user messages)"
        )
    if urls:
        text = "\n\n".join([*([text] if text else []), *[EARLIER_PICTURE] * len(urls)])
    return _checked(text, where)


def _checked(text: str, where: str) -> str:
    try:
        return check_text(text)
    except ValueError as exc:
        raise ValueError(f"{where}.content {exc}") from None


def _role(item: object, where: str) -> str:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a message object with role and content")
    role = item.get("role")
    if role not in _ROLES:
        raise ValueError(f"{where}.role must be one of {', '.join(_ROLES)} (got {role!r})")
    return str(role)


def foreign_history(items: Sequence[HistoryItem], *, name: str = "history") -> ForeignHistory:
    """Split OpenAI-style message dicts into extra system messages and the turn's history.

    Raises:
        ValueError: a message is not a dict, has an unknown role, non-text content, or a user
            message is empty; the message says which (``history[i]``, or ``name[i]``).
    """
    system: list[SystemMessage] = []
    messages: list[Message] = []
    for index, item in enumerate(items):
        where = f"{name}[{index}]"
        role = _role(item, where)
        if role == "tool":
            continue
        text = message_text(item.get("content"), where, pictures=role == "user")
        if role in ("system", "developer"):
            if text.strip():
                system.append(SystemMessage(content=text))
        elif role == "user":
            if not text.strip():
                raise ValueError(f"{where}: the user message is empty")
            messages.append(UserMessage(content=text))
        else:
            messages.append(AssistantMessage(content=text or None))
    return ForeignHistory(system=tuple(system), messages=tuple(messages))
