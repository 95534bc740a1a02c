"""Pictures sent to a chat bot: a platform's image files read into the turn's pictures.

A platform lists a message's files as :class:`~generic_framework.chats.message.Attachment`
(Telegram: a photo's largest size within ``BOT_MAX_IMAGE_BYTES``, and any document; Discord:
its attachments). :func:`picture_urls` keeps them only if every one is a JPEG or PNG within the
limits, refusing before anything is downloaded when the platform already says a file is too
large or not a picture, then downloads each through the platform's own file API and hands the
turn service ``data:`` URLs (which checks them again, as it checks every edge's: 0327). A
refusal is a :class:`~generic_framework.pictures.PictureRefused` whose words are the chat's
short reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from generic_framework.chats.message import Attachment
from generic_framework.pictures import IMAGE_MIME_TYPES, PictureRefused, data_url, sniff_mime

__all__ = ["NOT_A_PICTURE", "picture_urls", "refusal_reply"]

NOT_A_PICTURE = (
    "Sorry, I can only read text and pictures (JPEG or PNG). Please write your question, or "
    "send a photo."
)


def refusal_reply(exc: Exception) -> str:
    """The chat's short reply to a picture it cannot use."""
    return f"Sorry, I cannot use that picture: {exc}"


async def picture_urls(
    attachments: Sequence[Attachment], *, max_count: int, max_bytes: int
) -> tuple[str, ...]:
    """The attachments as ``data:`` URLs (see the module's docstring).

    Raises:
        PictureRefused: a file that is not a JPEG or PNG (its words are :data:`NOT_A_PICTURE`),
            more files than ``max_count``, or one larger than ``max_bytes``.
    """
    for item in attachments:
        if item.mime not in IMAGE_MIME_TYPES:
            raise PictureRefused(NOT_A_PICTURE)
    if len(attachments) > max_count:
        raise PictureRefused(f"at most {max_count} pictures go in one message")
    for item in attachments:
        if item.size is not None and item.size > max_bytes:
            raise PictureRefused(f"it has {item.size} bytes; the limit is {max_bytes}")
    urls = []
    for item in attachments:
        data = await item.fetch()
        urls.append(data_url(data, sniff_mime(data) or item.mime or "application/octet-stream"))
    return tuple(urls)
