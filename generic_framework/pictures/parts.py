"""Pictures a user sends with a turn: read from OpenAI image parts, checked, then sent or described.

A picture arrives as the URL of an OpenAI image part (``{"type": "image_url", "image_url":
{"url": ...}}``), from any edge: the API's messages, the page (which sends the same parts), a chat
platform's photo (downloaded by the bot, then written as a ``data:`` URL). :func:`read_pictures`
checks them all before anything is sent (docs/design/0327):

- the scheme is ``data:`` (``data:image/png;base64,...``) or ``https:``; nothing else;
- a ``data:`` picture is base64 that decodes, of a MIME type Z.AI documents (JPEG, PNG), whose
  bytes are that type's, and not larger than ``BOT_MAX_IMAGE_BYTES`` (Z.AI's documented limit
  by default: docs/protocol.md §9c);
- an ``https:`` picture is never fetched here (no request to an address a client chose): it is
  passed to Z.AI as given;
- there are no more than ``BOT_MAX_IMAGES`` pictures in one message.

A refusal is a :class:`PictureRefused` naming what is wrong. A :class:`Picture` keeps its URL as
it came (a vision model is sent exactly that), its MIME type, size and content hash (SHA-256 of
the decoded bytes, or of the URL of an ``https`` picture), and, once written, its description.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = [
    "IMAGE_MIME_TYPES",
    "MAX_IMAGES_DEFAULT",
    "MAX_IMAGE_BYTES_DEFAULT",
    "Picture",
    "PictureRefused",
    "data_url",
    "file_url",
    "picture_from_bytes",
    "read_picture",
    "read_pictures",
    "sniff_mime",
]

MAX_IMAGE_BYTES_DEFAULT = 5_000_000
"""Z.AI's documented limit: "under 5M per image" (docs/protocol.md §9c), read as decimal MB."""

MAX_IMAGES_DEFAULT = 4
"""Pictures in one message (Z.AI takes up to 50 or 150 per request by model: §9c)."""

IMAGE_MIME_TYPES = ("image/jpeg", "image/png")
"""The MIME types Z.AI documents ("Supports jpg, png, jpeg formats": §9c)."""

_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"))
_DATA_URL = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),(.*)", re.DOTALL)
_MAX_URL_CHARS = 2048
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")


class PictureRefused(ValueError):
    """A picture that cannot be sent (nothing was sent); the message says why."""


@dataclass(frozen=True, slots=True)
class Picture:
    """One checked picture of a turn.

    Attributes:
        url: the ``data:`` or ``https:`` URL, exactly as it came.
        mime: its MIME type (``image/png``); ``""`` for an ``https`` picture (not fetched).
        size: its decoded size in bytes; 0 for an ``https`` picture.
        sha256: the SHA-256 of its bytes (of its URL for an ``https`` picture), in hex.
        description: what a vision model wrote about it, once written.
    """

    url: str
    mime: str
    size: int
    sha256: str
    description: str | None = None

    @property
    def inline(self) -> bool:
        """Whether the picture's bytes are in its URL (``data:``)."""
        return self.url.startswith("data:")

    def part(self) -> dict[str, Any]:
        """The OpenAI image part that sends it."""
        return {"type": "image_url", "image_url": {"url": self.url}}

    def data(self) -> bytes:
        """The picture's bytes (a ``data:`` picture only)."""
        if not self.inline:
            raise ValueError("an https picture's bytes are not here (it is never fetched)")
        return base64.b64decode(self.url.partition(",")[2])

    def described(self, description: str) -> Picture:
        """This picture with its description."""
        return replace(self, description=description)

    @property
    def label(self) -> str:
        """A short name for it in text: its type and the start of its hash."""
        kind = self.mime.removeprefix("image/") if self.mime else "https link"
        return f"{kind}, sha256 {self.sha256[:12]}"


def sniff_mime(data: bytes) -> str | None:
    """The MIME type of ``data`` by its first bytes (JPEG or PNG), or ``None``."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    return None


def data_url(data: bytes, mime: str) -> str:
    """``data`` as a ``data:<mime>;base64,...`` URL."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def file_url(path: Path) -> str:
    """The bytes of the file at ``path`` as a ``data:`` URL of the type they say they are (the
    turn service checks them: another type, or too large, is refused before anything is sent).

    Raises:
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    return data_url(data, sniff_mime(data) or "application/octet-stream")


def picture_from_bytes(data: bytes, *, max_bytes: int, name: str = "the picture") -> Picture:
    """A picture from its bytes (a file, a platform's download), its type read from them.

    Raises:
        PictureRefused: not a JPEG or PNG, or larger than ``max_bytes``.
    """
    mime = sniff_mime(data)
    if mime is None:
        raise PictureRefused(f"{name} is not a JPEG or PNG picture (the types Z.AI takes)")
    return read_picture(data_url(data, mime), max_bytes=max_bytes, where=name)


def read_picture(url: object, *, max_bytes: int, where: str = "the picture") -> Picture:
    """Check one picture's URL (see the module docstring).

    Raises:
        PictureRefused: naming ``where`` and the problem.
    """
    if not isinstance(url, str) or not url:
        raise PictureRefused(f"{where}: image_url.url must be a non-empty string")
    scheme = url.partition(":")[0].lower()
    if scheme == "https":
        return _linked(url, where)
    if scheme != "data":
        shown = scheme if len(scheme) <= 20 and scheme.isascii() else "another"
        raise PictureRefused(
            f"{where}: the {shown!s} scheme is not taken; send the picture as a data: URL "
            "(data:image/png;base64,...) or an https: link"
        )
    return _inline(url, max_bytes, where)


def _linked(url: str, where: str) -> Picture:
    if len(url) > _MAX_URL_CHARS or _UNSAFE.search(url):
        raise PictureRefused(
            f"{where}: an https link must be at most {_MAX_URL_CHARS} characters, without "
            "spaces or control characters"
        )
    host = url[len("https://") :].split("/", 1)[0] if url.lower().startswith("https://") else ""
    if not host:
        raise PictureRefused(f"{where}: an https link needs a host (https://host/path)")
    return Picture(url=url, mime="", size=0, sha256=hashlib.sha256(url.encode()).hexdigest())


def _inline(url: str, max_bytes: int, where: str) -> Picture:
    found = _DATA_URL.fullmatch(url)
    if found is None:
        raise PictureRefused(f"{where}: a data: URL needs a comma before its data")
    declared, params, payload = found.group(1).strip().lower(), found.group(2), found.group(3)
    mime = _ALIASES.get(declared, declared)
    if mime not in IMAGE_MIME_TYPES:
        raise PictureRefused(
            f"{where}: {declared or 'no'} MIME type; Z.AI takes {', '.join(IMAGE_MIME_TYPES)}"
        )
    if ";base64" not in params.lower():
        raise PictureRefused(f"{where}: the data: URL must be base64 (data:{mime};base64,...)")
    # Refused by its length before it is decoded: a huge picture costs no decoding.
    if len(payload) // 4 * 3 > max_bytes + 3:
        raise _too_large(where, len(payload) // 4 * 3, max_bytes)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise PictureRefused(f"{where}: the picture's data is not valid base64") from None
    if not data:
        raise PictureRefused(f"{where}: the picture is empty")
    if len(data) > max_bytes:
        raise _too_large(where, len(data), max_bytes)
    if sniff_mime(data) != mime:
        raise PictureRefused(f"{where}: the data is not a {mime} picture (its bytes say otherwise)")
    return Picture(url=url, mime=mime, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def _too_large(where: str, size: int, max_bytes: int) -> PictureRefused:
    return PictureRefused(
        f"{where}: the picture has about {size} bytes; the limit is {max_bytes} "
        "(BOT_MAX_IMAGE_BYTES)"
    )


def read_pictures(urls: Sequence[object], *, max_count: int, max_bytes: int) -> tuple[Picture, ...]:
    """Check every picture of a message (see :func:`read_picture`) and their number.

    Raises:
        PictureRefused: the first problem, naming the picture (``picture 2``).
    """
    if len(urls) > max_count:
        raise PictureRefused(
            f"{len(urls)} pictures in one message; the limit is {max_count} (BOT_MAX_IMAGES)"
        )
    return tuple(
        read_picture(url, max_bytes=max_bytes, where=f"picture {number}")
        for number, url in enumerate(urls, start=1)
    )


def image_part_url(part: Mapping[str, Any], where: str) -> str:
    """The URL of an OpenAI image part (``image_url.url``), its shape checked.

    Raises:
        ValueError: the part has no ``image_url`` object with a string ``url``.
    """
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else None
    if not isinstance(url, str):
        raise ValueError(f"{where}.image_url must be an object with a string url")
    return url
