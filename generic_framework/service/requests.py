"""Reading requests: the JSON body, the conversation id of the path, the user's text.

Each function returns the valid value or raises a :class:`~generic_framework.service.errors.
ServiceError` (400) naming the field at fault; the app's exception handler answers it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from generic_framework.core.history import HistoryItem, foreign_history, message_text
from generic_framework.limits import check_conversation_id, wording
from generic_framework.pictures import split_content
from generic_framework.service.errors import ServiceError
from generic_framework.service.schemas import ChatMessageIn
from generic_framework.service.sources import strip_sources_footer

__all__ = [
    "checked_text",
    "content_text",
    "earlier_messages",
    "known_params",
    "last_user_text",
    "parse_body",
    "path_conversation_id",
    "user_content",
]

_M = TypeVar("_M", bound=BaseModel)


def known_params(request: Request, *known: str) -> None:
    """Refuse (400) a query parameter the endpoint does not know, or one given twice."""
    params = request.query_params
    unknown = sorted(set(params) - set(known))
    if unknown:
        names = ", ".join(known) or "none"
        raise ServiceError(
            400,
            f"unknown query parameter {unknown[0][:40]!r} (known: {names})",
            param=unknown[0][:40],
        )
    repeated = sorted(k for k in set(params) if len(params.getlist(k)) > 1)
    if repeated:
        raise ServiceError(
            400, f"query parameter {repeated[0]!r} given more than once", param=repeated[0]
        )


async def parse_body(request: Request, model: type[_M]) -> _M:
    """Validate the JSON body; the first problem becomes a 400 naming the field."""
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        what = wording(err) if err["type"] != "json_invalid" else str(err["msg"])
        message = f"{where}: {what}" if where else what
        raise ServiceError(400, message, param=where or None, code=err["type"]) from None


def path_conversation_id(request: Request) -> str:
    """The ``{conversation_id}`` of the path, if :func:`check_conversation_id` accepts it."""
    value = str(request.path_params["conversation_id"])
    try:
        return check_conversation_id(value)
    except ValueError as exc:
        raise ServiceError(
            400, str(exc), param="conversation_id", code="invalid_conversation_id"
        ) from None


def content_text(
    content: str | list[dict[str, Any]] | None, where: str = "messages", *, pictures: bool = False
) -> str:
    """The text of an OpenAI message ``content``: the persona's own reading of it.

    One definition with the foreign history's: :func:`generic_framework.core.history.message_text`
    (with ``pictures``, a user message's image parts become a mark).

    Raises:
        ServiceError: 400 ``unsupported`` naming ``where``: a part that is not text.
    """
    try:
        return message_text(content, where, pictures=pictures)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="messages", code="unsupported") from None


def last_user_text(messages: list[ChatMessageIn], max_chars: int) -> str:
    """The text of the last message, which must be the user's, checked against the limit
    (a message with pictures: :func:`user_content`)."""
    return user_content(messages, max_chars)[0]


def user_content(messages: list[ChatMessageIn], max_chars: int) -> tuple[str, tuple[str, ...]]:
    """The text of the last message (the user's) and its pictures' URLs, their shape checked;
    the pictures themselves are the turn service's to check (:mod:`generic_framework.pictures`).
    The text may be empty beside a picture."""
    last = messages[-1]
    if last.role != "user":
        raise ServiceError(
            400, "the last message must have role 'user'", param="messages", code="invalid_role"
        )
    where = f"messages[{len(messages) - 1}]"
    return content_parts(last.content, where, max_chars, param="messages")


def content_parts(
    content: str | list[dict[str, Any]] | None, where: str, max_chars: int, *, param: str
) -> tuple[str, tuple[str, ...]]:
    """A user message's text (checked: :func:`checked_text`, but empty is allowed beside a
    picture) and its pictures' URLs.

    Raises:
        ServiceError: 400 naming ``param``: a malformed part, or the text refused.
    """
    try:
        text, urls = split_content(content, where)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param=param, code="unsupported") from None
    text = content_text(text, where)
    if urls and not text.strip():
        _check_length(text, max_chars, "the message", param=param)
        return text, urls
    return checked_text(text, max_chars, param=param), urls


def checked_text(text: str, max_chars: int, *, param: str) -> str:
    """``text`` if it is not blank and not longer than ``max_chars`` (BOT_MAX_MESSAGE_CHARS)."""
    if not text.strip():
        raise ServiceError(400, "the message is empty", param=param, code="empty_message")
    _check_length(text, max_chars, "the message", param=param)
    return text


def earlier_messages(
    messages: list[ChatMessageIn], max_chars: int, *, allow_system: bool
) -> list[HistoryItem]:
    """The messages before the last one, as the turn's foreign history (docs/design/0602).

    The service's own "Sources:" footer is removed from assistant messages (the model is sent
    its earlier answers as a stored history holds them). Each user and system message must fit
    ``max_chars`` (BOT_MAX_MESSAGE_CHARS), like the last one; assistant messages (the model's
    own answers), tool results (the client's tools', dropped from the history) and the number
    of messages are not limited here: the body limit bounds them,
    and the persona keeps the last HISTORY_TURNS.

    Raises:
        ServiceError: 400 naming ``messages[i]``: invalid content, a message too long, or
            system messages the persona refuses (``system_not_allowed``).
    """
    items: list[HistoryItem] = [_as_sent(m) for m in messages[:-1]]
    try:
        foreign = foreign_history(items, name="messages")
    except ValueError as exc:
        raise ServiceError(400, str(exc), param="messages", code="invalid_message") from None
    for index, message in enumerate(messages[:-1]):
        if message.role not in ("assistant", "tool"):
            where = f"messages[{index}]"
            text = content_text(message.content, where, pictures=message.role == "user")
            _check_length(text, max_chars, where, param="messages")
    if foreign.system and not allow_system:
        raise ServiceError(
            400,
            "this persona does not accept system messages from the client "
            "(allow_client_system = false in its persona file); send user messages only",
            param="messages",
            code="system_not_allowed",
        )
    return items


def _as_sent(message: ChatMessageIn) -> HistoryItem:
    """A request message as a history item; an assistant answer without the footer."""
    item = message.model_dump(exclude_none=True)
    if message.role == "assistant" and isinstance(message.content, str):
        item["content"] = strip_sources_footer(message.content)
    return item


def _check_length(text: str, max_chars: int, where: str, *, param: str) -> None:
    """Refuse ``text`` (``where``, e.g. ``messages[2]``) over BOT_MAX_MESSAGE_CHARS."""
    if len(text) > max_chars:
        raise ServiceError(
            400,
            f"{where} has {len(text)} characters; the limit is {max_chars} (BOT_MAX_MESSAGE_CHARS)",
            param=param,
            code="message_too_long",
        )
