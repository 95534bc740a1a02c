"""A user message with pictures: read from OpenAI content parts, written for the model and store.

- :func:`split_content` reads a message's ``content`` into its text and its pictures' URLs
  (text parts joined; image parts' URLs in order; any other part refused).
- :func:`user_content` is what the persona's model is sent for the turn's own message: the
  pictures themselves (a vision model), or, for a picture that was described (the vision
  fallback: docs/design/0328), its description as text, marked as a description.
- :func:`stored_text` is what a stored turn keeps as its user message: the text and, per
  picture, its description (or a mark naming it by hash); later turns send that, never the
  picture again (docs/design/0329).

The store's picture type is imported by :func:`kept` when a turn has pictures: the settings and
a turn without any read this module, and need not load it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from generic_framework.pictures.parts import Picture, image_part_url

if TYPE_CHECKING:
    from generic_framework.store.pictures import StoredPicture

__all__ = [
    "EARLIER_PICTURE",
    "described_text",
    "kept",
    "split_content",
    "stored_text",
    "user_content",
]

EARLIER_PICTURE = "[a picture sent earlier; it is not sent again]"
"""What an earlier message's picture becomes in a caller's own history (never re-sent)."""


def split_content(content: object, where: str) -> tuple[str, tuple[str, ...]]:
    """The text of an OpenAI ``content`` and the URLs of its image parts.

    Raises:
        ValueError: ``content`` is neither a string nor a list of text and image parts, or a
            part is malformed; ``where`` names it.
    """
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise ValueError(
            f"{where}.content must be a string or a list of text parts and image parts"
        )
    texts: list[str] = []
    urls: list[str] = []
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "image_url":
            assert isinstance(part, Mapping)
            urls.append(image_part_url(part, at))
            continue
        if kind != "text":
            raise ValueError(f"{at}: only text and image_url content parts are supported")
        assert isinstance(part, Mapping)
        text = part.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{at}.text must be a string")
        texts.append(text)
    return "".join(texts), tuple(urls)


def described_text(picture: Picture, number: int) -> str:
    """A described picture as marked text (the model is told it did not see the picture)."""
    return (
        f"[Picture {number} ({picture.label}), described by a vision model because this "
        f"model cannot see pictures:]\n{picture.description}\n[End of the description]"
    )


def user_content(text: str, pictures: Sequence[Picture]) -> str | list[dict[str, Any]]:
    """The turn's user message content: ``text`` alone, or with its pictures (see the module)."""
    if not pictures:
        return text
    if all(picture.description is not None for picture in pictures):
        blocks = [text] if text.strip() else []
        blocks += [described_text(p, n) for n, p in enumerate(pictures, start=1)]
        return "\n\n".join(blocks)
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    for number, picture in enumerate(pictures, start=1):
        if picture.description is None:
            parts.append(picture.part())
        else:
            parts.append({"type": "text", "text": described_text(picture, number)})
    return parts


def stored_text(text: str, pictures: Sequence[Picture]) -> str:
    """The user message a stored turn keeps: the text, then each picture's description (or a
    mark naming it by hash when it was shown to a vision model undescribed)."""
    blocks = [text] if text.strip() else []
    for number, picture in enumerate(pictures, start=1):
        if picture.description is not None:
            blocks.append(described_text(picture, number))
        else:
            blocks.append(
                f"[Picture {number} ({picture.label}) was shown in this turn; it is not sent again]"
            )
    return "\n\n".join(blocks)


def kept(pictures: Sequence[Picture]) -> tuple[StoredPicture, ...]:
    """The pictures as a stored turn keeps them: a ``data:`` picture by its bytes, an
    ``https`` one by its address, each with its hash and description (docs/design/0329)."""
    from generic_framework.store.pictures import StoredPicture

    return tuple(
        StoredPicture(
            sha256=p.sha256,
            mime=p.mime,
            data=p.data() if p.inline else b"",
            url=None if p.inline else p.url,
            description=p.description,
        )
        for p in pictures
    )
