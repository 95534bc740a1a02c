"""Pictures in turns: checked at the turn service, sent to a vision model or described first
(see :mod:`.parts`, :mod:`.content` and :mod:`.vision`)."""

from generic_framework.pictures.content import (
    EARLIER_PICTURE,
    described_text,
    split_content,
    stored_text,
    user_content,
)
from generic_framework.pictures.parts import (
    IMAGE_MIME_TYPES,
    MAX_IMAGE_BYTES_DEFAULT,
    MAX_IMAGES_DEFAULT,
    Picture,
    PictureRefused,
    data_url,
    file_url,
    picture_from_bytes,
    read_picture,
    read_pictures,
    sniff_mime,
)

__all__ = [
    "EARLIER_PICTURE",
    "IMAGE_MIME_TYPES",
    "MAX_IMAGES_DEFAULT",
    "MAX_IMAGE_BYTES_DEFAULT",
    "Picture",
    "PictureRefused",
    "data_url",
    "described_text",
    "file_url",
    "picture_from_bytes",
    "read_picture",
    "read_pictures",
    "sniff_mime",
    "split_content",
    "stored_text",
    "user_content",
]
